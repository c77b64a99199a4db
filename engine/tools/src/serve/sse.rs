//! `GET /api/threads/{id}/events`: a page of events after a seq, or with `follow=1` the log as
//! Server-Sent Events (one `event` per log event, its seq as the SSE id; first a `pruned` event
//! naming the first available seq when the events asked for were pruned), live until the thread
//! reaches a terminal status or the server stops. Following polls the store every
//! [`FOLLOW_POLL_MS`]: the record is read before the events, and a thread's last events and its
//! terminal status are written in one batch, so a follower that sees the status terminal and no
//! event after its bookmark has seen the whole log.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use cairn_storage::ThreadRecord;
use serde_json::{Value, json};

use super::app::{App, Params, Segment, reject};
use super::params::{EventsParams, Reject};
use super::threads::record_of;
use crate::debug::rows::EventsPage;
use crate::debug::views::{events_after, sealed_keys};

/// How often a follower looks for new events: low enough for a person watching, and a read of
/// one thread record and an empty range costs little.
pub const FOLLOW_POLL_MS: u64 = 200;

pub(super) async fn events(
    State(app): State<App>,
    Params(p): Params<EventsParams>,
    Segment(id): Segment,
) -> Result<Response, Reject> {
    let (page, last, record, sealed) = read(app.clone(), id.clone(), p.clone(), p.since).await?;
    let terminal = record.status.is_terminal();
    if !p.follow {
        // The status read before the page, and where the stored log starts (a pruned thread's
        // is after 1): what a client paging or polling the log needs to know when to stop.
        let (status, first_seq) = (record.status.as_str().to_owned(), record.first_seq.0);
        let answer = EventsPage::<Value> {
            events: page,
            first_seq,
            next_since: last,
            sealed,
            status,
            thread: id,
        };
        return Ok(Json(answer).into_response());
    }
    let done = terminal && page.is_empty();
    let pruned = pruned_notice(&record, p.since);
    let follow = Follow { app, id, p, pruned, buffer: page.into(), last, done };
    let stream = futures::stream::unfold(follow, Follow::next);
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

/// A page of events after `after` (pruned ones skipped), the last seq read, the thread's
/// record as read before them, and the key ids of the bodies shown as placeholders.
async fn read(
    app: App,
    id: String,
    p: EventsParams,
    after: u64,
) -> Result<(Vec<Value>, u64, ThreadRecord, Vec<String>), Reject> {
    let record = record_of(&app.engine, &id).await?;
    let after = after.max(record.first_seq.0.saturating_sub(1));
    let (rows, last) = events_after(&app.engine, &record.id, after, &p.kinds, p.limit)
        .await
        .map_err(|e| reject(e, "since"))?;
    let sealed = sealed_keys(&rows);
    // A public endpoint redacts whatever the query says (a stream is no body the access layer
    // can redact whole).
    let page = rows.iter().map(|row| app.answer(json!(row), p.redact)).collect();
    Ok((page, last, record, sealed))
}

/// The first event of a stream asked to start before what a prune kept: a `pruned` event
/// naming the first available seq, since the events asked for will never come. `None` for a
/// `since` at or after the start of the stored log.
fn pruned_notice(record: &ThreadRecord, since: u64) -> Option<Event> {
    let first = record.first_seq.0;
    if since >= first.saturating_sub(1) {
        return None;
    }
    let data = json!({
        "thread": record.id.as_str(),
        "first_seq": first,
        "message": format!(
            "the events of thread {} before seq {first} were pruned; the first available seq \
             is {first}",
            record.id
        ),
    });
    Some(Event::default().event("pruned").data(data.to_string()))
}

struct Follow {
    app: App,
    id: String,
    p: EventsParams,
    /// Said first: the events asked for were pruned ([`pruned_notice`]).
    pruned: Option<Event>,
    buffer: VecDeque<Value>,
    last: u64,
    /// A read after the thread became terminal found no more events: none will follow.
    done: bool,
}

impl Follow {
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Self)> {
        if let Some(notice) = self.pruned.take() {
            return Some((Ok(notice), self));
        }
        loop {
            if let Some(e) = self.buffer.pop_front() {
                let seq = e["seq"].as_u64().unwrap_or_default();
                let event = Event::default().id(seq.to_string()).event("event").data(e.to_string());
                return Some((Ok(event), self));
            }
            if self.done || self.app.stop.is_cancelled() {
                return None;
            }
            match read(self.app.clone(), self.id.clone(), self.p.clone(), self.last).await {
                Ok((page, last, record, _)) => {
                    let terminal = record.status.is_terminal();
                    // Ended only once a read after the terminal status finds nothing more.
                    self.done = terminal && page.is_empty();
                    if page.is_empty() && !terminal {
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_millis(FOLLOW_POLL_MS)) => {}
                            () = self.app.stop.cancelled() => return None,
                        }
                    }
                    self.buffer.extend(page);
                    self.last = last;
                }
                Err(r) => {
                    self.done = true;
                    let data = json!({"error": r.error, "field": r.field}).to_string();
                    return Some((Ok(Event::default().event("error").data(data)), self));
                }
            }
        }
    }
}
