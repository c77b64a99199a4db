//! The three-channel view of the event stream: progress for people watching a task,
//! control for whoever steers threads, monitor for operators and tools.

use cairn_storage::EventKind;
use serde::{Deserialize, Serialize};

use crate::api::handle::EventStream;
use crate::core::codec::Recorded;
use crate::error::Error;

/// A channel of the event stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    /// What a user watching the task wants: progress, conversation, the outcome.
    Progress,
    /// What changes the course of a thread: status changes, input requests and replies,
    /// timers, cancellation, budgets, locks.
    Control,
    /// Everything else an operator traces: nodes, tools, retries, checkpoints, recovery.
    Monitor,
}

impl Channel {
    /// The channel an event kind belongs to (every kind belongs to exactly one).
    ///
    /// # Examples
    /// ```
    /// use cairn::Channel;
    /// use cairn::storage::EventKind;
    /// assert_eq!(Channel::of(EventKind::Progress), Channel::Progress);
    /// assert_eq!(Channel::of(EventKind::InputRequested), Channel::Control);
    /// assert_eq!(Channel::of(EventKind::ToolCalled), Channel::Monitor);
    /// ```
    pub fn of(kind: EventKind) -> Channel {
        use EventKind as K;
        match kind {
            K::Progress | K::Message => Channel::Progress,
            K::StatusChanged
            | K::InputRequested
            | K::InputReceived
            | K::TimerSet
            | K::TimerFired
            | K::Cancelled
            | K::TimedOut
            | K::BudgetWarning
            | K::BudgetExceeded
            | K::LockAcquired
            | K::LockReleased => Channel::Control,
            _ => Channel::Monitor,
        }
    }
}

impl EventStream {
    /// The next event of `channel`, skipping the others.
    ///
    /// # Errors
    /// As [`EventStream::next`].
    pub async fn next_in(&mut self, channel: Channel) -> Result<Recorded, Error> {
        loop {
            let event = self.next().await?;
            if Channel::of(event.body.kind()) == channel {
                return Ok(event);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_channel_and_each_channel_is_used() {
        let mut seen = std::collections::BTreeSet::new();
        for kind in EventKind::ALL {
            seen.insert(format!("{:?}", Channel::of(*kind)));
        }
        assert_eq!(seen.len(), 3, "{seen:?}");
    }
}
