//! The `record_decode` check: untrusted bytes through every record decoder.
//!
//! Each input is tried twice: as raw bytes (what a corrupted table value looks like), and as the
//! body of a correctly framed record of every kind, because a random input almost never passes
//! the frame's CRC and the body decoders behind it would otherwise go unfuzzed. Nothing may
//! panic; anything that decodes must re-encode and decode to the same value.

use cairn_storage::codec;
use cairn_storage::frame::{self, RecordKind};

/// Bodies longer than this are not framed (a frame's length field is a u32, and the record bounds
/// are far below it; libFuzzer inputs are small anyway).
const BODY_MAX: usize = 1 << 20;

/// Runs every decoder on `data`, raw and framed.
///
/// # Panics
///
/// When a decoder panics, or a decoded record does not survive a re-encode: both are bugs.
pub fn check(data: &[u8]) {
    decode_all(data);
    if data.len() <= BODY_MAX {
        for kind in RecordKind::ALL {
            decode_all(&frame::encode(*kind, data));
        }
    }
}

fn decode_all(bytes: &[u8]) {
    for kind in RecordKind::ALL {
        let _ = frame::decode(bytes, *kind);
    }
    if let Ok(event) = codec::decode_event(bytes) {
        let again = codec::encode_event(&event).expect("a decoded event re-encodes");
        assert_eq!(codec::decode_event(&again).expect("re-encoded event decodes"), event);
    }
    if let Ok(events) = codec::decode_event_batch(bytes) {
        let again = codec::encode_event_batch(&events).expect("a decoded batch frame re-encodes");
        assert_eq!(codec::decode_event_batch(&again).expect("re-encoded batch decodes"), events);
    }
    if let Ok(thread) = codec::decode_thread(bytes) {
        let again = codec::encode_thread(&thread).expect("a decoded thread re-encodes");
        assert_eq!(codec::decode_thread(&again).expect("re-encoded thread decodes"), thread);
    }
    if let Ok(info) = codec::decode_checkpoint(bytes) {
        let again = codec::encode_checkpoint(&info).expect("a decoded checkpoint re-encodes");
        assert_eq!(codec::decode_checkpoint(&again).expect("re-encoded checkpoint decodes"), info);
    }
    if let Ok((id, snapshot)) = codec::decode_snapshot(bytes) {
        let again = codec::encode_snapshot(id, &snapshot).expect("a decoded snapshot re-encodes");
        assert_eq!(
            codec::decode_snapshot(&again).expect("re-encoded snapshot decodes"),
            (id, snapshot)
        );
    }
    if let Ok(lock) = codec::decode_lock(bytes) {
        let again = codec::encode_lock(&lock).expect("a decoded lock re-encodes");
        assert_eq!(codec::decode_lock(&again).expect("re-encoded lock decodes"), lock);
    }
    if let Ok(entry) = codec::decode_correlation(bytes) {
        let again = codec::encode_correlation(&entry).expect("a decoded entry re-encodes");
        assert_eq!(codec::decode_correlation(&again).expect("re-encoded entry decodes"), entry);
    }
    if let Ok(signal) = codec::decode_signal(bytes) {
        let again = codec::encode_signal(&signal).expect("a decoded signal re-encodes");
        assert_eq!(codec::decode_signal(&again).expect("re-encoded signal decodes"), signal);
    }
    if let Ok(chunk) = codec::decode_seq_chunk(bytes) {
        let again = codec::encode_seq_chunk(&chunk).expect("a decoded seq chunk re-encodes");
        assert_eq!(codec::decode_seq_chunk(&again).expect("re-encoded chunk decodes"), chunk);
    }
}
