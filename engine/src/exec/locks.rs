//! Durable resource locks held by threads (a file, an account: whatever two threads must not
//! use at once), with a time to live, released when their thread ends.
//!
//! The owner of a lock is the thread id, so that every lock of a thread can be released in the
//! same batch that ends it, whatever the way it ends. A lock has a time to live from the engine
//! clock; an expired lock can be taken by another thread. Taking a lock a thread already holds
//! renews it, so a task that runs again after a crash takes its locks again without conflict.

use std::sync::Arc;

use cairn_dsl::NodeError;
use cairn_storage::{Batch, LockOp};
use futures::future::BoxFuture;

use super::env::ThreadEnv;
use super::stop::in_doubt;
use crate::core::codec::{self, Recorded};
use crate::core::event::Body;

/// Takes lock `name` for the thread; with `wait`, waits (engine clock) until a holder's lock
/// expires or is released, else fails with [`NodeError::Lock`].
pub(crate) fn acquire(
    env: Arc<ThreadEnv>,
    name: String,
    ttl_ms: u64,
    wait: bool,
) -> BoxFuture<'static, Result<Vec<Recorded>, NodeError>> {
    Box::pin(async move {
        loop {
            // Listen for releases before trying, so one between the try and the wait counts.
            let mut released = env.coord.lock_releases();
            let now = env.clock.now_ms();
            let op = LockOp::Acquire {
                name: name.clone(),
                owner: env.thread.to_string(),
                now_ms: now,
                ttl_ms,
            };
            match write(&env, op, Body::Lock { name: name.clone(), acquired: true }, now).await {
                Ok(recs) => return Ok(recs),
                Err(cairn_storage::Error::LockHeld { owner, expires_at_ms, .. }) => {
                    if !wait {
                        return Err(NodeError::Lock {
                            name,
                            detail: format!("held by {owner} until {expires_at_ms} ms"),
                        });
                    }
                    // Wake when a lock is released, at the holder's expiry, or when the
                    // thread is cancelled.
                    tokio::select! {
                        _ = released.changed() => {}
                        () = env.clock.sleep_until(expires_at_ms) => {}
                        () = env.cancel.cancelled() => return Err(NodeError::Cancelled),
                    }
                }
                Err(e) => return Err(env.stop.node_error(e.into())),
            }
        }
    })
}

/// Releases lock `name` held by the thread (releasing a lock not held is a no-op).
pub(crate) fn release(
    env: Arc<ThreadEnv>,
    name: String,
) -> BoxFuture<'static, Result<Vec<Recorded>, NodeError>> {
    Box::pin(async move {
        let now = env.clock.now_ms();
        let op = LockOp::Release { name: name.clone(), owner: env.thread.to_string() };
        let recs =
            match write(&env, op, Body::Lock { name: name.clone(), acquired: false }, now).await {
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
    op: LockOp,
    body: Body,
    now: u64,
) -> Result<Vec<Recorded>, cairn_storage::Error> {
    env.settle().await.map_err(as_storage)?;
    let mut batch = Batch::default();
    codec::push_event(&mut batch, &env.thread, &body, now)
        .map_err(|e| cairn_storage::Error::Invalid { detail: e.to_string() })?;
    batch.locks.push(op);
    // A lock another thread holds refuses the batch: refusable, so the refusal leaves the
    // thread's chain of seq guards as it was.
    let appended = env.pipeline.submit_refusable(batch, now).await.map_err(as_storage)?;
    Ok(appended
        .bookmarks
        .into_iter()
        .map(|bookmark| Recorded { bookmark, thread: env.thread.clone(), body: body.clone() })
        .collect())
}

/// A lock write's engine error as the storage error lock callers report.
fn as_storage(e: crate::error::Error) -> cairn_storage::Error {
    match e {
        crate::error::Error::Storage(e) => e,
        other => cairn_storage::Error::Invalid { detail: other.to_string() },
    }
}
