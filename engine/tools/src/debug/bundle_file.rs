//! A bundle as a file: its bytes (JSON, gzip-compressed or not) out, and in, with every check
//! a file from outside needs before it is trusted.

use serde_json::Value;

use super::bundle::{BUNDLE_BYTES_MAX, Bundle};
use super::dup_keys;
use super::reader::{self, bad};
use super::seed;
use super::seed_names::{SEED_VERSION, is_seed_version};
use super::validate::check_version_of;
use cairn::error::Error;

impl Bundle {
    /// The bundle as JSON bytes, gzip-compressed when `gzip`.
    ///
    /// # Errors
    /// [`Error::Codec`] if a value does not serialise; [`Error::Invalid`] if compression fails.
    pub fn to_bytes(&self, gzip: bool) -> Result<Vec<u8>, Error> {
        let json = serde_json::to_vec(self)?;
        if !gzip {
            return Ok(json);
        }
        gzip_bytes(&json)
    }

    /// Reads a bundle (gzip detected by its magic bytes) and checks all of it: JSON syntax,
    /// types and required fields, the version, seq continuity, payload references and hashes,
    /// event kinds against their bodies, snapshots, and every size against its named limit.
    /// A bundle of the seed format (version `0.1.0`) is converted to this format first (see
    /// the module docs of `seed.rs` for how each field maps).
    ///
    /// # Errors
    /// [`Error::Bundle`] naming the JSON path of the first problem (`$` for the document).
    ///
    /// # Examples
    /// ```
    /// let err = cairn_tools::debug::Bundle::from_bytes(br#"{"version": 2}"#).unwrap_err();
    /// assert!(matches!(err, cairn::Error::Bundle { ref path, .. } if path == "$.version"));
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<Bundle, Error> {
        let json = decompress(bytes)?;
        let value: Value =
            serde_json::from_slice(&json).map_err(|e| bad("$", format!("not JSON: {e}")))?;
        // The version first: a bundle of another version is said to be one before anything
        // else about it is judged.
        check_version_of(&value)?;
        dup_keys::check(&json)?;
        let seed = value.get("version").and_then(Value::as_str).is_some_and(is_seed_version);
        if !seed {
            let bundle = reader::bundle(&value)?;
            bundle.validate()?;
            return Ok(bundle);
        }
        let bundle = seed::bundle(&value)?;
        // The conversion checked what it read; a problem found after it is in the converted
        // bundle, whose paths the message must not pass off as the seed bundle's.
        bundle.validate().map_err(|e| match e {
            Error::Bundle { path, detail } => Error::Bundle {
                path,
                detail: format!("{detail} (path in the bundle converted from seed {SEED_VERSION})"),
            },
            other => other,
        })?;
        Ok(bundle)
    }
}

/// The JSON bytes of a bundle file, decompressed when gzip, within [`BUNDLE_BYTES_MAX`].
pub(super) fn decompress(bytes: &[u8]) -> Result<Vec<u8>, Error> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        if bytes.len() > BUNDLE_BYTES_MAX {
            return Err(too_big(bytes.len() as u64));
        }
        return Ok(bytes.to_vec());
    }
    let out = gunzip(bytes)?;
    if out.len() > BUNDLE_BYTES_MAX {
        return Err(too_big(out.len() as u64));
    }
    Ok(out)
}

/// Gzip, with the `gzip` feature (on by default; the CLI turns it on).
#[cfg(feature = "gzip")]
pub(super) fn gzip_bytes(json: &[u8]) -> Result<Vec<u8>, Error> {
    use std::io::Write as _;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(json).map_err(|e| Error::Invalid(format!("gzip: {e}")))?;
    enc.finish().map_err(|e| Error::Invalid(format!("gzip: {e}")))
}

#[cfg(not(feature = "gzip"))]
pub(super) fn gzip_bytes(_json: &[u8]) -> Result<Vec<u8>, Error> {
    Err(Error::Invalid("gzip bundles need cairn's `gzip` feature".into()))
}

/// At most one byte past [`BUNDLE_BYTES_MAX`] of the gzip stream `bytes`, unpacked.
#[cfg(feature = "gzip")]
fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, Error> {
    use std::io::Read as _;
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .take(BUNDLE_BYTES_MAX as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| bad("$", format!("not valid gzip: {e}")))?;
    Ok(out)
}

#[cfg(not(feature = "gzip"))]
fn gunzip(_bytes: &[u8]) -> Result<Vec<u8>, Error> {
    Err(bad("$", "a gzip bundle, and this build has no `gzip` feature"))
}

fn too_big(len: u64) -> Error {
    bad("$", format!("the bundle is {len} bytes (unpacked), over the limit of {BUNDLE_BYTES_MAX}"))
}
