//! Published events and promises in the fold (`docs/promises.md`).
//!
//! A node publishes a key/value pair (`ctx.set_event`: an `event_published` event, durable
//! before the call returns); the thread keeps the latest value of each key in
//! [`ThreadMeta::published`], so a live read, a restore, `state_at` and a fork agree on it.
//! A node creates a promise (`ctx.promise`: a `promise_created` event, durable before its id is
//! handed out); the thread keeps the ids it created in [`ThreadMeta::promises`], which is how a
//! completion tells an id the thread handed out from one it never did.
//!
//! A promise's id is derived, not drawn: the thread's id, `~p`, the step, a hash of the task
//! and the task's count of promises before it ([`promise_id`]), so a node that runs again (after
//! a crash, a wake, in a replay) makes the same id. A completion is a signal named
//! [`promise_signal`] in the thread's inbox, which `ctx.await_promise` receives.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::error::Error;
use crate::event::{Body, TaskKey};
use crate::thread_ctx::{EventAt, ThreadCtx, ThreadMeta, input_hash};

/// What separates a promise id's thread from its suffix (never in a suffix).
pub const PROMISE_ID_SEPARATOR: &str = "~p";

/// The prefix of the signal names that carry promise completions (the engine's own: a caller
/// may not send one by name).
pub const PROMISE_SIGNAL_PREFIX: &str = "cairn.promise.";

/// The id of the `n`th promise (from 0) task `task` of thread `thread` creates in step `step`.
///
/// # Examples
/// ```
/// use cairn_core::event::TaskKey;
/// use cairn_core::published::{promise_id, promise_thread};
/// let id = promise_id("order-7", 3, &TaskKey::node("pay"), 0);
/// assert_eq!(promise_thread(&id).map(|(t, _)| t), Some("order-7"));
/// assert_eq!(id, promise_id("order-7", 3, &TaskKey::node("pay"), 0));
/// ```
pub fn promise_id(thread: &str, step: u64, task: &TaskKey, n: u32) -> String {
    let task_hash = input_hash(&Value::from(task.to_string()));
    format!("{thread}{PROMISE_ID_SEPARATOR}{step}.{}.{n}", &task_hash[..16])
}

/// The thread and the suffix of a promise id; `None` for text that is not one.
pub fn promise_thread(id: &str) -> Option<(&str, &str)> {
    let (thread, suffix) = id.rsplit_once(PROMISE_ID_SEPARATOR)?;
    let mut parts = suffix.split('.');
    let well_formed = parts.next().is_some_and(|s| s.parse::<u64>().is_ok())
        && parts.next().is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        && parts.next().is_some_and(|n| n.parse::<u32>().is_ok())
        && parts.next().is_none();
    (well_formed && !thread.is_empty()).then_some((thread, suffix))
}

/// The name of the signal that completes the promise `id` in its thread's inbox.
pub fn promise_signal(id: &str) -> String {
    let suffix = promise_thread(id).map_or(id, |(_, s)| s);
    format!("{PROMISE_SIGNAL_PREFIX}{suffix}")
}

/// The latest value published under `key`, if any.
pub fn published<'a>(meta: &'a ThreadMeta, key: &str) -> Option<&'a Value> {
    meta.published.get(key)
}

/// The distinct keys a thread has published, as the tasks of a step count them against the
/// engine's bound (`PUBLISHED_KEYS_PER_THREAD_MAX`): those of the thread's state when the step
/// began plus those its tasks published since.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishedKeys {
    keys: BTreeSet<String>,
}

impl PublishedKeys {
    /// The keys of `published` ([`ThreadMeta::published`]).
    pub fn of(published: &BTreeMap<String, Value>) -> Self {
        PublishedKeys { keys: published.keys().cloned().collect() }
    }

    /// Becomes the keys of `published`, copying nothing when they are the same already (the
    /// usual case at a step's start: the last step's keys were folded into the thread's state).
    pub fn reset(&mut self, published: &BTreeMap<String, Value>) {
        if !self.keys.iter().eq(published.keys()) {
            *self = PublishedKeys::of(published);
        }
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Counts `key` in, unless it is a new key and `max` are there already.
    ///
    /// # Errors
    /// The refusal, for the node: the limit by name, and the key.
    pub fn admit(&mut self, key: &str, max: usize) -> Result<(), String> {
        if self.keys.contains(key) {
            return Ok(());
        }
        if self.keys.len() >= max {
            return Err(format!(
                "event {key:?}: limit PUBLISHED_KEYS_PER_THREAD_MAX exceeded: the thread has \
                 published {max} distinct keys already (a key published before may be \
                 published again)"
            ));
        }
        self.keys.insert(key.to_owned());
        Ok(())
    }
}

/// Folds the published part of `e` into `ctx`: the key's latest value, the promise's id.
///
/// # Errors
/// None: every event folds.
pub(crate) fn fold(ctx: &mut ThreadCtx, e: EventAt<'_>) -> Result<(), Error> {
    match e.body {
        Body::EventPublished { key, value, .. } => {
            ctx.meta.published.insert(key.clone(), value.clone());
        }
        Body::PromiseCreated { promise, .. } => {
            ctx.meta.promises.insert(promise.clone());
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_key_past_the_bound_is_refused_and_a_known_one_is_not() {
        let published = BTreeMap::from([("a".to_owned(), Value::Null)]);
        let mut keys = PublishedKeys::of(&published);
        assert_eq!(keys.admit("b", 2), Ok(()));
        let refused = keys.admit("c", 2).unwrap_err();
        assert!(refused.contains("PUBLISHED_KEYS_PER_THREAD_MAX"), "{refused}");
        assert_eq!(keys.admit("a", 2), Ok(()), "published before");
        assert_eq!(keys.len(), 2);
        keys.reset(&published);
        assert_eq!(keys, PublishedKeys::of(&published));
    }

    #[test]
    fn a_promise_id_names_its_thread_and_its_signal_and_nothing_else_reads_as_one() {
        let id = promise_id("a~pb", 12, &TaskKey { node: "n".into(), item: Some(2) }, 7);
        let (thread, suffix) = promise_thread(&id).expect("an id");
        assert_eq!(thread, "a~pb");
        assert!(suffix.starts_with("12.") && suffix.ends_with(".7"), "{suffix}");
        assert_eq!(promise_signal(&id), format!("cairn.promise.{suffix}"));
        assert_ne!(id, promise_id("a~pb", 12, &TaskKey::node("n"), 7), "the item counts");
        for bad in ["", "t", "t~p", "t~p1.2.3", "~p1.0123456789abcdef.0", "t~p1.0123456789abcdeg.0"]
        {
            assert_eq!(promise_thread(bad), None, "{bad:?}");
        }
    }
}
