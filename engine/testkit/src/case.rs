//! Crash cases: where a run is crashed and how, written so that a failure can be replayed.
//!
//! A [`CrashCase`] names the I/O op the fault fires at (ops are the `write`, `set_len` and
//! `sync_data` calls redb makes on its file, numbered from 0 for a fresh database), the
//! [`CrashModel`], the seed of the model's random choices, and optionally a second crash during
//! recovery. Its text form (`torn_write@17#2a`, `kill@40#9+lose_unsynced@3`) is what failures
//! print and what `CAIRN_CRASH_CASE` accepts.

use std::fmt;
use std::str::FromStr;

use cairn_storage_testkit::fault::{CrashModel, OpKind};

/// A crash during recovery: the fault armed on the reopened file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SecondCrash {
    /// The mutating op of the recovery run it fires at (numbered from 0 at the reopen).
    pub op: u64,
    /// The model (one that kills the process: a crash, not an error).
    pub model: CrashModel,
}

/// One crash case: a fault at an I/O op, its model and seed, and maybe a second crash while
/// recovering.
///
/// # Examples
/// ```
/// use cairn_testkit::CrashCase;
/// use cairn_testkit::CrashModel;
/// let case: CrashCase = "torn_write@17#2a+kill@3".parse().expect("a case");
/// assert_eq!(case.op, 17);
/// assert_eq!(case.model, CrashModel::TornWrite);
/// assert_eq!(case.seed, 0x2a);
/// assert_eq!(case.to_string(), "torn_write@17#2a+kill@3");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CrashCase {
    /// The mutating op of the first run the fault fires at.
    pub op: u64,
    /// What happens then.
    pub model: CrashModel,
    /// Seed of the model's random choices (torn-write cut, reordered subset, garbage bytes).
    pub seed: u64,
    /// A second crash during the first recovery.
    pub then: Option<SecondCrash>,
}

/// Models a second crash is drawn from: process and power failures within redb's media
/// contract (a second crash is a crash, not an I/O error the process survives).
pub const SECOND_CRASH_MODELS: [CrashModel; 4] = [
    CrashModel::Kill,
    CrashModel::LoseUnsynced,
    CrashModel::TornWrite,
    CrashModel::ReorderedUnsynced,
];

impl CrashCase {
    /// A single crash at `op` under `model`, with a seed derived from both.
    pub fn at(op: u64, model: CrashModel) -> CrashCase {
        CrashCase { op, model, seed: mix(op.wrapping_mul(31) ^ model as u64), then: None }
    }

    /// The same case with a second crash during recovery.
    #[must_use]
    pub fn then(self, op: u64, model: CrashModel) -> CrashCase {
        CrashCase { then: Some(SecondCrash { op, model }), ..self }
    }

    /// The case random number `seed` stands for, in a run of `ops` mutating ops: a uniform
    /// model and op, and in one case of three a second crash at an op of the recovery.
    ///
    /// # Examples
    /// ```
    /// use cairn_testkit::CrashCase;
    /// let a = CrashCase::random(42, 100);
    /// assert_eq!(a, CrashCase::random(42, 100));
    /// assert!(a.op < 100);
    /// ```
    pub fn random(seed: u64, ops: u64) -> CrashCase {
        let mut rng = SplitMix(seed);
        let model = CrashModel::ALL[(rng.next() % CrashModel::ALL.len() as u64) as usize];
        let op = rng.next() % ops.max(1);
        let case_seed = rng.next();
        let then = rng.next().is_multiple_of(3).then(|| SecondCrash {
            // Recovery redoes at most what is left of the run, plus the reopen itself.
            op: rng.next() % (ops.saturating_sub(op) + 16),
            model: SECOND_CRASH_MODELS[(rng.next() % SECOND_CRASH_MODELS.len() as u64) as usize],
        });
        CrashCase { op, model, seed: case_seed, then }
    }

    /// Every case of an exhaustive sweep over a run whose mutating ops were `ops` on a file
    /// that was `start_len` bytes long: each model at each op where it makes a distinct case
    /// (see [`applies`]), then a double crash at every op (first model and second model
    /// rotating, second op derived from the seed).
    pub fn every(ops: &[OpKind], start_len: u64) -> Vec<CrashCase> {
        let mut cases = Vec::new();
        for model in CrashModel::ALL {
            cases.extend(CrashCase::every_with(model, ops, start_len));
        }
        let n = ops.len() as u64;
        for op in 0..n {
            let first = SECOND_CRASH_MODELS[(op % 4) as usize];
            let second = SECOND_CRASH_MODELS[((op / 4) % 4) as usize];
            let case = CrashCase::at(op, first);
            cases.push(case.then(case.seed % (n - op + 16), second));
        }
        cases
    }
}

impl CrashCase {
    /// One case per op of `ops` where `model` applies (see [`applies`]).
    pub fn every_with(model: CrashModel, ops: &[OpKind], start_len: u64) -> Vec<CrashCase> {
        applies(model, ops, start_len).into_iter().map(|op| CrashCase::at(op, model)).collect()
    }
}

/// The op indexes of `ops` (a clean run's mutating ops on a file `start_len` bytes long) where
/// `model` makes a distinct case: a torn write differs from a plain power loss only at a write,
/// a failed fsync only at a sync, a full disk only where the file grows; every other model
/// applies at every op.
pub fn applies(model: CrashModel, ops: &[OpKind], start_len: u64) -> Vec<u64> {
    let mut size = start_len;
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let keep = match model {
            CrashModel::TornWrite => matches!(op, OpKind::Write { .. }),
            CrashModel::FailedSync => *op == OpKind::Sync,
            CrashModel::DiskFull => op.grows_past(size),
            _ => true,
        };
        match *op {
            OpKind::Write { offset, len } => size = size.max(offset.saturating_add(len)),
            OpKind::SetLen { to, .. } => size = to,
            OpKind::Sync | OpKind::Read { .. } => {}
        }
        if keep {
            out.push(i as u64);
        }
    }
    out
}

/// Which cases a sweep runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cases {
    /// Every op of the uninterrupted run under every crash model, plus a double crash at every
    /// op ([`CrashCase::every`]).
    Every,
    /// Every op of the uninterrupted run where this model applies ([`CrashCase::every_with`]).
    EveryWith(CrashModel),
    /// `count` random cases ([`CrashCase::random`]) from case seeds derived from `seed`.
    Random {
        /// How many.
        count: u64,
        /// The sweep's seed (printed; `CAIRN_CRASH_SEED` overrides it).
        seed: u64,
    },
}

impl From<u64> for Cases {
    /// `n` random cases with the default seed 0.
    fn from(count: u64) -> Cases {
        Cases::Random { count, seed: 0 }
    }
}

impl fmt::Display for CrashCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}#{:x}", self.model, self.op, self.seed)?;
        if let Some(then) = self.then {
            write!(f, "+{}@{}", then.model, then.op)?;
        }
        Ok(())
    }
}

/// Why a crash case's text did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseCaseError(String);

impl fmt::Display for ParseCaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a crash case ({}); expected MODEL@OP#SEEDHEX[+MODEL@OP]", self.0)
    }
}

impl std::error::Error for ParseCaseError {}

impl FromStr for CrashCase {
    type Err = ParseCaseError;

    fn from_str(s: &str) -> Result<CrashCase, ParseCaseError> {
        let bad = |what: &str| ParseCaseError(format!("{what} in {s:?}"));
        let (first, second) = match s.split_once('+') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let (model_op, seed) = first.split_once('#').ok_or_else(|| bad("no #SEED"))?;
        let (model, op) = parse_model_op(model_op).ok_or_else(|| bad("bad MODEL@OP"))?;
        let seed = u64::from_str_radix(seed.trim(), 16).map_err(|_| bad("bad seed"))?;
        let then = match second {
            Some(text) => {
                let (model, op) = parse_model_op(text).ok_or_else(|| bad("bad second crash"))?;
                Some(SecondCrash { op, model })
            }
            None => None,
        };
        Ok(CrashCase { op, model, seed, then })
    }
}

fn parse_model_op(text: &str) -> Option<(CrashModel, u64)> {
    let (model, op) = text.trim().split_once('@')?;
    let model = CrashModel::ALL.into_iter().find(|m| m.as_str() == model)?;
    Some((model, op.parse().ok()?))
}

/// SplitMix64: the case generator (tiny and seedable, so a case seed is all a replay needs).
pub(crate) struct SplitMix(pub(crate) u64);

impl SplitMix {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }
}

/// The seed of random case number `i` of a sweep seeded with `seed`.
pub(crate) fn case_seed(seed: u64, i: u64) -> u64 {
    mix(seed ^ mix(i.wrapping_add(1)))
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips() {
        for seed in 0..200 {
            let case = CrashCase::random(seed, 50);
            assert_eq!(case.to_string().parse::<CrashCase>(), Ok(case));
        }
        assert!("kill@x#1".parse::<CrashCase>().is_err());
        assert!("nonsense@1#1".parse::<CrashCase>().is_err());
        assert!("kill@1".parse::<CrashCase>().is_err());
    }

    #[test]
    fn every_covers_each_model() {
        let ops = [
            OpKind::SetLen { from: 0, to: 4096 },
            OpKind::Write { offset: 0, len: 512 },
            OpKind::Sync,
            OpKind::Write { offset: 512, len: 100 },
        ];
        let cases = CrashCase::every(&ops, 0);
        let torn: Vec<u64> = cases
            .iter()
            .filter(|c| c.model == CrashModel::TornWrite && c.then.is_none())
            .map(|c| c.op)
            .collect();
        assert_eq!(torn, [1, 3]);
        let full: Vec<u64> = cases
            .iter()
            .filter(|c| c.model == CrashModel::DiskFull && c.then.is_none())
            .map(|c| c.op)
            .collect();
        assert_eq!(full, [0]);
        assert_eq!(cases.iter().filter(|c| c.then.is_some()).count(), 4);
    }
}
