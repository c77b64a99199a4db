//! The registered workflows, by id and version.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use cairn_dsl::DynWorkflow;
use cairn_storage::ThreadRecord;

use crate::error::Error;

/// The workflows an engine can run.
#[derive(Default)]
pub(crate) struct Registry {
    workflows: RwLock<HashMap<(String, u32), Arc<DynWorkflow>>>,
}

impl Registry {
    /// Registers `wf` and its sub-workflows (depth-first, without recursion).
    ///
    /// # Errors
    /// [`Error::Invalid`] if an id and version are registered with another fingerprint.
    pub fn register(&self, wf: Arc<DynWorkflow>) -> Result<(), Error> {
        let mut stack = vec![wf];
        let mut reg = self.workflows.write().unwrap_or_else(PoisonError::into_inner);
        while let Some(wf) = stack.pop() {
            for node in wf.nodes() {
                if let cairn_dsl::DynNodeKind::Subgraph { child, .. } = &node.kind {
                    stack.push(child.clone());
                }
            }
            let key = (wf.id().to_owned(), wf.version());
            if let Some(existing) = reg.get(&key)
                && existing.fingerprint() != wf.fingerprint()
            {
                return Err(Error::Invalid(format!(
                    "workflow {} v{} is registered with fingerprint {}; this definition has {} (bump the version)",
                    key.0,
                    key.1,
                    existing.fingerprint(),
                    wf.fingerprint()
                )));
            }
            reg.insert(key, wf);
        }
        Ok(())
    }

    /// The registered workflow a thread is pinned to, checked against its fingerprint.
    ///
    /// # Errors
    /// [`Error::UnknownWorkflow`], [`Error::FingerprintChanged`].
    pub fn workflow_for(&self, record: &ThreadRecord) -> Result<Arc<DynWorkflow>, Error> {
        let w = &record.workflow;
        let wf = self.latest(&w.id, Some(w.version))?;
        let current = wf.fingerprint().to_string();
        if current != *w.fingerprint {
            return Err(Error::FingerprintChanged {
                thread: record.id.to_string(),
                workflow: format!("{} v{}", w.id, w.version),
                recorded: w.fingerprint.to_string(),
                current,
            });
        }
        Ok(wf)
    }

    /// Version `version` of workflow `id`, or its newest registered version.
    ///
    /// # Errors
    /// [`Error::UnknownWorkflow`].
    pub fn latest(&self, id: &str, version: Option<u32>) -> Result<Arc<DynWorkflow>, Error> {
        let reg = self.workflows.read().unwrap_or_else(PoisonError::into_inner);
        let found = match version {
            Some(v) => reg.get(&(id.to_owned(), v)).cloned(),
            None => reg
                .iter()
                .filter(|((i, _), _)| i == id)
                .max_by_key(|((_, v), _)| *v)
                .map(|(_, w)| w.clone()),
        };
        found.ok_or_else(|| {
            Error::unknown_workflow(id, version, reg.keys().map(|(id, v)| (id.as_str(), *v)))
        })
    }

    /// Every registered workflow, by id then version.
    pub fn all(&self) -> Vec<Arc<DynWorkflow>> {
        let reg = self.workflows.read().unwrap_or_else(PoisonError::into_inner);
        let mut all: Vec<_> = reg.values().cloned().collect();
        all.sort_by(|a, b| (a.id(), a.version()).cmp(&(b.id(), b.version())));
        all
    }
}
