//! The batch frame (record kind 12, format v6): a run of one thread's events, consecutive in seq
//! and in lsn, stored as one record of the log under its last lsn.
//!
//! ```text
//! body (postcard)
//!   thread      string (varint length, UTF-8)
//!   first_seq   varint u64   seq of the first event (>= 1)
//!   first_lsn   varint u64   lsn of the first event (>= 1)
//!   events      varint count (>= 1), then per event:
//!     at_ms        varint u64
//!     kind         varint u16 (EventKind)
//!     node         option<string>
//!     status       u8 (EventStatus)
//!     summary      string
//!     payload      option<PayloadRef> (32 hash bytes, varint len)
//!     data         bytes (varint length, raw)
//!     correlation  option<string>
//! ```
//!
//! Event `i` (from 0) has seq `first_seq + i` and lsn `first_lsn + i`: the thread, the seqs and
//! the lsns are stored once a frame, not once an event. The writer cuts a thread's run of a
//! commit into frames of at most [`FRAME_EVENTS_MAX`] events and about [`FRAME_BODY_TARGET`]
//! bytes ([`frames`]).

use serde::{Deserialize, Serialize, Serializer};

use crate::error::Error;
use crate::event::{Event, EventKind, EventStatus};
use crate::ids::{Bookmark, Lsn, PayloadRef, Seq, ThreadId};

/// Events in one batch frame at most, as the writer cuts them: a read of one event decodes its
/// whole frame, so a long run (an import, a copy) is cut into frames of this many.
pub const FRAME_EVENTS_MAX: usize = 64;

/// Body bytes after which the writer starts a new frame (one event may make a frame larger, up
/// to [`RECORD_BYTES_MAX`](crate::limits::RECORD_BYTES_MAX), which bounds one event too).
pub const FRAME_BODY_TARGET: usize = 64 * 1024;

#[derive(Serialize)]
pub(crate) struct BatchRef<'a> {
    thread: &'a ThreadId,
    first_seq: u64,
    first_lsn: u64,
    events: Items<'a>,
}

/// The per-event fields of `events`, serialised as a sequence without a copy.
struct Items<'a>(&'a [Event]);

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|e| ItemRef {
            at_ms: e.bookmark.at_ms,
            kind: e.kind,
            node: e.node.as_deref(),
            status: e.status,
            summary: &e.summary,
            payload: e.payload,
            data: &e.data,
            correlation: e.correlation.as_deref(),
        }))
    }
}

#[derive(Serialize)]
struct ItemRef<'a> {
    at_ms: u64,
    kind: EventKind,
    node: Option<&'a str>,
    status: EventStatus,
    summary: &'a str,
    payload: Option<PayloadRef>,
    #[serde(with = "crate::bytes_serde")]
    data: &'a [u8],
    correlation: Option<&'a str>,
}

#[derive(Deserialize)]
pub(crate) struct BatchOwned {
    thread: ThreadId,
    first_seq: u64,
    first_lsn: u64,
    events: Vec<ItemOwned>,
}

#[derive(Deserialize)]
struct ItemOwned {
    at_ms: u64,
    kind: EventKind,
    node: Option<String>,
    status: EventStatus,
    summary: String,
    payload: Option<PayloadRef>,
    #[serde(with = "crate::bytes_serde")]
    data: Vec<u8>,
    correlation: Option<String>,
}

/// The body of the batch frame of `events` and the expected size of its encoding, or why
/// `events` is not one run of one thread (the codec's `encode_event_batch` frames it).
pub(crate) fn body_of(events: &[Event]) -> Result<(BatchRef<'_>, usize), Error> {
    let Some(first) = events.first() else {
        return Err(Error::Invalid { detail: "an empty batch frame".into() });
    };
    if run_len(events) != events.len() {
        return Err(Error::Invalid { detail: "a batch frame holds one run of one thread".into() });
    }
    let hint = 16 + first.thread.as_str().len() + events.iter().map(weight).sum::<usize>();
    let body = BatchRef {
        thread: &first.thread,
        first_seq: first.bookmark.seq.0,
        first_lsn: first.bookmark.lsn.0,
        events: Items(events),
    };
    Ok((body, hint))
}

/// The events of a decoded batch body, in order, or what is wrong with it (no events, seq or
/// lsn 0, seqs or lsns past `u64::MAX`, an invalid correlation id).
pub(crate) fn events_of(batch: BatchOwned) -> Result<Vec<Event>, String> {
    let Some(last) = (batch.events.len() as u64).checked_sub(1) else {
        return Err("a batch frame without events".into());
    };
    if batch.first_seq == 0 || batch.first_lsn == 0 {
        return Err("seq and lsn start at 1".into());
    }
    if batch.first_seq.checked_add(last).is_none() || batch.first_lsn.checked_add(last).is_none() {
        return Err("the frame's seqs or lsns overflow".into());
    }
    let mut out = Vec::with_capacity(batch.events.len());
    for (i, item) in (0u64..).zip(batch.events) {
        if let Some(correlation) = &item.correlation {
            crate::event::check_correlation(correlation).map_err(|e| e.to_string())?;
        }
        out.push(Event {
            bookmark: Bookmark {
                seq: Seq(batch.first_seq + i),
                lsn: Lsn(batch.first_lsn + i),
                at_ms: item.at_ms,
            },
            thread: batch.thread.clone(),
            kind: item.kind,
            node: item.node,
            status: item.status,
            summary: item.summary,
            payload: item.payload,
            data: item.data,
            correlation: item.correlation,
        });
    }
    Ok(out)
}

/// `events` (in lsn order) cut into the slices the writer frames: each a run of one thread, of
/// at most [`FRAME_EVENTS_MAX`] events and, unless one event alone is larger, about
/// [`FRAME_BODY_TARGET`] body bytes.
pub(crate) fn frames(mut events: &[Event]) -> impl Iterator<Item = &[Event]> {
    std::iter::from_fn(move || {
        if events.is_empty() {
            return None;
        }
        let run = run_len(events).min(FRAME_EVENTS_MAX);
        let mut len = 0;
        let mut bytes = 0;
        while len < run && (len == 0 || bytes + weight(&events[len]) <= FRAME_BODY_TARGET) {
            bytes += weight(&events[len]);
            len += 1;
        }
        let (frame, rest) = events.split_at(len);
        events = rest;
        Some(frame)
    })
}

/// How many of `events`, from the first, are one run: the same thread, seq and lsn one above.
fn run_len(events: &[Event]) -> usize {
    let follows = |a: &Event, b: &Event| {
        a.thread == b.thread
            && a.bookmark.seq.0.checked_add(1) == Some(b.bookmark.seq.0)
            && a.bookmark.lsn.0.checked_add(1) == Some(b.bookmark.lsn.0)
    };
    match events.windows(2).position(|w| !follows(&w[0], &w[1])) {
        Some(i) => i + 1,
        None => events.len(),
    }
}

/// About the bytes an event adds to a frame's body.
fn weight(event: &Event) -> usize {
    24 + event.node.as_ref().map_or(0, String::len)
        + event.summary.len()
        + event.data.len()
        + event.correlation.as_ref().map_or(0, String::len)
        + if event.payload.is_some() { 40 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode_event_batch, encode_event_batch};
    use crate::frame::{self, RecordKind};

    fn event(thread: &str, seq: u64, lsn: u64) -> Event {
        let mut event =
            Event::sample(Bookmark { seq: Seq(seq), lsn: Lsn(lsn), at_ms: seq }, vec![1, 2]);
        event.thread = ThreadId::new(thread).expect("id");
        event
    }

    #[test]
    fn a_frame_stores_its_thread_seq_and_lsn_once() {
        let mut run = vec![event("t", 3, 9), event("t", 4, 10)];
        run[1].correlation = Some("c".into());
        let framed = encode_event_batch(&run).expect("encode");
        let body = frame::decode(&framed, RecordKind::EventBatch).expect("frame");
        // "t", seq 3, lsn 9, two events: at 3, kind 16, no node, status 4, "", no payload,
        // data [1, 2], no correlation; then at 4 ... correlation "c".
        assert_eq!(
            body,
            [
                1, b't', 3, 9, 2, 3, 16, 0, 4, 0, 0, 2, 1, 2, 0, 4, 16, 0, 4, 0, 0, 2, 1, 2, 1, 1,
                b'c'
            ]
        );
        assert_eq!(decode_event_batch(&framed).expect("decode"), run);
    }

    #[test]
    fn a_frame_that_is_not_a_run_is_refused_both_ways() {
        for bad in [
            vec![],
            vec![event("t", 1, 1), event("u", 2, 2)],
            vec![event("t", 1, 1), event("t", 3, 2)],
            vec![event("t", 1, 1), event("t", 2, 3)],
        ] {
            assert!(encode_event_batch(&bad).is_err(), "{bad:?}");
        }
        let bodies: [&[u8]; 4] = [
            &[1, b't', 1, 1, 0],                             // no events
            &[1, b't', 0, 1, 1, 3, 16, 0, 4, 0, 0, 0, 0],    // seq 0
            &[1, b't', 1, 0, 1, 3, 16, 0, 4, 0, 0, 0, 0],    // lsn 0
            &[1, b't', 1, 1, 1, 3, 16, 0, 4, 0, 0, 0, 1, 0], // an empty correlation id
        ];
        for body in bodies {
            let framed = frame::encode(RecordKind::EventBatch, body);
            assert!(decode_event_batch(&framed).is_err(), "{body:?}");
        }
        let near_max = frame::encode(
            RecordKind::EventBatch,
            &[
                1, b't', 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 2, 3, 16,
                0, 4, 0, 0, 0, 0, 3, 16, 0, 4, 0, 0, 0, 0,
            ],
        );
        assert!(decode_event_batch(&near_max).is_err(), "lsns past u64::MAX");
    }

    #[test]
    fn the_writer_cuts_runs_by_thread_count_and_size() {
        let mut log: Vec<Event> = (1..=70).map(|i| event("t", i, i)).collect();
        log.push(event("u", 1, 71));
        log.push(event("t", 71, 72));
        let lens: Vec<usize> = frames(&log).map(<[Event]>::len).collect();
        assert_eq!(lens, [FRAME_EVENTS_MAX, 70 - FRAME_EVENTS_MAX, 1, 1]);
        let mut big: Vec<Event> = (1..=3).map(|i| event("t", i, i)).collect();
        big[0].data = vec![0; FRAME_BODY_TARGET];
        big[1].data = vec![0; FRAME_BODY_TARGET / 2];
        let lens: Vec<usize> = frames(&big).map(<[Event]>::len).collect();
        assert_eq!(lens, [1, 2], "one large event alone, then the rest");
    }
}
