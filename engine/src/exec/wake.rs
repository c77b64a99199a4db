//! What happens when an armed timer or deadline comes due: the exec layer's side of the
//! coordinator's timers.

use std::sync::{Arc, Weak};

use cairn_storage::{ThreadId, ThreadRecord, ThreadStatus};
use futures::future::BoxFuture;

use super::drive::spawn_drive;
use super::parked::{time_out_parked, write_read};
use super::shell::Shell;
use crate::coord::{Due, Wake};
use crate::core::child_start::pinned_elsewhere;
use crate::core::event::Body;
use crate::core::status::Transition;
use crate::core::summary;
use crate::error::Error;

/// Records due timers and deadlines for the engine whose shell this points to (weakly: the
/// coordinator that holds this must not keep the engine alive).
pub(crate) struct Waker(pub Weak<Shell>);

impl Wake for Waker {
    fn due(&self, thread: ThreadId, due: Due) -> BoxFuture<'static, ()> {
        let shell = self.0.upgrade();
        Box::pin(async move {
            let Some(shell) = shell else { return };
            match due {
                Due::Timer { task, until_ms } => fire_timer(&shell, thread, task, until_ms).await,
                Due::Start { .. } => spawn_drive(&shell, thread, "its start time came"),
                Due::Deadline { .. } => match time_out_parked(&shell, &thread).await {
                    Ok(()) => super::drive::wake_selecting_parent(&shell, &thread),
                    Err(e) => {
                        tracing::debug!(thread = %thread, error = %e, "deadline of a parked thread");
                    }
                },
            }
        })
    }

    fn updates_stored(&self, thread: ThreadId) -> BoxFuture<'static, ()> {
        let shell = self.0.upgrade();
        Box::pin(async move {
            if let Some(shell) = shell {
                super::update_parked::answer_parked(&shell, &thread).await;
            }
        })
    }
}

/// Times a timer's write is tried when the thread's log moves between the read and the write
/// while it sleeps on (an event that leaves it sleeping, such as a checkpoint's).
const FIRE_TRIES: usize = 4;

/// Records that a sleeping thread's timer fired and wakes it in the same batch; a thread that
/// is no longer Sleeping (cancelled, paused) is left alone: a resume arms a paused sleeper's
/// timer again. So is a thread pinned to another worker build (repinned since this engine armed
/// the timer, by another process or engine): the timer is dropped, the build's engines arm
/// their own (`Engine::repin`, docs/patching.md).
///
/// A timer fires only the sleep it was armed for. One armed for an earlier sleep (a resume's
/// arming, read before the thread woke and slept again, replaces the new sleep's) would wake
/// the new sleep before its time: its write is refused (the thread's summary names the time its
/// sleep is due, and the write is guarded by the log read), and the new sleep's timer is armed
/// again.
async fn fire_timer(
    shell: &Arc<Shell>,
    thread: ThreadId,
    task: crate::core::event::TaskKey,
    until_ms: u64,
) {
    for _ in 0..FIRE_TRIES {
        let record = match super::parked::stored(shell, &thread).await {
            Ok(record) if record.status == ThreadStatus::Sleeping => record,
            Ok(_) => return,
            Err(e) => return tracing::debug!(thread = %thread, error = %e, "timer not delivered"),
        };
        if pinned_elsewhere(&record.labels, shell.config.build_id.as_deref()) {
            return tracing::debug!(thread = %thread, "timer dropped: pinned to another build");
        }
        if summary::sleeping_until_ms(&record.summary).is_some_and(|due| due != until_ms) {
            tracing::debug!(thread = %thread, until_ms, "a timer of an earlier sleep");
            return arm_again(shell, &record).await;
        }
        let body = Body::TimerFired { task: task.clone(), until_ms };
        let run = Some(Transition::Run);
        match write_read(shell, record, ThreadStatus::Sleeping, vec![body], run, true).await {
            Ok(()) => return spawn_drive(shell, thread, "timer fired"),
            // Moved since the read: look again.
            Err(Error::WrongStatus { .. }) => {}
            Err(e) => return tracing::debug!(thread = %thread, error = %e, "timer not delivered"),
        }
    }
}

/// Arms the timer of the sleep `record`'s thread is in.
async fn arm_again(shell: &Shell, record: &ThreadRecord) {
    let armed = async {
        let wf = shell.registry.workflow_for(record)?;
        let ctx = super::fetch::restore(shell.store.as_ref(), &wf, &record.id, None).await?;
        if let Some(due) = Due::timer_of(&ctx) {
            shell.coord.arm(&record.id, due);
        }
        Ok::<_, Error>(())
    };
    if let Err(e) = armed.await {
        tracing::warn!(thread = %record.id, error = %e, "a sleeping thread's timer not armed again");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cairn_dsl::{END, NodeOutput, START, Workflow};
    use cairn_storage::{Seq, ThreadId, ThreadStatus};

    use crate::clock::ManualClock;
    use crate::coord::Due;
    use crate::core::event::{Body, TaskKey};
    use crate::{Engine, Replace};

    const T1: u64 = 1_000;
    const T2: u64 = 2_000;

    async fn status(engine: &Engine, id: &ThreadId) -> ThreadStatus {
        engine.shell.store.thread(id).await.unwrap().unwrap().status
    }

    /// Waits (in real time, briefly) until `id`'s stored record satisfies `ok`.
    async fn until(
        engine: &Engine,
        id: &ThreadId,
        ok: impl Fn(&cairn_storage::ThreadRecord) -> bool,
    ) {
        for _ in 0..2_000 {
            let record = engine.shell.store.thread(id).await.unwrap().unwrap();
            if ok(&record) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        panic!("{id} never got there");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_timer_armed_for_an_earlier_sleep_does_not_end_the_next_one() {
        // One node, run twice (as a schedule's round is): its sleeps are one task's.
        let wf = Workflow::<Replace<u64>>::builder("naps", 1)
            .node("nap", |s: Arc<Replace<u64>>, ctx| async move {
                ctx.sleep_until_ms(if s.0 == 0 { T1 } else { T2 }).await?;
                Ok(NodeOutput::update(s.0 + 1))
            })
            .edge(START, "nap")
            .loop_bound("nap", 2)
            .route("nap", |s: &Replace<u64>| if s.0 < 2 { "nap" } else { END }, ["nap", END])
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(0);
        let engine = Engine::builder(dir.path().join("w.db"))
            .clock(Arc::new(clock.clone()))
            .workflow(&wf)
            .open()
            .await
            .unwrap();
        let options = crate::StartOptions::id("t");
        let id = engine.start_json("naps", &Replace(0u64), options).await.unwrap().id().clone();
        let sleeping_until = |ms: u64| {
            move |r: &cairn_storage::ThreadRecord| {
                r.status == ThreadStatus::Sleeping
                    && crate::core::summary::sleeping_until_ms(&r.summary) == Some(ms)
            }
        };
        until(&engine, &id, sleeping_until(T1)).await;
        clock.set_ms(T1);
        until(&engine, &id, sleeping_until(T2)).await;
        // What a resume that read the first sleep arms after the thread slept again: the first
        // sleep's timer, in place of the second's, due at once.
        engine.shell.coord.arm(&id, Due::Timer { task: TaskKey::node("nap"), until_ms: T1 });
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(status(&engine, &id).await, ThreadStatus::Sleeping, "woken before its time");
        assert_eq!(fired(&engine, &id).await, 1, "only the first sleep's timer fired");
        // The second sleep's timer is armed again: it ends at its time.
        clock.set_ms(T2);
        until(&engine, &id, |r| r.status == ThreadStatus::Completed).await;
        engine.shutdown().await;
    }

    /// The `timer_fired` events of `id`'s log.
    async fn fired(engine: &Engine, id: &ThreadId) -> usize {
        let events = engine.shell.store.read_since(id, Seq(0), 1_000).await.unwrap();
        events
            .into_iter()
            .map(|e| crate::blocking::decode(engine.shell.store.as_ref(), e).unwrap().body)
            .filter(|b| matches!(b, Body::TimerFired { .. }))
            .count()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_thread_repinned_away_gets_no_timer_fired_from_this_build() {
        let wf = Workflow::<Replace<u64>>::builder("nap", 1)
            .node("nap", |s: Arc<Replace<u64>>, ctx| async move {
                ctx.sleep_until_ms(T1).await?;
                Ok(NodeOutput::update(s.0 + 1))
            })
            .edge(START, "nap")
            .edge("nap", END)
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(0);
        let engine = Engine::builder(dir.path().join("w.db"))
            .clock(Arc::new(clock.clone()))
            .build_id("build-a")
            .workflow(&wf)
            .open()
            .await
            .unwrap();
        let mut ids = Vec::new();
        for id in ["moved", "stays"] {
            let started = engine.start_json("nap", &Replace(0u64), crate::StartOptions::id(id));
            ids.push(started.await.unwrap().id().clone());
        }
        let (moved, stays) = (&ids[0], &ids[1]);
        for id in &ids {
            until(&engine, id, |r| r.status == ThreadStatus::Sleeping).await;
            // Armed once the sleep is written.
            for _ in 0..2_000 {
                if engine.shell.coord.is_armed(id, crate::coord::Slot::Timer) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            assert!(engine.shell.coord.is_armed(id, crate::coord::Slot::Timer), "{id}");
        }
        engine.repin("moved", Some("build-b")).await.unwrap();
        assert!(!engine.shell.coord.is_armed(moved, crate::coord::Slot::Timer), "disarmed");
        assert!(engine.shell.coord.is_armed(stays, crate::coord::Slot::Timer), "control");
        // What an engine that armed the timer before another process repinned it still holds.
        engine.shell.coord.arm(moved, Due::Timer { task: TaskKey::node("nap"), until_ms: T1 });
        clock.set_ms(T1);
        until(&engine, stays, |r| r.status == ThreadStatus::Completed).await;
        assert_eq!(fired(&engine, stays).await, 1, "control: the timer of a thread kept fires");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(status(&engine, moved).await, ThreadStatus::Sleeping, "left to build-b");
        assert_eq!(fired(&engine, moved).await, 0, "no timer_fired from build-a");
        assert!(!engine.shell.coord.is_armed(moved, crate::coord::Slot::Timer), "dropped");
        engine.shutdown().await;
    }
}
