//! [`SealedView`]: how the read-only tool surfaces (the CLI's reads, the endpoint's read
//! routes, the web view) open bodies. A body sealed with a key the codec does not hold (no
//! codec, another codec, a key id not in the ring) is [`Viewed::Sealed`], a [`Placeholder`]
//! naming its codec and key, rather than an error for the whole read; a body a key the codec
//! holds does not open is still [`Error::Sealed`] (a wrong key or tampering, never hidden).
//!
//! The distinction is by type: a `SealedView` is not a [`cairn_storage::Store`], so nothing
//! that drives, replays, forks or writes a thread can be given one; its placeholders are
//! values of [`Viewed`], which no fold, node or write takes. Engines keep their
//! [`super::SealingStore`], which answers every such body with [`Error::Sealed`].

use std::sync::Arc;

use cairn_storage::Store;
use serde::{Deserialize, Serialize};

use super::PayloadCodec;
use super::envelope;
use crate::error::Error;

/// What a read-only view shows in place of a value sealed with a key it does not hold:
/// `{"encrypted": true, "codec": "aes256gcm", "key": "k1"}` (`docs/encryption.md`, "Tools").
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Placeholder {
    /// Always `true`: what a reader tests for.
    pub encrypted: bool,
    /// The codec id of the envelope.
    pub codec: String,
    /// The key id the body is sealed with: the key to bring back.
    pub key: String,
}

impl Placeholder {
    /// The placeholder of a body sealed by `codec` with `key`.
    pub fn new(codec: impl Into<String>, key: impl Into<String>) -> Placeholder {
        Placeholder { encrypted: true, codec: codec.into(), key: key.into() }
    }

    /// The placeholder as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "encrypted": true, "codec": self.codec, "key": self.key })
    }

    /// The placeholder `value` is, if it is one (exactly the shape [`Placeholder::to_json`]
    /// writes).
    pub fn of_json(value: &serde_json::Value) -> Option<Placeholder> {
        let p: Placeholder = serde_json::from_value(value.clone()).ok()?;
        p.encrypted.then_some(p)
    }
}

/// A value a read-only view opened, or the placeholder of one it holds no key for.
#[derive(Debug, Clone, PartialEq)]
pub enum Viewed<T> {
    /// Opened (or plain: written before a codec was installed).
    Open(T),
    /// Sealed with a key the view does not hold.
    Sealed(Placeholder),
}

/// The read-only view of an engine's store for the tools (see the module doc); made by the
/// engine (`cairn::admin::sealed_view`).
#[derive(Clone)]
pub struct SealedView {
    inner: Arc<dyn Store>,
    codec: Option<Arc<dyn PayloadCodec>>,
}

impl std::fmt::Debug for SealedView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let codec = self.codec.as_ref().map(|c| c.codec_id().to_owned());
        f.debug_struct("SealedView").field("codec", &codec).finish_non_exhaustive()
    }
}

impl SealedView {
    /// The view of `inner` (the store under the engine's sealing) with `codec`, if any.
    pub(crate) fn new(inner: Arc<dyn Store>, codec: Option<Arc<dyn PayloadCodec>>) -> SealedView {
        SealedView { inner, codec }
    }

    /// The store as written (bodies sealed), for the reads of `api/admin.rs`.
    pub(crate) fn raw(&self) -> &dyn Store {
        &*self.inner
    }

    /// Whether a body sealed by `codec` with `key` is one this view holds no key for.
    pub fn lacks(&self, codec: &str, key: &str) -> bool {
        match &self.codec {
            None => true,
            Some(c) => c.codec_id() != codec || !c.holds(key),
        }
    }

    /// The placeholder for `error` when it is a body sealed with a key this view does not
    /// hold; `None` for any other error (a wrong key included), which stays an error.
    pub fn placeholder_for(&self, error: &Error) -> Option<Placeholder> {
        match error {
            Error::Sealed { codec, key, .. } if self.lacks(codec, key) => {
                Some(Placeholder::new(codec.clone(), key.clone()))
            }
            _ => None,
        }
    }

    /// `bytes` opened (as they are when plain), or the placeholder of a body sealed with a key
    /// this view does not hold.
    ///
    /// # Errors
    /// [`Error::Sealed`] for a damaged envelope or a body a held key does not open.
    pub fn open(&self, bytes: Vec<u8>) -> Result<Viewed<Vec<u8>>, Error> {
        let envelope = match envelope::parse(&bytes) {
            Ok(None) => return Ok(Viewed::Open(bytes)),
            Ok(Some(envelope)) => envelope,
            Err(detail) => {
                return Err(Error::Sealed { codec: "?".into(), key: "?".into(), detail });
            }
        };
        match &self.codec {
            Some(codec) if !self.lacks(envelope.codec, envelope.key) => {
                codec.decode(envelope.key, envelope.ciphertext).map(Viewed::Open)
            }
            _ => Ok(Viewed::Sealed(Placeholder::new(envelope.codec, envelope.key))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sealing::Encoded;

    /// Holds `k1`; "opens" by reversing, and refuses bytes that start with `!` (a wrong key).
    struct Ring;
    impl PayloadCodec for Ring {
        fn codec_id(&self) -> &str {
            "ring"
        }
        fn encode(&self, plain: &[u8]) -> Result<Encoded, Error> {
            Ok(Encoded { key: "k1".into(), ciphertext: plain.iter().rev().copied().collect() })
        }
        fn decode(&self, key: &str, sealed: &[u8]) -> Result<Vec<u8>, Error> {
            if sealed.starts_with(b"!") {
                let detail = "does not open".to_owned();
                return Err(Error::Sealed { codec: "ring".into(), key: key.into(), detail });
            }
            Ok(sealed.iter().rev().copied().collect())
        }
        fn holds(&self, key: &str) -> bool {
            key == "k1"
        }
    }

    fn view(codec: Option<Arc<dyn PayloadCodec>>) -> SealedView {
        let dir = tempfile::tempdir().unwrap();
        let file = cairn_storage::RedbStore::open(dir.path().join("v.db"), Default::default());
        SealedView::new(Arc::new(file.unwrap()), codec)
    }

    #[test]
    fn a_missing_key_is_a_placeholder_a_held_one_opens_a_wrong_one_is_an_error() {
        let ring = view(Some(Arc::new(Ring)));
        let none = view(None);
        let k1 = envelope::write("ring", "k1", b"cba");
        let k2 = envelope::write("ring", "k2", b"cba");
        let other = envelope::write("aes256gcm", "k1", b"cba");
        assert_eq!(ring.open(k1.clone()).unwrap(), Viewed::Open(b"abc".to_vec()));
        assert_eq!(ring.open(b"{}".to_vec()).unwrap(), Viewed::Open(b"{}".to_vec()));
        let sealed = |c: &str, k: &str| Viewed::Sealed(Placeholder::new(c, k));
        assert_eq!(ring.open(k2).unwrap(), sealed("ring", "k2"));
        assert_eq!(ring.open(other).unwrap(), sealed("aes256gcm", "k1"));
        assert_eq!(none.open(k1).unwrap(), sealed("ring", "k1"));
        let wrong = ring.open(envelope::write("ring", "k1", b"!x")).unwrap_err();
        assert!(matches!(wrong, Error::Sealed { .. }), "{wrong:?}");
        assert!(ring.open(vec![envelope::MAGIC, envelope::VERSION, 9]).is_err(), "torn");
        // An error names a placeholder only for a key the view lacks.
        let error = |key: &str| Error::Sealed {
            codec: "ring".into(),
            key: key.into(),
            detail: String::new(),
        };
        assert_eq!(ring.placeholder_for(&error("k2")), Some(Placeholder::new("ring", "k2")));
        assert_eq!(ring.placeholder_for(&error("k1")), None);
        assert_eq!(ring.placeholder_for(&Error::Invalid("x".into())), None);
    }

    #[test]
    fn a_placeholder_is_exactly_its_shape() {
        let p = Placeholder::new("aes256gcm", "k1");
        let json = p.to_json();
        assert_eq!(json, serde_json::json!({"encrypted": true, "codec": "aes256gcm", "key": "k1"}));
        assert_eq!(Placeholder::of_json(&json), Some(p));
        let mut more = json.clone();
        more["note"] = "x".into();
        assert_eq!(Placeholder::of_json(&more), None);
        assert_eq!(
            Placeholder::of_json(
                &serde_json::json!({"encrypted": false, "codec": "c", "key": "k"})
            ),
            None
        );
    }
}
