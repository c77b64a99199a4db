//! The lease heartbeat of an engine on a shared database: while its runners drive threads, the
//! engine renews their leases on its own, every [`HEARTBEAT_FRACTION`]th of the lease, whatever
//! the runners are doing (a tool call of minutes, a node that waits on a network).
//!
//! Without it, a lease was renewed only by a runner's batches, so a call longer than the lease
//! let another engine take the thread over and run the same call again while this engine was
//! alive and connected. With it, a live engine that reaches its database keeps its threads; a
//! stalled one (stopped by SIGSTOP, cut off from the database, its runtime blocked) renews
//! nothing, loses its threads once the lease lapses, and its late writes are fenced: a renewal
//! is [`LeaseOp::Renew`], which the store refuses unless the lease is still this owner's, so a
//! heartbeat never takes a lease back from an engine that took it over.
//!
//! Each thread's renewal is a batch of its own (one refused renewal fails no other); the group
//! commit writes the engine's renewals of one beat in one transaction.

use std::sync::Arc;
use std::time::Duration;

use cairn_storage::{Error as StoreError, LeaseOp, Store, StoreExt};
use tracing::Instrument;

use super::Local;
use crate::clock::Clock;
use crate::tasks::Tasks;

/// The heartbeat renews leases this many times per lease time to live: two beats can be lost
/// (a slow commit, a brief network stall) before a lease lapses.
pub(crate) const HEARTBEAT_FRACTION: u64 = 3;

/// What the heartbeat needs: the threads this engine drives and where their leases are.
pub(super) struct Heartbeat {
    pub local: Arc<Local>,
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    /// This engine's lease owner name.
    pub owner: String,
    /// The lease time to live the renewals set, in ms.
    pub lease_ttl_ms: u64,
}

impl Heartbeat {
    /// The time between two beats.
    fn period(&self) -> Duration {
        Duration::from_millis((self.lease_ttl_ms / HEARTBEAT_FRACTION).max(1))
    }

    /// Beats until the engine stops.
    pub fn spawn(self, tasks: &Tasks) {
        let stopping = tasks.stopping().clone();
        tasks.spawn(async move {
            let mut ticks = tokio::time::interval(self.period());
            // A late beat is followed by the next one a whole period later, not by a burst.
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticks.tick() => {}
                    () = stopping.cancelled() => return,
                }
                let threads = self.local.driven();
                if threads.is_empty() {
                    continue;
                }
                let span = tracing::debug_span!("lease_heartbeat", threads = threads.len());
                self.beat(threads).instrument(span).await;
            }
        });
    }

    /// Renews the lease of each of `threads` (those whose lease is no longer ours, or not yet
    /// taken, are refused by the store and left alone: the runner learns of it at its next
    /// batch, which is fenced).
    async fn beat(&self, threads: Vec<cairn_storage::ThreadId>) {
        let now_ms = self.clock.now_ms();
        let renewals = threads.iter().map(|thread| {
            self.store.lease(LeaseOp::Renew {
                thread: thread.clone(),
                owner: self.owner.as_str().into(),
                now_ms,
                ttl_ms: self.lease_ttl_ms,
            })
        });
        let outcomes = futures::future::join_all(renewals).await;
        for (thread, outcome) in threads.iter().zip(outcomes) {
            match outcome {
                Ok(()) => {}
                // Not taken yet (the runner's first batch is on its way), or released by the
                // runner's last one: nothing to keep alive.
                Err(StoreError::LeaseNotHeld { .. } | StoreError::UnknownThread(_)) => {
                    tracing::debug!(%thread, "no lease of ours to renew");
                }
                Err(e) => {
                    tracing::warn!(%thread, error = %e, "lease renewal failed (the lease lapses unless a later beat renews it)");
                }
            }
        }
    }
}
