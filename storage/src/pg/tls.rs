//! TLS to the server: when a URL says `sslmode=require`, every connection of the store is
//! encrypted, and the server's certificate is always verified (chain and host name), against
//! the certificates of `sslrootcert=FILE` when the URL names one, else the system's roots.
//! That is stricter than libpq, whose `require` encrypts without verifying: a connection that
//! cannot be verified is refused rather than made. Without `sslmode=require` (libpq's default
//! is `prefer`) connections are plain, as before. TLS is rustls with ring (no OpenSSL), behind
//! the `tls` feature; a build without it refuses a URL that requires TLS.
//!
//! `sslrootcert` is libpq's name; the client crate does not know it, so it is taken out of the
//! URL here (both forms: `postgresql://...?sslmode=require&sslrootcert=/ca.pem`, and
//! `host=... sslmode=require sslrootcert=/ca.pem`).

use std::path::PathBuf;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::config::SslMode;
use tokio_postgres::{AsyncMessage, Client, Connection, Notification};

use crate::error::Error;

/// How the store's connections are made: plainly, or over TLS (rustls).
#[derive(Clone)]
pub(crate) enum Tls {
    Plain,
    #[cfg(feature = "tls")]
    Rustls(tokio_postgres_rustls::MakeRustlsConnect),
}

/// Where a listening connection's notifications go (bounded: a listener that falls behind
/// holds its connection's reading back, never memory).
pub(crate) type Notices = tokio::sync::mpsc::Sender<Notification>;

/// `url` without its `sslrootcert` parameter, and that parameter's file.
pub(crate) fn split_root_cert(url: &str) -> (String, Option<PathBuf>) {
    if let Some((head, query)) = url.split_once('?') {
        let mut root = None;
        let kept: Vec<&str> = query
            .split('&')
            .filter(|kv| match kv.split_once('=') {
                Some(("sslrootcert", value)) => {
                    root = Some(PathBuf::from(percent_decode(value)));
                    false
                }
                _ => true,
            })
            .collect();
        let url =
            if kept.is_empty() { head.to_owned() } else { format!("{head}?{}", kept.join("&")) };
        return (url, root);
    }
    if url.contains("://") {
        return (url.to_owned(), None);
    }
    let mut root = None;
    let kept: Vec<&str> = url
        .split_whitespace()
        .filter(|kv| match kv.split_once('=') {
            Some(("sslrootcert", value)) => {
                root = Some(PathBuf::from(value.trim_matches('\'')));
                false
            }
            _ => true,
        })
        .collect();
    (kept.join(" "), root)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Tls {
    /// The TLS `config` asks for (which it is then set to require).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a root certificate file that cannot be read, or TLS required by a
    /// build without the `tls` feature.
    pub(crate) fn for_config(
        config: &mut tokio_postgres::Config,
        root: Option<PathBuf>,
    ) -> Result<Tls, Error> {
        if config.get_ssl_mode() != SslMode::Require && root.is_none() {
            return Ok(Tls::Plain);
        }
        // The handshake is always made (and verified) once asked for.
        config.ssl_mode(SslMode::Require);
        encrypted(root)
    }
}

/// Connects with `config` and `tls`; the connection's socket is driven by a task spawned on
/// `handle` (the store's runtime), which passes the notifications it reads on to `notices`.
///
/// # Errors
/// The server cannot be reached, refuses, or its certificate does not verify.
pub(crate) async fn connect(
    config: &tokio_postgres::Config,
    tls: &Tls,
    handle: &tokio::runtime::Handle,
    notices: Option<Notices>,
) -> Result<(Client, tokio::task::JoinHandle<()>), tokio_postgres::Error> {
    match tls {
        Tls::Plain => {
            let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
            Ok((client, handle.spawn(drive(connection, notices))))
        }
        #[cfg(feature = "tls")]
        Tls::Rustls(make) => {
            let (client, connection) = config.connect(make.clone()).await?;
            Ok((client, handle.spawn(drive(connection, notices))))
        }
    }
}

/// Drives a connection until it ends: its requests and answers, and the messages the server
/// sends on its own (notifications go to `notices`; notices of other kinds are logged).
async fn drive<S, T>(mut connection: Connection<S, T>, notices: Option<Notices>)
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            Some(Ok(AsyncMessage::Notification(n))) => {
                if let Some(to) = &notices
                    && to.send(n).await.is_err()
                {
                    // Nobody listens any more: the connection goes with its listener.
                    return;
                }
            }
            Some(Ok(AsyncMessage::Notice(notice))) => {
                tracing::debug!(%notice, "PostgreSQL notice");
            }
            Some(Ok(_)) => {}
            Some(Err(error)) => {
                tracing::debug!(%error, "a PostgreSQL connection ended");
                return;
            }
            None => return,
        }
    }
}

/// A failed connection, with its causes in the message ("error performing TLS handshake:
/// invalid peer certificate: UnknownIssuer", not only the first of them).
pub(crate) fn connect_error(e: tokio_postgres::Error) -> Error {
    let message = error_chain(&e);
    Error::Storage { op: "connect", source: std::sync::Arc::new(std::io::Error::other(message)) }
}

/// "connect: " and a failed connection's error with its causes, as the database's state names
/// it ([`crate::telemetry::DatabaseState::last_error`]).
pub(crate) fn connect_error_text(e: &tokio_postgres::Error) -> String {
    format!("connect: {}", error_chain(e))
}

/// `e`'s message followed by each of its causes'.
fn error_chain(e: &tokio_postgres::Error) -> String {
    let mut message = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        message.push_str(": ");
        message.push_str(&c.to_string());
        cause = c.source();
    }
    message
}

#[cfg(feature = "tls")]
fn encrypted(root: Option<PathBuf>) -> Result<Tls, Error> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;

    let mut roots = rustls::RootCertStore::empty();
    match &root {
        Some(file) => {
            let invalid = |e: &dyn std::fmt::Display| Error::Invalid {
                detail: format!("sslrootcert {}: {e}", file.display()),
            };
            for cert in CertificateDer::pem_file_iter(file).map_err(|e| invalid(&e))? {
                roots.add(cert.map_err(|e| invalid(&e))?).map_err(|e| invalid(&e))?;
            }
            if roots.is_empty() {
                return Err(invalid(&"no certificate in the file"));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A system certificate rustls cannot use is skipped, as libraries do.
                let _ = roots.add(cert);
            }
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Invalid { detail: format!("TLS: {e}") })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Tls::Rustls(tokio_postgres_rustls::MakeRustlsConnect::new(tls)))
}

#[cfg(not(feature = "tls"))]
fn encrypted(_: Option<PathBuf>) -> Result<Tls, Error> {
    Err(Error::Invalid {
        detail: "the URL requires TLS (sslmode=require or sslrootcert), and this build of Cairn \
                 has no TLS: build it with the `tls` feature of cairn-storage (`postgres-tls` of \
                 cairn, on in the cairn binary)"
            .into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_certificate_is_taken_out_of_either_form_of_url() {
        let (url, root) =
            split_root_cert("postgresql://u@h:5/db?sslmode=require&sslrootcert=%2Ftmp%2Fca.pem");
        assert_eq!(url, "postgresql://u@h:5/db?sslmode=require");
        assert_eq!(root, Some(PathBuf::from("/tmp/ca.pem")));
        let (url, root) = split_root_cert("postgresql://u@h/db?sslrootcert=/ca.pem");
        assert_eq!((url.as_str(), root), ("postgresql://u@h/db", Some(PathBuf::from("/ca.pem"))));
        let (url, root) = split_root_cert("host=h user=u sslmode=require sslrootcert=/ca.pem");
        assert_eq!((url.as_str(), root), ("host=h user=u sslmode=require", Some("/ca.pem".into())));
        assert_eq!(split_root_cert("postgresql://u@h/db"), ("postgresql://u@h/db".into(), None));
    }
}
