//! Message tracing: the conversation messages of a session (a thread and its sub-workflow
//! threads, at any depth) or of the whole store, filtered by correlation id, by the two
//! parties they pass between, by time, or followed up a chain of `parent` ids.
//!
//! A session's messages are found without reading anyone else's log: its threads come from the
//! thread index (children by their parent label), and each thread's `message` events from its
//! own log through the per-thread seq index, the kind checked before a body is decoded. Without
//! a session ([`TraceScope::All`]) and with a correlation id, the store's correlation index
//! ([`ThreadLog::read_correlated`](cairn_storage::ThreadLog::read_correlated), `docs/format.md` §2.2)
//! gives the messages carrying it, with the time range applied to the index entries: no other
//! event is read. Without either (or for a chain, which may leave the correlation id), the whole
//! store's log is read in lsn order.

use std::collections::BTreeMap;

use cairn_dsl::Message;
use cairn_storage::{CorrelationQuery, EventKind, Lsn, Seq, Store, ThreadId};
use serde::{Deserialize, Serialize};

use crate::Operator;
use crate::limits::{TRACE_CHAIN_MAX, TRACE_MESSAGES_MAX};
use cairn::admin;
use cairn::admin as fetch;
use cairn::error::Error;
use cairn::event::{Body, TaskKey};
use cairn_core::codec;
use cairn_core::limits::READ_CHUNK_EVENTS;

/// Whose messages a trace reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceScope {
    /// These threads and their sub-workflow threads, at any depth (a session).
    Threads(Vec<String>),
    /// Every thread of the store (through the correlation index when the query names a
    /// correlation id and no chain; else the whole log).
    All,
}

/// What to trace; `None` fields do not filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceQuery {
    /// Whose messages.
    pub scope: TraceScope,
    /// Only messages carrying this correlation id.
    pub correlation_id: Option<String>,
    /// Only messages between these two parties, either way: a message's sender is its role,
    /// the node that wrote it or its thread, its addressee its `to`.
    pub between: Option<(String, String)>,
    /// Only messages written at or after this time (engine clock, ms).
    pub from_ms: Option<u64>,
    /// Only messages written at or before this time.
    pub to_ms: Option<u64>,
    /// Only the chain ending at the message with this id: it, the message its `parent` names,
    /// and so on up, first message first.
    pub chain_to: Option<String>,
}

impl TraceQuery {
    /// Every message of `scope`.
    pub fn new(scope: TraceScope) -> Self {
        TraceQuery {
            scope,
            correlation_id: None,
            between: None,
            from_ms: None,
            to_ms: None,
            chain_to: None,
        }
    }

    fn admits(&self, m: &TracedMessage) -> bool {
        let msg = &m.message;
        let corr = self.correlation_id.as_ref();
        if corr.is_some_and(|c| msg.correlation_id.as_ref() != Some(c)) {
            return false;
        }
        if self.from_ms.is_some_and(|f| m.at_ms < f) || self.to_ms.is_some_and(|t| m.at_ms > t) {
            return false;
        }
        match &self.between {
            None => true,
            Some((a, b)) => {
                let sent_by = |p: &str| msg.role == p || &*m.task.node == p || m.thread == p;
                let to = msg.to.as_deref();
                (sent_by(a) && to == Some(b.as_str())) || (sent_by(b) && to == Some(a.as_str()))
            }
        }
    }
}

/// One message and where it was written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TracedMessage {
    /// The thread whose log holds it.
    pub thread: String,
    /// Its seq there.
    pub seq: u64,
    /// Its lsn in the store.
    pub lsn: u64,
    /// When it was written (engine clock, ms).
    pub at_ms: u64,
    /// The task that wrote it.
    pub task: TaskKey,
    /// The message.
    pub message: Message,
}

impl Operator {
    /// The messages `query` asks for, in the order they were written (lsn), or the chain it
    /// names, first message first.
    ///
    /// # Errors
    /// [`Error::UnknownThread`] for a scope thread that does not exist;
    /// [`Error::LimitExceeded`] past [`TRACE_MESSAGES_MAX`] messages matching (narrow the query)
    /// or a chain longer than [`TRACE_CHAIN_MAX`]; storage and record errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// use cairn_tools::debug::{TraceQuery, TraceScope};
    /// let mut query = TraceQuery::new(TraceScope::Threads(vec!["session_001".into()]));
    /// query.between = Some(("experiment_planning".into(), "code_agent".into()));
    /// for m in cairn_tools::Operator::new(&engine).trace(&query).await? {
    ///     println!("{} {}: {}", m.thread, m.message.role, m.message.content);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn trace(&self, query: &TraceQuery) -> Result<Vec<TracedMessage>, Error> {
        let all = match &query.scope {
            TraceScope::All => messages_of_store(self.engine.store().as_ref(), query).await?,
            TraceScope::Threads(roots) => self.messages_of_threads(roots, query).await?,
        };
        let Some(last) = &query.chain_to else { return Ok(all) };
        let by_id: BTreeMap<&str, &TracedMessage> =
            all.iter().filter_map(|m| Some((m.message.id.as_deref()?, m))).collect();
        let mut chain = Vec::new();
        let mut next = Some(last.as_str());
        while let Some(id) = next {
            let Some(m) = by_id.get(id) else { break };
            if chain.len() >= TRACE_CHAIN_MAX {
                return Err(too_many("a message chain", chain.len(), TRACE_CHAIN_MAX));
            }
            chain.push((*m).clone());
            next = m.message.parent.as_deref();
        }
        chain.reverse();
        Ok(chain)
    }

    async fn messages_of_threads(
        &self,
        roots: &[String],
        query: &TraceQuery,
    ) -> Result<Vec<TracedMessage>, Error> {
        let store = self.engine.store().as_ref();
        let mut pending: Vec<ThreadId> = Vec::new();
        for root in roots {
            let id = ThreadId::new(root)?;
            admin::thread_record(self.engine.store().as_ref(), &id).await?;
            pending.push(id);
        }
        let mut found = Vec::new();
        // A stack, not recursion: nesting comes from stored records.
        while let Some(thread) = pending.pop() {
            messages_in(store, Source::Thread(&thread), query, &mut found).await?;
            pending.extend(fetch::children_of(store, &thread).await?.into_iter().map(|r| r.id));
        }
        found.sort_by_key(|m| m.lsn);
        Ok(found)
    }
}

/// The messages of the whole store that `query` admits, in lsn order (through the correlation
/// index when it names a correlation id and no chain).
pub(crate) async fn messages_of_store(
    store: &dyn Store,
    query: &TraceQuery,
) -> Result<Vec<TracedMessage>, Error> {
    let index;
    let source = match (&query.correlation_id, &query.chain_to) {
        // The messages carrying the correlation id, through the store's index.
        (Some(correlation), None) => {
            index = CorrelationQuery {
                from_ms: query.from_ms,
                to_ms: query.to_ms,
                ..CorrelationQuery::new(correlation)
            };
            Source::Correlated(&index)
        }
        _ => Source::All,
    };
    let mut found = Vec::new();
    messages_in(store, source, query, &mut found).await?;
    Ok(found)
}

/// What [`messages_in`] reads, a page at a time.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// One thread's log, by seq.
    Thread(&'a ThreadId),
    /// The store's correlation index, by lsn.
    Correlated(&'a CorrelationQuery),
    /// The whole store, by lsn.
    All,
}

/// Adds the messages of `source` that `query` admits to `found`.
async fn messages_in(
    store: &dyn Store,
    source: Source<'_>,
    query: &TraceQuery,
    found: &mut Vec<TracedMessage>,
) -> Result<(), Error> {
    let mut after = 0;
    loop {
        let events = match source {
            Source::Thread(id) => store.read_since(id, Seq(after), READ_CHUNK_EVENTS).await?,
            Source::Correlated(index) => {
                store.read_correlated(index, Lsn(after), READ_CHUNK_EVENTS).await?
            }
            Source::All => store.read_all_since(Lsn(after), READ_CHUNK_EVENTS).await?,
        };
        let n = events.len();
        for event in events {
            let at = &event.bookmark;
            after = if let Source::Thread(_) = source { at.seq.0 } else { at.lsn.0 };
            if event.kind == EventKind::Message {
                push(found, query, fetch::decode(store, event).await?)?;
            }
        }
        if n < READ_CHUNK_EVENTS {
            return Ok(());
        }
    }
}

/// Adds the message `rec` holds when `query` admits it (a chain query keeps every message: the
/// chain is cut from them afterwards).
fn push(
    found: &mut Vec<TracedMessage>,
    query: &TraceQuery,
    rec: codec::Recorded,
) -> Result<(), Error> {
    let Body::Message { task, message } = rec.body else { return Ok(()) };
    let m = TracedMessage {
        thread: rec.thread.to_string(),
        seq: rec.bookmark.seq.0,
        lsn: rec.bookmark.lsn.0,
        at_ms: rec.bookmark.at_ms,
        task,
        message,
    };
    if query.chain_to.is_some() || query.admits(&m) {
        if found.len() >= TRACE_MESSAGES_MAX {
            return Err(too_many(
                "the messages a trace returns",
                found.len() + 1,
                TRACE_MESSAGES_MAX,
            ));
        }
        found.push(m);
    }
    Ok(())
}

fn too_many(limit: &'static str, value: usize, max: usize) -> Error {
    Error::LimitExceeded { limit, value: value as u64, max: max as u64 }
}
