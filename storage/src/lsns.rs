//! The per-thread seq index: which lsn each seq of a thread has.
//!
//! Events are stored by lsn (one global, append-only log, so the hot insert always lands on the
//! B-tree's right edge). A thread's seqs map to lsns through its *tail* (the lsns of its newest
//! events, at most [`SEQ_CHUNK_LEN`] - 1, kept in its thread record, which every group commit that
//! appends to the thread rewrites anyway) and *chunks* (a [`SeqChunk`] per [`SEQ_CHUNK_LEN`] older events, in the `seq_index`
//! table, written once when the tail fills). So an append touches two tables: the log and the
//! threads table, whose records are small and dense (many threads share a page).
//!
//! Lists of lsns are stored as deltas (the first from 0): every lsn is above the previous one,
//! so each delta is at least 1, and a thread's consecutive lsns usually differ by a small number
//! (one varint byte).

use serde::de::{SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ids::ThreadId;

/// Events per chunk of the seq index: the tail is flushed into a chunk when it reaches this many.
/// 32 keeps the tail in the thread record small (tens of bytes) while writing a chunk only once
/// every 32 appends of a thread.
pub const SEQ_CHUNK_LEN: usize = 32;

/// The most lsns a stored list (a chunk or a tail) may hold. Decoders refuse longer lists before
/// allocating for them; far above [`SEQ_CHUNK_LEN`] so the chunk length may grow in a later
/// version without a format change for readers.
pub const LSN_LIST_MAX: usize = 4096;

/// One chunk of a thread's seq index: the lsns of seqs `first_seq .. first_seq + lsns.len()`.
/// Stored framed (record kind 6) under the key `(thread, first_seq)`; it repeats its key so a
/// chunk found under the wrong key is detected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqChunk {
    /// The thread.
    pub thread: ThreadId,
    /// The seq of the first lsn.
    pub first_seq: u64,
    /// Strictly increasing lsns, one per seq.
    #[serde(with = "deltas")]
    pub lsns: Vec<u64>,
}

/// Serde for a strictly increasing lsn list as deltas (see the module doc).
pub(crate) mod deltas {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(lsns: &[u64], serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(lsns.len()))?;
        let mut previous = 0u64;
        for &lsn in lsns {
            // Encoders only ever see increasing lists (the writer builds them); a wrapped delta
            // would be refused by the decoder rather than silently misread.
            seq.serialize_element(&lsn.wrapping_sub(previous))?;
            previous = lsn;
        }
        seq.end()
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<u64>, D::Error> {
        deserializer.deserialize_seq(DeltaVisitor)
    }

    struct DeltaVisitor;

    impl<'de> Visitor<'de> for DeltaVisitor {
        type Value = Vec<u64>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of lsn deltas")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u64>, A::Error> {
            use serde::de::Error as _;
            let hint = seq.size_hint().unwrap_or(0);
            if hint > LSN_LIST_MAX {
                return Err(A::Error::custom(format!("{hint} lsns exceed {LSN_LIST_MAX}")));
            }
            let mut out = Vec::with_capacity(hint);
            let mut previous = 0u64;
            while let Some(delta) = seq.next_element::<u64>()? {
                if out.len() == LSN_LIST_MAX {
                    return Err(A::Error::custom(format!("more than {LSN_LIST_MAX} lsns")));
                }
                if delta == 0 {
                    return Err(A::Error::custom("lsns must strictly increase (a zero delta)"));
                }
                previous = previous
                    .checked_add(delta)
                    .ok_or_else(|| A::Error::custom("an lsn delta overflows"))?;
                out.push(previous);
            }
            Ok(out)
        }
    }
}
