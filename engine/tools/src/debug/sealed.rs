//! The read-only views of a thread whose sealed bodies this reader holds no key for
//! (`docs/encryption.md`, "Tools"): what is in the clear (the thread record: ids, status, step,
//! frontier, progress, labels, timestamps; each event's header) shows as usual, and each value
//! that would be folded from a sealed body is the placeholder
//! `{"encrypted": true, "codec", "key"}`. Nothing here guesses: a value that the clear record
//! does not hold at the seq asked for is a placeholder or absent, never a default.
//!
//! Only a key missing from the reader ([`cairn::sealing::SealedView::placeholder_for`]) gives a
//! placeholder; a key that is held but does not open a body (a wrong key, tampering) stays the
//! error it is.

use cairn::Engine;
use cairn::error::Error;
use cairn::sealing::Placeholder;
use cairn_storage::ThreadRecord;

use super::rows::{Budgets, Sealable, StateRow, ThreadDetails};
use super::views::{locks_of, thread_row};

/// The placeholder for `error` when it is a body sealed with a key `engine`'s view lacks;
/// `error` itself otherwise.
///
/// # Errors
/// `error`, when it is not such a body.
pub(crate) fn lacking(engine: &Engine, error: Error) -> Result<Placeholder, Error> {
    cairn::admin::sealed_view(engine).placeholder_for(&error).ok_or(error)
}

/// Why a thread's fold is not shown: its key is missing here.
fn why(p: &Placeholder) -> String {
    format!(
        "sealed with key {} (codec {}): no such key here; read with CAIRN_KEYS to see its values",
        p.key, p.codec
    )
}

/// The state of `record` after `seq`, its fold needing the key `p` names. At its last seq the
/// status, step and frontier are the record's (in the clear); at an earlier one they are
/// absent: only a fold of the sealed log could say them.
pub(crate) fn state_row(record: &ThreadRecord, seq: u64, p: &Placeholder) -> StateRow {
    let row = thread_row(record);
    let latest = row.last_seq == Some(seq);
    StateRow {
        frontier: row.frontier.filter(|_| latest),
        sealed: vec![p.key.clone()],
        seq,
        state: p.to_json(),
        status: latest.then_some(row.status),
        step: row.step.filter(|_| latest),
        thread: row.thread,
    }
}

/// What `cairn show` reports of `record` when its fold needs the key `p` names: the record's
/// clear fields, the values folded from the log as placeholders.
///
/// # Errors
/// Storage errors reading its locks.
pub(crate) async fn details(
    engine: &Engine,
    record: &ThreadRecord,
    p: &Placeholder,
) -> Result<ThreadDetails, Error> {
    let row = thread_row(record);
    let sealed = || p.to_json();
    let wf = cairn::admin::workflow_for(engine, record).ok();
    let updates = wf.map(|wf| wf.update_names().into_iter().map(str::to_owned).collect());
    Ok(ThreadDetails {
        budgets: Sealable::<Budgets>::Sealed(p.clone()),
        continued_as: Some(Sealable::Sealed(p.clone())),
        continued_from: Some(Sealable::Sealed(p.clone())),
        created_at_ms: row.created_at_ms,
        first_seq: row.first_seq,
        fork: Some(sealed()),
        frontier: row.frontier.unwrap_or_default(),
        labels: row.labels,
        last_error: Some(Sealable::Sealed(p.clone())),
        last_seq: row.last_seq,
        lease: record.lease.clone(),
        locks: locks_of(engine, record).await?,
        node_results: sealed(),
        output: Some(sealed()),
        parent: row.parent,
        progress: row.progress,
        progress_text: row.progress_text,
        sealed: vec![p.key.clone()],
        seq: row.last_seq.unwrap_or(0),
        state_unknown: Some(why(p)),
        status: row.status,
        status_reason: row.last_error,
        step: row.step.unwrap_or(0),
        telemetry: Sealable::Sealed(p.clone()),
        thread: row.thread,
        undos: Sealable::Sealed(p.clone()),
        unwinding: Some(sealed()),
        updated_at_ms: row.updated_at_ms,
        updates: updates.unwrap_or_default(),
        waiting: Some(sealed()),
        workflow: row.workflow,
    })
}
