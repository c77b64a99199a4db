//! A thread's counters: steps, tool calls, errors, retries, tokens and cost (in all and per
//! model), time per node, checkpoints. Part of the snapshot; folded from the log like the rest.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_dsl::Usage;
use serde::{Deserialize, Serialize};

use crate::limits::MODELS_PER_THREAD_MAX;

/// The model name usage is filed under once a thread has used [`MODELS_PER_THREAD_MAX`] others.
pub const OTHER_MODELS: &str = "(other)";

/// Counters and durations of the thread (steps, tool calls, tokens, cost, time).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Telemetry {
    /// Steps completed.
    pub steps: u64,
    /// Tool calls started.
    pub tool_calls: u64,
    /// Node failures (including retried ones).
    pub errors: u64,
    /// Retries scheduled.
    pub retries: u64,
    /// Tokens used (tools and nodes).
    pub tokens: u64,
    /// Cost used, in millionths of the currency unit.
    pub cost_micros: u64,
    /// Total ms of engine clock spent in each node.
    pub node_ms: BTreeMap<Arc<str>, u64>,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Tokens and cost per model, as tools reported them by name
    /// (`ToolCtx::report_model_usage`); at most [`MODELS_PER_THREAD_MAX`] names, the rest under
    /// [`OTHER_MODELS`]. Absent in snapshots written before it existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_model: BTreeMap<String, Usage>,
}

/// Adds `usage` (of which `models` is the part named by model) to the counters.
pub fn add_usage(t: &mut Telemetry, usage: &Usage, models: &BTreeMap<String, Usage>) {
    t.tokens = t.tokens.saturating_add(usage.tokens);
    t.cost_micros = t.cost_micros.saturating_add(usage.cost_micros);
    for (model, used) in models {
        let name = if t.by_model.contains_key(model) || t.by_model.len() < MODELS_PER_THREAD_MAX {
            model.as_str()
        } else {
            OTHER_MODELS
        };
        let entry = t.by_model.entry(name.to_owned()).or_default();
        *entry = entry.saturating_add(*used);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_summed_per_model_and_bounded() {
        let mut t = Telemetry::default();
        let u = |tokens| Usage { tokens, cost_micros: tokens * 2 };
        let models = BTreeMap::from([("small".to_owned(), u(3)), ("large".to_owned(), u(7))]);
        add_usage(&mut t, &u(10), &models);
        add_usage(&mut t, &u(3), &BTreeMap::from([("small".to_owned(), u(3))]));
        assert_eq!((t.tokens, t.cost_micros), (13, 26));
        assert_eq!(t.by_model["small"], u(6));
        assert_eq!(t.by_model["large"], u(7));
        for i in 0..MODELS_PER_THREAD_MAX {
            add_usage(&mut t, &u(1), &BTreeMap::from([(format!("m{i}"), u(1))]));
        }
        assert_eq!(t.by_model.len(), MODELS_PER_THREAD_MAX + 1);
        assert_eq!(t.by_model[OTHER_MODELS], u(2), "the two names past the bound");
    }
}
