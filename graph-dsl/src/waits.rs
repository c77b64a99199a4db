//! Waits with a deadline: the first of several signals, children's ends or a timer
//! ([`Ctx::select`], [`Ctx::recv_timeout`]), decided once and recorded, so a node that runs again (after a crash,
//! a wake, in a replay or a fork) takes the same branch (`docs/signals.md`).
//!
//! The engine records two values for a select: where it starts (the names, the children and
//! the deadline, which a parked thread's wakers read) and what it took (the signal, the child's
//! end, or the deadline). A signal not taken stays in the inbox for the next receive, and a
//! child not taken can still be joined: when another arm wins, nothing is lost.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::child::{ChildEnded, ChildHandle};
use crate::limits::SELECT_SIGNALS_MAX;
use crate::{Ctx, NodeError, SignalName};

/// What a [`Ctx::select`] waits for: signals by name, children's ends, and at most one
/// deadline.
///
/// # Examples
/// ```
/// let wait = cairn_dsl::Select::new().signal("approve").signal("reject").timeout_ms(60_000);
/// assert_eq!(wait.signals(), ["approve", "reject"]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Select {
    signals: Vec<String>,
    children: Vec<String>,
    deadline: Option<Deadline>,
}

/// When a select stops waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deadline {
    /// This long after the select's (recorded) clock reading.
    AfterMs(u64),
    /// At this time, ms since the epoch.
    AtMs(u64),
}

impl Select {
    /// A select that waits for nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also waits for the next signal named `name`.
    #[must_use]
    pub fn signal(mut self, name: impl Into<String>) -> Self {
        self.signals.push(name.into());
        self
    }

    /// Also waits for the end of `child` (started by this thread with [`Ctx::start_child`]).
    /// A child that has ended when the select decides wins over a signal (the first listed of
    /// several ended children); a child not taken runs on and can be joined later.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{ChildHandle, Replace, Select};
    /// let report: ChildHandle<Replace<u64>> = ChildHandle::from_id("t/n@1/child-1");
    /// let wait = Select::new().child(&report).signal("cancel");
    /// assert_eq!(wait.children(), ["t/n@1/child-1"]);
    /// ```
    #[must_use]
    pub fn child<S>(mut self, child: &ChildHandle<S>) -> Self {
        self.children.push(child.id().to_owned());
        self
    }

    /// Gives up `ms` after the select starts (its clock reading is recorded, so the deadline
    /// is the same however often the node runs again).
    #[must_use]
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.deadline = Some(Deadline::AfterMs(ms));
        self
    }

    /// Gives up at the time `at_ms` (ms since the epoch, on the engine's clock).
    #[must_use]
    pub fn until_ms(mut self, at_ms: u64) -> Self {
        self.deadline = Some(Deadline::AtMs(at_ms));
        self
    }

    /// The signal names waited for, in the order given.
    pub fn signals(&self) -> &[String] {
        &self.signals
    }

    /// The ids of the children whose ends are waited for, in the order given.
    pub fn children(&self) -> &[String] {
        &self.children
    }
}

/// What a [`Ctx::select`] took.
#[derive(Debug, Clone, PartialEq)]
pub enum Selected {
    /// A signal: the first sent of those waited for (lowest inbox number) that was sent by
    /// the deadline, or any one while the deadline has not passed.
    Signal {
        /// Its name.
        name: String,
        /// Its value, as sent.
        value: Value,
    },
    /// A child waited for ended (how, as `Ctx::join_child_ended` gives it). The select counts
    /// as that child's join.
    Child(ChildEnded),
    /// The deadline passed with no signal waited for sent by then.
    Timeout,
}

impl Ctx {
    /// Waits for the first of several things: a signal of one of the names, a child's end, or
    /// the deadline. The outcome is recorded as one value of the task: a node that runs again
    /// takes the same branch, a replay and a fork too. While nothing has happened, the thread
    /// parks durably (Sleeping until the deadline, or WaitingInput without one) and a signal of
    /// any of the names wakes it; a select that also waits for a running child waits in the
    /// runner instead (driving the child as [`Ctx::join_child`] does). When it decides, an
    /// ended child wins over a signal, and a signal over the deadline. A signal not taken
    /// stays in the inbox for the next receive; a child not taken can still be joined.
    ///
    /// # Errors
    /// [`NodeError::Sleeping`] or [`NodeError::WaitingSignal`] while it waits (propagate them
    /// with `?`); [`NodeError::Codec`] for a select with nothing to wait for or over
    /// [`SELECT_SIGNALS_MAX`] names or children; [`NodeError::Failed`] for a child this
    /// thread did not start.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeError, Select, Selected};
    /// async fn decide(ctx: &Ctx) -> Result<&'static str, NodeError> {
    ///     let wait = Select::new().signal("approve").signal("reject").timeout_ms(7 * 86_400_000);
    ///     Ok(match ctx.select(wait).await? {
    ///         Selected::Signal { name, .. } if name == "approve" => "approved",
    ///         Selected::Signal { .. } => "rejected",
    ///         Selected::Child(_) | Selected::Timeout => "escalated",
    ///     })
    /// }
    /// ```
    pub async fn select(&self, select: Select) -> Result<Selected, NodeError> {
        let until_ms = self.deadline_ms(&select)?;
        if !select.children.is_empty() {
            return self.inner().select_children(select.signals, select.children, until_ms).await;
        }
        let chosen = self.inner().select(select.signals, until_ms).await?;
        Ok(chosen.map_or(Selected::Timeout, |(name, value)| Selected::Signal { name, value }))
    }

    /// Receives the next signal named `name` as an `R`, or `None` once `timeout_ms` has passed
    /// since the call first ran without one sent: "approve within 7 days, else escalate". A
    /// value that is not an `R` is set aside as [`Ctx::recv`] does, and the wait goes on to
    /// the same deadline.
    ///
    /// # Errors
    /// [`NodeError::Sleeping`] while it waits (propagate it with `?`: the thread parks until
    /// the signal is sent or the deadline passes, whichever comes first).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeError};
    /// async fn approval(ctx: &Ctx) -> Result<bool, NodeError> {
    ///     let week = 7 * 86_400_000;
    ///     Ok(ctx.recv_timeout::<bool>("approval", week).await?.unwrap_or(false))
    /// }
    /// ```
    pub async fn recv_timeout<R: DeserializeOwned>(
        &self,
        name: impl SignalName<R>,
        timeout_ms: u64,
    ) -> Result<Option<R>, NodeError> {
        let name = name.signal_name().to_owned();
        let until_ms = self.now_ms().saturating_add(timeout_ms);
        // Bounded as `recv`'s loop: each turn receives a signal.
        loop {
            let Some((_, value)) = self.inner().select(vec![name.clone()], Some(until_ms)).await?
            else {
                return Ok(None);
            };
            match R::deserialize(&value) {
                Ok(received) => return Ok(Some(received)),
                Err(e) => {
                    let expected = crate::signals::short_type_name(std::any::type_name::<R>());
                    self.inner().signal_set_aside(&name, &format!("not a {expected}: {e}"));
                }
            }
        }
    }

    /// The absolute deadline of `select`, its shape checked.
    fn deadline_ms(&self, select: &Select) -> Result<Option<u64>, NodeError> {
        if select.signals.is_empty() && select.children.is_empty() && select.deadline.is_none() {
            return Err(NodeError::Codec { detail: "a select waits for nothing".into() });
        }
        for (what, n) in [("signals", select.signals.len()), ("children", select.children.len())] {
            if n > SELECT_SIGNALS_MAX {
                return Err(NodeError::Codec {
                    detail: format!(
                        "limit SELECT_SIGNALS_MAX exceeded: a select names {n} {what}, at most {SELECT_SIGNALS_MAX}"
                    ),
                });
            }
        }
        Ok(match select.deadline {
            Some(Deadline::AfterMs(ms)) => Some(self.now_ms().saturating_add(ms)),
            Some(Deadline::AtMs(at)) => Some(at),
            None => None,
        })
    }
}
