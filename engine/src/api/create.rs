//! Creating a thread without driving it ([`Engine::create`]): the thread is written `created`
//! (or queued, on a queue) and left for an engine that runs threads, which resumes it from its
//! open (recovery resumes `created` threads), its queue admitter, or, on a shared database, its
//! poller. A process that only writes (the command line: `cairn start` on a file no engine
//! holds) starts threads this way, so that it never leaves a thread `running` with nothing
//! driving it when it exits.
//!
//! The same write, followed by a drive of the thread (or a nudge of the queue admitter), is how
//! the HTTP endpoint starts one (`crate::serve`): [`Creation::created`] says whether the call
//! wrote the thread or found it (an existing id, a dedup key held).

use cairn_dsl::{State, Workflow};

use super::engine::Engine;
use super::handle::ThreadHandle;
use super::outcome::Untyped;
use crate::config::StartOptions;
use crate::error::Error;

/// What [`Engine::create`] did: the thread that answers the call, and whether the call wrote it.
#[derive(Clone)]
pub struct Creation<S = Untyped> {
    /// The thread: the one written, the existing thread of the id, or the holder of the dedup key.
    pub thread: ThreadHandle<S>,
    /// The call wrote the thread (`false`: it existed, or another thread holds the dedup key).
    pub created: bool,
}

impl Engine {
    /// Writes a thread of `workflow` on `input` as [`Engine::start`] does, but does not run it:
    /// it is left `created` (on a queue, queued in line) for an engine that runs threads. On a
    /// file that is the next engine to open it (`cairn serve`, `cairn worker`, an application:
    /// recovery resumes `created` threads); on a shared database any engine polling it. On an
    /// engine that runs threads itself, use [`Engine::start`]: a thread created here waits for
    /// the next open (a queued one is admitted by this engine's admitter).
    ///
    /// Idempotent on `options.thread_id` as `start` is; a dedup key held answers its holder.
    ///
    /// # Errors
    /// As [`Engine::start`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use cairn::dsl::{END, NodeOutput, Replace, START, Workflow};
    /// use cairn::{RecoveryPolicy, StartOptions, ThreadStatus};
    /// let double = Workflow::<Replace<u64>>::builder("double", 1)
    ///     .node("double", |s: std::sync::Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(s.0 * 2)) })
    ///     .edge(START, "double")
    ///     .edge("double", END)
    ///     .build()?;
    /// // An engine that runs nothing: it writes the thread and closes.
    /// let engine = cairn::Engine::builder("cairn.db").recovery(RecoveryPolicy::Park).open().await?;
    /// engine.register(&double)?;
    /// let done = engine.create(&double, Replace(21), StartOptions::id("job-1")).await?;
    /// assert_eq!(done.thread.status().await?, ThreadStatus::Created);
    /// engine.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub async fn create<S: State>(
        &self,
        workflow: &Workflow<S>,
        input: S,
        options: StartOptions,
    ) -> Result<Creation<S>, Error> {
        let options = self.pinned(workflow, options)?;
        let Creation { thread, created } = self.create_json(workflow.id(), input, options).await?;
        Ok(Creation { thread: thread.retyped(), created })
    }

    /// [`Engine::create`] of the newest registered version of the workflow named `workflow`
    /// (or `options.version`), on an input given as anything that serializes to its state: for
    /// callers that know the workflow by name only (the command line, the endpoint).
    ///
    /// # Errors
    /// As [`Engine::create`].
    pub async fn create_json(
        &self,
        workflow: &str,
        input: impl serde::Serialize,
        options: StartOptions,
    ) -> Result<Creation, Error> {
        let input = serde_json::to_value(input)?;
        self.write_start(workflow, input, options, false).await
    }

    /// Writes a start as [`Engine::create`] does and, when `drive`, runs what it wrote: a thread
    /// started at once is driven here, a queued one waits for this engine's admitter.
    pub(crate) async fn write_start(
        &self,
        workflow: &str,
        input: serde_json::Value,
        options: StartOptions,
        drive: bool,
    ) -> Result<Creation, Error> {
        if let Some(queue) = &options.queue
            && self.debounces(queue).await?
        {
            let thread = self.start_debounced(workflow, input, options).await?;
            return Ok(Creation { thread, created: true });
        }
        let prepared = self.prepare_start(workflow, input, options).await?;
        let (thread, created) = self.write_prepared(vec![prepared], drive).await?.remove(0);
        Ok(Creation { thread: ThreadHandle::new(self.clone(), thread), created })
    }
}
