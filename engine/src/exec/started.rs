//! Starting a thread and running it at once, without reading it back.
//!
//! `Engine::start` (on a file or a shared database) claims the new thread first, then writes
//! its creation already Running under this engine's lease ([`super::start::prepare_running`]),
//! and hands the creation's context to a runner, whose pipeline waits for the creation as its
//! first batch in flight. The runner's first batches follow the creation into storage before it
//! is durable, so they can share its group commit (one durable commit for a short thread instead
//! of two: its creation, then its run), and the runner skips the read of the thread, the restore
//! and the resume check that a drive of a stored thread makes.
//!
//! What a crash could observe is unchanged: `start` returns once the creation is durable; the
//! runner's steps are acknowledged by its pipeline as before, each after its commit, and a batch
//! of the runner can only commit in or after the creation's group. If the creation is refused
//! (the id was taken meanwhile), every batch of the runner is refused after it: they renew the
//! lease that only the creation gave this engine's owner (see `prepare_running`). On a shared
//! database the same holds across engines: two creations of one id meet at the thread row's
//! key, and the loser's batches fail the lease guard. A runner stopped there by a failed write
//! is accounted for as any drive's (`drive::stopped_by`: fenced, or driven again from its log).
//!
//! The runner runs in `start`'s caller until the creation is durable, and then as a task of
//! its own if it is not done ([`crate::tasks::Tasks::inline`]): a short thread starts, runs and
//! ends in the caller's task, with no runtime worker woken to run it and no caller woken by it.
//!
//! The thread's status channel is opened at the creation's status before the runner starts
//! (`Coordinator::expect_status`), so a handle waiting on it reads nothing back either.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::{Batch, ThreadId, WriteIntent};
use tokio::sync::{OwnedSemaphorePermit, watch};
use tracing::Instrument as _;

use super::acknowledge::Acknowledger;
use super::drive::{Claimed, released, run_claimed};
use super::pipeline::Pipeline;
use super::runner::Exit;
use super::shell::Shell;
use super::start::{Running, STARTED};
use crate::coord::{Control, Seen};
use crate::error::Error;

/// A new thread this engine has claimed, whose creation is on its way to storage.
pub(crate) struct Created {
    /// The thread.
    pub thread: ThreadId,
    /// The claim taken before the creation was prepared.
    pub control: Arc<Control>,
    /// The workflow it runs.
    pub wf: Arc<DynWorkflow>,
    /// The creation, its context and record.
    pub running: Running,
}

/// Writes the creation of `created` and drives the thread from the creation's context under
/// `permit` (one of the engine's runner permits, taken before the creation); `intent` (taken
/// before the creation was queued) announces the runner's first batches to storage. Returns once
/// the creation is durable: a receiver of the thread's status channel (subscribed before the
/// runner started, so it sees the end the runner publishes however soon that comes), or `None`
/// if another creation of the id got there first (whose creator drives it; the runner stops
/// unseen).
///
/// # Errors
/// Storage errors of the creation; [`Error::ShutDown`] if the engine stopped before its
/// outcome was known.
pub(crate) async fn start_running(
    shell: &Arc<Shell>,
    created: Created,
    permit: OwnedSemaphorePermit,
    intent: Option<WriteIntent>,
) -> Result<Option<watch::Receiver<Seen>>, Error> {
    let Created { thread, control, wf, running } = created;
    let Running { batch, ctx, record } = running;
    let (pipeline, acknowledger) =
        creation_pipeline(shell, &thread, batch, ctx.meta.seq, intent).await?;
    let durable = pipeline.durable_through(1);
    let refused = pipeline.durable_through(1);
    shell.verified.insert(&thread);
    // Its handle's waiters subscribe without reading the thread back; the runner's release
    // below publishes whatever status it leaves.
    let seen = shell.coord.expect_status(&thread, record.status);
    let record_status = record.status;
    let (s, id, workflow) = (shell.clone(), thread.clone(), wf.clone());
    let counted = shell.queued.enter(&thread);
    let span = tracing::info_span!(
        "thread",
        thread = %id,
        workflow = workflow.id(),
        version = workflow.version(),
        depth = 0,
        reason = STARTED,
    );
    crate::telemetry::adopt_thread_trace(&span, id.as_str());
    // The task is this one block in its span (not a block that makes it: that held every
    // value it moves in twice). It runs in the caller's task until the creation is durable
    // (`start` waits for that anyway), and on its own after that if it is not done.
    let task = shell.tasks.inline(
        async move {
            let _counted = counted;
            let (result, mut published) = if s.tasks.is_stopping() {
                // The thread stays Running and is recovered at the next open (its creation is
                // still acknowledged, for `start`, below).
                drop(pipeline);
                acknowledger.beside(std::pin::pin!(async { Ok(Exit::Shutdown) })).await
            } else {
                // A thread started here has no checkpoint yet.
                let claimed = Claimed {
                    thread: &id,
                    depth: 0,
                    reason: STARTED,
                    control: &control,
                    wf: workflow,
                    checkpointed_at_ms: None,
                };
                let run = std::pin::pin!(run_claimed(&s, claimed, ctx, record, pipeline, true));
                acknowledger.beside(run).await
            };
            drop(permit);
            // Accounted for before the thread is let go (whoever waits for the release sees
            // the runner counted as fenced).
            if result.is_err() {
                // What became of the creation, for `refused` below (and `start`).
                published.publish();
            }
            let again = match &result {
                Err(error) if refused.await.is_err() => {
                    // Its creation was refused (or its outcome is unknown): nothing of this run
                    // was written, and whoever created the thread drives it.
                    tracing::debug!(thread = %id, %error, "a started runner stopped with its creation");
                    false
                }
                Err(error) => super::drive::stopped_by(&s, &id, error),
                Ok(_) => false,
            };
            // `start` learns its creation is durable once the thread is let go (and its end, if
            // it ended, published): not later, after reads of a store that may not answer.
            super::drive::released_then(&s, &id, &result, || published.publish()).await;
            if !matches!(result, Ok(Exit::Status(_))) {
                // No status of its own to publish (stopped, refused): the stored one, read.
                s.coord.status_changed(&id, record_status).await;
            }
            drop(published);
            super::drive::wake_if_signalled(&s, &id, &result).await;
            if again {
                // As a drive of a stored thread: again from its log, after a pause.
                super::drive::spawn_drive_after(&s, id.clone(), "driven again after a failed write");
            }
        }
        .instrument(span),
    );
    match task.run_until(durable).await {
        Ok(()) => Ok(Some(seen)),
        Err(Error::Storage(cairn_storage::Error::GuardFailed { .. })) => {
            let existing = super::fetch::record(shell.store.as_ref(), &thread).await?;
            // The status opened for this creation's runner was never the thread's.
            shell.coord.status_changed(&thread, existing.status).await;
            super::start::same_workflow(&existing, &wf).map(|()| None)
        }
        Err(e) => Err(e),
    }
}

/// The pipeline of a thread created running, with its creation (`batch`, ending at `seq`) queued
/// as its first batch in flight; on an error, the thread released.
async fn creation_pipeline(
    shell: &Arc<Shell>,
    thread: &ThreadId,
    batch: Batch,
    seq: u64,
    intent: Option<WriteIntent>,
) -> Result<(Pipeline, Acknowledger), Error> {
    let (pipeline, acknowledger) = Pipeline::start(shell, thread, seq, seq);
    pipeline.intend(intent);
    if let Err(e) = pipeline.hand_creation(batch, shell.clock.now_ms()).await {
        released(shell, thread, &Ok(Exit::Elsewhere)).await;
        return Err(e);
    }
    Ok((pipeline, acknowledger))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cairn_dsl::{END, NodeOutput, START, Workflow};

    use crate::{Engine, Replace};

    /// The most a spawned engine task may take: its box is made by copying it, once a thread.
    /// A started runner's task is the largest: 26,448 bytes in a test build while its step
    /// future held a second task future and the task was a block that made the spawned block
    /// (holding what it moved in twice), and the runner's future held its context twice; 9,264
    /// since.
    const SPAWNED_BYTES_MAX: usize = 12 * 1024;

    /// A workflow of two nodes that each add one.
    fn two() -> Workflow<Replace<u64>> {
        let add = |s: Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(s.0 + 1)) };
        Workflow::<Replace<u64>>::builder("two", 1)
            .node("a", add)
            .node("b", add)
            .edge(START, "a")
            .edge("a", "b")
            .edge("b", END)
            .build()
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_started_runner_is_spawned_as_a_small_future() {
        let wf = two();
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::builder(dir.path().join("w.db")).workflow(&wf).open().await.unwrap();
        let options = crate::StartOptions::id("t");
        let handle = engine.start_json("two", &Replace(0u64), options).await.unwrap();
        handle.finished().await.unwrap();
        let largest = engine.shell.tasks.largest_spawned();
        assert!(largest <= SPAWNED_BYTES_MAX, "a {largest}-byte future was spawned");
        engine.shutdown().await;
    }

    /// A short thread started alone, on a store whose groups need not be durable, runs in
    /// `start`'s caller to its end, its writes committed on the caller's thread, when the
    /// store's writer rests: no task is spawned to run it, and it is stored completed when
    /// `start` returns. A start that finds the writer still busy (its thread not yet parked
    /// after the open or the last group, on a loaded machine: CI once saw the first thread
    /// spawned) hands its writes to the writer's thread and its runner to a task; the test
    /// starts threads until three ran in the caller, and a thread that ran there must have
    /// ended.
    #[tokio::test(flavor = "current_thread")]
    async fn a_short_thread_started_alone_ends_before_start_returns() {
        let wf = two();
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::builder(dir.path().join("w.db"))
            .durability(cairn_storage::Durability::None)
            .workflow(&wf)
            .open()
            .await
            .unwrap();
        let mut in_caller = 0;
        for n in 0..50 {
            let spawned = engine.shell.tasks.spawned();
            let options = crate::StartOptions::id(format!("t{n}"));
            let handle = engine.start_json("two", &Replace(0u64), options).await.unwrap();
            let status = handle.status().await.unwrap();
            if engine.shell.tasks.spawned() == spawned {
                assert_eq!(status, cairn_storage::ThreadStatus::Completed, "thread {n}");
                in_caller += 1;
            }
            if in_caller == 3 {
                break;
            }
            handle.finished().await.unwrap();
        }
        assert_eq!(
            in_caller, 3,
            "of 50 threads started one at a time, {in_caller} ran in the caller"
        );
        engine.shutdown().await;
    }
}
