//! Named limits of the operator tooling (the endpoint, the command line, the debug views), each
//! with its reason. Exceeding one is an error that names it.

/// Events of a thread whose node runs [`crate::Operator::node_runs`] lists: it folds the whole log in
/// memory (decoded bodies), so a thread longer than this is read through `events` in pages.
pub const NODE_RUNS_EVENTS_MAX: u64 = 1_000_000;

/// Messages one trace returns ([`crate::Operator::trace`]): the result is held in memory; a query that
/// matches more is narrowed (a session, a correlation id, a time range) rather than cut.
pub const TRACE_MESSAGES_MAX: usize = 100_000;

/// Messages in one chain of parent ids a trace follows: a loop of parent ids in the record
/// stops here instead of running forever.
pub const TRACE_CHAIN_MAX: usize = 10_000;

/// The longest an endpoint holds a `GET /api/threads/{id}/result?wait_ms=` request open: a
/// long poll is re-asked by its client (`cairn result --wait` does), so a dropped connection
/// costs at most this, and an endpoint never holds a request for ever.
pub const RESULT_WAIT_MS_MAX: u64 = 30_000;

/// Items in one page of the HTTP endpoint (threads, events): a page is built in memory and sent
/// as one JSON document, so a client pages through a large log instead of asking for all of it.
pub const SERVE_PAGE_MAX: usize = 1_000;

/// Signals read in one page of a thread's inbox while the endpoint looks for its promises'
/// completions (`GET /api/threads/{id}/promises`): the page is held in memory, and a thread
/// holds at most `cairn_storage::limits::SIGNALS_PER_THREAD_MAX` signals, so the walk is bounded.
pub const INBOX_PAGE: usize = 256;

/// Bytes of one answer the CLI accepts from an engine's endpoint when it reads through it: above
/// the largest a page can be made of (a state of [`cairn_storage::limits::SNAPSHOT_BYTES_MAX`]
/// as JSON, a page of events with payloads), so only a broken or foreign server reaches it.
pub const SERVE_ANSWER_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// Bytes of one request body to the HTTP endpoint (a control's input or a fork's update): the
/// same bound as one inline value plus its envelope would be too tight for a large input, and an
/// input is recorded in the log, so it stays far below a storage batch.
pub const SERVE_BODY_BYTES_MAX: usize = 1024 * 1024;

/// Threads one session read ([`Operator::session_state_at_time`](crate::Operator::session_state_at_time)) walks at most: the root and its
/// sub-workflow and child threads, at any depth.
pub const SESSION_THREADS_MAX: usize = 1_000;

/// Messages of a chain one step-through ([`Operator::replay_chain`](crate::Operator::replay_chain))
/// folds a state for: each step holds its thread's whole state, so a longer chain is refused
/// (read it without the states, or from a later message) rather than built in memory.
pub const CHAIN_STATES_MAX: usize = 1_000;

/// Parties (senders and addressees) one interaction graph draws at most
/// ([`InteractionGraph::of`](crate::debug::InteractionGraph::of)); the rest are counted, not drawn.
pub const INTERACTION_PARTIES_MAX: usize = 200;
