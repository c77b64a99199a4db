//! [`AesGcmCodec`]: AES-256-GCM (RustCrypto's `aes-gcm`) over a keyring: one active key seals,
//! every key of the ring opens what it sealed. The ciphertext is a fresh 12-byte nonce from the
//! operating system's randomness, then the encrypted body and its 16-byte tag; the codec id and
//! key id are authenticated with it (associated data), so an envelope relabelled to another key
//! does not open.

use std::collections::BTreeMap;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};

use super::envelope::valid_id;
use super::{Encoded, PayloadCodec};
use crate::error::Error;

/// The environment variable holding the keys of tools (`cairn`, the endpoint): `id=hex,...`,
/// each key 64 hex digits (32 bytes); the one marked `*id=hex`, or else the first, is active.
pub const KEYS_ENV: &str = "CAIRN_KEYS";
/// The environment variable naming a file that holds the keys as [`KEYS_ENV`] does (commas or
/// line breaks between them); read when [`KEYS_ENV`] is not set.
pub const KEYS_FILE_ENV: &str = "CAIRN_KEYS_FILE";

/// The nonce's length: GCM's standard 96 bits.
const NONCE_BYTES: usize = 12;

/// AES-256-GCM over a keyring (see the module doc).
///
/// # Examples
/// ```
/// use cairn::sealing::{AesGcmCodec, PayloadCodec};
///
/// let old = AesGcmCodec::new("k1", [7; 32])?;
/// let sealed = old.encode(b"secret")?;
/// // Rotation: k2 writes from now on; k1 still opens what it sealed.
/// let ring = AesGcmCodec::new("k2", [9; 32])?.with_key("k1", [7; 32])?;
/// assert_eq!(ring.encode(b"x")?.key, "k2");
/// assert_eq!(ring.decode(&sealed.key, &sealed.ciphertext)?, b"secret");
/// // The same ring from the text of `CAIRN_KEYS`:
/// let spec = format!("k2={},k1={}", "09".repeat(32), "07".repeat(32));
/// assert_eq!(AesGcmCodec::from_spec(&spec)?.active_key(), "k2");
/// # Ok::<(), cairn::Error>(())
/// ```
pub struct AesGcmCodec {
    active: String,
    keys: BTreeMap<String, Aes256Gcm>,
}

impl std::fmt::Debug for AesGcmCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Key ids only: key bytes never reach a log.
        f.debug_struct("AesGcmCodec")
            .field("active", &self.active)
            .field("keys", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl AesGcmCodec {
    /// The codec id in its envelopes.
    pub const ID: &'static str = "aes256gcm";

    /// A ring of one key, `id`, which seals.
    ///
    /// # Errors
    /// [`Error::Invalid`] for an id that is not 1 to 64 bytes of `[A-Za-z0-9._-]`.
    pub fn new(id: &str, key: [u8; 32]) -> Result<AesGcmCodec, Error> {
        let ring = AesGcmCodec { active: id.to_owned(), keys: BTreeMap::new() };
        ring.with_key(id, key)
    }

    /// The ring with `key` added under `id` for opening (an older key after a rotation); the
    /// active key stays the one that seals.
    ///
    /// # Errors
    /// [`Error::Invalid`] for an invalid id or one the ring holds already.
    pub fn with_key(mut self, id: &str, key: [u8; 32]) -> Result<AesGcmCodec, Error> {
        if !valid_id(id) {
            return Err(Error::Invalid(format!("key id {id:?}: 1 to 64 of [A-Za-z0-9._-]")));
        }
        let cipher = Aes256Gcm::new(&key.into());
        if self.keys.insert(id.to_owned(), cipher).is_some() {
            return Err(Error::Invalid(format!("key id {id} is given twice")));
        }
        Ok(self)
    }

    /// The ring `spec` describes: `id=hex` entries separated by commas, line breaks or
    /// spaces, each key 64 hex digits; the entry marked with a leading `*` (`*k2=...`) is the
    /// active key, or the first one when none is marked.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the entry that does not parse (never echoing key digits), or
    /// for more than one marked entry.
    pub fn from_spec(spec: &str) -> Result<AesGcmCodec, Error> {
        let mut entries = spec.split([',', '\n', '\r', ' ', '\t']).filter(|e| !e.trim().is_empty());
        let first = entries.next().ok_or_else(|| Error::Invalid("no key given".into()))?;
        let (id, key, mut marked) = entry(first)?;
        let mut ring = AesGcmCodec::new(id, key)?;
        let mut active = marked.then(|| id.to_owned());
        for e in entries {
            let (id, key, star) = entry(e)?;
            ring = ring.with_key(id, key)?;
            if star && std::mem::replace(&mut marked, true) {
                return Err(Error::Invalid("more than one key is marked active (*)".into()));
            }
            if star {
                active = Some(id.to_owned());
            }
        }
        if let Some(active) = active {
            ring.active = active;
        }
        Ok(ring)
    }

    /// The ring of [`KEYS_ENV`], or of the file [`KEYS_FILE_ENV`] names; `None` when neither
    /// is set.
    ///
    /// # Errors
    /// [`Error::Invalid`] for keys that do not parse or a file that does not read.
    pub fn from_env() -> Result<Option<AesGcmCodec>, Error> {
        if let Ok(spec) = std::env::var(KEYS_ENV) {
            return AesGcmCodec::from_spec(&spec).map(Some);
        }
        let Some(path) = std::env::var_os(KEYS_FILE_ENV) else { return Ok(None) };
        let spec = std::fs::read_to_string(&path).map_err(|e| {
            Error::Invalid(format!(
                "{KEYS_FILE_ENV} {}: {e}",
                std::path::Path::new(&path).display()
            ))
        })?;
        AesGcmCodec::from_spec(&spec).map(Some)
    }

    /// The id of the key that seals.
    pub fn active_key(&self) -> &str {
        &self.active
    }
}

/// One `id=hex` entry: its id, its key, and whether it is marked active (`*id=hex`).
fn entry(text: &str) -> Result<(&str, [u8; 32], bool), Error> {
    let (id, hex) = text
        .trim()
        .split_once('=')
        .ok_or_else(|| Error::Invalid("a key entry is id=64 hex digits".into()))?;
    let (id, star) = match id.trim().strip_prefix('*') {
        Some(id) => (id, true),
        None => (id.trim(), false),
    };
    let bad = || Error::Invalid(format!("key {id}: not 64 hex digits"));
    let hex = hex.trim().as_bytes();
    if hex.len() != 64 {
        return Err(bad());
    }
    let mut key = [0u8; 32];
    for (byte, pair) in key.iter_mut().zip(hex.chunks_exact(2)) {
        let digits = std::str::from_utf8(pair).map_err(|_| bad())?;
        *byte = u8::from_str_radix(digits, 16).map_err(|_| bad())?;
    }
    Ok((id, key, star))
}

/// What the tag authenticates besides the body: the codec and key ids.
fn associated(key: &str) -> Vec<u8> {
    [AesGcmCodec::ID.as_bytes(), b"/", key.as_bytes()].concat()
}

impl PayloadCodec for AesGcmCodec {
    fn codec_id(&self) -> &str {
        AesGcmCodec::ID
    }

    fn encode(&self, plain: &[u8]) -> Result<Encoded, Error> {
        let cipher = self.keys.get(&self.active).ok_or_else(|| {
            Error::Invalid(format!("the active key {} is not in the ring", self.active))
        })?;
        let mut nonce = [0u8; NONCE_BYTES];
        getrandom::fill(&mut nonce)
            .map_err(|e| Error::Invalid(format!("the operating system's randomness: {e}")))?;
        let aad = associated(&self.active);
        let sealed = cipher
            .encrypt(Nonce::from_slice(&nonce), Payload { msg: plain, aad: &aad })
            .map_err(|_| Error::Invalid("AES-GCM refused the body (too long)".into()))?;
        let mut ciphertext = Vec::with_capacity(NONCE_BYTES + sealed.len());
        ciphertext.extend_from_slice(&nonce);
        ciphertext.extend_from_slice(&sealed);
        Ok(Encoded { key: self.active.clone(), ciphertext })
    }

    fn decode(&self, key: &str, ciphertext: &[u8]) -> Result<Vec<u8>, Error> {
        let sealed = |detail: &str| Error::Sealed {
            codec: AesGcmCodec::ID.into(),
            key: key.into(),
            detail: detail.into(),
        };
        let cipher = self.keys.get(key).ok_or_else(|| sealed("no key of this id is given"))?;
        let (nonce, body) = ciphertext
            .split_at_checked(NONCE_BYTES)
            .ok_or_else(|| sealed("the ciphertext is shorter than its nonce"))?;
        let aad = associated(key);
        cipher
            .decrypt(Nonce::from_slice(nonce), Payload { msg: body, aad: &aad })
            .map_err(|_| sealed("the key does not open it (a wrong key, or damaged bytes)"))
    }

    fn holds(&self, key: &str) -> bool {
        self.keys.contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrong_key_or_a_flipped_bit_is_a_sealed_error_never_garbage() {
        let right = AesGcmCodec::new("k1", [1; 32]).unwrap();
        let wrong = AesGcmCodec::new("k1", [2; 32]).unwrap();
        let mut sealed = right.encode(b"{\"card\":\"4111\"}").unwrap();
        assert!(matches!(wrong.decode("k1", &sealed.ciphertext), Err(Error::Sealed { .. })));
        assert!(matches!(right.decode("k9", &sealed.ciphertext), Err(Error::Sealed { .. })));
        sealed.ciphertext[NONCE_BYTES] ^= 1;
        assert!(matches!(right.decode("k1", &sealed.ciphertext), Err(Error::Sealed { .. })));
        assert!(matches!(right.decode("k1", &[0; 5]), Err(Error::Sealed { .. })));
        assert!(right.holds("k1") && !right.holds("k9"));
    }

    #[test]
    fn specs_that_do_not_parse_say_which_entry_without_its_digits() {
        assert!(AesGcmCodec::from_spec("").is_err());
        let e = AesGcmCodec::from_spec("k1=abc").unwrap_err().to_string();
        assert!(e.contains("k1") && !e.contains("abc"), "{e}");
        let twice = format!("k1={0},k1={0}", "00".repeat(32));
        assert!(AesGcmCodec::from_spec(&twice).is_err());
        let marked = format!("k1={0},*k2={0},k3={0}", "00".repeat(32));
        assert_eq!(AesGcmCodec::from_spec(&marked).unwrap().active_key(), "k2");
        let two = format!("*k1={0},*k2={0}", "00".repeat(32));
        assert!(AesGcmCodec::from_spec(&two).is_err());
    }
}
