//! The embedding API: open an engine on a database file, register workflows, start threads.

use std::sync::Arc;

use cairn_dsl::{DynWorkflow, State, Workflow};
use cairn_storage::{Store, ThreadId};
use serde::Serialize;

use super::handle::ThreadHandle;
use crate::clock::Clock;
use crate::config::StartOptions;
use crate::error::Error;
use crate::exec::drive::spawn_drive;
use crate::exec::shell::{Shell, StepHook};
use crate::exec::start::{self, NewThread};

/// One start, checked and ready to write.
pub(super) struct Prepared {
    pub(super) wf: Arc<DynWorkflow>,
    pub(super) id: ThreadId,
    /// Its creation (put in line when `queued`), or `None` if the id exists already.
    pub(super) batch: Option<cairn_storage::Batch>,
    /// Started on a queue.
    pub(super) queued: bool,
}

/// A durable workflow engine on one database file.
///
/// # Examples
/// ```no_run
/// use cairn::dsl::{Replace, Workflow, NodeOutput, START, END};
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let wf = Workflow::<Replace<u64>>::builder("double", 1)
///     .node("double", |s: std::sync::Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(s.0 * 2)) })
///     .edge(START, "double")
///     .edge("double", END)
///     .build()?;
/// let engine = cairn::Engine::builder("cairn.db").workflow(&wf).open().await?;
/// let thread = engine.start(&wf, Replace(21), cairn::StartOptions::id("t1")).await?;
/// assert_eq!(thread.output().await?, Replace(42));
/// engine.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Engine {
    pub(crate) shell: Arc<Shell>,
}

impl Engine {
    /// Registers a workflow (and its sub-workflows). Several versions of one id may be
    /// registered; a thread stays on the version it started with.
    ///
    /// # Errors
    /// [`Error::Invalid`] if this id and version are registered with another fingerprint.
    pub fn register<S: State>(&self, wf: &Workflow<S>) -> Result<(), Error> {
        self.register_dyn(wf.erase())
    }

    /// Registers a type-erased workflow (and its sub-workflows).
    ///
    /// # Errors
    /// As [`Engine::register`].
    pub fn register_dyn(&self, wf: Arc<DynWorkflow>) -> Result<(), Error> {
        // Its labelled metrics exist from now on (a scrape shows its series at 0).
        self.shell.metrics.for_workflow(wf.id(), wf.nodes().iter().map(|n| n.name.as_str()));
        self.shell.registry.register(wf)
    }

    /// Starts a thread of `workflow` (this version of it, which must be registered) on
    /// `input`, its initial state. The handle returned is typed by the state: its
    /// [`ThreadHandle::output`] is an `S`. Idempotent on `options.thread_id` while the thread
    /// is stored (a start of an existing id returns it, whatever its status); once it is deleted
    /// ([`Engine::delete`], [`crate::RetentionPolicy`]) the id starts a new thread.
    ///
    /// `start` returns once the thread's creation is durable. Until then the new thread runs in
    /// the task that awaits `start` (its first steps share the creation's commit); whatever is
    /// left of it then, or if that task stops awaiting, goes on as a task of its own. A short
    /// thread may so end before `start` returns, without another task or thread being woken.
    ///
    /// # Errors
    /// [`Error::UnknownWorkflow`] if this version of `workflow` is not registered;
    /// [`Error::Invalid`] if another workflow is registered under its id and version, if
    /// `options.version` names another version, if the input is not a valid state or the id
    /// exists with another workflow; storage errors.
    ///
    /// A wrong input or output type does not compile:
    /// ```compile_fail
    /// # async fn run(engine: cairn::Engine, wf: cairn::dsl::Workflow<cairn::dsl::Replace<u64>>) -> Result<(), cairn::Error> {
    /// engine.start(&wf, "21", cairn::StartOptions::default()).await?; // not a Replace<u64>
    /// # Ok(()) }
    /// ```
    /// ```compile_fail
    /// # async fn run(engine: cairn::Engine, wf: cairn::dsl::Workflow<cairn::dsl::Replace<u64>>) -> Result<(), cairn::Error> {
    /// let thread = engine.start(&wf, cairn::dsl::Replace(21), cairn::StartOptions::default()).await?;
    /// let out: String = thread.output().await?; // the output is a Replace<u64>
    /// # Ok(()) }
    /// ```
    pub async fn start<S: State>(
        &self,
        workflow: &Workflow<S>,
        input: S,
        options: StartOptions,
    ) -> Result<ThreadHandle<S>, Error> {
        let options = self.pinned(workflow, options)?;
        Ok(self.start_json(workflow.id(), input, options).await?.retyped())
    }

    /// `options` pinned to the version of `workflow`, after checking that this very workflow
    /// is the one registered under its id and version (what a typed start relies on).
    pub(crate) fn pinned<S: State>(
        &self,
        workflow: &Workflow<S>,
        options: StartOptions,
    ) -> Result<StartOptions, Error> {
        let (id, version) = (workflow.id(), workflow.version());
        if options.version.is_some_and(|v| v != version) {
            return Err(Error::Invalid(format!(
                "a typed start of workflow {id} v{version} names version {:?} in its options",
                options.version
            )));
        }
        let registered = self.shell.registry.latest(id, Some(version))?;
        if registered.fingerprint() != workflow.fingerprint() {
            return Err(Error::Invalid(format!(
                "the workflow registered as {id} v{version} is not this one (fingerprint {}, not {})",
                registered.fingerprint(),
                workflow.fingerprint()
            )));
        }
        Ok(StartOptions { version: Some(version), ..options })
    }

    /// Starts a thread of the newest registered version of the workflow named `workflow` (or
    /// `options.version`) on `input`, its initial state as JSON (or anything that serialises
    /// as it), for callers that know the workflow only by name (the endpoint, the command
    /// line). The handle is [`crate::Untyped`]; prefer [`Engine::start`] where the workflow's
    /// type is at hand. Idempotent on `options.thread_id` as `start` is.
    ///
    /// # Errors
    /// [`Error::UnknownWorkflow`]; [`Error::Invalid`] if the input is not a valid state or the id
    /// exists with another workflow; storage errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// let thread = engine.start_json("double", 21, cairn::StartOptions::id("t1")).await?;
    /// assert_eq!(thread.output::<u64>().await?, 42);
    /// # Ok(()) }
    /// ```
    pub async fn start_json(
        &self,
        workflow: &str,
        input: impl Serialize,
        options: StartOptions,
    ) -> Result<ThreadHandle, Error> {
        let input = serde_json::to_value(input)?;
        if let Some(queue) = &options.queue
            && self.debounces(queue).await?
        {
            return self.start_debounced(workflow, input, options).await;
        }
        if options.queue.is_some() {
            // Created Queued and put in line in one batch; the admitter runs it when the
            // limits allow (a dedup key held in the queue answers with its holder).
            let prepared = self.prepare_start(workflow, input, options).await?;
            let (id, _) = self.write_prepared(vec![prepared], true).await?.remove(0);
            return Ok(ThreadHandle::new(self.clone(), id));
        }
        self.start_running(workflow, input, options).await
    }

    /// Starts many threads at once. Their creations are handed to storage together and share
    /// durable commits, where a loop that awaits each [`Engine::start`] pays one durable commit
    /// per thread before it can start the next. Returns one handle per start, in order;
    /// idempotent per id, as `start` is.
    ///
    /// Use `start` for one thread, or when each start depends on the one before; `start_many`
    /// for a batch of independent threads (an import, a fan-out of jobs).
    ///
    /// Starts on a queue ([`StartOptions::on_queue`]) are written the same way, each put in
    /// line by its own batch, in order, sharing the commits: the limits apply to them exactly as
    /// to single starts (admission asked for once, after them), and a dedup key held by a thread
    /// (a stored one, or an earlier start of the same call) returns that thread's handle.
    ///
    /// # Errors
    /// As [`Engine::start`]. Every start is checked before anything is written, so a bad input
    /// or an unknown workflow writes nothing; a storage error comes after the threads written
    /// before it were started.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), Box<dyn std::error::Error>> {
    /// use cairn::dsl::{END, NodeOutput, Replace, START, Workflow};
    /// use cairn::StartOptions;
    /// let double = Workflow::<Replace<u64>>::builder("double", 1)
    ///     .node("double", |s: std::sync::Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(s.0 * 2)) })
    ///     .edge(START, "double")
    ///     .edge("double", END)
    ///     .build()?;
    /// engine.register(&double)?;
    /// let jobs = (0..100).map(|i| (Replace(i), StartOptions::id(format!("job-{i}"))));
    /// let handles = engine.start_many(&double, jobs).await?;
    /// assert_eq!(handles[7].output().await?, Replace(14));
    /// # Ok(()) }
    /// ```
    pub async fn start_many<S: State>(
        &self,
        workflow: &Workflow<S>,
        starts: impl IntoIterator<Item = (S, StartOptions)>,
    ) -> Result<Vec<ThreadHandle<S>>, Error> {
        let starts = starts
            .into_iter()
            .map(|(input, options)| Ok((input, self.pinned(workflow, options)?)))
            .collect::<Result<Vec<_>, Error>>()?;
        let handles = self.start_many_json(workflow.id(), starts).await?;
        Ok(handles.into_iter().map(ThreadHandle::retyped).collect())
    }

    /// [`Engine::start_many`] of the newest registered version of the workflow named
    /// `workflow` (or `options.version`), on inputs given as anything that serializes to its
    /// state: for callers that know the workflow by name only.
    ///
    /// # Errors
    /// As [`Engine::start_many`].
    pub async fn start_many_json<I: Serialize>(
        &self,
        workflow: &str,
        starts: impl IntoIterator<Item = (I, StartOptions)>,
    ) -> Result<Vec<ThreadHandle>, Error> {
        let starts: Vec<(I, StartOptions)> = starts.into_iter().collect();
        // Every queue named must exist before anything is written (one read for the call).
        let named: std::collections::BTreeSet<&String> =
            starts.iter().filter_map(|(_, o)| o.queue.as_ref()).collect();
        if !named.is_empty() {
            let defined = self.shell.store.queues().await?;
            if let Some(missing) = named.iter().find(|n| !defined.iter().any(|q| &&q.name == *n)) {
                return Err(cairn_storage::Error::UnknownQueue((*missing).clone()).into());
            }
        }
        let mut prepared = Vec::new();
        let mut debounced = Vec::new();
        for (input, options) in starts {
            let input = serde_json::to_value(input)?;
            if let Some(queue) = &options.queue
                && self.debounces(queue).await?
            {
                // Each supersedes the one before: one at a time, in order, after the others.
                debounced.push((prepared.len() + debounced.len(), input, options));
                continue;
            }
            prepared.push(self.prepare_start(workflow, input, options).await?);
        }
        if !debounced.is_empty() {
            let mut handles: Vec<ThreadHandle> = self
                .write_prepared(prepared, true)
                .await?
                .into_iter()
                .map(|(id, _)| ThreadHandle::new(self.clone(), id))
                .collect();
            for (at, input, options) in debounced {
                let handle = self.start_debounced(workflow, input, options).await?;
                handles.insert(at, handle);
            }
            return Ok(handles);
        }
        let written = self.write_prepared(prepared, true).await?;
        Ok(written.into_iter().map(|(id, _)| ThreadHandle::new(self.clone(), id)).collect())
    }

    /// Writes prepared creations together (pipelined: they share group commits, each batch
    /// accepted or refused on its own, in order) and, when `drive`, drives each thread created;
    /// threads put in line wait for one admission pass, asked for once. Returns, per start, the
    /// thread that answers it (the one written, the existing thread of the id, or the holder of
    /// its dedup key) and whether the call wrote it.
    pub(super) async fn write_prepared(
        &self,
        prepared: Vec<Prepared>,
        drive: bool,
    ) -> Result<Vec<(ThreadId, bool)>, Error> {
        let mut first_error = None;
        let mut written = Vec::new();
        let mut out = Vec::with_capacity(prepared.len());
        for p in prepared {
            out.push((p.id.clone(), false));
            let Some(batch) = p.batch else { continue };
            if first_error.is_some() {
                continue;
            }
            match self.shell.store.append_async(batch).await {
                Ok(pending) => written.push((out.len() - 1, p.wf, p.queued, pending)),
                Err(e) => first_error = Some(e.into()),
            }
        }
        let mut queued_any = false;
        for (at, wf, queued, pending) in written {
            let id = out[at].0.clone();
            let settled = if queued {
                self.settle_queued(&wf, &id, pending).await
            } else {
                start::settle(&self.shell, &wf, &id, pending)
                    .await
                    .map(|created| (id.clone(), created))
            };
            match settled {
                Ok((answer, created)) => {
                    queued_any |= created && queued;
                    if created && drive && !queued {
                        spawn_drive(&self.shell, id, "started");
                    }
                    out[at] = (answer, created);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if queued_any && drive {
            self.shell.admit.notify_one();
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// [`Engine::start_json`]: when a runner permit is
    /// free, the thread is claimed first, created already running, and driven from its
    /// creation's context, so that its first batches may share the creation's durable commit
    /// (see `exec::started`). Otherwise (no permit free, or the id claimed by a runner of this
    /// engine: an existing thread, or another start of it under way) the plain path.
    async fn start_running(
        &self,
        workflow: &str,
        input: serde_json::Value,
        options: StartOptions,
    ) -> Result<ThreadHandle, Error> {
        if options.start_at_ms.is_some_and(|at| at > self.shell.clock.now_ms()) {
            // Created now, run at its time: the drive arms its start (`exec/delayed_start.rs`).
            // Boxed, as the spawn below: `start`'s future, which a caller's task holds, stays
            // small.
            let done = Box::pin(self.write_start(workflow, input, options, true)).await?;
            return Ok(done.thread);
        }
        let wf = self.shell.registry.latest(workflow, options.version)?;
        let id = self.start_id(&options)?;
        // A thread that would wait for a runner permit is created as before (Created, no
        // lease), and queued.
        let permit = self.shell.permits.clone().try_acquire_owned().ok();
        let claimed = permit.and_then(|p| Some((p, self.shell.coord.claim(&id, None)?)));
        let Some((permit, control)) = claimed else {
            let batch =
                start::prepare(&self.shell, self.new_thread(&wf, &id, input, &options)).await?;
            let prepared = Prepared { wf, id, batch, queued: false };
            let (id, _) = self.write_prepared(vec![prepared], true).await?.remove(0);
            return Ok(ThreadHandle::new(self.clone(), id));
        };
        // Announced before the creation is queued: the writer may hold the creation's group
        // open for the runner's first batch.
        let intent = self.shell.store.intend_write();
        let prepared =
            start::prepare_running(&self.shell, self.new_thread(&wf, &id, input, &options)).await;
        let running = match prepared {
            Ok(Some(running)) => running,
            Ok(None) => {
                self.shell.coord.release(&id);
                return Ok(ThreadHandle::new(self.clone(), id));
            }
            Err(e) => {
                self.shell.coord.release(&id);
                return Err(e);
            }
        };
        let created = crate::exec::started::Created { thread: id.clone(), control, wf, running };
        let started = crate::exec::started::start_running(&self.shell, created, permit, intent);
        let seen = Box::pin(started).await?;
        Ok(ThreadHandle::new(self.clone(), id).watching(seen))
    }

    /// Checks a start and builds the batch that creates its thread (`None`: the thread exists).
    pub(super) async fn prepare_start(
        &self,
        workflow: &str,
        input: serde_json::Value,
        options: StartOptions,
    ) -> Result<Prepared, Error> {
        let wf = self.shell.registry.latest(workflow, options.version)?;
        let id = self.start_id(&options)?;
        if options.queue.is_some() && options.start_at_ms.is_some() {
            return Err(Error::Invalid(
                "a delayed start (start_at_ms) cannot wait on a queue as well".into(),
            ));
        }
        let batch = start::prepare(&self.shell, self.new_thread(&wf, &id, input, &options)).await?;
        let queued = options.queue.is_some();
        let batch = if queued { batch.map(|b| Engine::enqueued(b, &id, &options)) } else { batch };
        Ok(Prepared { wf, id, batch, queued })
    }

    /// The id a start with `options` creates (theirs, or a new one).
    ///
    /// # Errors
    /// [`Error::Invalid`] for an id that is not one, or labels holding one the engine reserves
    /// (`RESERVED_LABELS`: nothing is written).
    fn start_id(&self, options: &StartOptions) -> Result<ThreadId, Error> {
        crate::exec::start::check_labels(&options.labels)?;
        Ok(match &options.thread_id {
            Some(id) => ThreadId::new(id.clone())?,
            None => ThreadId::new(self.shell.ids.new_id())?,
        })
    }

    /// Thread `id` of `wf` on `input` as `options` start it: their labels, and a policy of their
    /// deadline (from now), budgets and permissions.
    fn new_thread<'a>(
        &self,
        wf: &'a Arc<DynWorkflow>,
        id: &'a ThreadId,
        input: serde_json::Value,
        options: &StartOptions,
    ) -> NewThread<'a> {
        let policy = crate::core::event::ThreadPolicy {
            deadline_at_ms: options
                .deadline_ms
                .map(|d| self.shell.clock.now_ms().saturating_add(d)),
            budgets: options.budgets.clone(),
            permissions: options.permissions.clone(),
            start_at_ms: options.start_at_ms,
        };
        NewThread {
            labels: options.labels.clone(),
            policy,
            pin: !options.unpinned,
            ..NewThread::new(wf, id, input)
        }
    }

    /// A handle to an existing thread.
    ///
    /// # Errors
    /// [`Error::UnknownThread`].
    pub async fn thread(&self, id: &str) -> Result<ThreadHandle, Error> {
        let id = ThreadId::new(id)?;
        if self.shell.store.thread(&id).await?.is_none() {
            return Err(Error::UnknownThread(id.to_string()));
        }
        Ok(ThreadHandle::new(self.clone(), id))
    }

    /// The store under the engine (reads, subscriptions, verify).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.shell.store
    }

    /// The engine's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.shell.clock
    }

    /// Whether a runner of this engine (this process) holds `thread` now: driving it, or
    /// parking it and not yet done releasing its claim. A test waits for `false` before it
    /// answers a parked thread or moves a manual clock past its timer
    /// (`cairn_testkit::runner_released`).
    ///
    /// # Examples
    /// ```
    /// # async fn f(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// let thread = cairn::ThreadId::new("t1")?;
    /// while engine.is_driven(&thread) {
    ///     tokio::task::yield_now().await;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_driven(&self, thread: &ThreadId) -> bool {
        self.shell.coord.is_driven(thread)
    }

    /// Calls `hook(thread, step, total_acknowledged_steps)` after every acknowledged step.
    pub fn on_step(&self, hook: StepHook) {
        self.shell.acks.set_hook(hook);
    }

    /// Shuts down gracefully: every runner stops at its next step boundary (its thread stays
    /// Running and is recovered at the next open), timers stop, then the store is flushed.
    pub async fn shutdown(&self) {
        self.shell.tasks.stop(false).await;
    }

    /// Stops every engine task where it stands, as a crash would (for tests: the store stays
    /// whatever the last commit left; writes already handed to storage may still commit).
    pub async fn crash(&self) {
        self.shell.tasks.stop(true).await;
    }

    /// Number of steps acknowledged by this engine instance.
    pub fn acknowledged_steps(&self) -> u64 {
        self.shell.acks.count()
    }

    /// Runners of this engine stopped because a write was refused as another owner's: on a
    /// shared database, a runner that stalled past its lease (its thread was taken over) or
    /// whose thread another process changed. Zero on a redb file.
    pub fn fenced_runners(&self) -> u64 {
        self.shell.acks.fenced_count()
    }

    /// The registered workflow a thread runs, checked against the fingerprint it was started
    /// with.
    ///
    /// # Errors
    /// [`Error::UnknownWorkflow`], [`Error::FingerprintChanged`], [`Error::UnknownThread`].
    pub async fn workflow_of(&self, thread: &ThreadId) -> Result<Arc<DynWorkflow>, Error> {
        let record = crate::exec::fetch::record(self.shell.store.as_ref(), thread).await?;
        self.shell.registry.workflow_for(&record)
    }

    /// The registered workflow the thread of `record` runs, as [`Engine::workflow_of`] (for
    /// callers holding the record already: nothing is read).
    pub(crate) fn workflow_for(
        &self,
        record: &cairn_storage::ThreadRecord,
    ) -> Result<Arc<DynWorkflow>, Error> {
        self.shell.registry.workflow_for(record)
    }

    /// Every registered workflow, by id then version.
    pub fn workflows(&self) -> Vec<Arc<DynWorkflow>> {
        self.shell.registry.all()
    }

    /// The ids of the registered workflows, each once, in order.
    pub(crate) fn workflow_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.workflows().iter().map(|wf| wf.id().to_owned()).collect();
        ids.dedup();
        ids
    }

    /// Appends `batch` and waits until it is durable.
    pub(crate) async fn write(
        &self,
        batch: cairn_storage::Batch,
    ) -> Result<cairn_storage::Appended, cairn_storage::Error> {
        self.shell.store.append_async(batch).await?.wait().await
    }
}
