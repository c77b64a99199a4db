//! Events: the append-only record of what happened on a thread.
//!
//! Invariant: a stored [`Event`] carries its own bookmark, so every read can check that the key it
//! was found under agrees with the record (see `codec`).

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::{Bookmark, PayloadRef, ThreadId};
use crate::limits::{
    self, CORRELATION_ID_BYTES_MAX, EVENT_DATA_BYTES_MAX, NODE_NAME_BYTES_MAX, SUMMARY_BYTES_MAX,
};
use crate::wire_enum::wire_enum;

wire_enum! {
    /// What an event records. Discriminants are stored on disk: never reuse or renumber one.
    /// Retired, never written by any release and never to be reused: 23 (step started), 25
    /// (values recorded), 27 (forked), 28 (migrated), 29 (error), 30 (usage recorded).
    ///
    /// Storage keeps the kind beside each event (not only inside the engine's JSON body) so that
    /// listings and filters (`--kind`, channels, verify's counts) need not decode bodies; the
    /// engine's `Body::kind` is the one place that decides an event's kind.
    pub enum EventKind: u16, from_u16 {
        /// A thread was created.
        ThreadCreated = 1 => "thread_created",
        /// The thread's status changed.
        StatusChanged = 2 => "status_changed",
        /// A node started.
        NodeStarted = 3 => "node_started",
        /// A node completed.
        NodeCompleted = 4 => "node_completed",
        /// A node failed.
        NodeFailed = 5 => "node_failed",
        /// The thread's state was updated.
        StateUpdated = 6 => "state_updated",
        /// A tool was called.
        ToolCalled = 7 => "tool_called",
        /// A tool returned.
        ToolReturned = 8 => "tool_returned",
        /// A retry was scheduled.
        RetryScheduled = 9 => "retry_scheduled",
        /// Human input was requested.
        InputRequested = 10 => "input_requested",
        /// Human input was received.
        InputReceived = 11 => "input_received",
        /// A checkpoint was created.
        CheckpointCreated = 12 => "checkpoint_created",
        /// A budget is close to its limit.
        BudgetWarning = 13 => "budget_warning",
        /// A budget was exceeded.
        BudgetExceeded = 14 => "budget_exceeded",
        /// Progress was reported.
        Progress = 15 => "progress",
        /// A conversation message.
        Message = 16 => "message",
        /// A resource lock was acquired.
        LockAcquired = 17 => "lock_acquired",
        /// A resource lock was released.
        LockReleased = 18 => "lock_released",
        /// A timer was set.
        TimerSet = 19 => "timer_set",
        /// A timer fired.
        TimerFired = 20 => "timer_fired",
        /// The thread was cancelled.
        Cancelled = 21 => "cancelled",
        /// The thread timed out.
        TimedOut = 22 => "timed_out",
        /// A step completed.
        StepCompleted = 24 => "step_completed",
        /// The thread was recovered after a restart.
        Recovered = 26 => "recovered",
        /// An application-defined event.
        Custom = 31 => "custom",
    }
}

wire_enum! {
    /// How an event turned out. Discriminants are stored on disk: never reuse one.
    pub enum EventStatus: u8, from_u8 {
        /// It worked.
        Success = 1 => "success",
        /// It failed.
        Failure = 2 => "failure",
        /// It worked with a warning.
        Warning = 3 => "warning",
        /// Information only.
        Info = 4 => "info",
    }
}

/// An event to append; the writer assigns its [`Bookmark`] (seq, lsn) at commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewEvent {
    /// The thread it belongs to (must have a [`ThreadRecord`](crate::ThreadRecord)).
    pub thread: ThreadId,
    /// What happened.
    pub kind: EventKind,
    /// The node it concerns, if any.
    pub node: Option<String>,
    /// How it turned out.
    pub status: EventStatus,
    /// One human line.
    pub summary: String,
    /// A large payload stored in the payload table, if any.
    pub payload: Option<PayloadRef>,
    /// Kind-specific bytes, opaque to storage (the engine puts JSON here).
    #[serde(with = "crate::bytes_serde")]
    pub data: Vec<u8>,
    /// Engine clock time, in ms.
    pub at_ms: u64,
    /// The correlation id this event carries, if any: the store indexes it database-wide
    /// ([`ThreadLog::read_correlated`](crate::ThreadLog::read_correlated); `docs/format.md` §2.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation: Option<String>,
}

impl NewEvent {
    /// Checks this event against [`crate::limits`].
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] naming the first bound exceeded.
    pub fn check_limits(&self) -> Result<(), Error> {
        if let Some(node) = &self.node {
            limits::check("NODE_NAME_BYTES_MAX", node.len(), NODE_NAME_BYTES_MAX)?;
        }
        limits::check("SUMMARY_BYTES_MAX", self.summary.len(), SUMMARY_BYTES_MAX)?;
        if let Some(correlation) = &self.correlation {
            check_correlation(correlation)?;
        }
        limits::check("EVENT_DATA_BYTES_MAX", self.data.len(), EVENT_DATA_BYTES_MAX)
    }

    /// Bytes this event contributes to [`crate::limits::BATCH_BYTES_MAX`].
    pub(crate) fn weight(&self) -> usize {
        self.data.len() + self.summary.len() + self.node.as_ref().map_or(0, String::len)
    }
}

/// A stored event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Where it sits (seq, lsn, time).
    pub bookmark: Bookmark,
    /// The thread it belongs to.
    pub thread: ThreadId,
    /// What happened.
    pub kind: EventKind,
    /// The node it concerns, if any.
    pub node: Option<String>,
    /// How it turned out.
    pub status: EventStatus,
    /// One human line.
    pub summary: String,
    /// A large payload stored in the payload table, if any.
    pub payload: Option<PayloadRef>,
    /// Kind-specific bytes.
    #[serde(with = "crate::bytes_serde")]
    pub data: Vec<u8>,
    /// The correlation id it carries, if any (a kind-7 record; `codec` encodes it after the
    /// fields above, so an event without one encodes exactly as in format v1).
    #[serde(skip)]
    pub correlation: Option<String>,
}

/// An [`Event`]'s fields as its record holds them, borrowed from the event or from the
/// [`NewEvent`] it is made of (`codec::encode_event`, `codec::encode_new_event`): a stored
/// event's bytes without a copy of the event. Serialized as `Event` is, field for field (a test
/// holds the two encodings equal).
#[derive(Serialize)]
pub(crate) struct EventView<'a> {
    pub bookmark: Bookmark,
    pub thread: &'a ThreadId,
    pub kind: EventKind,
    pub node: Option<&'a str>,
    pub status: EventStatus,
    pub summary: &'a str,
    pub payload: Option<PayloadRef>,
    #[serde(serialize_with = "crate::bytes_serde::serialize")]
    pub data: &'a [u8],
}

impl<'a> EventView<'a> {
    /// A stored event's fields.
    pub(crate) fn of_event(event: &'a Event) -> EventView<'a> {
        EventView {
            bookmark: event.bookmark,
            thread: &event.thread,
            kind: event.kind,
            node: event.node.as_deref(),
            status: event.status,
            summary: &event.summary,
            payload: event.payload,
            data: &event.data,
        }
    }

    /// `new` at `bookmark`.
    pub(crate) fn of(new: &'a NewEvent, bookmark: Bookmark) -> EventView<'a> {
        EventView {
            bookmark,
            thread: &new.thread,
            kind: new.kind,
            node: new.node.as_deref(),
            status: new.status,
            summary: &new.summary,
            payload: new.payload,
            data: &new.data,
        }
    }
}

/// Checks a correlation id: 1 to [`CORRELATION_ID_BYTES_MAX`] bytes, no control characters
/// (as [`limits::check_text`]).
pub(crate) fn check_correlation(correlation: &str) -> Result<(), Error> {
    let max = CORRELATION_ID_BYTES_MAX;
    limits::check_text("CORRELATION_ID_BYTES_MAX", max, "correlation id", correlation)
}

impl Event {
    /// A message event of thread `t` at `bookmark` carrying `data` (unit tests).
    #[cfg(test)]
    pub(crate) fn sample(bookmark: crate::ids::Bookmark, data: Vec<u8>) -> Event {
        Event {
            bookmark,
            thread: ThreadId::new("t").expect("id"),
            kind: EventKind::Message,
            node: None,
            status: EventStatus::Info,
            summary: String::new(),
            payload: None,
            data,
            correlation: None,
        }
    }

    /// The stored event for `new` at `seq`/`lsn`.
    pub(crate) fn from_new(new: NewEvent, seq: crate::ids::Seq, lsn: crate::ids::Lsn) -> Event {
        Event {
            bookmark: Bookmark { seq, lsn, at_ms: new.at_ms },
            thread: new.thread,
            kind: new.kind,
            node: new.node,
            status: new.status,
            summary: new.summary,
            payload: new.payload,
            data: new.data,
            correlation: new.correlation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_repr_and_name() {
        for kind in EventKind::ALL {
            assert_eq!(EventKind::from_u16(kind.to_repr()), Some(*kind));
            assert_eq!(kind.as_str().parse::<EventKind>().ok(), Some(*kind));
        }
        assert_eq!(EventKind::ALL.len(), 25);
        for retired in [23, 25, 27, 28, 29, 30] {
            assert_eq!(EventKind::from_u16(retired), None, "{retired} is retired");
        }
        assert_eq!(EventKind::from_u16(0), None);
        assert_eq!(EventKind::from_u16(32), None);
        assert_eq!(EventKind::NodeStarted.as_str(), "node_started");
        assert!("nope".parse::<EventKind>().is_err());
    }

    #[test]
    fn statuses_round_trip() {
        for status in EventStatus::ALL {
            assert_eq!(EventStatus::from_u8(status.to_repr()), Some(*status));
            assert_eq!(status.as_str().parse::<EventStatus>().ok(), Some(*status));
        }
    }
}
