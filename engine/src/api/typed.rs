//! The typed layer over thread handles: a [`ThreadHandle<S>`] from [`Engine::start`] returns
//! its workflow's state `S` as its output, and sends signals and asks queries named by a
//! [`SignalDef`] or [`QueryDef`], whose value, argument and answer types the compiler checks.
//! An [`Untyped`](super::outcome::Untyped) handle ([`Engine::start_json`], [`Engine::thread`]) gives results as JSON.

use cairn_dsl::{QueryDef, SignalDef, State, Workflow};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::engine::Engine;
use super::handle::ThreadHandle;
use crate::error::Error;

impl<S: State> ThreadHandle<S> {
    /// Waits until the thread ends and returns its output, the workflow's final state. A
    /// thread that parks (waits for input, sleeps, pauses) is waited for until it is resumed
    /// and ends; use [`ThreadHandle::wait`] to return at a park.
    ///
    /// # Errors
    /// [`Error::WrongStatus`] if the thread ends other than completed; [`Error::Codec`] if
    /// its output does not decode as an `S`.
    ///
    /// # Examples
    /// ```
    /// # async fn run(engine: cairn::Engine, wf: cairn::dsl::Workflow<cairn::dsl::Replace<u64>>) -> Result<(), cairn::Error> {
    /// let thread = engine.start(&wf, cairn::dsl::Replace(21), cairn::StartOptions::id("t")).await?;
    /// let out: cairn::dsl::Replace<u64> = thread.output().await?;
    /// # Ok(()) }
    /// ```
    pub async fn output(&self) -> Result<S, Error> {
        Ok(serde_json::from_value(self.json_output().await?)?)
    }
}

impl<S> ThreadHandle<S> {
    /// Sends `value` as the signal `signal` names, as [`Engine::signal`] does: the value's type
    /// is the signal's, checked by the compiler (declare it with the same [`SignalDef`] in
    /// [`cairn_dsl::WorkflowBuilder::signal`]). Returns its number in the thread's inbox.
    ///
    /// # Errors
    /// As [`Engine::signal`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(thread: cairn::ThreadHandle) -> Result<(), cairn::Error> {
    /// const DELIVERED: cairn::dsl::SignalDef<String> = cairn::dsl::SignalDef::new("delivered");
    /// thread.signal(DELIVERED, "Lyon".to_owned()).await?;
    /// # Ok(()) }
    /// ```
    /// A value of another type than the signal's does not compile:
    /// ```compile_fail
    /// # async fn run(thread: cairn::ThreadHandle) -> Result<(), cairn::Error> {
    /// const DELIVERED: cairn::dsl::SignalDef<String> = cairn::dsl::SignalDef::new("delivered");
    /// thread.signal(DELIVERED, 12345_u64).await?; // not a String
    /// # Ok(()) }
    /// ```
    pub async fn signal<T: Serialize>(&self, signal: SignalDef<T>, value: T) -> Result<u64, Error> {
        self.engine.signal(self.id().as_str(), signal.name(), value).await
    }

    /// Answers the query `query` names with `args`, as [`Engine::query`] does, its arguments
    /// and answer of the query's types (declare it with the same [`QueryDef`] in
    /// [`cairn_dsl::WorkflowBuilder::query`]).
    ///
    /// # Errors
    /// As [`Engine::query`]; [`Error::Codec`] if the answer does not decode as an `R`.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(thread: cairn::ThreadHandle) -> Result<(), cairn::Error> {
    /// const LENGTH: cairn::dsl::QueryDef<(), usize> = cairn::dsl::QueryDef::new("length");
    /// let length: usize = thread.query(LENGTH, ()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn query<A: Serialize, R: DeserializeOwned>(
        &self,
        query: QueryDef<A, R>,
        args: A,
    ) -> Result<R, Error> {
        let args = serde_json::to_value(args)?;
        let answer = self.engine.query(self.id().as_str(), query.name(), args).await?;
        Ok(serde_json::from_value(answer)?)
    }
}

impl Engine {
    /// A handle to the existing thread `id` of `workflow`, typed by its state: for a caller
    /// that did not start it (another process, a later run).
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; [`Error::Invalid`] if the thread runs another workflow (id or
    /// version) than `workflow`; storage errors.
    pub async fn thread_of<S: State>(
        &self,
        workflow: &Workflow<S>,
        id: &str,
    ) -> Result<ThreadHandle<S>, Error> {
        let handle = self.thread(id).await?;
        let record = crate::exec::fetch::record(self.store().as_ref(), handle.id()).await?;
        let runs = &record.workflow;
        if &*runs.id != workflow.id() || runs.version != workflow.version() {
            return Err(Error::Invalid(format!(
                "thread {id} runs workflow {} v{}, not {} v{}",
                runs.id,
                runs.version,
                workflow.id(),
                workflow.version()
            )));
        }
        Ok(handle.retyped())
    }
}
