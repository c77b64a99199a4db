//! Protection at rest: every body the engine stores (event bodies: state updates, inputs,
//! outputs, tool results, signal receipts; offloaded payloads; checkpoint snapshots; signal
//! values) passes through a user-supplied [`PayloadCodec`] on its way into the store and back.
//!
//! [`SealingStore`] is a decorator of any [`Store`](cairn_storage::Store) (a redb file,
//! PostgreSQL): it seals the bodies of each batch before handing it on and opens them in every
//! read, so neither backend's layout changes and no format version moves. A sealed body is an
//! envelope ([`envelope`], `docs/format.md` §10.3) naming its codec and key id, so a keyring can
//! rotate keys: one active key writes, older ones still read. Ids, names, labels, timestamps,
//! summaries (a message's aside) and the thread record stay clear (`docs/encryption.md` lists
//! what is and is not sealed).
//!
//! Invariants: a sealed body is never handed to the engine as plain bytes (a body this store
//! cannot open is [`cairn_storage::Error::Sealed`]); a plain body (written before a codec was
//! installed) reads as it is; an offloaded event keeps its empty data field, and its payload
//! reference is rewritten to the sealed payload's hash in the same batch, so the store's
//! content-addressing checks still hold.

pub mod envelope;

#[cfg(feature = "encryption")]
mod aes;

#[cfg(feature = "encryption")]
pub use aes::{AesGcmCodec, KEYS_ENV, KEYS_FILE_ENV};

mod store;
mod view;

pub use store::SealingStore;
pub use view::{Placeholder, SealedView, Viewed};

use crate::error::Error;

/// What a [`PayloadCodec`] made of a plain body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// The key id it used (the keyring's active key): written in the envelope, so the record
    /// opens with that key after the active one changes.
    pub key: String,
    /// The sealed bytes (for an AEAD: nonce, ciphertext and tag).
    pub ciphertext: Vec<u8>,
}

/// A codec for bodies at rest (Temporal's payload codec): encodes each body before it is
/// stored and decodes it when it is read. Implement it for a key management service of your
/// own, or use `AesGcmCodec` (feature `encryption`).
///
/// # Examples
/// A codec that only reverses the bytes (for illustration; it hides nothing):
/// ```
/// use cairn::sealing::{Encoded, PayloadCodec};
///
/// struct Reversing;
/// impl PayloadCodec for Reversing {
///     fn codec_id(&self) -> &str { "reverse" }
///     fn encode(&self, plain: &[u8]) -> Result<Encoded, cairn::Error> {
///         Ok(Encoded { key: "none".into(), ciphertext: plain.iter().rev().copied().collect() })
///     }
///     fn decode(&self, _key: &str, sealed: &[u8]) -> Result<Vec<u8>, cairn::Error> {
///         Ok(sealed.iter().rev().copied().collect())
///     }
/// }
/// let engine = cairn::Engine::builder("cairn.db").payload_codec(std::sync::Arc::new(Reversing));
/// # drop(engine);
/// ```
pub trait PayloadCodec: Send + Sync + 'static {
    /// The codec's id, written in every envelope: 1 to 64 bytes of `[A-Za-z0-9._-]`
    /// (`AesGcmCodec`: `aes256gcm`).
    fn codec_id(&self) -> &str;

    /// Seals `plain` with the active key.
    ///
    /// # Errors
    /// Whatever the codec cannot do (no randomness, a key service that does not answer); the
    /// batch holding the body is then refused, nothing of it written.
    fn encode(&self, plain: &[u8]) -> Result<Encoded, Error>;

    /// Opens what [`PayloadCodec::encode`] sealed with `key`.
    ///
    /// # Errors
    /// [`Error::Sealed`] for a key id the codec does not hold or bytes the key does not open
    /// (a wrong key, a damaged record): never garbage.
    fn decode(&self, key: &str, ciphertext: &[u8]) -> Result<Vec<u8>, Error>;

    /// Whether the codec holds the key `key` (a key ring's ids): the read-only views of the
    /// tools ([`SealedView`]) show a body sealed with a key the codec does not hold as a
    /// placeholder, and a body that a key it holds does not open as the error it is (a wrong
    /// key, damaged bytes). The default, `true`, makes every failure to open an error.
    fn holds(&self, key: &str) -> bool {
        let _ = key;
        true
    }
}

/// The codec and key id of a sealed body (`None` for a plain one, or a damaged envelope):
/// what a view shows in place of a value it cannot open (`{"encrypted": true, "key": ..}`).
///
/// # Examples
/// ```
/// let sealed = cairn::sealing::envelope::write("aes256gcm", "k1", b"...");
/// assert_eq!(cairn::sealing::sealed_by(&sealed), Some(("aes256gcm".into(), "k1".into())));
/// assert_eq!(cairn::sealing::sealed_by(b"{}"), None);
/// ```
pub fn sealed_by(bytes: &[u8]) -> Option<(String, String)> {
    let envelope = envelope::parse(bytes).ok()??;
    Some((envelope.codec.to_owned(), envelope.key.to_owned()))
}
