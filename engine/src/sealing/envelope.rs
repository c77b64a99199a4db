//! The sealed-payload envelope (`docs/format.md` §10.3), byte for byte:
//!
//! ```text
//! offset        size  field
//! 0             1     magic 0xC5 (no plain body starts with it: event bodies start 0x01 or
//!                     '{', snapshots and signal values '{' or another JSON first byte)
//! 1             1     envelope version 0x01
//! 2             1     codec id length c (1..=ID_BYTES_MAX)
//! 3             c     codec id, ASCII [A-Za-z0-9._-]
//! 3+c           1     key id length k (1..=ID_BYTES_MAX)
//! 4+c           k     key id, ASCII [A-Za-z0-9._-]
//! 4+c+k         rest  ciphertext, as the codec writes it (AES-256-GCM: 12-byte nonce, the
//!                     encrypted body, 16-byte tag)
//! ```
//!
//! Parsing checks every length against the bytes there are and never indexes unchecked: a torn
//! or forged envelope is an error, never a panic.

/// The envelope's first byte.
pub const MAGIC: u8 = 0xC5;
/// The envelope's version byte (offset 1).
pub const VERSION: u8 = 0x01;
/// The longest codec id or key id, in bytes.
pub const ID_BYTES_MAX: usize = 64;

/// Offset of the codec id's length byte (the codec id follows it).
const CODEC_LEN_AT: usize = 2;

/// A parsed envelope, borrowing the record's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope<'a> {
    /// The codec that sealed it.
    pub codec: &'a str,
    /// The key it was sealed with.
    pub key: &'a str,
    /// What the codec wrote.
    pub ciphertext: &'a [u8],
}

/// Whether `bytes` begin as an envelope does (magic and version): a sealed body.
pub fn is_sealed(bytes: &[u8]) -> bool {
    bytes.starts_with(&[MAGIC, VERSION])
}

/// Whether `id` may name a codec or a key: 1 to [`ID_BYTES_MAX`] bytes of `[A-Za-z0-9._-]`.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= ID_BYTES_MAX
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// The envelope of `ciphertext` sealed by `codec` with `key` (both [`valid_id`]s, which the
/// caller checked).
pub fn write(codec: &str, key: &str, ciphertext: &[u8]) -> Vec<u8> {
    debug_assert!(valid_id(codec) && valid_id(key), "ids are checked before sealing");
    let mut out = Vec::with_capacity(4 + codec.len() + key.len() + ciphertext.len());
    out.extend_from_slice(&[MAGIC, VERSION]);
    for id in [codec, key] {
        // Both are at most ID_BYTES_MAX (64) long: the length fits a byte.
        out.push(u8::try_from(id.len()).unwrap_or(u8::MAX));
        out.extend_from_slice(id.as_bytes());
    }
    out.extend_from_slice(ciphertext);
    out
}

/// The envelope `bytes` hold: `Ok(None)` for bytes that are not sealed (a plain body, written
/// before a codec was installed), an error saying what is wrong with a damaged one.
///
/// # Errors
/// A description of the first field that does not parse.
pub fn parse(bytes: &[u8]) -> Result<Option<Envelope<'_>>, String> {
    if !is_sealed(bytes) {
        return Ok(None);
    }
    let (codec, rest) = id_at(bytes, CODEC_LEN_AT, "codec id")?;
    let (key, rest) = id_at(bytes, rest, "key id")?;
    let ciphertext = bytes.get(rest..).unwrap_or_default();
    Ok(Some(Envelope { codec, key, ciphertext }))
}

/// The id whose length byte is at `at`, and the offset after it.
fn id_at<'a>(bytes: &'a [u8], at: usize, what: &str) -> Result<(&'a str, usize), String> {
    let len = *bytes.get(at).ok_or_else(|| format!("envelope ends before its {what}"))?;
    let start = at + 1;
    let end = start + usize::from(len);
    let raw = bytes.get(start..end).ok_or_else(|| format!("envelope ends inside its {what}"))?;
    let id = std::str::from_utf8(raw).map_err(|_| format!("envelope's {what} is not text"))?;
    if !valid_id(id) {
        return Err(format!("envelope's {what} {id:?} is not a valid id"));
    }
    Ok((id, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_reads_back_as_written() {
        let bytes = write("aes256gcm", "k1", b"\x00\x01secret");
        assert_eq!(&bytes[..=CODEC_LEN_AT], &[MAGIC, VERSION, 9]);
        let envelope = parse(&bytes).unwrap().unwrap();
        assert_eq!(
            envelope,
            Envelope { codec: "aes256gcm", key: "k1", ciphertext: b"\x00\x01secret" }
        );
    }

    #[test]
    fn plain_bodies_are_not_envelopes_and_torn_ones_are_errors() {
        assert_eq!(parse(b"{\"a\":1}").unwrap(), None);
        assert_eq!(parse(&[0x01, 0x02]).unwrap(), None);
        let bytes = write("c", "key", b"x");
        for cut in 2..bytes.len() - 1 {
            assert!(parse(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert!(parse(&[MAGIC, VERSION, 1, b'!', 1, b'k']).is_err());
    }
}
