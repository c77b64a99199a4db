//! A select in the live run (`ctx.select`, `ctx.recv_timeout`; records in `core/select.rs`):
//! its start record drawn like any value, then its outcome, read back when the task runs again
//! or decided now from the children's records, the inbox and the clock, under the step's
//! signal cursor.
//!
//! The rule when it decides: the first listed child that has ended wins, else the first signal
//! sent of those waited for, else the deadline if it has passed. With nothing to take, the
//! select parks durably: asleep until its deadline, else waiting for a signal; a signal of its
//! names, the end of one of its children (`exec/signals.rs` `wake_selecting_parent`) or the
//! deadline wakes the thread, and the task decides again.

use cairn_dsl::{NodeError, Selected};
use cairn_storage::{Signal, ThreadId};
use futures::future::BoxFuture;
use serde_json::Value;

use std::sync::Mutex;

use super::{LiveNodeContext, TaskState, lock_state};
use crate::core::drawn::Drawn;
use crate::core::select::{self, Outcome};
use crate::exec::env::ThreadEnv;

/// What a select answers: the signal taken (name, value), or `None` for the deadline.
type Chosen = Option<(String, Value)>;

impl LiveNodeContext {
    /// The task's next select of `names` until `until_ms`: see [`cairn_dsl::NodeContext::select`].
    pub(super) fn select_wait(
        &self,
        names: Vec<String>,
        until_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<Chosen, NodeError>> {
        let selected = self.select_any(names, Vec::new(), until_ms);
        Box::pin(async move {
            Ok(match selected.await? {
                Selected::Signal { name, value } => Some((name, value)),
                Selected::Child(_) | Selected::Timeout => None,
            })
        })
    }

    /// The task's next select of `names` and the ends of `children` until `until_ms`: see
    /// [`cairn_dsl::NodeContext::select_children`].
    pub(super) fn select_any(
        &self,
        names: Vec<String>,
        children: Vec<String>,
        until_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<Selected, NodeError>> {
        let fresh_start = select::start_with_children(&names, &children, until_ms);
        let recorded =
            self.value(Drawn::Wait, |_| Drawn::Wait.read(&fresh_start).unwrap_or_default());
        if select::started(&recorded) != Some((names.clone(), until_ms))
            || select::started_children(&recorded).as_ref() != Some(&children)
        {
            let detail = format!(
                "the code selects {names:?} and children {children:?} until {until_ms:?} where a select of {recorded} was recorded"
            );
            self.nondeterminism(detail.clone());
            return Box::pin(std::future::ready(Err(NodeError::Nondeterminism { detail })));
        }
        let replayed = {
            let mut st = self.state();
            st.draws += 1;
            crate::core::patch::skip(&mut st.replay_values);
            st.replay_values.pop_front()
        };
        if let Some(recorded) = replayed {
            let outcome = self.replayed_outcome(&recorded, &names, &children);
            return Box::pin(std::future::ready(outcome.and_then(|o| taken(&self.st, o))));
        }
        let fired = self.state().suspensions.unconsumed_timers();
        let (env, st) = (self.env.clone(), self.st.clone());
        Box::pin(async move {
            let ids = children
                .iter()
                .map(|c| ThreadId::new(c.clone()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| NodeError::fatal(e.to_string()))?;
            let wait = Wait { names: &names, children: &children, ids: &ids, until_ms, fired };
            let outcome = decided(&env, &wait).await?;
            {
                let mut state = lock_state(&st);
                state.suspensions.consume_timers(fired);
                state.new_values.push(outcome.record());
            }
            taken(&st, outcome)
        })
    }

    /// The recorded outcome of a select of `names` and `children`, its timers consumed.
    fn replayed_outcome(
        &self,
        recorded: &Value,
        names: &[String],
        children: &[String],
    ) -> Result<Outcome, NodeError> {
        let outcome = Outcome::read(recorded).and_then(|o| match (&o.signal, &o.child) {
            (Some((name, _, _)), _) if !names.contains(name) => {
                Err(format!("a select that took signal {name:?}"))
            }
            (_, Some(end)) if !children.contains(&end.child) => {
                Err(format!("a select that took the end of child {:?}", end.child))
            }
            _ => Ok(o),
        });
        match outcome {
            Ok(o) => {
                self.state().suspensions.consume_timers(o.timers);
                Ok(o)
            }
            Err(was) => {
                let detail = format!(
                    "the code selects {names:?} and children {children:?} where {was} was recorded"
                );
                self.nondeterminism(detail.clone());
                Err(NodeError::Nondeterminism { detail })
            }
        }
    }
}

/// What a select's outcome gives the node; a child taken counts as its join in this task.
fn taken(st: &Mutex<TaskState>, outcome: Outcome) -> Result<Selected, NodeError> {
    if let Some(end) = outcome.child {
        if !lock_state(st).joined.insert(end.child.clone()) {
            return Err(NodeError::fatal(format!("child thread {} is joined twice", end.child)));
        }
        return Ok(Selected::Child(end.ended()));
    }
    Ok(match outcome.signal {
        Some((name, _, value)) => Selected::Signal { name, value },
        None => Selected::Timeout,
    })
}

/// A fresh select being decided.
struct Wait<'a> {
    names: &'a [String],
    children: &'a [String],
    ids: &'a [ThreadId],
    until_ms: Option<u64>,
    /// Durable timers that fired for it.
    fired: u32,
}

/// Decides a fresh select: now if something is there to take, else the park (durable: a
/// signal of its names, the end of one of its children or its deadline wakes the thread, and
/// the task decides again when it runs again).
async fn decided(env: &ThreadEnv, w: &Wait<'_>) -> Result<Outcome, NodeError> {
    let timed_out = w.fired > 0 || w.until_ms.is_some_and(|u| env.clock.now_ms() >= u);
    if let Some(outcome) = look(env, w, timed_out).await? {
        return Ok(outcome);
    }
    Err(select::parked(w.names, w.children, w.until_ms))
}

/// One look: the first listed ended child, else the first signal (only one sent by the
/// deadline once it passed), else the deadline; `None`: nothing to take yet.
async fn look(
    env: &ThreadEnv,
    w: &Wait<'_>,
    timed_out: bool,
) -> Result<Option<Outcome>, NodeError> {
    let Wait { names, ids, until_ms, fired, .. } = *w;
    for id in ids {
        if let Some(end) = env.children.clone().ended(id.clone()).await? {
            return Ok(Some(Outcome { signal: None, child: Some(end), timers: fired }));
        }
    }
    // After the deadline, only a signal sent by then is taken; a later one stays in the inbox
    // for the next receive.
    let accept = |s: &Signal| !timed_out || until_ms.is_some_and(|u| s.at_ms <= u);
    let taken = env.signals.take_first(&env.thread, names, accept).await;
    Ok(match taken.map_err(|e| env.stop.node_error(e))? {
        Some(signal) => {
            Some(Outcome { signal: Some(decoded(signal)?), child: None, timers: fired })
        }
        None if timed_out => Some(Outcome { signal: None, child: None, timers: fired }),
        None => None,
    })
}

/// A stored signal's name, number and value.
fn decoded(signal: Signal) -> Result<(String, u64, Value), NodeError> {
    let value: Value = serde_json::from_slice(&signal.data).map_err(|e| {
        NodeError::fatal(format!("signal {} of {:?} is not JSON: {e}", signal.n, signal.name))
    })?;
    Ok((signal.name, signal.n, value))
}
