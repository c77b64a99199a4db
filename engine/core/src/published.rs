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

use std::collections::BTreeSet;

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

/// The distinct keys one task counts against the engine's bound
/// (`PUBLISHED_KEYS_PER_THREAD_MAX`): the keys the thread had when the task's step began (shared
/// by the step's tasks, never changed by them) plus the new keys this task published since.
///
/// A task never sees its siblings' new keys, so which one is refused does not depend on which
/// sibling ran first, and replay, which counts in log order, counts the same
/// ([`PublishedKeys::at_step_start`] reads the step's start off any context of the step). The
/// price is a bounded overshoot: the parallel tasks of one step may together publish past the
/// bound, by at most what each of them adds on its own (tasks × (bound − keys at the step's
/// start)); the next step counts from the total and admits no new key until it is under.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishedKeys {
    /// The keys the thread had at the step's start; `None` when there were none (a default
    /// or a task's copy then allocates nothing).
    base: Option<std::sync::Arc<BTreeSet<String>>>,
    /// The task's own new keys (not in `base`).
    own: BTreeSet<String>,
}

impl PublishedKeys {
    /// The keys the thread had when its open step began: those of [`ThreadMeta::published`]
    /// not first published in that step ([`ThreadMeta::published_in_step`]); no own key.
    pub fn at_step_start(meta: &ThreadMeta) -> Self {
        let base: BTreeSet<String> = Self::base_of(meta).cloned().collect();
        PublishedKeys {
            base: (!base.is_empty()).then(|| std::sync::Arc::new(base)),
            own: BTreeSet::new(),
        }
    }

    fn base_of(meta: &ThreadMeta) -> impl Iterator<Item = &String> {
        meta.published.keys().filter(|k| !meta.published_in_step.contains(*k))
    }

    /// Becomes [`PublishedKeys::at_step_start`] of `meta`, copying nothing when the keys are
    /// the same already (the usual case at a step's start when the last step published none).
    pub fn reset(&mut self, meta: &ThreadMeta) {
        if !self.base.iter().flat_map(|b| b.iter()).eq(Self::base_of(meta)) {
            *self = PublishedKeys::at_step_start(meta);
        } else {
            self.own.clear();
        }
    }

    /// The same keys at the step's start, without any own key: what one task of the step
    /// starts from (the shared part is not copied).
    pub fn for_task(&self) -> Self {
        PublishedKeys { base: self.base.clone(), own: BTreeSet::new() }
    }

    /// How many there are: at the step's start, plus the task's own.
    pub fn len(&self) -> usize {
        self.base.as_ref().map_or(0, |b| b.len()) + self.own.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts `key` in, unless it is a new key and `max` are there already.
    ///
    /// # Errors
    /// The refusal, for the node: the limit by name, and the key.
    pub fn admit(&mut self, key: &str, max: usize) -> Result<(), String> {
        if self.base.as_ref().is_some_and(|b| b.contains(key)) || self.own.contains(key) {
            return Ok(());
        }
        if self.len() >= max {
            return Err(format!(
                "event {key:?}: limit PUBLISHED_KEYS_PER_THREAD_MAX exceeded: the thread has \
                 published {max} distinct keys already (a key published before may be \
                 published again)"
            ));
        }
        self.own.insert(key.to_owned());
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
            let first = ctx.meta.published.insert(key.clone(), value.clone()).is_none();
            if first {
                ctx.meta.published_in_step.insert(key.clone());
            }
        }
        // The open step closed: its new keys are the next step's keys at its start.
        Body::StepCompleted { .. } if !ctx.meta.published_in_step.is_empty() => {
            ctx.meta.published_in_step.clear();
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
    use std::collections::BTreeMap;

    use super::*;

    fn ctx() -> ThreadCtx {
        crate::fold_samples::running_one_node("keys")
    }

    fn meta(published: &[&str], in_step: &[&str]) -> ThreadMeta {
        let mut ctx = ctx();
        ctx.meta.published = published.iter().map(|k| ((*k).to_owned(), Value::Null)).collect();
        ctx.meta.published_in_step = in_step.iter().map(|k| (*k).to_owned()).collect();
        ctx.meta
    }

    #[test]
    fn a_new_key_past_the_bound_is_refused_and_a_known_one_is_not() {
        let m = meta(&["a"], &[]);
        let mut keys = PublishedKeys::at_step_start(&m);
        assert_eq!(keys.admit("b", 2), Ok(()));
        let refused = keys.admit("c", 2).unwrap_err();
        assert!(refused.contains("PUBLISHED_KEYS_PER_THREAD_MAX"), "{refused}");
        assert_eq!(keys.admit("a", 2), Ok(()), "published before");
        assert_eq!(keys.len(), 2);
        keys.reset(&m);
        assert_eq!(keys, PublishedKeys::at_step_start(&m));
    }

    #[test]
    fn each_task_counts_the_keys_at_the_steps_start_and_its_own_not_its_siblings() {
        // Restored mid-step: "b" was first published in the open step, by a sibling.
        let m = meta(&["a", "b"], &["b"]);
        let step = PublishedKeys::at_step_start(&m);
        assert_eq!(step.len(), 1);
        let (mut one, mut two) = (step.for_task(), step.for_task());
        assert_eq!(one.admit("c", 2), Ok(()));
        assert!(one.admit("d", 2).is_err(), "its own new key counts");
        assert_eq!(two.admit("b", 2), Ok(()), "the sibling's key is new to this task too");
        assert!(two.admit("e", 2).is_err());
    }

    #[test]
    fn a_key_first_published_in_the_open_step_is_set_apart_until_the_step_completes() {
        let mut ctx = ctx();
        let body = |key: &str| Body::EventPublished {
            task: TaskKey::node("n"),
            key: key.into(),
            value: Value::Null,
        };
        fold(&mut ctx, EventAt { seq: 1, at_ms: 0, body: &body("a") }).unwrap();
        fold(&mut ctx, EventAt { seq: 2, at_ms: 0, body: &body("a") }).unwrap();
        assert_eq!(ctx.meta.published_in_step, BTreeSet::from(["a".to_owned()]));
        let done = Body::StepCompleted { step: 1, next: vec![], arrivals: BTreeMap::new() };
        fold(&mut ctx, EventAt { seq: 3, at_ms: 0, body: &done }).unwrap();
        assert!(ctx.meta.published_in_step.is_empty());
        fold(&mut ctx, EventAt { seq: 4, at_ms: 0, body: &body("a") }).unwrap();
        assert!(ctx.meta.published_in_step.is_empty(), "published before the step");
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
