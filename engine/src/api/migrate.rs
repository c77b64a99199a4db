//! Migrations: moving a parked thread onto a new version of its workflow, deliberately.
//!
//! A migration is a function from the old version's state (JSON) to the new version's. Applying
//! one writes, in one batch guarded by the thread's status: a `checkpoint_created` event, a
//! checkpoint tagged [`MIGRATION_TAG`] holding the migrated state under the new version, and the
//! thread record pinned to the new version. Restore at or after that seq starts from that
//! checkpoint, so it never needs the old reducer; seqs before it still fold with the old version
//! (time travel looks the version up per seq). The thread keeps its status: resume it to go on.
//!
//! Keep migration checkpoints: restore past a migration needs its checkpoint (retention keeps
//! the latest checkpoint of a thread, which is at or after the migration).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use cairn_storage::{CheckpointKind, CheckpointMeta, ThreadId};
use serde_json::Value;

use super::checkpoint::ParkedCheckpoint;
use crate::api::engine::Engine;
use crate::error::Error;
use crate::exec::shell::Shell;

/// The tag of the checkpoint a migration writes (and of nothing else).
pub const MIGRATION_TAG: &str = "migration";

pub(crate) type MigrationFn = Arc<dyn Fn(Value) -> Result<Value, String> + Send + Sync>;
type Registry = HashMap<(String, u32, u32), MigrationFn>;

/// Registered migrations per engine instance. Keyed by a weak reference to the engine's shared
/// state so that a dropped engine's entries are recognised and swept, and two engines in one
/// process never see each other's migrations.
static MIGRATIONS: Mutex<Vec<(Weak<Shell>, Registry)>> = Mutex::new(Vec::new());

impl Engine {
    /// Registers `f`, which turns a state of `workflow` v`from` into a state of v`to`. Several
    /// migrations chain (v1 -> v2 -> v3); registering the same pair again replaces it. An
    /// engine that continues a migrate batch at open needs it before:
    /// [`EngineBuilder::migration`](crate::EngineBuilder::migration).
    ///
    /// # Examples
    /// ```no_run
    /// # fn run(engine: cairn::Engine) {
    /// // v2 renamed `n` to `count`.
    /// engine.register_migration("counter", 1, 2, |mut state| {
    ///     let n = state.get("n").cloned().ok_or("no field n")?;
    ///     let obj = state.as_object_mut().ok_or("not an object")?;
    ///     obj.remove("n");
    ///     obj.insert("count".into(), n);
    ///     Ok(state)
    /// });
    /// # }
    /// ```
    pub fn register_migration(
        &self,
        workflow: &str,
        from: u32,
        to: u32,
        f: impl Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
    ) {
        let mut all = MIGRATIONS.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|(w, _)| w.strong_count() > 0);
        let me = Arc::downgrade(&self.shell);
        let index = match all.iter().position(|(w, _)| Weak::ptr_eq(w, &me)) {
            Some(i) => i,
            None => {
                all.push((me, HashMap::new()));
                all.len() - 1
            }
        };
        all[index].1.insert((workflow.to_owned(), from, to), Arc::new(f));
    }

    /// Moves a parked thread (paused, blocked, waiting, sleeping, or parked by recovery) onto
    /// version `to_version` of its workflow, through the registered migrations.
    ///
    /// # Errors
    /// [`Error::NoMigration`] if no chain of migrations leads there; [`Error::UnknownWorkflow`]
    /// if either version is not registered; [`Error::WrongStatus`] for an ended thread or one a
    /// runner drives; [`Error::Invalid`] if the migration fails, its result is not a state of the
    /// new version, the new version lacks a node the thread is at, or the open step has
    /// finished tasks whose updates belong to the old version; storage errors.
    pub async fn migrate(&self, thread: &str, to_version: u32) -> Result<(), Error> {
        let id = ThreadId::new(thread)?;
        let record = crate::exec::fetch::record(self.store().as_ref(), &id).await?;
        if record.status.is_terminal() {
            return Err(Error::WrongStatus {
                thread: id.to_string(),
                status: record.status,
                detail: "an ended thread is not migrated".into(),
            });
        }
        let old = record.workflow.clone();
        if old.version == to_version {
            return Err(Error::Invalid(format!("thread {id} is on v{to_version} already")));
        }
        let chain = self.migration_chain(&old.id, old.version, to_version)?;
        let new_wf = self.shell.registry.latest(&old.id, Some(to_version))?;
        let last = record.last.map_or(0, |b| b.seq.0);
        let ctx = super::versioned::restore_at(self, &id, last).await?;
        if let Some((task, _)) = ctx.meta.open.iter().find(|(_, j)| j.outcome.is_some()) {
            return Err(Error::Invalid(format!(
                "thread {id} has an open step where {task} finished under v{}: migrate at a step \
                 boundary (resume it until it parks between steps)",
                old.version
            )));
        }
        let mut nodes: Vec<&str> = ctx.meta.frontier.iter().map(String::as_str).collect();
        nodes.extend(ctx.meta.open.keys().map(|t| &*t.node));
        let arrivals =
            ctx.meta.arrivals.iter().flat_map(|(j, from)| std::iter::once(j).chain(from));
        nodes.extend(arrivals.map(String::as_str));
        if let Some(missing) = nodes.into_iter().find(|n| new_wf.node_id(n).is_none()) {
            return Err(Error::Invalid(format!(
                "thread {id} is at node {missing}, which v{to_version} of {} does not have",
                old.id
            )));
        }
        let mut state = ctx.state.to_json().map_err(|e| Error::Codec(e.to_string()))?;
        for (from, to, f) in chain {
            state = f(state).map_err(|e| {
                Error::Invalid(format!("migration of {} v{from} -> v{to} failed: {e}", old.id))
            })?;
        }
        new_wf.state_from_json(&state).map_err(|e| {
            Error::Invalid(format!("the migrated state is not a state of v{to_version}: {e}"))
        })?;
        let new_ref = crate::exec::start::workflow_ref(&new_wf);
        let description = format!("migrated {} v{} -> v{}", old.id, old.version, to_version);
        let mut custom = BTreeMap::new();
        custom.insert("from_version".to_owned(), old.version.to_string());
        custom.insert("to_version".to_owned(), to_version.to_string());
        custom.insert("from_fingerprint".to_owned(), old.fingerprint.to_string());
        custom.insert("to_fingerprint".to_owned(), new_ref.fingerprint.to_string());
        let meta = CheckpointMeta {
            creator: "migration".into(),
            description: description.clone(),
            tags: vec![MIGRATION_TAG.to_owned()],
            custom,
        };
        let checkpoint = ParkedCheckpoint { kind: CheckpointKind::Manual, description, meta };
        self.write_parked(record, ctx, Vec::new(), checkpoint, move |mut snapshot| {
            snapshot.meta.workflow = new_ref;
            snapshot.meta.visits.retain(|node, _| new_wf.node_id(node).is_some());
            snapshot.state = state;
            Ok(snapshot)
        })
        .await?;
        Ok(())
    }

    /// The registered migrations leading from `from` to `to` (shortest chain).
    fn migration_chain(
        &self,
        workflow: &str,
        from: u32,
        to: u32,
    ) -> Result<Vec<(u32, u32, MigrationFn)>, Error> {
        let edges: Vec<(u32, u32, MigrationFn)> = {
            let all = MIGRATIONS.lock().unwrap_or_else(PoisonError::into_inner);
            let me = Arc::downgrade(&self.shell);
            all.iter()
                .find(|(w, _)| Weak::ptr_eq(w, &me))
                .map(|(_, reg)| {
                    reg.iter()
                        .filter(|((w, _, _), _)| w == workflow)
                        .map(|((_, a, b), f)| (*a, *b, f.clone()))
                        .collect()
                })
                .unwrap_or_default()
        };
        // Breadth-first over versions: the shortest chain, ties broken by version order.
        let mut prev: HashMap<u32, usize> = HashMap::new();
        let mut queue = VecDeque::from([from]);
        let mut order: Vec<usize> = (0..edges.len()).collect();
        order.sort_by_key(|&i| (edges[i].0, edges[i].1));
        while let Some(v) = queue.pop_front() {
            if v == to {
                break;
            }
            for &i in &order {
                let (a, b, _) = &edges[i];
                if *a == v && *b != from && !prev.contains_key(b) {
                    prev.insert(*b, i);
                    queue.push_back(*b);
                }
            }
        }
        if !prev.contains_key(&to) {
            return Err(Error::NoMigration { workflow: workflow.to_owned(), from, to });
        }
        let mut chain = Vec::new();
        let mut v = to;
        while v != from {
            let i = prev[&v];
            chain.push(edges[i].clone());
            v = edges[i].0;
        }
        chain.reverse();
        Ok(chain)
    }
}
