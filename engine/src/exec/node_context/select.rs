//! A select in the live run (`ctx.select`, `ctx.recv_timeout`; records in `core/select.rs`):
//! its start record drawn like any value, then its outcome, read back when the task runs again
//! or decided now from the inbox and the clock, under the step's signal cursor.

use cairn_dsl::NodeError;
use cairn_storage::Signal;
use futures::future::BoxFuture;
use serde_json::Value;

use super::{LiveNodeContext, lock_state};
use crate::core::drawn::Drawn;
use crate::core::select::{self, Outcome};

/// What a select answers: the signal taken (name, value), or `None` for the deadline.
type Chosen = Option<(String, Value)>;

impl LiveNodeContext {
    /// The task's next select of `names` until `until_ms`: see [`cairn_dsl::NodeContext::select`].
    pub(super) fn select_wait(
        &self,
        names: Vec<String>,
        until_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<Chosen, NodeError>> {
        let fresh_start = select::start(&names, until_ms);
        let recorded =
            self.value(Drawn::Wait, |_| Drawn::Wait.read(&fresh_start).unwrap_or_default());
        if select::started(&recorded) != Some((names.clone(), until_ms)) {
            let detail = format!(
                "the code selects {names:?} until {until_ms:?} where a select of {recorded} was recorded"
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
            return Box::pin(std::future::ready(self.replayed_outcome(&recorded, &names)));
        }
        let fired = self.state().suspensions.unconsumed_timers();
        let (env, st) = (self.env.clone(), self.st.clone());
        Box::pin(async move {
            let timed_out = fired > 0 || until_ms.is_some_and(|u| env.clock.now_ms() >= u);
            // After the deadline, only a signal sent by then is taken; a later one stays in
            // the inbox for the next receive.
            let accept = |s: &Signal| !timed_out || until_ms.is_some_and(|u| s.at_ms <= u);
            let taken = env.signals.take_first(&env.thread, &names, accept).await;
            let signal = match taken.map_err(|e| env.stop.node_error(e))? {
                Some(signal) => Some(decoded(signal)?),
                None if timed_out => None,
                None => return Err(select::parked(&names, until_ms)),
            };
            let outcome = Outcome { signal, timers: fired };
            let mut state = lock_state(&st);
            state.suspensions.consume_timers(fired);
            state.new_values.push(outcome.record());
            Ok(outcome.signal.map(|(name, _, value)| (name, value)))
        })
    }

    /// The recorded outcome of a select of `names`, its timers consumed.
    fn replayed_outcome(&self, recorded: &Value, names: &[String]) -> Result<Chosen, NodeError> {
        let outcome = Outcome::read(recorded).and_then(|o| match &o.signal {
            Some((name, _, _)) if !names.contains(name) => {
                Err(format!("a select that took signal {name:?}"))
            }
            _ => Ok(o),
        });
        match outcome {
            Ok(o) => {
                self.state().suspensions.consume_timers(o.timers);
                Ok(o.signal.map(|(name, _, value)| (name, value)))
            }
            Err(was) => {
                let detail = format!("the code selects {names:?} where {was} was recorded");
                self.nondeterminism(detail.clone());
                Err(NodeError::Nondeterminism { detail })
            }
        }
    }
}

/// A stored signal's name, number and value.
fn decoded(signal: Signal) -> Result<(String, u64, Value), NodeError> {
    let value: Value = serde_json::from_slice(&signal.data).map_err(|e| {
        NodeError::fatal(format!("signal {} of {:?} is not JSON: {e}", signal.n, signal.name))
    })?;
    Ok((signal.name, signal.n, value))
}
