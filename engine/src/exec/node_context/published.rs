//! The node's side of published events and promises (`ctx.set_event`, `ctx.promise`; the fold
//! in `core/published.rs`): each is an event of the task written and durable before the call
//! returns. A task that runs again (after a crash or a wake) counts the ones its journal holds
//! and writes none of them again; a promise's id is derived from the task's place and count,
//! so the run that writes it and the one that skips it make the same id.

use cairn_dsl::{NodeError, Promise};
use futures::future::BoxFuture;
use serde_json::Value;

use super::{LiveNodeContext, lock_state};
use crate::core::event::Body;
use crate::core::published::{promise_id, promise_signal};
use crate::core::thread_ctx::Publication;
use crate::limits::{
    PUBLICATIONS_PER_TASK_MAX, PUBLISHED_KEY_BYTES_MAX, PUBLISHED_KEYS_PER_THREAD_MAX,
    PUBLISHED_VALUE_BYTES_MAX,
};

impl LiveNodeContext {
    /// `ctx.set_event`: the key and value checked against their limits, then published.
    pub(super) fn publish_event(
        &self,
        key: &str,
        value: Value,
    ) -> BoxFuture<'static, Result<(), NodeError>> {
        let size = serde_json::to_vec(&value).map_or(usize::MAX, |v| v.len());
        let refused = if key.is_empty() || key.len() > PUBLISHED_KEY_BYTES_MAX {
            Some(format!(
                "event key {key:?}: 1 to {PUBLISHED_KEY_BYTES_MAX} bytes (PUBLISHED_KEY_BYTES_MAX)"
            ))
        } else if size > PUBLISHED_VALUE_BYTES_MAX {
            Some(format!(
                "event {key:?}: its value is {size} bytes, past PUBLISHED_VALUE_BYTES_MAX \
                 ({PUBLISHED_VALUE_BYTES_MAX})"
            ))
        } else {
            self.new_key_refused(key)
        };
        if let Some(detail) = refused {
            return Box::pin(std::future::ready(Err(NodeError::fatal(detail))));
        }
        let body = Body::EventPublished { task: self.key.clone(), key: key.to_owned(), value };
        let (_, write) = self.publication(Publication::Event(key.to_owned()), |_| body);
        write
    }

    /// The refusal of publishing `key` now: a new key of a task whose thread had, at the step's
    /// start, with the task's own new keys, `PUBLISHED_KEYS_PER_THREAD_MAX` distinct ones
    /// already (its siblings' new keys are not counted: `PublishedKeys`). Counts the key in
    /// otherwise. A
    /// publication the journal holds in this place was admitted when it was written: it is
    /// counted, never refused (a refused one took no place: the journal holds the next one
    /// there). One past the task's own bound is refused by `publication`.
    fn new_key_refused(&self, key: &str) -> Option<String> {
        let mut st = self.state();
        let place = st.replay_published.get(st.published as usize);
        let recorded = matches!(place, Some(Publication::Event(k)) if k == key);
        if st.published >= PUBLICATIONS_PER_TASK_MAX {
            return None;
        }
        let max = if recorded { usize::MAX } else { PUBLISHED_KEYS_PER_THREAD_MAX };
        st.keys.admit(key, max).err()
    }

    /// `ctx.promise`: the promise of the task's next publication, created.
    pub(super) fn create_promise(&self) -> BoxFuture<'static, Result<Promise, NodeError>> {
        let (thread, step, task) = (self.env.thread.to_string(), self.step, self.key.clone());
        let (id, write) = self.publication(Publication::Promise, |n| Body::PromiseCreated {
            task: task.clone(),
            promise: promise_id(&thread, step, &task, n),
        });
        Box::pin(async move {
            write.await?;
            let id = id.unwrap_or_default();
            let signal = promise_signal(&id);
            Ok(Promise::new(id, signal))
        })
    }

    /// The task's next publication, `what`, made by `body` from its index: written unless the
    /// journal holds it (the write then answers at once; another thing recorded in its place is
    /// nondeterminism). Returns the promise id it holds.
    fn publication(
        &self,
        what: Publication,
        body: impl FnOnce(u32) -> Body,
    ) -> (Option<String>, BoxFuture<'static, Result<(), NodeError>>) {
        let (index, fresh, log_start) = {
            let mut st = self.state();
            let index = st.published;
            st.published += 1;
            let recorded = st.replay_published.get(index as usize).cloned();
            let fresh = recorded.is_none();
            if let Some(recorded) = recorded.filter(|r| *r != what) {
                st.nondeterminism.get_or_insert(format!(
                    "publication {index} of the task: the recorded run made {recorded:?}, \
                     the code now {what:?}"
                ));
            }
            let log_start = fresh && !st.started_logged;
            if log_start {
                st.started_logged = true;
            }
            (index, fresh, log_start)
        };
        let body = body(index);
        let id = match &body {
            Body::PromiseCreated { promise, .. } => Some(promise.clone()),
            _ => None,
        };
        if index >= PUBLICATIONS_PER_TASK_MAX {
            let detail = format!(
                "limit PUBLICATIONS_PER_TASK_MAX exceeded: {index} >= {PUBLICATIONS_PER_TASK_MAX}"
            );
            return (id, Box::pin(std::future::ready(Err(NodeError::fatal(detail)))));
        }
        if !fresh {
            return (id, Box::pin(std::future::ready(Ok(()))));
        }
        let (env, shared) = (self.env.clone(), self.st.clone());
        let (step, task, attempt, item) =
            (self.step, self.key.clone(), self.attempt, self.item.clone());
        let write = Box::pin(async move {
            let now = env.clock.now_ms();
            let mut bodies = Vec::with_capacity(2);
            if log_start {
                bodies.push(Body::NodeStarted { step, task, attempt, item });
            }
            bodies.push(body);
            let recs = env.append_now(bodies, now).await.map_err(|e| env.stop.node_error(e))?;
            lock_state(&shared).appended.extend(recs);
            Ok(())
        });
        (id, write)
    }
}
