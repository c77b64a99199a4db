//! What the tasks of a step read when they receive a signal (`ctx.recv`, `ctx.try_recv`): the
//! cursor of the last signal received per name, shared by the step's tasks, and how a receive
//! reads a recorded receipt or takes the next signal from the inbox (see `signals.rs` for the
//! design).

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_dsl::NodeError;
use cairn_storage::{Signal, Store, ThreadId};
use serde_json::Value;

use super::stop::StopSlot;
use crate::core::drawn::{Drawn, received};
use crate::core::thread_ctx::ThreadCtx;
use crate::error::Error;

/// Signals read per inbox read while looking for the next one of a name.
const INBOX_PAGE: usize = 256;

/// The last signal number received per name, as the step's tasks move it, and the store
/// whose inbox they read.
pub(crate) struct SignalCursor {
    store: Arc<dyn Store>,
    /// An async lock: held across the inbox read, which is awaited.
    taken: tokio::sync::Mutex<BTreeMap<String, u64>>,
}

impl SignalCursor {
    /// A cursor at what `ctx` has received.
    pub(crate) fn new(store: Arc<dyn Store>, ctx: &ThreadCtx) -> SignalCursor {
        SignalCursor { store, taken: tokio::sync::Mutex::new(ctx.meta.signals.clone()) }
    }

    /// Starts a step from what the thread context has received.
    pub(crate) async fn reset(&self, ctx: &ThreadCtx) {
        *self.taken.lock().await = ctx.meta.signals.clone();
    }

    /// Takes the next signal named `name` after the last one taken, if there is one.
    ///
    /// # Errors
    /// Storage errors reading the inbox.
    pub(crate) async fn take(
        &self,
        thread: &ThreadId,
        name: &str,
    ) -> Result<Option<Signal>, Error> {
        // Held across the read, so that two tasks of the step never take the same signal.
        let mut taken = self.taken.lock().await;
        let after = taken.get(name).copied().unwrap_or(0);
        let Some(signal) = next_of(self.store.as_ref(), thread, name, after).await? else {
            return Ok(None);
        };
        taken.insert(name.to_owned(), signal.n);
        Ok(Some(signal))
    }
}

impl SignalCursor {
    /// Takes the first sent (lowest number) of the next signals of `names` after the last
    /// ones taken, if `accept` takes it; a signal refused stays where it is.
    ///
    /// # Errors
    /// Storage errors reading the inbox.
    pub(crate) async fn take_first(
        &self,
        thread: &ThreadId,
        names: &[String],
        accept: impl Fn(&Signal) -> bool,
    ) -> Result<Option<Signal>, Error> {
        // Held across the reads, as `take` holds it.
        let mut taken = self.taken.lock().await;
        let mut first: Option<Signal> = None;
        for name in names {
            let after = taken.get(name).copied().unwrap_or(0);
            if let Some(next) = next_of(self.store.as_ref(), thread, name, after).await?
                && first.as_ref().is_none_or(|f| next.n < f.n)
            {
                first = Some(next);
            }
        }
        let Some(signal) = first.filter(|s| accept(s)) else { return Ok(None) };
        taken.insert(signal.name.clone(), signal.n);
        Ok(Some(signal))
    }
}

/// The first signal named `name` with a number above `after`.
pub(crate) async fn next_of(
    store: &dyn Store,
    thread: &ThreadId,
    name: &str,
    mut after: u64,
) -> Result<Option<Signal>, Error> {
    loop {
        let page = store.signals(thread, after, INBOX_PAGE).await?;
        let full = page.len() == INBOX_PAGE;
        if let Some(found) = page.iter().find(|s| s.name == name) {
            return Ok(Some(found.clone()));
        }
        match page.last() {
            Some(last) if full => after = last.n,
            _ => return Ok(None),
        }
    }
}

/// What a recorded receipt gives a receive of `name` when the task runs again.
///
/// # Errors
/// [`NodeError::Nondeterminism`] when the code receives another name, or waits where a
/// `try_recv` found none, or the value recorded there is not a signal.
pub(crate) fn replayed(
    recorded: &Value,
    name: &str,
    wait: bool,
) -> Result<Option<Value>, NodeError> {
    let inner = Drawn::Signal
        .read(recorded)
        .map_err(|was| format!("the code receives a signal where a {was} value was recorded"));
    let got = inner.and_then(|inner| match received(&inner) {
        Some((n, got)) if n == name => Ok(got.map(|(_, v)| v.clone())),
        Some((n, _)) => Err(format!("the code receives signal {name:?} where {n:?} was recorded")),
        None => Err(format!("a recorded signal {inner} does not read")),
    });
    match got {
        Ok(Some(value)) => Ok(Some(value)),
        Ok(None) if !wait => Ok(None),
        Ok(None) => Err(NodeError::Nondeterminism {
            detail: format!("signal {name:?} waited for where try_recv found none"),
        }),
        Err(detail) => Err(NodeError::Nondeterminism { detail }),
    }
}

impl SignalCursor {
    /// A fresh receive of `name`: the next signal's value (or `None`) and the value the task
    /// records for it; with nothing there and `wait`, the suspension that parks the thread.
    ///
    /// # Errors
    /// [`NodeError::WaitingSignal`]; a storage error (put in `stop` when the runner must stop);
    /// a stored value that is not JSON.
    pub(crate) async fn fresh(
        &self,
        thread: &ThreadId,
        name: &str,
        wait: bool,
        stop: &StopSlot,
    ) -> Result<(Option<Value>, Value), NodeError> {
        let signal = self.take(thread, name).await.map_err(|e| stop.node_error(e))?;
        let mut record = serde_json::Map::new();
        record.insert("name".into(), Value::from(name));
        let value = match signal {
            Some(signal) => {
                let value: Value = serde_json::from_slice(&signal.data).map_err(|e| {
                    NodeError::fatal(format!("signal {} of {name:?} is not JSON: {e}", signal.n))
                })?;
                record.insert("n".into(), Value::from(signal.n));
                record.insert("value".into(), value.clone());
                Some(value)
            }
            None if wait => return Err(NodeError::WaitingSignal { name: name.to_owned() }),
            None => None,
        };
        Ok((value, Drawn::Signal.record(Value::Object(record))))
    }
}
