//! Signals: named messages to a thread that is running or waiting (`docs/signals.md`).
//!
//! [`Engine::signal`] writes the signal to the thread's inbox in its own batch (never to the
//! thread's log, which its runner guards), acknowledged once durable; a node receives it with
//! `ctx.recv(name)` or `ctx.try_recv(name)` (`exec/signals.rs`). A thread parked waiting for
//! that name is woken here; one that parks just after the send wakes itself. A signal the
//! thread's workflow does not accept (`WorkflowBuilder::signal` declarations) is refused before
//! anything is written.

use cairn_storage::{Batch, Guard, NewSignal, ThreadId};
use serde::Serialize;
use serde_json::Value;

use super::engine::Engine;
use crate::error::Error;
use crate::exec::drive::spawn_drive;
use crate::exec::signals::wake_if_sent;

impl Engine {
    /// Sends `value` as a signal named `name` to `thread`, which may be running, waiting or
    /// paused; returns its number in the thread's inbox (from 1). Acknowledged only once
    /// durable; signals of one name are received in the order they were sent, each exactly
    /// once. A thread waiting in `ctx.recv(name)` is woken (and driven by this engine, which
    /// needs the thread's workflow registered).
    ///
    /// When the thread's workflow declares signals (`WorkflowBuilder::signal`), a name it does
    /// not declare and a value that does not decode as the declared type are refused before
    /// anything is stored; a workflow that declares none accepts any signal. The check needs
    /// the workflow registered here: an engine without it stores the signal unchecked.
    ///
    /// # Errors
    /// [`Error::SignalRefused`] for a signal the thread's workflow does not accept (the thread
    /// is untouched); [`Error::UnknownThread`]; [`Error::WrongStatus`] for a thread that has
    /// finished;
    /// [`Error::Storage`] with `LimitExceeded` for a name over 256 bytes, a value over
    /// 256 KiB, or a thread sent 10,000 signals already; storage errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// engine.signal("order-7", "payment", serde_json::json!({"amount": 30})).await?;
    /// # Ok(()) }
    /// ```
    pub async fn signal(
        &self,
        thread: &str,
        name: &str,
        value: impl Serialize,
    ) -> Result<u64, Error> {
        Ok(self.signal_and_wake(thread, name, value).await?.0)
    }

    /// [`Engine::signal`], and whether the signal woke the thread here (it now runs in this
    /// engine).
    pub(crate) async fn signal_and_wake(
        &self,
        thread: &str,
        name: &str,
        value: impl Serialize,
    ) -> Result<(u64, bool), Error> {
        self.send_signal(thread, name, value, None).await
    }

    /// [`Engine::signal_and_wake`], with `marker` (a dedup key's, `signal_once.rs`) stored in
    /// the same batch right after the signal.
    pub(crate) async fn send_signal(
        &self,
        thread: &str,
        name: &str,
        value: impl Serialize,
        marker: Option<NewSignal>,
    ) -> Result<(u64, bool), Error> {
        let id = ThreadId::new(thread)?;
        let engine_own = name == super::signal_once::DEDUP_SIGNAL
            || name == crate::exec::update_inbox::UPDATE_SIGNAL
            || name.starts_with(crate::core::published::PROMISE_SIGNAL_PREFIX);
        if engine_own {
            return Err(Error::Invalid(format!("signal name {name:?} is the engine's own")));
        }
        let value = serde_json::to_value(value)?;
        self.check_declared(&id, name, &value).await?;
        self.store_signal(thread, name, value, marker).await
    }

    /// [`Engine::send_signal`] without the checks of the name: for the engine's own signals
    /// (a promise's completion, `api/promise.rs`) as well as a caller's checked one.
    pub(crate) async fn store_signal(
        &self,
        thread: &str,
        name: &str,
        value: serde_json::Value,
        marker: Option<NewSignal>,
    ) -> Result<(u64, bool), Error> {
        let id = ThreadId::new(thread)?;
        let data = serde_json::to_vec(&value)?;
        let now = self.clock().now_ms();
        let signal = NewSignal::new(id.clone(), name, data, now)?;
        let marker = marker.map(|m| NewSignal { at_ms: now, ..m });
        // A marker is stored once: the write itself checks that the thread's inbox lacks it,
        // so that two engines sending the same key at once store one signal.
        let guards = marker
            .iter()
            .map(|m| Guard::NoSignal {
                thread: id.clone(),
                name: m.name.clone(),
                data: m.data.clone(),
            })
            .collect();
        let signals = std::iter::once(signal).chain(marker).collect();
        let n = match self.write(Batch { signals, guards, ..Batch::default() }).await {
            Ok(appended) => appended.signals.first().copied().unwrap_or_default(),
            Err(cairn_storage::Error::UnknownThread(_)) => {
                return Err(Error::UnknownThread(thread.to_owned()));
            }
            Err(cairn_storage::Error::Finished { status, .. }) => {
                return Err(Error::WrongStatus {
                    thread: thread.to_owned(),
                    status,
                    detail: "it has finished: it receives no more signals".into(),
                });
            }
            Err(e) => return Err(e.into()),
        };
        // The signal is durable: a failed wake loses nothing (the thread wakes when its runner,
        // a later signal or recovery looks again), so it is reported, not returned.
        let woke = wake_if_sent(&self.shell, &id).await.unwrap_or_else(|e| {
            tracing::warn!(thread = %id, error = %e, "signal stored; the waiting thread was not woken");
            None
        });
        // A sub-workflow's child is woken through the top-level thread whose nodes drive it.
        let Some(top) = woke else { return Ok((n, false)) };
        spawn_drive(&self.shell, top, "signal received");
        Ok((n, true))
    }

    /// Refuses a signal the thread's workflow does not accept (its declarations). A thread
    /// that has finished or is missing is left to the write, which refuses it with its own
    /// error; a workflow not registered here (or changed since the thread started) cannot be
    /// asked, and the signal is stored unchecked, as before declarations existed.
    async fn check_declared(&self, id: &ThreadId, name: &str, value: &Value) -> Result<(), Error> {
        let Some(record) = self.store().thread(id).await? else { return Ok(()) };
        if record.status.is_terminal() {
            return Ok(());
        }
        let Ok(wf) = self.workflow_for(&record) else { return Ok(()) };
        wf.check_signal(name, value)
            .map_err(|source| Error::SignalRefused { thread: id.to_string(), source })
    }
}
