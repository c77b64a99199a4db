//! Fairness weights between a queue's keys (`docs/queues.md`, "Fairness weights"): between
//! heads of equal priority, admission serves keys in proportion to their weights, by stride
//! scheduling. Each key has a pass value; serving a key advances its pass by
//! [`STRIDE`] / its weight, and the lowest pass is served next (ties: the key served least
//! recently, then the oldest ticket). A key with no pass yet (new, or back after it had
//! nothing waiting or running) starts at the queue's floor, the pass the last admission was
//! made at, and a key's pass below the floor counts as the floor: a key gains no credit while
//! it waits behind its own limits or is away. Deterministic: no clocks, no randomness.
//!
//! A queue without weights, or whose weights all equal its default, admits exactly as before
//! weights existed (the least recently served key first): weights that do not differ leave
//! round robin as it was, and its record has no fairness part (`queue_wire.rs`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::limits::{self, QUEUE_FAIRNESS_KEYS_MAX, QUEUE_FAIRNESS_WEIGHT_MAX};

/// The pass a key of weight 1 advances by per admission (a key of weight `w`: `STRIDE / w`).
/// Divisible by every weight up to 16, so small ratios are exact.
pub(crate) const STRIDE: u64 = 720_720 * 1_000;

/// A queue's fairness weights: per key, how large a share of admissions it gets while it
/// waits beside others of the same priority.
///
/// # Examples
///
/// ```
/// use cairn_storage::Fairness;
/// let fair = Fairness::new(1, [("gold".to_string(), 3)]);
/// assert_eq!((fair.weight_of("gold"), fair.weight_of("anyone")), (3, 1));
/// assert!(fair.check().is_ok());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fairness {
    /// The weight of a key not in `weights` (0 is read as 1).
    pub default_weight: u32,
    /// Keys with a weight of their own.
    pub weights: BTreeMap<String, u32>,
}

impl Fairness {
    /// Weights `weights`, and `default_weight` for the other keys.
    pub fn new(default_weight: u32, weights: impl IntoIterator<Item = (String, u32)>) -> Self {
        Fairness { default_weight, weights: weights.into_iter().collect() }
    }

    /// The weight of `key`.
    pub fn weight_of(&self, key: &str) -> u32 {
        self.weights.get(key).copied().unwrap_or(self.default_weight).max(1)
    }

    /// Whether some key's weight differs from another's (else admission is round robin).
    pub fn differs(&self) -> bool {
        let default = self.default_weight.max(1);
        self.weights.values().any(|w| *w != default)
    }

    /// Checks the weights are usable.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a weight of 0 or over [`QUEUE_FAIRNESS_WEIGHT_MAX`];
    /// [`Error::LimitExceeded`] past [`QUEUE_FAIRNESS_KEYS_MAX`] keys.
    pub fn check(&self) -> Result<(), Error> {
        limits::check("QUEUE_FAIRNESS_KEYS_MAX", self.weights.len(), QUEUE_FAIRNESS_KEYS_MAX)?;
        let weights = self.weights.values().chain(std::iter::once(&self.default_weight));
        for w in weights {
            if *w == 0 || *w > QUEUE_FAIRNESS_WEIGHT_MAX {
                return Err(Error::Invalid {
                    detail: format!(
                        "a fairness weight is 1 to QUEUE_FAIRNESS_WEIGHT_MAX ({QUEUE_FAIRNESS_WEIGHT_MAX}), not {w}"
                    ),
                });
            }
        }
        Ok(())
    }
}

/// The stride scheduler's state in a queue's record: each key's pass, and the floor.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FairState {
    /// Per key with a waiting or running thread, its pass (a key with neither is dropped).
    pub pass: BTreeMap<String, u64>,
    /// The pass the latest admission was made at.
    pub floor: u64,
}

impl FairState {
    /// The pass `key` competes with now.
    pub fn pass_of(&self, key: &str) -> u64 {
        self.pass.get(key).copied().unwrap_or(self.floor).max(self.floor)
    }

    /// Records an admission of `key`, of weight `weight`.
    pub(crate) fn served(&mut self, key: &str, weight: u32) {
        let at = self.pass_of(key);
        self.floor = at;
        let next = at.saturating_add(STRIDE / u64::from(weight.max(1)));
        self.pass.insert(key.to_owned(), next);
    }

    /// Forgets `key` (it has nothing waiting or running).
    pub(crate) fn forget(&mut self, key: &str) {
        self.pass.remove(key);
    }
}
