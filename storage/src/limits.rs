//! Every bound the storage crate enforces, in one place, each with its reason.
//!
//! Exceeding one is [`Error::LimitExceeded`](crate::Error::LimitExceeded) naming the constant,
//! never silent truncation. Decoders use the same bounds to refuse a length prefix before
//! allocating for it.

/// Bytes in a [`ThreadId`](crate::ThreadId). Ids appear in every event key; 128 bytes holds a
/// UUID with a long readable prefix while keeping keys small.
pub const THREAD_ID_BYTES_MAX: usize = 128;

/// Bytes in a node name on an event. Node names come from the workflow graph and are short.
pub const NODE_NAME_BYTES_MAX: usize = 256;

/// Bytes in an event summary. A summary is one human line for listings; big things go in
/// `data` or in a payload.
pub const SUMMARY_BYTES_MAX: usize = 4 * 1024;

/// Bytes of inline kind-specific `data` on one event. Larger values belong in the payload table
/// (content-addressed, stored once); keeping events small keeps `read_since` fast.
pub const EVENT_DATA_BYTES_MAX: usize = 256 * 1024;

/// Bytes of one framed record other than a checkpoint snapshot (event, thread, lock, checkpoint
/// metadata). Bounds the allocation a decoder makes for a length prefix it has not yet verified.
pub const RECORD_BYTES_MAX: usize = 1024 * 1024;

/// Bytes of one checkpoint snapshot. A snapshot holds a whole thread's state; 64 MiB is far above
/// any sane thread and still fits comfortably in memory twice (encode and decode).
pub const SNAPSHOT_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Bytes of one content-addressed payload (tool outputs, big inputs). Read back whole, so bounded
/// by what a caller can hold in memory at once.
pub const PAYLOAD_BYTES_MAX: usize = 32 * 1024 * 1024;

/// Events in one batch. One batch is one write transaction's worth of work; a bound keeps one
/// caller from stalling the group commit for everybody else.
pub const BATCH_EVENTS_MAX: usize = 10_000;

/// Total bytes carried by one batch (event data and summaries, payloads, snapshots, thread
/// summaries). Sized to admit one maximal snapshot plus one maximal payload.
pub const BATCH_BYTES_MAX: usize = SNAPSHOT_BYTES_MAX + PAYLOAD_BYTES_MAX;

/// Engine-owned summary bytes on a [`ThreadRecord`](crate::ThreadRecord). Thread listings decode
/// every record they show, so the record stays small.
pub const THREAD_SUMMARY_BYTES_MAX: usize = 64 * 1024;

/// Labels on one thread. Labels are for filtering listings, not for storing data.
pub const LABELS_PER_THREAD_MAX: usize = 64;

/// Bytes in one label key or value, one checkpoint tag, or one custom metadata key or value.
pub const LABEL_BYTES_MAX: usize = 256;

/// Tags on one checkpoint. Each tag is an index entry written with the checkpoint.
pub const TAGS_PER_CHECKPOINT_MAX: usize = 32;

/// Bytes in one checkpoint tag (same reason as [`LABEL_BYTES_MAX`]).
pub const TAG_BYTES_MAX: usize = LABEL_BYTES_MAX;

/// Custom metadata fields on one checkpoint.
pub const CUSTOM_FIELDS_MAX: usize = 64;

/// Bytes in free text on records: checkpoint creator and description, lease and lock owners,
/// lock names, workflow ids and fingerprints.
pub const TEXT_BYTES_MAX: usize = 4 * 1024;

/// Records returned by one read call (`read_since`, `read_range`, `read_all_since`, list calls).
/// Readers page; a bound keeps one call's memory and read-transaction lifetime small.
pub const READ_LIMIT_MAX: usize = 10_000;

/// Operations of each kind (locks, leases, guards, thread upserts, checkpoints, payloads) in one
/// batch; same reason as [`BATCH_EVENTS_MAX`].
pub const BATCH_OPS_MAX: usize = 1_000;

/// Attempts [`RedbStore::open_read_only`](crate::RedbStore::open_read_only) makes to copy a file
/// image that a live writer did not change while it was being read.
pub const SNAPSHOT_ATTEMPTS_MAX: u32 = 8;

/// Bytes in one message to a thread's driver ([`SharedDatabase::tell_driver`](crate::SharedDatabase::tell_driver)):
/// it travels as a PostgreSQL NOTIFY payload (under 8,000 bytes with the thread id).
pub const DRIVER_MESSAGE_BYTES_MAX: usize = 4 * 1024;

/// Driver messages a receiver may fall behind by before it loses the oldest.
pub const DRIVER_MESSAGES_QUEUED_MAX: usize = 1024;

/// Bytes in a correlation id ([`NewEvent::correlation`](crate::NewEvent::correlation)): it is a
/// key of the correlation index, and ids are short tokens (a UUID is 36 bytes).
pub const CORRELATION_ID_BYTES_MAX: usize = 256;

/// Events read per write transaction while a v1 file's correlation index is built at open
/// (`docs/format.md` §2.2): bounds the migration's memory to one batch of events.
pub const MIGRATION_BATCH_EVENTS: usize = 1024;

/// Bytes in a signal's name (`docs/format.md` §2.3): a key of the signal inbox, and names are
/// short words ("payment", "shipped").
pub const SIGNAL_NAME_BYTES_MAX: usize = 256;

/// Bytes of one signal's value (its JSON): a signal is a message, not a document; a larger one
/// belongs in a payload the signal names. Well below [`RECORD_BYTES_MAX`] so that the record
/// with its key fields always fits.
pub const SIGNAL_BYTES_MAX: usize = 256 * 1024;

/// Signals one thread may be sent over its life. The inbox keeps every signal until the thread
/// is deleted (the receipts in the log point at them), so this bounds it; Temporal caps the
/// signals of one workflow execution at the same 10,000 by default.
pub const SIGNALS_PER_THREAD_MAX: u64 = 10_000;

/// PostgreSQL: opening a connection, all of it (socket, TLS, startup, the `SET`s Cairn runs),
/// when the URL sets no `connect_timeout`. A connection opens in milliseconds on a LAN and in
/// well under a second across regions with TLS; 5 s leaves room for a loaded server's fork and
/// authentication, and bounds what a reconnection into a silent network costs (libpq has no
/// default: it waits for ever).
pub const PG_CONNECT_TIMEOUT_DEFAULT: std::time::Duration = std::time::Duration::from_secs(5);

/// PostgreSQL: the server's `statement_timeout`, when the URL's `options` set none. Cairn's
/// statements touch a page of rows by index (a group's rows, a page of a listing or of
/// `verify`'s scan): milliseconds each, so 10 s only ends a statement stuck behind a lock or a
/// server that no longer works, and the client gives its connection up soon after
/// ([`PG_ANSWER_GRACE_MAX`]).
pub const PG_STATEMENT_TIMEOUT_DEFAULT: std::time::Duration = std::time::Duration::from_secs(10);

/// PostgreSQL: how long past its statement timeout a client waits for the server's own answer
/// (the server's cancellation, then the round trip back) before it gives the connection up as
/// one the network dropped. A read's (and a write's) deadline is the statement timeout plus
/// this: 12 s by default. A read seldom waits that long: one that needs a database the store
/// knows is unreachable fails at once ([`crate::Error::Unavailable`]), and one in flight when
/// the store learns it fails then.
pub const PG_ANSWER_GRACE_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// PostgreSQL: how long a read waits for one of the store's reader connections when every one
/// is busy, at most (and never longer than the read's answer deadline, statement timeout plus
/// [`PG_ANSWER_GRACE_MAX`]): each busy connection is freed within its own answer deadline, so a
/// read that waits longer waits on connections nothing frees (a read that was started and is
/// no longer driven, its caller blocked elsewhere). It then fails with
/// [`crate::Error::TimedOut`] naming the read, instead of waiting for ever (a 20-minute hang in
/// a test's driver was one such wait).
pub const PG_READ_CONNECTION_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// PostgreSQL: how often the store checks that its database answers (an empty query on its
/// listening connection), whatever it reads or writes meanwhile: a network that goes silent
/// is noticed within this plus [`PG_CHECK_ANSWER_MAX`] even when nothing is written.
pub const PG_CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// PostgreSQL: how long that check may go unanswered before the store says the database is
/// unreachable (an empty query answers in a millisecond; 2 s is a server or a network that is
/// gone, not a busy one). The connection is given up and a fresh one, opened within the
/// connect timeout, is the check while the database does not answer.
pub const PG_CHECK_ANSWER_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// PostgreSQL: how long writes wait for a database that does not answer before they fail
/// ([`crate::Error::Unavailable`]) instead of waiting on: a server restart (about a second)
/// costs writes a delay, an outage of minutes costs each caller an error within this.
pub const PG_WRITE_WAIT_UNAVAILABLE_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// Checks `value <= max`, naming the limit in the error.
///
/// # Errors
///
/// [`Error::LimitExceeded`](crate::Error::LimitExceeded) when `value > max`.
pub(crate) fn check(
    limit: &'static str,
    value: usize,
    max: usize,
) -> Result<(), crate::error::Error> {
    if value > max {
        return Err(crate::error::Error::LimitExceeded {
            limit,
            value: value as u64,
            max: max as u64,
        });
    }
    Ok(())
}

/// Checks `text`, a `what` ("signal name"): 1 to `max` bytes (the limit named `limit`), no
/// control characters.
///
/// # Errors
///
/// [`Error::LimitExceeded`](crate::Error::LimitExceeded) past `max`;
/// [`Error::Invalid`](crate::Error::Invalid) for an empty text or one with a control character.
pub(crate) fn check_text(
    limit: &'static str,
    max: usize,
    what: &str,
    text: &str,
) -> Result<(), crate::error::Error> {
    check(limit, text.len(), max)?;
    if text.is_empty() || text.chars().any(char::is_control) {
        return Err(crate::error::Error::Invalid {
            detail: format!("{what} {text:?} is empty or has a control character"),
        });
    }
    Ok(())
}

/// What a limit of this module bounds, in words, for messages (a user should not need to know
/// the constant's name to understand which of their values was too large).
pub fn in_words(limit: &str) -> &'static str {
    match limit {
        "THREAD_ID_BYTES_MAX" => "a thread id's length in bytes",
        "NODE_NAME_BYTES_MAX" => "a node name's length in bytes",
        "SUMMARY_BYTES_MAX" => "an event summary's length in bytes",
        "EVENT_DATA_BYTES_MAX" => "an event's inline data in bytes",
        "RECORD_BYTES_MAX" => "a stored record's size in bytes",
        "SNAPSHOT_BYTES_MAX" => "a checkpoint snapshot's size in bytes",
        "PAYLOAD_BYTES_MAX" => "a payload's size in bytes",
        "BATCH_EVENTS_MAX" => "the events in one batch",
        "BATCH_BYTES_MAX" => "the bytes in one batch",
        "BATCH_OPS_MAX" => "the operations of one kind in one batch",
        "THREAD_SUMMARY_BYTES_MAX" => "a thread summary's size in bytes",
        "LABELS_PER_THREAD_MAX" => "the labels on one thread",
        "LABEL_BYTES_MAX" => "a label's (or custom field's) key or value length in bytes",
        "TAGS_PER_CHECKPOINT_MAX" => "the tags on one checkpoint",
        "TAG_BYTES_MAX" => "a checkpoint tag's length in bytes",
        "CUSTOM_FIELDS_MAX" => "the custom fields on one checkpoint",
        "TEXT_BYTES_MAX" => {
            "a text field's length in bytes (creator, description, owner, lock name)"
        }
        "READ_LIMIT_MAX" => "the events one read may return",
        "SNAPSHOT_ATTEMPTS_MAX" => "the attempts at a read-only snapshot",
        "DRIVER_MESSAGE_BYTES_MAX" => "a message to a thread's driver, in bytes",
        "CORRELATION_ID_BYTES_MAX" => "a correlation id's length in bytes",
        "SIGNAL_NAME_BYTES_MAX" => "a signal name's length in bytes",
        "SIGNAL_BYTES_MAX" => "a signal's value in bytes",
        "SIGNALS_PER_THREAD_MAX" => "the signals one thread may be sent",
        _ => "a value",
    }
}

/// Bytes in a queue name, a concurrency key or a dedup key. Each is part of an index key
/// written with every enqueue; 256 bytes holds a tenant id or a business key.
pub const QUEUE_NAME_BYTES_MAX: usize = 256;

/// Keys with a waiting or running thread in one queue. Their counts live in the queue's record,
/// which admission rewrites; 10,000 keys keep it under ~1 MiB (`RECORD_BYTES_MAX`).
pub const QUEUE_KEYS_MAX: usize = 10_000;

/// Starts per window of one rate limit: the record keeps the time of each start in the window.
pub const RATE_STARTS_MAX: usize = 10_000;

/// Threads one admission op admits: one op is one write transaction, which it must not stall.
pub const QUEUE_ADMIT_MAX: usize = 1_000;

/// Waiting entries of one key admission looks at for its head (skipping paused threads and
/// workflows the caller lacks): bounds the reads of one admission.
pub const QUEUE_HEAD_SCAN_MAX: usize = 64;

/// Members one batch run takes (`QueueLimits::batch_max` at most, and a batch by window
/// alone): their ids are in the run's queue record and their inputs in its input, so a batch
/// stays well inside one record.
pub const QUEUE_BATCH_MAX: usize = 1_000;

/// Keys one queue gives a fairness weight of their own (`QueueLimits::fairness`; the others
/// take its default): they live in the queue's record, rewritten by every admission.
pub const QUEUE_FAIRNESS_KEYS_MAX: usize = 1_000;

/// The largest fairness weight (the smallest is 1): a key of weight `w` is served `w` times as
/// often as a key of weight 1 while both wait.
pub const QUEUE_FAIRNESS_WEIGHT_MAX: u32 = 1_000;

/// Starts waiting to be gathered into batch runs, per queue: their ids live in the queue's
/// record, rewritten by every enqueue and admission, so the record stays small.
pub const QUEUE_BATCH_WAITING_MAX: usize = 10_000;
