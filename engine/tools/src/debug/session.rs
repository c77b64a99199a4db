//! A session across threads (seed 004's `replay_to_point` and `replay_message_chain`): the state
//! of a thread and of every thread it started (sub-workflow and child threads, at any depth) as
//! they stood at one time, and the state after each message of a chain, step by step.

use cairn_storage::ThreadId;
use serde::{Deserialize, Serialize};

use super::{StateView, TraceQuery, TracedMessage};
use crate::Operator;
use crate::limits::{CHAIN_STATES_MAX, SESSION_THREADS_MAX};
use cairn::admin;
use cairn::error::Error;

/// One thread of a session as it stood at a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionThread {
    /// The thread.
    pub thread: String,
    /// The thread that started it (`None` for the session's root).
    pub parent: Option<String>,
    /// Its state then; `None` when the root had recorded nothing by then (a thread it started
    /// later is left out).
    pub state: Option<StateView>,
}

/// One message of a chain and the state of its thread right after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainStep {
    /// The message, where it was written.
    pub message: TracedMessage,
    /// The state of the message's thread after the event that holds it.
    pub state: StateView,
}

impl Operator {
    /// The session rooted at `root` as it stood at `at_ms` (engine clock, ms since the epoch):
    /// the root first, then the threads it had started by then, each after its parent, with the
    /// state each had then. A thread that had recorded nothing by `at_ms` (started later) is
    /// left out, except the root, which comes with no state.
    ///
    /// # Errors
    /// [`Error::UnknownThread`] for `root`; [`Error::LimitExceeded`] past
    /// [`SESSION_THREADS_MAX`] threads; storage and record errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// for t in cairn_tools::Operator::new(&engine).session_state_at_time("s1", 1_764_000_000_000).await? {
    ///     println!("{} (from {:?}): {:?}", t.thread, t.parent, t.state.map(|s| s.state));
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn session_state_at_time(
        &self,
        root: &str,
        at_ms: u64,
    ) -> Result<Vec<SessionThread>, Error> {
        let mut out = Vec::new();
        for (thread, parent) in self.session_threads(root).await? {
            let state = match self.seq_at_time(&thread, at_ms).await? {
                Some(seq) => Some(self.state_at(&thread, Some(seq)).await?),
                // Not started yet: not part of the session then.
                None if parent.is_some() => continue,
                None => None,
            };
            out.push(SessionThread { thread, parent, state });
        }
        Ok(out)
    }

    /// The session's threads, each with its parent, parents first (a queue over stored
    /// records, not recursion).
    async fn session_threads(&self, root: &str) -> Result<Vec<(String, Option<String>)>, Error> {
        let store = self.engine.store().as_ref();
        let id = ThreadId::new(root)?;
        admin::thread_record(store, &id).await?;
        let mut out = vec![(root.to_owned(), None)];
        let mut next = 0;
        while let Some((thread, _)) = out.get(next) {
            let parent = thread.clone();
            next += 1;
            for child in admin::children_of(store, &ThreadId::new(&parent)?).await? {
                if out.len() >= SESSION_THREADS_MAX {
                    let (value, max) = (out.len() as u64 + 1, SESSION_THREADS_MAX as u64);
                    return Err(Error::LimitExceeded { limit: "threads of a session", value, max });
                }
                out.push((child.id.to_string(), Some(parent.clone())));
            }
        }
        Ok(out)
    }

    /// The chain `query` names (its `chain_to`), each message with the state of its thread
    /// right after it: a step-through of a conversation across the threads it passed through.
    ///
    /// # Errors
    /// [`Error::Invalid`] when `query` names no chain; [`Error::LimitExceeded`] for a chain
    /// longer than [`CHAIN_STATES_MAX`] messages; as [`Operator::trace`] and
    /// [`Operator::state_at`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// use cairn_tools::debug::{TraceQuery, TraceScope};
    /// let mut query = TraceQuery::new(TraceScope::Threads(vec!["s1".into()]));
    /// query.chain_to = Some("m-7".into());
    /// for step in cairn_tools::Operator::new(&engine).replay_chain(&query).await? {
    ///     println!("{}: {}", step.message.message.content, step.state.state);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn replay_chain(&self, query: &TraceQuery) -> Result<Vec<ChainStep>, Error> {
        if query.chain_to.is_none() {
            return Err(Error::Invalid(
                "a step-through needs a chain (its last message's id)".into(),
            ));
        }
        let chain = self.trace(query).await?;
        if chain.len() > CHAIN_STATES_MAX {
            let (value, max) = (chain.len() as u64, CHAIN_STATES_MAX as u64);
            return Err(Error::LimitExceeded {
                limit: "messages of a chain stepped through",
                value,
                max,
            });
        }
        let mut steps = Vec::new();
        for message in chain {
            let state = self.state_at(&message.thread, Some(message.seq)).await?;
            steps.push(ChainStep { message, state });
        }
        Ok(steps)
    }
}
