//! JSON views of threads, events, checkpoints and messages, shared by the command line
//! (`cairn threads`, `show`, `events`, `trace`, `checkpoints`) and the HTTP endpoint
//! (`engine/tools/src/serve/`, which calls these), so that both show one thing the same way. Reads
//! only.

use cairn_storage::{
    Checkpoint, CheckpointInfo, EventKind, Seq, Store, ThreadFilter, ThreadId, ThreadRecord,
    ThreadStatus,
};
use serde_json::{Value, json};

use super::fold::fold;
use super::rows::{
    Budget, Budgets, CheckpointDetails, CheckpointRow, Covers, DeletedRow, EventRow, LastError,
    LockRow, MessageRow, Parent, ProblemRow, Redactable, ResumableRow, Sealable, StateRow,
    ThreadDetails, ThreadRow, VerifyRow,
};
use super::sealed::lacking;
use cairn::Engine;
use cairn::admin as fetch;
use cairn::admin::{PARENT_LABEL, STARTED_BY_LABEL};
use cairn::admin::{ThreadPages, ViewedEvent};
use cairn::error::Error;
use cairn::sealing::{Placeholder, Viewed};
use cairn_core::limits::READ_CHUNK_EVENTS;

/// The summary the runner keeps in each thread record (`core/summary.rs`), as far as a listing
/// shows it; a summary that does not read shows nothing.
#[derive(Default, serde::Deserialize)]
struct Summary {
    step: Option<u64>,
    frontier: Option<Vec<String>>,
    progress: Option<cairn_dsl::Progress>,
    last_error: Option<String>,
}

/// One thread as a listing shows it (`cairn threads --json`, `GET /api/threads`).
pub(crate) fn thread_row(record: &ThreadRecord) -> ThreadRow {
    let s: Summary = serde_json::from_slice(&record.summary).unwrap_or_default();
    ThreadRow {
        created_at_ms: record.created_at_ms,
        first_seq: record.first_seq.0,
        frontier: s.frontier,
        labels: record.labels.clone(),
        last_error: s.last_error,
        last_seq: record.last.map(|b| b.seq.0),
        parent: parent(record),
        progress_text: s.progress.as_ref().map(|p| progress_text(record.status, p)),
        progress: s.progress,
        status: record.status.as_str().to_owned(),
        step: s.step,
        thread: record.id.as_str().to_owned(),
        updated_at_ms: record.updated_at_ms,
        workflow: record.workflow.clone(),
    }
}

/// A thread's progress as a person reads it, in a listing, `cairn show` and the web view alike:
/// `step/total message`, or `done` for a completed thread whose last report was short of its
/// last step (a short route: the demo's direct answer reports step 1 of 5 and ends).
pub(crate) fn progress_text(status: ThreadStatus, p: &cairn_dsl::Progress) -> String {
    if status == ThreadStatus::Completed && p.step < p.total {
        return "done".into();
    }
    format!("{}/{} {}", p.step, p.total, p.message)
}

/// The thread `record` comes from: the one it was forked from (at `seq`), or the one whose
/// sub-workflow node runs it (named by its [`PARENT_LABEL`]: `seq` null, via `sub-workflow`), or
/// the one whose node started it (`ctx.start_child`, its [`STARTED_BY_LABEL`]: via
/// `start_child`); `None` for a thread started on its own.
fn parent(record: &ThreadRecord) -> Option<Parent> {
    if let Some((t, s)) = &record.parent {
        return Some(Parent { seq: Some(s.0), thread: t.as_str().to_owned(), via: None });
    }
    if let Some(p) = record.labels.get(PARENT_LABEL) {
        return Some(Parent { seq: None, thread: p.clone(), via: Some("sub-workflow".into()) });
    }
    let p = record.labels.get(STARTED_BY_LABEL)?;
    Some(Parent { seq: None, thread: p.clone(), via: Some("start_child".into()) })
}

/// Everything `cairn show` reports (what `--json` prints and `GET /api/threads/{id}` serves).
pub(crate) async fn thread_details(
    engine: &Engine,
    record: &ThreadRecord,
) -> Result<ThreadDetails, Error> {
    let folded = match fold(engine, &record.id, None).await {
        Ok(folded) => folded,
        Err(e) => return super::sealed::details(engine, record, &lacking(engine, e)?).await,
    };
    let m = folded.ctx.meta;
    let t = &m.telemetry;
    let wall = m.updated_at_ms.saturating_sub(m.created_at_ms);
    let wf = cairn::admin::workflow_for(engine, record).ok();
    let limits = wf.as_ref().map(|wf| wf.budgets().clone());
    let updates = wf.as_ref().map(|wf| wf.update_names().into_iter().map(str::to_owned).collect());
    let limit = |f: fn(&cairn_dsl::Budgets) -> Option<u64>| limits.as_ref().and_then(f);
    let budgets = Budgets {
        cost_micros: Budget { used: t.cost_micros, limit: limit(|b| b.max_cost_micros) },
        steps: Budget { used: t.steps, limit: limit(|b| b.max_steps) },
        tokens: Redactable::Shown(Budget { used: t.tokens, limit: limit(|b| b.max_tokens) }),
        tool_calls: Budget { used: t.tool_calls, limit: limit(|b| b.max_tool_calls) },
        wall_ms: Budget { used: wall, limit: limit(|b| b.max_wall_ms) },
    };
    let last_error = m.errors.back().map(|e| LastError {
        at_ms: e.at_ms,
        error: e.error.to_string(),
        seq: e.seq,
        task: e.task.to_string(),
    });
    // Errors that are not a node's (a resume blocked by a diverging replay) are only in the
    // record's summary; so is a place in line (a queue's admission flips the record's status
    // from queued to created and writes no event), so the status is the record's, as
    // `cairn threads` lists it.
    let row = thread_row(record);
    Ok(ThreadDetails {
        budgets: Sealable::Open(budgets),
        continued_as: m.continued_as.map(Sealable::Open),
        continued_from: m.continued_from.map(Sealable::Open),
        created_at_ms: row.created_at_ms,
        first_seq: row.first_seq,
        fork: m.fork.map(serde_json::to_value).transpose()?,
        frontier: m.frontier,
        labels: row.labels,
        last_error: last_error.map(Sealable::Open),
        last_seq: row.last_seq,
        lease: record.lease.clone(),
        locks: locks_of(engine, record).await?,
        node_results: serde_json::to_value(&m.node_results)?,
        output: m.output,
        parent: row.parent,
        progress_text: m.progress.as_ref().map(|p| progress_text(m.status, p)),
        progress: m.progress,
        sealed: Vec::new(),
        seq: m.seq,
        state_unknown: folded.state_unknown,
        status: row.status,
        status_reason: row.last_error,
        step: m.step,
        telemetry: Sealable::Open(m.telemetry),
        thread: row.thread,
        undos: Sealable::Open(m.undos.iter().map(serde_json::to_value).collect::<Result<_, _>>()?),
        unwinding: m.unwinding.map(serde_json::to_value).transpose()?,
        updated_at_ms: row.updated_at_ms,
        updates: updates.unwrap_or_default(),
        waiting: m.waiting.map(serde_json::to_value).transpose()?,
        workflow: row.workflow,
    })
}

/// The locks `record`'s thread holds.
///
/// # Errors
/// Storage errors.
pub(crate) async fn locks_of(
    engine: &Engine,
    record: &ThreadRecord,
) -> Result<Vec<LockRow>, Error> {
    let locks = engine.store().locks().await?.into_iter().filter(|l| l.owner == record.id.as_str());
    let locks = locks.map(|l| LockRow {
        acquired_at_ms: l.acquired_at_ms,
        expires_at_ms: l.expires_at_ms,
        name: l.name,
    });
    Ok(locks.collect())
}

/// The ids of the promises thread `thread` created (`ctx.promise`), from its folded log.
///
/// # Errors
/// Unknown thread, damaged or pruned log.
pub(crate) async fn promises_created(
    engine: &Engine,
    thread: &ThreadId,
) -> Result<std::collections::BTreeSet<String>, Error> {
    Ok(fold(engine, thread, None).await?.ctx.meta.promises)
}

/// One event as `cairn events --json` prints it and `GET /api/threads/{id}/events` serves it:
/// its body decoded (a `checkpoint_created` one with the id its checkpoint got at commit), or
/// the placeholder of a body sealed with a key this reader lacks.
pub(crate) fn event_row(viewed: ViewedEvent) -> Result<EventRow, Error> {
    let event = viewed.event;
    let (seq, lsn, at_ms) = (event.bookmark.seq.0, event.bookmark.lsn.0, event.bookmark.at_ms);
    let (kind, status) = (event.kind.as_str().to_owned(), event.status.as_str().to_owned());
    let (node, summary) = (event.node, event.summary);
    let body = match viewed.body {
        Viewed::Open(body) => serde_json::to_value(body)?,
        Viewed::Sealed(p) => p.to_json(),
    };
    Ok(EventRow { seq, lsn, at_ms, kind, node, status, summary, body })
}

/// The state at a seq as `cairn state --json` prints it and `GET /api/threads/{id}/state`
/// serves it.
pub(crate) fn state_row(view: super::StateView) -> StateRow {
    StateRow {
        frontier: Some(view.meta.frontier),
        sealed: Vec::new(),
        seq: view.seq,
        state: view.state,
        status: Some(view.status.as_str().to_owned()),
        step: Some(view.step),
        thread: view.thread,
    }
}

/// The state of `record`'s thread after seq `at` (its last when `None`), or as it stood at
/// `at_ms`, as [`state_row`] shows it; with the placeholder for the state (and the clear
/// fields the record holds) when its fold needs a key this reader lacks.
///
/// # Errors
/// As [`crate::Operator::state_at`] and [`crate::Operator::state_at_time`], but for a missing
/// key.
pub(crate) async fn state_at(
    engine: &Engine,
    record: &ThreadRecord,
    at: Option<u64>,
    at_ms: Option<u64>,
) -> Result<StateRow, Error> {
    let operator = crate::Operator::new(engine);
    let thread = record.id.as_str();
    let seq = match at_ms {
        Some(ms) => match operator.seq_at_time(thread, ms).await? {
            Some(seq) => Some(seq),
            None => return operator.state_at_time(thread, ms).await.map(state_row),
        },
        None => at,
    };
    match operator.state_at(thread, seq).await {
        Ok(view) => Ok(state_row(view)),
        Err(e) => {
            let p = lacking(engine, e)?;
            let seq = seq.unwrap_or_else(|| record.last.map_or(0, |b| b.seq.0));
            Ok(super::sealed::state_row(record, seq, &p))
        }
    }
}

/// What a thread deletion removed, as `cairn delete --json` prints it and `DELETE
/// /api/threads/{id}` answers it (one document for both).
pub(crate) fn deleted_row(thread: &str, d: &cairn_storage::Deleted) -> DeletedRow {
    DeletedRow {
        thread: thread.to_owned(),
        deleted: true,
        status: d.status.as_str().to_owned(),
        events: d.events,
        checkpoints: d.checkpoints,
        locks: d.locks,
        payloads: d.payloads,
    }
}

/// A verify report as `cairn verify --json` prints it and `GET /api/verify` answers it.
pub(crate) fn verify_row(report: &cairn_storage::VerifyReport) -> VerifyRow {
    let problems = report.problems.iter().map(|p| ProblemRow {
        detail: p.detail.clone(),
        seq: p.seq.map(|s| s.0),
        table: p.table.to_owned(),
        thread: p.thread.as_ref().map(|t| t.as_str().to_owned()),
    });
    VerifyRow {
        checkpoints: report.checkpoints,
        clean: report.is_clean(),
        events: report.events,
        locks: report.locks,
        opened: true,
        payloads: report.payloads,
        problems: problems.collect(),
        threads: report.threads,
    }
}

/// One checkpoint's metadata as `cairn checkpoints --json` prints it.
pub(crate) fn checkpoint_row(c: &CheckpointInfo) -> CheckpointRow {
    CheckpointRow {
        id: c.id.0,
        thread: c.thread.as_str().to_owned(),
        workflow: c.workflow.clone(),
        kind: c.kind.as_str().to_owned(),
        covers: Covers { seq: c.covers.seq.0, lsn: c.covers.lsn.0, at_ms: c.covers.at_ms },
        created_at_ms: c.created_at_ms,
        snapshot_len: c.snapshot_len,
        meta: c.meta.clone(),
    }
}

/// One checkpoint with the snapshot it holds, as `cairn checkpoint show --json` prints it and
/// `GET /api/checkpoints/{id}` serves it: the metadata, the status, step and frontier it
/// restores, and the user state.
///
/// # Errors
/// A snapshot that does not decode.
pub(crate) fn checkpoint_details(cp: &Checkpoint) -> Result<CheckpointDetails, Error> {
    let snapshot = cairn_core::restore::decode_snapshot(&cp.thread, cp.covers.seq.0, &cp.snapshot)?;
    Ok(CheckpointDetails {
        info: checkpoint_row(&cp.info()),
        status: snapshot.meta.status.as_str().to_owned(),
        step: snapshot.meta.step,
        frontier: snapshot.meta.frontier,
        state: snapshot.state,
    })
}

/// One traced message as `cairn trace --json` prints it and `GET /api/trace` serves it.
pub(crate) fn message_row(m: &super::TracedMessage) -> MessageRow {
    MessageRow {
        lsn: m.lsn,
        thread: m.thread.clone(),
        seq: m.seq,
        at_ms: m.at_ms,
        node: m.task.to_string(),
        role: m.message.role.clone(),
        to: m.message.to.clone(),
        content: m.message.content.clone(),
        correlation_id: m.message.correlation_id.clone(),
        id: m.message.id.clone(),
        parent: m.message.parent.clone(),
    }
}

/// The resumable threads as `cairn resumable --json` prints them and `GET /api/resumable`
/// serves them, in natural id order: each with whether `engine` has its workflow compiled in
/// (`runnable`) and why not.
pub(crate) fn resumable_rows(engine: &Engine, mut records: Vec<ThreadRecord>) -> Vec<ResumableRow> {
    records.sort_by(|a, b| natural_cmp(a.id.as_str(), b.id.as_str()));
    records
        .iter()
        .map(|r| {
            let runnable = cairn::admin::workflow_for(engine, r);
            ResumableRow {
                thread: r.id.as_str().to_owned(),
                workflow: r.workflow.clone(),
                status: r.status.as_str().to_owned(),
                last_seq: r.last.map(|b| b.seq.0),
                updated_at_ms: r.updated_at_ms,
                runnable: runnable.is_ok(),
                why_not: runnable.err().map(|e| e.to_string()),
            }
        })
        .collect()
}

/// The threads matching `filter` in natural id order (`demo-2` before `demo-10`), `offset`
/// skipped and at most `limit` kept. The store lists in byte order, so every matching record is
/// read (a cursor walk, a page at a time) and only the `offset + limit` first in natural order
/// are kept ([`NaturalFirst`]): memory does not grow with the number of threads.
///
/// # Errors
/// Storage errors.
#[cfg(feature = "cli")]
pub(crate) async fn threads_page(
    store: &dyn Store,
    filter: &ThreadFilter,
    offset: usize,
    limit: usize,
) -> Result<Vec<ThreadRecord>, Error> {
    let mut first = NaturalFirst::new(offset.saturating_add(limit));
    let mut pages = ThreadPages::new(filter.clone(), None, THREADS_CHUNK);
    while let Some(page) = pages.next(store).await? {
        for record in page {
            first.offer(record.id.to_string(), record);
        }
    }
    Ok(first.finish(offset, limit))
}

/// Threads read a chunk at a time by the walks here.
const THREADS_CHUNK: usize = 1_000;

/// A page of the threads matching `filter` in the store's id order: those after the cursor
/// `after` (exclusive), `offset` of them skipped, at most `limit`; and the cursor of the next
/// page (the last id returned), `None` when no matching thread follows. Reads from the cursor
/// on, a chunk at a time: memory holds a chunk and the page, whatever the number of threads.
///
/// # Errors
/// Storage errors.
pub(crate) async fn threads_after(
    store: &dyn Store,
    filter: &ThreadFilter,
    after: Option<&ThreadId>,
    offset: usize,
    limit: usize,
) -> Result<(Vec<ThreadRecord>, Option<ThreadId>), Error> {
    let mut pages = ThreadPages::new(filter.clone(), after.cloned(), THREADS_CHUNK);
    let mut skip = offset;
    let mut out = Vec::new();
    // One more than the page, to know whether another follows.
    while out.len() <= limit
        && let Some(page) = pages.next(store).await?
    {
        for record in page {
            if skip > 0 {
                skip -= 1;
            } else if out.len() <= limit {
                out.push(record);
            }
        }
    }
    let more = out.len() > limit;
    out.truncate(limit);
    let next = if more { out.last().map(|r| r.id.clone()) } else { None };
    Ok((out, next))
}

/// The `keep` first items in natural order of their keys (ties in byte order), kept while any
/// number of items are offered: memory holds at most twice `keep` items (sorted and cut back to
/// the `keep` first whenever it fills).
#[cfg(feature = "cli")]
pub(crate) struct NaturalFirst<T> {
    keep: usize,
    items: Vec<(String, T)>,
}

#[cfg(feature = "cli")]
impl<T> NaturalFirst<T> {
    /// Keeps the `keep` first.
    pub(crate) fn new(keep: usize) -> Self {
        Self { keep, items: Vec::new() }
    }

    /// Offers `item` under `key`: kept if among the `keep` first so far.
    pub(crate) fn offer(&mut self, key: String, item: T) {
        self.items.push((key, item));
        if self.items.len() > self.keep.saturating_mul(2).max(1) {
            self.cut();
        }
    }

    fn cut(&mut self) {
        self.items.sort_by(|(a, _), (b, _)| natural_cmp(a, b).then_with(|| a.cmp(b)));
        self.items.truncate(self.keep);
    }

    /// The items kept, first first, `offset` skipped and at most `limit`.
    pub(crate) fn finish(mut self, offset: usize, limit: usize) -> Vec<T> {
        self.cut();
        self.items.into_iter().skip(offset).take(limit).map(|(_, item)| item).collect()
    }
}

/// The events of `thread` after seq `after` that pass `kinds` (all when empty), decoded, at
/// most `max` of them, read through `engine`'s sealed view (a body sealed with a key this
/// reader lacks is a placeholder); returns them and the last seq read (matching or not).
///
/// # Errors
/// Storage errors; an event that does not decode; a body a held key does not open.
pub(crate) async fn events_after(
    engine: &Engine,
    thread: &ThreadId,
    mut after: u64,
    kinds: &[EventKind],
    max: usize,
) -> Result<(Vec<EventRow>, u64), Error> {
    let mut out = Vec::new();
    loop {
        let chunk = READ_CHUNK_EVENTS.min(max.saturating_sub(out.len()).max(1));
        let events = fetch::viewed_events(engine, thread, Seq(after), chunk).await?;
        let n = events.len();
        for viewed in events {
            after = viewed.event.bookmark.seq.0;
            if kinds.is_empty() || kinds.contains(&viewed.event.kind) {
                out.push(event_row(viewed)?);
            }
        }
        if n < chunk || out.len() >= max {
            return Ok((out, after));
        }
    }
}

/// The key ids whose placeholders stand in `rows`' bodies, once each, in order.
pub(crate) fn sealed_keys(rows: &[EventRow]) -> Vec<String> {
    let keys = rows.iter().filter_map(|r| Placeholder::of_json(&r.body)).map(|p| p.key);
    keys.collect::<std::collections::BTreeSet<_>>().into_iter().collect()
}

/// The messages that carry `correlation_id`, across threads, in lsn order, read through the
/// store's correlation index (`docs/format.md` §2.2): no other event is read.
///
/// # Errors
/// Storage errors; an event that does not decode; [`Error::LimitExceeded`] past
/// [`crate::limits::TRACE_MESSAGES_MAX`] messages.
pub(crate) async fn messages(store: &dyn Store, correlation_id: &str) -> Result<Vec<Value>, Error> {
    let query = super::TraceQuery {
        correlation_id: Some(correlation_id.to_owned()),
        ..super::TraceQuery::new(super::TraceScope::All)
    };
    let found = super::trace::messages_of_store(store, &query).await?;
    let row = |m: super::TracedMessage| {
        json!({
            "lsn": m.lsn,
            "thread": m.thread,
            "seq": m.seq,
            "at_ms": m.at_ms,
            "node": m.task.to_string(),
            "role": m.message.role,
            "to": m.message.to,
            "content": m.message.content,
            "id": m.message.id,
            "parent": m.message.parent,
        })
    };
    Ok(found.into_iter().map(row).collect())
}

/// Natural order of thread ids: runs of digits compare as numbers, so `demo-2` comes before
/// `demo-10` (plain byte order, the store's, puts `demo-10` first).
pub(crate) fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return std::cmp::Ordering::Equal,
            (None, Some(_)) => return std::cmp::Ordering::Less,
            (Some(_), None) => return std::cmp::Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let (da, ra) = split_digits(a);
                let (db, rb) = split_digits(b);
                // Leading zeros aside, the longer number is the larger; equal lengths compare
                // digit by digit; then fewer leading zeros first, for a total order.
                let (ta, tb) = (trim_zeros(da), trim_zeros(db));
                let order = ta.len().cmp(&tb.len()).then(ta.cmp(tb)).then(da.len().cmp(&db.len()));
                if order != std::cmp::Ordering::Equal {
                    return order;
                }
                (a, b) = (ra, rb);
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                (a, b) = (&a[1..], &b[1..]);
            }
        }
    }
}

fn split_digits(s: &[u8]) -> (&[u8], &[u8]) {
    let n = s.iter().take_while(|c| c.is_ascii_digit()).count();
    s.split_at(n)
}

fn trim_zeros(digits: &[u8]) -> &[u8] {
    let zeros = digits.iter().take_while(|&&c| c == b'0').count();
    &digits[zeros..]
}

#[cfg(test)]
mod tests {
    use super::natural_cmp;

    #[test]
    fn thread_ids_sort_naturally() {
        let mut ids = vec!["demo-10", "demo-2", "demo-1", "b", "a10b", "a9c", "demo-02", "x"];
        ids.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(ids, ["a9c", "a10b", "b", "demo-1", "demo-2", "demo-02", "demo-10", "x"]);
    }
}
