//! The workflow fingerprint: BLAKE3 over a canonical byte encoding of the structure.
//!
//! The encoding is written by hand, field by field, so it depends on nothing that may change
//! between compilers, platforms or library versions (no serde, no `Debug`, no `type_name`, no
//! hash-map order). Integers are little-endian; strings and lists are prefixed by a `u32` length;
//! floats by their IEEE bits, with `-0.0` read as `0.0`; set-like lists (tags, non-retryable
//! codes, permissions) are sorted first; targets are node ids (declaration order) or `u32::MAX`
//! for `END`.
//!
//! Covered: id, version, budgets, permissions, checkpoint policy, and per node (in declaration
//! order) its name, kind, policy (version included) and, for a sub-workflow, the child's
//! fingerprint; then the links of `START` and of each node (edges, route targets, gotos) and the
//! joins. Not covered: the code inside handlers and route functions, which the node `version`
//! stands for. Changing the encoding changes every fingerprint: bump [`DOMAIN`] when you do.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Recovery;
use crate::erased::{DynNodeKind, DynWorkflow};
use crate::graph::{Links, NextTarget};
use crate::policy::NodePolicy;

/// Domain separation and encoding version.
const DOMAIN: &[u8] = b"cairn-dsl/workflow-fingerprint/v1";

/// A workflow's structural fingerprint (32 bytes of BLAKE3). Displays as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The 64 lowercase hex digits.
    ///
    /// # Examples
    /// ```
    /// let f = cairn_dsl::Fingerprint([0xab; 32]);
    /// assert_eq!(f.to_hex(), "ab".repeat(32));
    /// ```
    pub fn to_hex(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One write of the 64 digits (a `write!` per byte cost about 9,000 instructions a call,
        // and every thread's creation renders its workflow's fingerprint).
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut hex = [0u8; 64];
        for (pair, byte) in hex.chunks_exact_mut(2).zip(self.0) {
            pair[0] = DIGITS[usize::from(byte >> 4)];
            pair[1] = DIGITS[usize::from(byte & 0x0f)];
        }
        f.write_str(std::str::from_utf8(&hex).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// A string that is not 64 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a fingerprint is 64 hex digits")]
pub struct ParseFingerprintError;

impl FromStr for Fingerprint {
    type Err = ParseFingerprintError;

    /// Parses 64 hex digits (either case).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::Fingerprint;
    /// let f: Fingerprint = "01".repeat(32).parse().unwrap();
    /// assert_eq!(f, Fingerprint([1; 32]));
    /// assert!("xyz".parse::<Fingerprint>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bytes = s.as_bytes();
        if bytes.len() != 64 {
            return Err(ParseFingerprintError);
        }
        let mut out = [0_u8; 32];
        for (slot, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
            let hi = hex_digit(pair[0]).ok_or(ParseFingerprintError)?;
            let lo = hex_digit(pair[1]).ok_or(ParseFingerprintError)?;
            *slot = hi << 4 | lo;
        }
        Ok(Self(out))
    }
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl Serialize for Fingerprint {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Fingerprint {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The fingerprint of `wf` (its own `fingerprint` field is not read).
pub(crate) fn compute(wf: &DynWorkflow) -> Fingerprint {
    let mut e = Encoder(blake3::Hasher::new());
    e.bytes(DOMAIN);
    e.str(&wf.id);
    e.u32(wf.version);

    let b = &wf.budgets;
    for limit in [b.max_steps, b.max_tool_calls, b.max_tokens, b.max_cost_micros, b.max_wall_ms] {
        e.opt_u64(limit);
    }
    e.f64(b.warn_fraction);
    e.strs(wf.permissions.iter().map(String::as_str));
    e.opt_u64(wf.checkpoint.every_steps);
    e.opt_u64(wf.checkpoint.every_ms);

    e.len(wf.nodes.len());
    for node in &wf.nodes {
        e.str(&node.name);
        match &node.kind {
            DynNodeKind::Task(_) => e.u8(1),
            DynNodeKind::Map { .. } => e.u8(2),
            DynNodeKind::Subgraph { child, .. } => {
                e.u8(3);
                e.bytes(&child.fingerprint().0);
            }
        }
        e.policy(&node.policy);
    }

    e.links(&wf.shape.start);
    for links in &wf.shape.nodes {
        e.links(links);
    }
    for join in &wf.shape.joins {
        match join {
            None => e.u8(0),
            Some(sources) => {
                e.u8(1);
                e.len(sources.len());
                for &id in sources {
                    e.id(id);
                }
            }
        }
    }
    Fingerprint(*e.0.finalize().as_bytes())
}

struct Encoder(blake3::Hasher);

impl Encoder {
    fn bytes(&mut self, b: &[u8]) {
        self.0.update(b);
    }

    fn u8(&mut self, v: u8) {
        self.bytes(&[v]);
    }

    fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    /// Lengths and ids are bounded by `limits.rs` far below `u32::MAX`; saturating keeps the
    /// encoding total anyway.
    fn len(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }

    fn id(&mut self, id: usize) {
        self.len(id);
    }

    fn f64(&mut self, v: f64) {
        // Adding 0.0 turns -0.0 into 0.0 and leaves every other value unchanged.
        self.u64((v + 0.0).to_bits());
    }

    fn opt_u64(&mut self, v: Option<u64>) {
        match v {
            None => self.u8(0),
            Some(v) => {
                self.u8(1);
                self.u64(v);
            }
        }
    }

    fn str(&mut self, s: &str) {
        self.len(s.len());
        self.bytes(s.as_bytes());
    }

    /// A set of strings: sorted, so declaration order does not matter.
    fn strs<'a>(&mut self, items: impl Iterator<Item = &'a str>) {
        let mut items: Vec<&str> = items.collect();
        items.sort_unstable();
        self.len(items.len());
        for s in items {
            self.str(s);
        }
    }

    fn targets(&mut self, targets: &[NextTarget]) {
        self.len(targets.len());
        for t in targets {
            match t {
                NextTarget::Node(id) => self.id(*id),
                NextTarget::End => self.u32(u32::MAX),
            }
        }
    }

    fn links(&mut self, links: &Links) {
        self.targets(&links.edges);
        match &links.route {
            None => self.u8(0),
            Some(route) => {
                self.u8(1);
                self.targets(route);
            }
        }
        self.targets(&links.gotos);
    }

    fn policy(&mut self, p: &NodePolicy) {
        let r = &p.retry;
        self.u32(r.max_attempts);
        self.u64(r.initial_backoff_ms);
        self.u64(r.max_backoff_ms);
        self.f64(r.multiplier);
        self.f64(r.jitter);
        self.strs(r.non_retryable.iter().map(String::as_str));
        self.opt_u64(p.timeout_ms);
        self.u8(u8::from(p.checkpoint_after));
        self.u8(u8::from(p.phase));
        self.strs(p.tags.iter().map(String::as_str));
        self.u32(p.version);
        match p.max_visits {
            None => self.u8(0),
            Some(v) => {
                self.u8(1);
                self.u32(v);
            }
        }
        // Hashed only when set, so workflows without one keep the fingerprints they had.
        match &p.on_failure {
            Recovery::Fail => {}
            Recovery::Fallback(node) => {
                self.u8(0xF1);
                self.str(node);
            }
            other => {
                self.u8(0xF2);
                self.str(other.name());
            }
        }
        // Per kind, likewise only when set.
        for (kind, recovery) in &p.on_failure_by_kind {
            self.u8(0xF3);
            self.u8(kind.byte());
            self.str(recovery.name());
            if let Recovery::Fallback(node) = recovery {
                self.str(node);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Fingerprint;

    #[test]
    fn the_hex_digits_are_each_bytes_two_lowercase_digits() {
        for bytes in [[0u8; 32], [0xff; 32], std::array::from_fn(|i| (i as u8).wrapping_mul(37))] {
            let expected: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let shown = Fingerprint(bytes).to_string();
            assert_eq!(shown, expected);
            assert_eq!(shown.parse::<Fingerprint>().expect("parses back"), Fingerprint(bytes));
        }
    }
}
