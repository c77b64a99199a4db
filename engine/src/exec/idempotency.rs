//! The idempotency key of a recorded tool call (`ToolCtx::idempotency_key`): what an external
//! service deduplicates a call the engine runs again (after a crash, a take-over) by.

use super::env::ThreadEnv;
use crate::core::event::TaskKey;

/// The idempotency key of call `index` of attempt `attempt` of `task` at `step` (see
/// [`cairn_dsl::ToolCtx::idempotency_key`]): a hash of what names the recorded call, all of it read from
/// the log on a restore, so a call run again after a crash or a take-over gets the key it had.
/// The thread's recorded seed tells apart two threads that had the same id (one deleted, then
/// the id started again); an engine with a configured seed records the same seed in every
/// thread, so there only the id, step, task, attempt and call tell calls apart.
pub(super) fn key(env: &ThreadEnv, step: u64, task: &TaskKey, attempt: u32, index: u32) -> String {
    let mut h = thread_hasher(b"cairn idempotency key v1\0", env);
    h.update(&step.to_le_bytes());
    h.update(task.node.as_bytes());
    h.update(b"\0");
    h.update(&task.item.map_or(u64::MAX, u64::from).to_le_bytes());
    h.update(&attempt.to_le_bytes());
    h.update(&index.to_le_bytes());
    format!("cairn-{}", &h.finalize().to_hex()[..32])
}

/// The idempotency key of undo `index` (in registration order) of the thread of `env`: run again
/// after a crash (its `undo_started` recorded, its `undo_finished` not), it gets the same key.
pub(super) fn undo_key(env: &ThreadEnv, index: u32) -> String {
    let mut h = thread_hasher(b"cairn undo key v1\0", env);
    h.update(&index.to_le_bytes());
    format!("cairn-undo-{}", &h.finalize().to_hex()[..32])
}

/// A hasher of the key kind `domain` that has read the thread's id and recorded seed.
fn thread_hasher(domain: &[u8], env: &ThreadEnv) -> blake3::Hasher {
    let mut h = blake3::Hasher::new();
    h.update(domain);
    h.update(env.thread.as_str().as_bytes());
    h.update(b"\0");
    h.update(&env.seed.to_le_bytes());
    h
}
