//! Published events and promises in node code (`docs/promises.md`): [`Ctx::set_event`]
//! publishes a key/value pair a caller reads (`Engine::get_event`); [`Ctx::promise`] makes a
//! [`Promise`] whose id the node hands out, and [`Ctx::await_promise`] waits until an outside
//! system completes it by that id, with a value or an error (`Engine::complete_promise`).
//!
//! A completion is a signal in the thread's inbox, named [`Promise::signal_name`] and holding
//! `{"value": ..}` or `{"error": ".."}`: awaiting a promise is receiving that signal, so it
//! parks the thread durably, may sit in a [`Select`] beside other signals and a deadline, and
//! takes a completion sent before the node awaited it.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{Ctx, NodeError, Select, Selected};

/// A promise a node created: its id, which an outside system completes it by.
///
/// # Examples
/// ```
/// let p = cairn_dsl::Promise::new("order-7~p1.0123456789abcdef.0", "cairn.promise.1.0123456789abcdef.0");
/// assert_eq!(p.id(), "order-7~p1.0123456789abcdef.0");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Promise {
    id: String,
    signal: String,
}

impl Promise {
    /// The promise `id`, completed by the signal `signal` (made by the engine).
    pub fn new(id: impl Into<String>, signal: impl Into<String>) -> Self {
        Self { id: id.into(), signal: signal.into() }
    }

    /// Its id: what the node hands out, and what `Engine::complete_promise` takes.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The name of the signal its completion arrives as.
    pub fn signal_name(&self) -> &str {
        &self.signal
    }

    /// The completion a [`Ctx::select`] took, if it took this promise's: `Ok(value)` or the
    /// completer's `Err(message)`.
    ///
    /// # Errors
    /// [`NodeError::Codec`] for a completion that is neither a value nor an error.
    pub fn outcome(&self, selected: &Selected) -> Option<Result<Result<Value, String>, NodeError>> {
        match selected {
            Selected::Signal { name, value } if *name == self.signal => Some(completion(value)),
            _ => None,
        }
    }
}

impl Select {
    /// Also waits for `promise` to be completed ([`Promise::outcome`] reads what was taken).
    #[must_use]
    pub fn promise(self, promise: &Promise) -> Self {
        self.signal(promise.signal_name())
    }
}

/// A completion's value or error, as the inbox holds it.
fn completion(sent: &Value) -> Result<Result<Value, String>, NodeError> {
    match (sent.get("value"), sent.get("error").and_then(Value::as_str)) {
        (Some(value), None) => Ok(Ok(value.clone())),
        (None, Some(error)) => Ok(Err(error.to_owned())),
        _ => Err(NodeError::Codec {
            detail: format!("a promise completion {sent} that does not read"),
        }),
    }
}

/// `value` as an `R`, or the codec error naming the promise.
fn typed<R: DeserializeOwned>(p: &Promise, value: Value) -> Result<R, NodeError> {
    R::deserialize(&value).map_err(|e| NodeError::Codec {
        detail: format!("promise {} was completed with {value}, not the type awaited: {e}", p.id),
    })
}

impl Ctx {
    /// Publishes `value` under `key` on the thread: durable when this returns, and what
    /// `Engine::get_event(thread, key, ..)` answers (a later value of the key replaces it). A
    /// node that runs again (after a crash or a wake) does not publish again what it published.
    ///
    /// # Errors
    /// [`NodeError::Failed`] for a key or value over the engine's limits; a storage failure.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeError};
    /// async fn report(ctx: &Ctx) -> Result<(), NodeError> {
    ///     ctx.set_event("stage", "shipping").await
    /// }
    /// ```
    pub async fn set_event(&self, key: &str, value: impl Serialize) -> Result<(), NodeError> {
        let value = serde_json::to_value(value)
            .map_err(|e| NodeError::Codec { detail: format!("event {key:?}: {e}") })?;
        self.inner().set_event(key, value).await
    }

    /// Creates a promise: durable when this returns, its id derived from where the node stands
    /// (a node that runs again gets the same one). Hand the id out (a tool call, an email,
    /// [`Ctx::set_event`]), then [`Ctx::await_promise`] it.
    ///
    /// # Errors
    /// [`NodeError::Failed`] past the engine's limit of promises per thread; a storage failure.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeError};
    /// async fn approval(ctx: &Ctx) -> Result<bool, NodeError> {
    ///     let p = ctx.promise().await?;
    ///     ctx.set_event("approval_promise", p.id()).await?;
    ///     Ok(ctx.await_promise::<bool>(&p).await?.unwrap_or(false))
    /// }
    /// ```
    pub async fn promise(&self) -> Result<Promise, NodeError> {
        self.inner().promise().await
    }

    /// Waits until `promise` is completed: `Ok(value)` (as an `R`) or the completer's
    /// `Err(message)`. A completion sent before this call is taken at once.
    ///
    /// # Errors
    /// [`NodeError::WaitingSignal`] while it waits (propagate it with `?`: the thread parks);
    /// [`NodeError::Codec`] for a value that is not an `R`.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeError, Promise};
    /// async fn paid(ctx: &Ctx, p: &Promise) -> Result<u64, NodeError> {
    ///     ctx.await_promise::<u64>(p).await?.map_err(NodeError::fatal)
    /// }
    /// ```
    pub async fn await_promise<R: DeserializeOwned>(
        &self,
        promise: &Promise,
    ) -> Result<Result<R, String>, NodeError> {
        let sent = self.inner().recv(promise.signal_name()).await?;
        match completion(&sent)? {
            Ok(value) => typed(promise, value).map(Ok),
            Err(message) => Ok(Err(message)),
        }
    }

    /// As [`Ctx::await_promise`], giving up `timeout_ms` after the call first ran: `None`
    /// once the deadline passed without a completion (one sent later stays for a later await).
    ///
    /// # Errors
    /// [`NodeError::Sleeping`] while it waits; as [`Ctx::await_promise`].
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeError, Promise};
    /// async fn within_a_day(ctx: &Ctx, p: &Promise) -> Result<bool, NodeError> {
    ///     Ok(matches!(ctx.await_promise_timeout::<bool>(p, 86_400_000).await?, Some(Ok(true))))
    /// }
    /// ```
    pub async fn await_promise_timeout<R: DeserializeOwned>(
        &self,
        promise: &Promise,
        timeout_ms: u64,
    ) -> Result<Option<Result<R, String>>, NodeError> {
        let selected = self.select(Select::new().promise(promise).timeout_ms(timeout_ms)).await?;
        match promise.outcome(&selected) {
            None => Ok(None),
            Some(completed) => match completed? {
                Ok(value) => typed(promise, value).map(|v| Some(Ok(v))),
                Err(message) => Ok(Some(Err(message))),
            },
        }
    }
}
