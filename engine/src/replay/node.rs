//! The context a task's node code sees when it is replayed: every tool call, clock reading,
//! random number and id comes from what was recorded, and the first difference is kept.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use cairn_dsl::{ErasedTool, Message, NodeContext, NodeError, Progress, ToolCall, Usage};
use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{RecordedCall, Shared};
use crate::core::drawn::Drawn;
use crate::core::event::TaskKey;
use crate::core::published::PublishedKeys;
use crate::core::suspend::Suspensions;
use crate::core::thread_ctx::Publication;

#[derive(Default)]
pub(super) struct ReplayNodeState {
    pub(super) values: VecDeque<Value>,
    pub(super) suspensions: Suspensions,
    pub(super) calls: Vec<RecordedCall>,
    pub(super) next_call: u32,
    /// The first difference seen inside the node (what, recorded, produced).
    pub(super) first: Option<(String, Value, Value)>,
    /// The answer of each patch id the task asked, so later calls agree.
    pub(super) patches: BTreeMap<String, bool>,
    /// Events published and promises created so far: a promise's id is derived from it.
    pub(super) published: u32,
    /// What the journal recorded the task published, in order (the code must publish the same).
    pub(super) recorded_published: Vec<Publication>,
    /// The keys the thread had published when the task's step began (its siblings' new keys
    /// left out, as the live run counted them): a new key past `PUBLISHED_KEYS_PER_THREAD_MAX`
    /// was refused there, and is here.
    pub(super) keys: PublishedKeys,
}

impl ReplayNodeState {
    /// The state a completed task of `journal` is replayed from: the values it drew, the tool
    /// calls recorded, and the keys the thread had published when the step began (`meta`).
    pub(super) fn of(
        journal: &crate::core::thread_ctx::TaskJournal,
        values: VecDeque<Value>,
        calls: Vec<RecordedCall>,
        meta: &crate::core::thread_ctx::ThreadMeta,
    ) -> Self {
        ReplayNodeState {
            values,
            suspensions: Suspensions::new(journal.inputs.clone(), journal.timers_fired),
            calls,
            recorded_published: journal.published.clone(),
            keys: PublishedKeys::at_step_start(meta),
            ..ReplayNodeState::default()
        }
    }
}

pub(super) struct ReplayNodeContext {
    pub(super) shared: Arc<Shared>,
    pub(super) step: u64,
    pub(super) task: TaskKey,
    pub(super) attempt: u32,
    pub(super) item: Option<Value>,
    pub(super) st: Mutex<ReplayNodeState>,
}

impl ReplayNodeContext {
    fn state(&self) -> std::sync::MutexGuard<'_, ReplayNodeState> {
        self.st.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A recorded value of another type than the code reads now (the code draws values in
    /// another order): a divergence, as the live run reports it as nondeterminism. Returns the
    /// placeholder the node goes on with.
    fn mistyped(&self, recorded: Value, kind: &str) -> u64 {
        // A missing value was reported by `value` already (and reads as null).
        if !recorded.is_null() {
            self.state().first.get_or_insert((
                format!("the code reads a recorded value as a {kind}"),
                recorded,
                Value::String(kind.into()),
            ));
        }
        0
    }

    pub(super) fn value(&self, drawn: Drawn) -> Value {
        let kind = drawn.name();
        let mut st = self.state();
        crate::core::patch::skip(&mut st.values);
        match st.values.pop_front() {
            Some(recorded) => drawn.read(&recorded).unwrap_or_else(|was| {
                st.first.get_or_insert((
                    format!("the code draws a {kind} where a {was} value was recorded"),
                    recorded,
                    Value::String(kind.into()),
                ));
                Value::Null
            }),
            None => {
                st.first.get_or_insert((
                    format!("the code drew a {kind} that was not recorded"),
                    Value::Null,
                    Value::String(kind.into()),
                ));
                Value::Null
            }
        }
    }

    /// The recorded receipt of the task's next receive of `name`; with nothing recorded (the
    /// task waited there), the same suspension as the live run for `recv`.
    fn receive(&self, name: &str, wait: bool) -> Result<Option<Value>, NodeError> {
        let mut st = self.state();
        crate::core::patch::skip(&mut st.values);
        let Some(recorded) = st.values.front().cloned() else {
            if wait {
                return Err(NodeError::WaitingSignal { name: name.to_owned() });
            }
            st.first.get_or_insert((
                format!("the code receives signal {name:?} that was not recorded"),
                Value::Null,
                Value::String(name.to_owned()),
            ));
            return Ok(None);
        };
        st.values.pop_front();
        let got = Drawn::Signal.read(&recorded).ok().and_then(|inner| {
            crate::core::drawn::received(&inner)
                .filter(|(n, _)| *n == name)
                .map(|(_, got)| got.map(|(_, v)| v.clone()))
        });
        match got {
            Some(Some(value)) => Ok(Some(value)),
            Some(None) if !wait => Ok(None),
            _ => {
                st.first.get_or_insert((
                    format!("the code receives signal {name:?} where another value was recorded"),
                    recorded,
                    Value::String(name.to_owned()),
                ));
                Err(NodeError::Nondeterminism { detail: "unrecorded signal".into() })
            }
        }
    }

    /// A select of `names` and the ends of `children` in a completed task: its recorded start
    /// (checked) and outcome.
    fn select_replayed(
        &self,
        names: Vec<String>,
        children: Vec<String>,
        until_ms: Option<u64>,
    ) -> Result<cairn_dsl::Selected, NodeError> {
        use crate::core::select::{self, Outcome};
        use cairn_dsl::Selected;
        let start = self.value(Drawn::Wait);
        let mut st = self.state();
        if select::started(&start) != Some((names.clone(), until_ms))
            || select::started_children(&start).as_ref() != Some(&children)
        {
            let asked = select::start_with_children(&names, &children, until_ms);
            st.first.get_or_insert(("the code selects other waits".into(), start, asked));
            return Err(NodeError::Nondeterminism { detail: "another select".into() });
        }
        crate::core::patch::skip(&mut st.values);
        let Some(recorded) = st.values.pop_front() else {
            return Err(select::parked(&names, &children, until_ms));
        };
        match Outcome::read(&recorded) {
            Ok(o)
                if o.signal.as_ref().is_none_or(|(name, _, _)| names.contains(name))
                    && o.child.as_ref().is_none_or(|end| children.contains(&end.child)) =>
            {
                st.suspensions.consume_timers(o.timers);
                Ok(match (o.signal, o.child) {
                    (_, Some(end)) => Selected::Child(end.ended()),
                    (Some((name, _, value)), None) => Selected::Signal { name, value },
                    (None, None) => Selected::Timeout,
                })
            }
            _ => {
                let asked = serde_json::json!({"names": names, "children": children});
                st.first.get_or_insert((
                    "the code selects where another value was recorded".into(),
                    recorded,
                    asked,
                ));
                Err(NodeError::Nondeterminism { detail: "unrecorded select".into() })
            }
        }
    }

    /// A patch call of `id` in a completed task, whose history went past every point: true iff
    /// the task recorded the marker here (`core::patch`). A deprecated patch without its marker
    /// is a divergence: the thread needed the old branch.
    fn patch(&self, id: &str, deprecated: bool) -> bool {
        let mut st = self.state();
        if let Some(known) = st.patches.get(id) {
            return *known;
        }
        let taken = crate::core::patch::take(&mut st.values, id);
        if deprecated && !taken {
            st.first.get_or_insert((
                format!("the task ran without deprecated patch {id:?}: it needs the old branch"),
                Value::Null,
                Value::String(id.to_owned()),
            ));
        }
        st.patches.insert(id.to_owned(), taken);
        taken
    }

    /// Keeps the first difference seen in the node: `what`, the recorded and produced values.
    pub(super) fn diverged(&self, what: String, recorded: Value, produced: Value) {
        self.state().first.get_or_insert((what, recorded, produced));
    }

    /// A marker call (`core::marks`) in a completed task: the log holds its marker here, or the
    /// code does what the recorded run did not (a divergence).
    /// Counts the task's next publication, `what`, and returns its index: another thing than
    /// the journal recorded there (or one it did not record) is a divergence.
    fn published(&self, what: Publication) -> u32 {
        let mut st = self.state();
        let n = st.published;
        st.published += 1;
        let recorded = st.recorded_published.get(n as usize).cloned();
        if recorded.as_ref() != Some(&what) {
            let recorded = serde_json::to_value(&recorded).unwrap_or_default();
            let produced = serde_json::to_value(&what).unwrap_or_default();
            let detail = format!("the code publishes {what:?} where the recorded run did not");
            st.first.get_or_insert((detail, recorded, produced));
        }
        n
    }

    /// The refusal the live run met publishing `key` in the task's next place, if it did: a
    /// new key past the thread's bound, where the record holds another publication or none.
    fn key_refused(&self, key: &str) -> Option<String> {
        let mut st = self.state();
        let place = st.recorded_published.get(st.published as usize);
        let recorded = matches!(place, Some(Publication::Event(k)) if k == key);
        let max = if recorded { usize::MAX } else { crate::limits::PUBLISHED_KEYS_PER_THREAD_MAX };
        st.keys.admit(key, max).err()
    }

    pub(super) fn marker(&self, marker: Value, what: &str) {
        let mut st = self.state();
        if !crate::core::marks::take(&mut st.values, &marker) {
            st.first.get_or_insert((
                format!("the code {what} where the recorded run did not"),
                Value::Null,
                marker,
            ));
        }
    }
}

impl NodeContext for ReplayNodeContext {
    fn start_child(
        &self,
        start: cairn_dsl::ChildStart,
    ) -> BoxFuture<'static, Result<String, NodeError>> {
        Box::pin(std::future::ready(self.replay_start(&start)))
    }
    fn join_child(
        &self,
        child: &str,
    ) -> BoxFuture<'static, Result<cairn_dsl::ChildEnded, NodeError>> {
        Box::pin(std::future::ready(self.replay_join(child)))
    }
    fn recv(&self, name: &str) -> BoxFuture<'static, Result<Value, NodeError>> {
        let got = self.receive(name, true).map(|v| v.unwrap_or(Value::Null));
        Box::pin(async move { got })
    }
    fn try_recv(&self, name: &str) -> BoxFuture<'static, Result<Option<Value>, NodeError>> {
        let got = self.receive(name, false);
        Box::pin(async move { got })
    }
    fn select(
        &self,
        signals: Vec<String>,
        until_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<Option<(String, Value)>, NodeError>> {
        let got = self.select_replayed(signals, Vec::new(), until_ms).map(|s| match s {
            cairn_dsl::Selected::Signal { name, value } => Some((name, value)),
            cairn_dsl::Selected::Child(_) | cairn_dsl::Selected::Timeout => None,
        });
        Box::pin(async move { got })
    }
    fn select_children(
        &self,
        signals: Vec<String>,
        children: Vec<String>,
        until_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<cairn_dsl::Selected, NodeError>> {
        Box::pin(std::future::ready(self.select_replayed(signals, children, until_ms)))
    }
    fn patched(&self, id: &str) -> bool {
        self.patch(id, false)
    }
    fn deprecate_patch(&self, id: &str) {
        self.patch(id, true);
    }
    fn on_undo(&self, name: &str, args: Value) -> Result<(), NodeError> {
        self.marker(crate::core::marks::undo(name, args), "registers an undo");
        Ok(())
    }
    fn continue_as_new(&self, input: Value) -> Result<(), NodeError> {
        self.marker(crate::core::marks::successor(input), "continues as new");
        Ok(())
    }
    fn change_label(&self, key: &str, value: Option<&str>) -> Result<(), NodeError> {
        self.marker(crate::core::marks::label(key, value), "changes a label");
        Ok(())
    }
    fn set_event(&self, key: &str, _value: Value) -> BoxFuture<'static, Result<(), NodeError>> {
        // The log holds what the live run published; replay writes nothing.
        if let Some(detail) = self.key_refused(key) {
            return Box::pin(std::future::ready(Err(NodeError::fatal(detail))));
        }
        self.published(Publication::Event(key.to_owned()));
        Box::pin(std::future::ready(Ok(())))
    }
    fn promise(&self) -> BoxFuture<'static, Result<cairn_dsl::Promise, NodeError>> {
        let n = self.published(Publication::Promise);
        let id = crate::core::published::promise_id(&self.shared.thread, self.step, &self.task, n);
        let signal = crate::core::published::promise_signal(&id);
        Box::pin(std::future::ready(Ok(cairn_dsl::Promise::new(id, signal))))
    }
    fn thread_id(&self) -> &str {
        &self.shared.thread
    }
    fn node(&self) -> &str {
        &self.task.node
    }
    fn step(&self) -> u64 {
        self.step
    }
    fn attempt(&self) -> u32 {
        self.attempt
    }
    fn item(&self) -> Option<&Value> {
        self.item.as_ref()
    }
    fn now_ms(&self) -> u64 {
        let v = self.value(Drawn::Clock);
        v.as_u64().unwrap_or_else(|| self.mistyped(v, "clock reading"))
    }
    fn random_u64(&self) -> u64 {
        let v = self.value(Drawn::Random);
        v.as_u64().unwrap_or_else(|| self.mistyped(v, "random number"))
    }
    fn new_id(&self) -> String {
        match self.value(Drawn::Id) {
            Value::String(id) => id,
            other => {
                self.mistyped(other, "id");
                String::new()
            }
        }
    }
    fn call_tool(
        &self,
        call: ToolCall,
        input: Value,
        _run: ErasedTool,
    ) -> BoxFuture<'static, Result<Value, NodeError>> {
        // The tool is never run: replay feeds recorded results.
        let mut st = self.state();
        let index = st.next_call;
        st.next_call += 1;
        let result = match st.calls.get(index as usize).cloned() {
            None => {
                st.first.get_or_insert((
                    format!("tool call #{index} was not recorded"),
                    Value::Null,
                    serde_json::json!({"tool": call.name, "input": input}),
                ));
                Err(NodeError::Nondeterminism { detail: "unrecorded tool call".into() })
            }
            Some((name, recorded_input, output)) => {
                if name != call.name {
                    st.first.get_or_insert((
                        format!("tool call #{index} names another tool"),
                        Value::String(name),
                        Value::String(call.name.clone()),
                    ));
                } else if let Some(recorded_input) = recorded_input
                    && recorded_input != input
                {
                    st.first.get_or_insert((
                        format!("tool call #{index} ({name}) has another input"),
                        recorded_input,
                        input,
                    ));
                }
                let key = (self.step, self.task.to_string(), index);
                match self.shared.overrides.get(&key) {
                    Some(v) => Ok(v.clone()),
                    None => output.map_err(NodeError::from),
                }
            }
        };
        Box::pin(async move { result })
    }
    fn progress(&self, _progress: Progress) {}
    fn message(&self, _message: Message) {}
    fn usage(&self, _usage: Usage) {}
    fn cancellation(&self) -> CancellationToken {
        self.shared.cancel.clone()
    }
    fn interrupt(&self, prompt: Value) -> Result<Value, NodeError> {
        self.state().suspensions.interrupt(prompt)
    }
    fn sleep(&self, duration_ms: u64) -> BoxFuture<'static, Result<(), NodeError>> {
        let now = self.now_ms();
        let result = self.state().suspensions.sleep(now, duration_ms);
        Box::pin(async move { result })
    }
    fn sleep_until(&self, at_ms: u64) -> BoxFuture<'static, Result<(), NodeError>> {
        let result = self.state().suspensions.sleep_until(at_ms);
        Box::pin(async move { result })
    }
    fn lock(
        &self,
        _name: &str,
        _ttl_ms: u64,
        _wait: bool,
    ) -> BoxFuture<'static, Result<(), NodeError>> {
        Box::pin(async { Ok(()) })
    }
    fn unlock(&self, _name: &str) -> BoxFuture<'static, Result<(), NodeError>> {
        Box::pin(async { Ok(()) })
    }
    fn lock_all(
        &self,
        _names: Vec<String>,
        _ttl_ms: u64,
        _wait: bool,
    ) -> BoxFuture<'static, Result<(), NodeError>> {
        Box::pin(async { Ok(()) })
    }
}
