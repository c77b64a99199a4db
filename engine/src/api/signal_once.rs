//! Signals that arrive once, and signal-with-start (`docs/signals.md`).
//!
//! [`Engine::signal_once`] stores a signal under a dedup key at most once per thread: a second
//! send with the key (a retried webhook, a caller that timed out and sends again, after a
//! restart too) stores nothing and answers the first one's number, marked a duplicate. The key
//! is kept in the thread's inbox beside the signal, as a marker signal named [`DEDUP_SIGNAL`]
//! (its value the key) written in the same batch, so both are durable together and a crash
//! leaves either both or neither. The engine reads the inbox for the marker first (a duplicate
//! answered without a write), and the write carries a guard (`Guard::NoSignal`) that the store
//! checks inside its transaction: redb's single writer, or PostgreSQL's transaction holding the
//! thread's row lock, so that two engines sharing a database and racing with one key store one
//! signal (the loser's write is refused, and it answers the winner's number); two sends in one
//! process likewise.
//!
//! [`Engine::signal_with_start`] creates the thread if it does not exist (idempotent on its id,
//! as `start` is), then sends the signal: two writes, each idempotent, so a caller that retries
//! after a failure with the same id and dedup key gets one thread and one signal.

use serde::Serialize;
use serde_json::Value;

use super::engine::Engine;
use crate::config::StartOptions;
use crate::error::Error;

/// The name of the marker that holds a dedup key in a thread's inbox (never received by a
/// node: a workflow's own signals may not take it).
pub const DEDUP_SIGNAL: &str = "cairn.dedup";

/// Signals read per inbox read while looking for a key.
const INBOX_PAGE: usize = 256;

/// What a send with a dedup key did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Sent {
    /// The signal's number in the thread's inbox: the one stored now, or the first one stored
    /// under the key.
    pub signal: u64,
    /// The key had been sent before: nothing was stored.
    pub duplicate: bool,
}

/// What [`Engine::signal_with_start`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SignalWithStart {
    /// The thread signalled.
    pub thread: String,
    /// The call created it (`false`: it existed).
    pub created: bool,
    /// The signal sent.
    #[serde(flatten)]
    pub sent: Sent,
}

impl Engine {
    /// Sends a signal as [`Engine::signal`] does, at most once per `dedup_key` on the thread:
    /// a key sent before (since the thread was created, across restarts) stores nothing and
    /// answers the number of the signal first stored under it, `duplicate: true`.
    ///
    /// # Errors
    /// As [`Engine::signal`]; [`Error::Invalid`] for an empty key or one over 256 bytes.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// let first = engine.signal_once("order-7", "payment", 30, "webhook-81").await?;
    /// let again = engine.signal_once("order-7", "payment", 30, "webhook-81").await?;
    /// assert!(!first.duplicate && again.duplicate && again.signal == first.signal);
    /// # Ok(()) }
    /// ```
    pub async fn signal_once(
        &self,
        thread: &str,
        name: &str,
        value: impl Serialize,
        dedup_key: &str,
    ) -> Result<Sent, Error> {
        Ok(self.signal_once_and_wake(thread, name, value, dedup_key).await?.0)
    }

    /// [`Engine::signal_once`], and whether the signal woke the thread here.
    pub(crate) async fn signal_once_and_wake(
        &self,
        thread: &str,
        name: &str,
        value: impl Serialize,
        dedup_key: &str,
    ) -> Result<(Sent, bool), Error> {
        let value = serde_json::to_value(value)?;
        self.keyed_send(thread, name, value, dedup_key, false).await
    }

    /// A send under `dedup_key`: the one stored before under it, else this one (`engine_own`:
    /// a signal of the engine's own name, stored without the checks a caller's gets).
    pub(crate) async fn keyed_send(
        &self,
        thread: &str,
        name: &str,
        value: Value,
        dedup_key: &str,
        engine_own: bool,
    ) -> Result<(Sent, bool), Error> {
        let id = cairn_storage::ThreadId::new(thread)?;
        let key = serde_json::to_vec(&Value::from(dedup_key))?;
        let marker = cairn_storage::NewSignal::new(id.clone(), DEDUP_SIGNAL, key.clone(), 0)
            .map_err(|e| Error::Invalid(format!("dedup key: {e}")))?;
        if let Some(first) = self.keyed(&id, &key).await? {
            return Ok((Sent { signal: first, duplicate: true }, false));
        }
        let sent = if engine_own {
            self.store_signal(thread, name, value, Some(marker)).await
        } else {
            self.send_signal(thread, name, value, Some(marker)).await
        };
        match sent {
            Ok((signal, woke)) => Ok((Sent { signal, duplicate: false }, woke)),
            // Another engine stored the key between the look above and the write, which
            // refused the second: the first is durable, and found now.
            Err(Error::Storage(cairn_storage::Error::GuardFailed { detail, .. })) => {
                match self.keyed(&id, &key).await? {
                    Some(first) => Ok((Sent { signal: first, duplicate: true }, false)),
                    None => Err(Error::Invalid(format!("dedup key {dedup_key:?}: {detail}"))),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Creates the thread `options.thread_id` of `workflow` on `input` unless it exists, then
    /// sends it the signal (with `dedup_key`, as [`Engine::signal_once`]): a signal to a thread
    /// that may not be running yet, in one call. The thread created runs in this engine.
    ///
    /// # Errors
    /// [`Error::Invalid`] without `options.thread_id`; as [`Engine::start`] and
    /// [`Engine::signal_once`] (a thread that exists and has finished refuses the signal).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// use cairn::StartOptions;
    /// let options = StartOptions::id("cart-9");
    /// let done = engine
    ///     .signal_with_start("cart", serde_json::json!({}), options, "add", "apple", None)
    ///     .await?;
    /// assert_eq!(done.thread, "cart-9");
    /// # Ok(()) }
    /// ```
    pub async fn signal_with_start(
        &self,
        workflow: &str,
        input: impl Serialize,
        options: StartOptions,
        name: &str,
        value: impl Serialize,
        dedup_key: Option<&str>,
    ) -> Result<SignalWithStart, Error> {
        let Some(thread) = options.thread_id.clone() else {
            return Err(Error::Invalid("signal-with-start needs the thread's id".into()));
        };
        let input = serde_json::to_value(input)?;
        let created = self.write_start(workflow, input, options, true).await?.created;
        let sent = match dedup_key {
            Some(key) => self.signal_once(&thread, name, value, key).await?,
            None => Sent { signal: self.signal(&thread, name, value).await?, duplicate: false },
        };
        Ok(SignalWithStart { thread, created, sent })
    }

    /// The number of the signal stored under the key `key` (its JSON) on `thread`, if any: the
    /// one just before its marker.
    async fn keyed(
        &self,
        thread: &cairn_storage::ThreadId,
        key: &[u8],
    ) -> Result<Option<u64>, Error> {
        let mut after = 0;
        loop {
            let page = self.store().signals(thread, after, INBOX_PAGE).await?;
            if let Some(marker) = page.iter().find(|s| s.name == DEDUP_SIGNAL && s.data == key) {
                return Ok(Some(marker.n.saturating_sub(1)));
            }
            match page.last() {
                Some(last) if page.len() == INBOX_PAGE => after = last.n,
                _ => return Ok(None),
            }
        }
    }
}
