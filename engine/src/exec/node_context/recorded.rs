//! The values a task records as it draws them (clock readings, random numbers, ids, and the
//! signals it receives): the recorded one when the task runs again, else a fresh one, recorded;
//! and the report of a received signal the node set aside.

use cairn_dsl::NodeError;
use futures::future::BoxFuture;
use serde_json::Value;

use super::LiveNodeContext;
use crate::core::drawn::{Drawn, task_random};

impl LiveNodeContext {
    /// Takes the next recorded value, or records `fresh(index)`, where `index` is the value's
    /// position in the task's sequence of values (so a fresh value after replayed ones is the
    /// same one an uninterrupted run would have drawn there).
    /// A recorded value of another kind is nondeterminism (the code draws in another order):
    /// reported, and read as null, which the caller then refuses as its type.
    pub(super) fn value(&self, kind: Drawn, fresh: impl FnOnce(u64) -> Value) -> Value {
        let index = {
            let mut st = self.state();
            st.draws += 1;
            crate::core::patch::skip(&mut st.replay_values);
            if let Some(recorded) = st.replay_values.pop_front() {
                return kind.read(&recorded).unwrap_or_else(|was| {
                    st.nondeterminism.get_or_insert(format!(
                        "the code draws a {} where a {was} value was recorded",
                        kind.name()
                    ));
                    Value::Null
                });
            }
            st.draws
        };
        let v = fresh(index);
        self.state().new_values.push(kind.record(v.clone()));
        v
    }

    /// A fresh random number: the task's `n`th draw, a function of the thread's seed and the
    /// task's identity (recorded like any value, so replay never depends on the seed).
    pub(super) fn fresh_random(&self, index: u64, sub: u64) -> u64 {
        task_random(
            self.env.seed,
            &self.env.thread,
            self.step,
            &self.key.to_string(),
            self.attempt,
            index * 2 + sub,
        )
    }

    /// The task's next receive of a signal named `name`: the recorded one when the task runs
    /// again, else the next in the inbox (recorded as a value of the task). Nothing there:
    /// `None` for `try_recv` (recorded too), a suspension for `recv` (`wait`). The draw is
    /// counted, and a recorded receipt taken, when this is called; the inbox read is awaited.
    pub(super) fn receive(
        &self,
        name: &str,
        wait: bool,
    ) -> BoxFuture<'static, Result<Option<Value>, NodeError>> {
        let recorded = {
            let mut st = self.state();
            st.draws += 1;
            crate::core::patch::skip(&mut st.replay_values);
            st.replay_values.pop_front()
        };
        if let Some(recorded) = recorded {
            let replayed = crate::exec::signal_cursor::replayed(&recorded, name, wait);
            return Box::pin(std::future::ready(replayed));
        }
        let (env, st, name) = (self.env.clone(), self.st.clone(), name.to_owned());
        Box::pin(async move {
            let (value, record) = env.signals.fresh(&env.thread, &name, wait, &env.stop).await?;
            super::lock_state(&st).new_values.push(record);
            Ok(value)
        })
    }

    /// Reports a signal `ctx.recv` set aside (its value is not the node's type): a warning when
    /// it was received now, a debug line when the task runs again past its recorded receipt.
    pub(super) fn set_aside(&self, name: &str, detail: &str) {
        // Fresh values are drawn only once the recorded ones are used up, so a receipt just
        // recorded means this signal was received now, not read again from the journal.
        let received = self.state().new_values.last().and_then(|v| {
            let receipt = v.get(Drawn::Signal.tag()).or_else(|| v.get(Drawn::Waited.tag()));
            let (_, got) = crate::core::drawn::received(receipt?)?;
            got.map(|(n, _)| n)
        });
        let (thread, node) = (&self.env.thread, &self.key.node);
        match received {
            Some(n) => tracing::warn!(
                %thread, %node, signal = name, n, detail,
                "a signal was set aside: its value does not decode as the type the node receives"
            ),
            None => tracing::debug!(
                %thread, %node, signal = name, detail,
                "a signal set aside before is set aside again as the node runs again"
            ),
        }
    }
}
