//! Record framing: every stored record (a batch of events, thread, checkpoint, snapshot, lock,
//! seq chunk) is one frame.
//!
//! ```text
//! offset        size  field
//! 0             1     format version (FRAME_VERSION = 1)
//! 1             1     record kind (RecordKind discriminant)
//! 2             4     body length n, u32 little-endian
//! 6             n     body (postcard, see `codec`)
//! 6 + n         4     CRC32 (crc32fast, IEEE) of bytes 0 .. 6 + n, little-endian
//! ```
//!
//! The CRC covers the header as well as the body, so a flipped length, kind or version byte is
//! caught like a flipped body byte. A 32-bit CRC detects every single-bit error and every burst of
//! up to 32 bits. Decode checks, in order: minimum size, declared length against the kind's
//! bound (before trusting it for anything), declared length against the actual size, CRC, then
//! version and kind. It never indexes unchecked and never panics.

use crate::limits::{RECORD_BYTES_MAX, SNAPSHOT_BYTES_MAX};
use crate::wire_enum::wire_enum;

/// The frame format version written by this build.
pub const FRAME_VERSION: u8 = 1;
/// Offset of the version byte.
pub const VERSION_OFFSET: usize = 0;
/// Offset of the record-kind byte.
pub const KIND_OFFSET: usize = VERSION_OFFSET + 1;
/// Offset of the body length (u32 LE).
pub const LEN_OFFSET: usize = KIND_OFFSET + 1;
/// Size of the header; the body starts here.
pub const HEADER_LEN: usize = LEN_OFFSET + 4;
/// Size of the trailing CRC.
pub const CRC_LEN: usize = 4;
/// Bytes a frame adds around its body.
pub const OVERHEAD: usize = HEADER_LEN + CRC_LEN;

wire_enum! {
    /// What a frame holds. Discriminants are stored on disk: never reuse one.
    pub enum RecordKind: u8, from_u8 {
        /// An [`Event`](crate::Event).
        Event = 1 => "event",
        /// A [`ThreadRecord`](crate::ThreadRecord).
        Thread = 2 => "thread",
        /// A [`CheckpointInfo`](crate::CheckpointInfo) (checkpoint metadata).
        Checkpoint = 3 => "checkpoint",
        /// A checkpoint's snapshot bytes.
        Snapshot = 4 => "snapshot",
        /// A [`LockRecord`](crate::LockRecord).
        Lock = 5 => "lock",
        /// A [`SeqChunk`](crate::SeqChunk) of a thread's seq index.
        SeqChunk = 6 => "seq_chunk",
        /// An [`Event`](crate::Event) carrying a correlation id: the kind-1 body, then the id
        /// (format v2).
        CorrelatedEvent = 7 => "correlated_event",
        /// A [`CorrelationEntry`](crate::CorrelationEntry) of the correlation index (format v2).
        CorrelationEntry = 8 => "correlation_entry",
        /// A [`Signal`](crate::Signal) of a thread's signal inbox (format v3).
        Signal = 9 => "signal",
        /// A [`QueueState`](crate::QueueState): a named queue's limits and counts (format v4).
        Queue = 10 => "queue",
        /// A [`QueueMember`](crate::QueueMember): a thread's place in a queue (format v4).
        QueueMember = 11 => "queue_member",
        /// A run of one thread's events, consecutive in seq and lsn: a record of the log
        /// (format v6; see [`encode_event_batch`](crate::codec::encode_event_batch)).
        EventBatch = 12 => "event_batch",
    }
}

impl RecordKind {
    /// The largest body a frame of this kind may declare.
    pub const fn body_max(self) -> usize {
        match self {
            // A snapshot frame holds the snapshot plus its id and length prefix.
            RecordKind::Snapshot => SNAPSHOT_BYTES_MAX + 32,
            _ => RECORD_BYTES_MAX,
        }
    }
}

/// Why a frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// Fewer bytes than a header and a CRC.
    #[error("frame of {0} bytes is shorter than the {OVERHEAD}-byte minimum")]
    TooShort(usize),
    /// The declared body length is past the kind's bound.
    #[error("declared body length {declared} exceeds the maximum {max}")]
    TooLong {
        /// Declared length.
        declared: u64,
        /// Bound for the expected kind.
        max: u64,
    },
    /// The declared body length disagrees with the frame's size.
    #[error("declared body length {declared} but the frame holds {actual}")]
    LengthMismatch {
        /// Declared length.
        declared: u64,
        /// Bytes actually present for the body.
        actual: u64,
    },
    /// The CRC does not match.
    #[error("crc mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Crc {
        /// CRC in the frame.
        stored: u32,
        /// CRC of the bytes.
        computed: u32,
    },
    /// A version this build does not know.
    #[error("unknown frame version {0}")]
    UnknownVersion(u8),
    /// A different record kind than the table holds.
    #[error("record kind {found} where {expected} was expected")]
    WrongKind {
        /// Kind byte found.
        found: u8,
        /// Kind expected.
        expected: RecordKind,
    },
}

/// Frames `body` as a record of `kind`.
///
/// # Panics
///
/// If `body` is longer than `u32::MAX` bytes: every caller bounds bodies far below that.
pub fn encode(kind: RecordKind, body: &[u8]) -> Vec<u8> {
    let mut out = begin(kind, body.len());
    out.extend_from_slice(body);
    finish(out)
}

/// Starts a frame whose body (expected `capacity` bytes) the caller appends, then [`finish`]es.
pub(crate) fn begin(kind: RecordKind, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(OVERHEAD + capacity);
    out.push(FRAME_VERSION);
    out.push(kind.to_repr());
    out.extend_from_slice(&[0; 4]);
    out
}

/// Writes the body length and the CRC of a frame started with [`begin`].
pub(crate) fn finish(mut out: Vec<u8>) -> Vec<u8> {
    let body_len = out.len() - HEADER_LEN;
    let body_len = u32::try_from(body_len).expect("frame bodies are bounded by limits.rs");
    out[LEN_OFFSET..HEADER_LEN].copy_from_slice(&body_len.to_le_bytes());
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks a frame of kind `expected` and returns its body.
///
/// # Errors
///
/// A [`FrameError`] naming the first check that failed.
///
/// # Examples
///
/// ```
/// use cairn_storage::frame::{decode, encode, RecordKind};
/// let framed = encode(RecordKind::Lock, b"body");
/// assert_eq!(decode(&framed, RecordKind::Lock)?, b"body");
/// let mut flipped = framed.clone();
/// flipped[7] ^= 0x10;
/// assert!(decode(&flipped, RecordKind::Lock).is_err());
/// assert!(decode(&framed, RecordKind::Event).is_err());
/// # Ok::<(), cairn_storage::frame::FrameError>(())
/// ```
pub fn decode(bytes: &[u8], expected: RecordKind) -> Result<&[u8], FrameError> {
    let (Some(header), Some(crc_start)) =
        (bytes.get(..HEADER_LEN), bytes.len().checked_sub(CRC_LEN))
    else {
        return Err(FrameError::TooShort(bytes.len()));
    };
    if crc_start < HEADER_LEN {
        return Err(FrameError::TooShort(bytes.len()));
    }
    let declared = u64::from(read_u32(header, LEN_OFFSET));
    let max = expected.body_max() as u64;
    if declared > max {
        return Err(FrameError::TooLong { declared, max });
    }
    let actual = (crc_start - HEADER_LEN) as u64;
    if declared != actual {
        return Err(FrameError::LengthMismatch { declared, actual });
    }
    let (covered, stored) = bytes.split_at(crc_start);
    let stored = read_u32(stored, 0);
    let computed = crc32fast::hash(covered);
    if stored != computed {
        return Err(FrameError::Crc { stored, computed });
    }
    let version = header[VERSION_OFFSET];
    if version != FRAME_VERSION {
        return Err(FrameError::UnknownVersion(version));
    }
    let kind = header[KIND_OFFSET];
    if kind != expected.to_repr() {
        return Err(FrameError::WrongKind { found: kind, expected });
    }
    Ok(&covered[HEADER_LEN..])
}

/// Reads a u32 LE at `offset`; callers have checked `offset + 4 <= bytes.len()`.
fn read_u32(bytes: &[u8], offset: usize) -> u32 {
    let mut word = [0u8; 4];
    if let Some(src) = bytes.get(offset..offset + 4) {
        word.copy_from_slice(src);
    }
    u32::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_layout() {
        let framed = encode(RecordKind::Event, b"abc");
        assert_eq!(framed.len(), OVERHEAD + 3);
        assert_eq!(framed[VERSION_OFFSET], FRAME_VERSION);
        assert_eq!(framed[KIND_OFFSET], 1);
        assert_eq!(&framed[LEN_OFFSET..HEADER_LEN], &3u32.to_le_bytes());
        assert_eq!(decode(&framed, RecordKind::Event), Ok(&b"abc"[..]));
    }

    #[test]
    fn every_single_bit_flip_is_refused() {
        let framed = encode(RecordKind::Thread, b"a small thread body");
        for bit in 0..framed.len() * 8 {
            let mut flipped = framed.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(&flipped, RecordKind::Thread).is_err(), "bit {bit} undetected");
        }
    }

    #[test]
    fn every_truncation_and_extension_is_refused() {
        let framed = encode(RecordKind::Lock, b"lock body");
        for len in 0..framed.len() {
            assert!(decode(&framed[..len], RecordKind::Lock).is_err(), "len {len}");
        }
        let mut longer = framed.clone();
        longer.push(0);
        assert!(decode(&longer, RecordKind::Lock).is_err());
    }

    #[test]
    fn wrong_kind_and_unknown_version_are_named() {
        let framed = encode(RecordKind::Lock, b"x");
        assert!(matches!(
            decode(&framed, RecordKind::Event),
            Err(FrameError::WrongKind { found: 5, expected: RecordKind::Event })
        ));
        let mut newer = framed[..framed.len() - CRC_LEN].to_vec();
        newer[VERSION_OFFSET] = 2;
        let newer = finish_raw(newer);
        assert_eq!(decode(&newer, RecordKind::Lock), Err(FrameError::UnknownVersion(2)));
    }

    #[test]
    fn huge_declared_length_is_refused_before_use() {
        let mut framed = encode(RecordKind::Event, b"x");
        framed[LEN_OFFSET..HEADER_LEN].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode(&framed, RecordKind::Event), Err(FrameError::TooLong { .. })));
    }

    fn finish_raw(mut covered: Vec<u8>) -> Vec<u8> {
        let crc = crc32fast::hash(&covered);
        covered.extend_from_slice(&crc.to_le_bytes());
        covered
    }
}
