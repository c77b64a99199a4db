//! Durable resource locks held by threads (a file, an account: whatever two threads must not
//! use at once), with a time to live, released when their thread ends.
//!
//! The owner of a lock is the thread id, so that every lock of a thread can be released in the
//! same batch that ends it, whatever the way it ends. A lock has a time to live from the engine
//! clock; an expired lock can be taken by another thread. Taking a lock a thread already holds
//! renews it, so a task that runs again after a crash takes its locks again without conflict.

use std::sync::{Arc, Mutex, PoisonError};

use cairn_dsl::limits::LOCKS_AT_ONCE_MAX;
use cairn_dsl::{HeldLock, NodeError};
use cairn_storage::{Batch, LockOp};
use futures::future::BoxFuture;

use super::env::ThreadEnv;
use super::node_context::TaskState;
use super::stop::in_doubt;
use crate::core::codec::{self, Recorded};
use crate::core::event::Body;

/// Takes every lock of `names` for the thread in one atomic batch (all or none); with `wait`,
/// waits (engine clock) until the holders' locks expire or are released, else fails: for one
/// name with [`NodeError::Lock`], for several with [`NodeError::LocksHeld`] naming each lock
/// held elsewhere.
pub(crate) fn acquire(
    env: Arc<ThreadEnv>,
    names: Vec<String>,
    ttl_ms: u64,
    wait: bool,
) -> BoxFuture<'static, Result<Vec<Recorded>, NodeError>> {
    Box::pin(async move {
        let mut names = names;
        let mut seen = std::collections::BTreeSet::new();
        names.retain(|n| seen.insert(n.clone()));
        if names.is_empty() || names.len() > LOCKS_AT_ONCE_MAX {
            let detail =
                format!("{} locks asked for at once (1..={LOCKS_AT_ONCE_MAX})", names.len());
            return Err(NodeError::Codec { detail });
        }
        let me = env.thread.to_string();
        loop {
            // Listen for releases before trying, so one between the try and the wait counts.
            let mut released = env.coord.lock_releases();
            let now = env.clock.now_ms();
            let ops = names.iter().map(|name| LockOp::Acquire {
                name: name.clone(),
                owner: me.clone(),
                now_ms: now,
                ttl_ms,
            });
            let bodies = names.iter().map(|name| Body::Lock { name: name.clone(), acquired: true });
            match write(&env, ops.collect(), bodies.collect(), now).await {
                Ok(recs) => return Ok(recs),
                Err(cairn_storage::Error::LockHeld { name, owner, expires_at_ms }) => {
                    let first = HeldLock { name, owner, expires_at_ms };
                    let held = held_elsewhere(&env, &names, &me, now, first).await;
                    if !wait {
                        return Err(refusal(held, names.len()));
                    }
                    let until = held.iter().map(|h| h.expires_at_ms).min().unwrap_or(now);
                    // Wake when a lock is released, at the first holder's expiry, or when the
                    // thread is cancelled.
                    tokio::select! {
                        _ = released.changed() => {}
                        () = env.clock.sleep_until(until) => {}
                        () = env.cancel.cancelled() => return Err(NodeError::Cancelled),
                    }
                }
                Err(e) => return Err(env.stop.node_error(e.into())),
            }
        }
    })
}

/// The locks of `names` other threads hold at `now`, from the lock table (storage's refusal
/// names the first only); `first` when the table no longer shows it (released meanwhile).
async fn held_elsewhere(
    env: &ThreadEnv,
    names: &[String],
    me: &str,
    now: u64,
    first: HeldLock,
) -> Vec<HeldLock> {
    let records = env.pipeline.locks().await.unwrap_or_default();
    let held: Vec<HeldLock> = names
        .iter()
        .filter_map(|name| records.iter().find(|r| &r.name == name))
        .filter(|r| r.owner != me && r.is_live(now))
        .map(|r| HeldLock {
            name: r.name.clone(),
            owner: r.owner.clone(),
            expires_at_ms: r.expires_at_ms,
        })
        .collect();
    if held.is_empty() { vec![first] } else { held }
}

/// The error of a refused acquisition: one lock as it always was, several by name.
fn refusal(mut held: Vec<HeldLock>, asked: usize) -> NodeError {
    if asked == 1
        && let Some(h) = held.pop()
    {
        let detail = format!("held by {} until {} ms", h.owner, h.expires_at_ms);
        return NodeError::Lock { name: h.name, detail };
    }
    NodeError::LocksHeld { held }
}

/// Releases lock `name` held by the thread (releasing a lock not held is a no-op).
pub(crate) fn release(
    env: Arc<ThreadEnv>,
    name: String,
) -> BoxFuture<'static, Result<Vec<Recorded>, NodeError>> {
    Box::pin(async move {
        let now = env.clock.now_ms();
        let op = LockOp::Release { name: name.clone(), owner: env.thread.to_string() };
        let recs = match write(
            &env,
            vec![op],
            vec![Body::Lock { name: name.clone(), acquired: false }],
            now,
        )
        .await
        {
            Ok(recs) => recs,
            // A failed write, not a refusal: the runner stops (`exec/stop.rs`).
            Err(e) if in_doubt(&e.clone().into()) => return Err(env.stop.node_error(e.into())),
            Err(e) => return Err(NodeError::Lock { name, detail: e.to_string() }),
        };
        env.coord.locks_released();
        Ok(recs)
    })
}

async fn write(
    env: &ThreadEnv,
    ops: Vec<LockOp>,
    bodies: Vec<Body>,
    now: u64,
) -> Result<Vec<Recorded>, cairn_storage::Error> {
    env.settle().await.map_err(as_storage)?;
    // Before the write: once it is sent the thread may hold the locks, whatever its answer.
    env.may_hold_locks.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut batch = Batch::default();
    for body in &bodies {
        codec::push_event(&mut batch, &env.thread, body, now)
            .map_err(|e| cairn_storage::Error::Invalid { detail: e.to_string() })?;
    }
    batch.locks.extend(ops);
    // A lock another thread holds refuses the batch: refusable, so the refusal leaves the
    // thread's chain of seq guards as it was.
    let appended = env.pipeline.submit_refusable(batch, now).await.map_err(as_storage)?;
    Ok(appended
        .bookmarks
        .into_iter()
        .zip(bodies)
        .map(|(bookmark, body)| Recorded { bookmark, thread: env.thread.clone(), body })
        .collect())
}

/// `write`, with the events it appended kept in the task's state for its run.
pub(super) fn appending(
    st: Arc<Mutex<TaskState>>,
    write: BoxFuture<'static, Result<Vec<Recorded>, NodeError>>,
) -> BoxFuture<'static, Result<(), NodeError>> {
    Box::pin(async move {
        let recs = write.await?;
        // A poisoned lock would still hold valid data (see `node_context::lock_state`).
        st.lock().unwrap_or_else(PoisonError::into_inner).appended.extend(recs);
        Ok(())
    })
}

/// A lock write's engine error as the storage error lock callers report.
fn as_storage(e: crate::error::Error) -> cairn_storage::Error {
    match e {
        crate::error::Error::Storage(e) => e,
        crate::error::Error::UnknownThread(id)
            if let Ok(id) = cairn_storage::ThreadId::new(&id) =>
        {
            cairn_storage::Error::UnknownThread(id)
        }
        other => cairn_storage::Error::Invalid { detail: other.to_string() },
    }
}
