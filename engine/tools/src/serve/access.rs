//! The one layer every request of the endpoint passes before its route (an axum `from_fn`
//! middleware over the whole router, fallbacks included, so a route added later is guarded
//! without a line of its own). In order, it refuses:
//!
//! 1. a request whose `Host` is not an address this endpoint serves (421, field `host`): the
//!    served address itself, for a loopback bind also `localhost`, `127.0.0.1` and `[::1]` at its
//!    port, for an unspecified bind (`0.0.0.0`, `[::]`) those and any IP literal at its port, and the
//!    names of [`super::ServeOptions::allow_hosts`]. A web page an attacker serves under a name
//!    they re-point at 127.0.0.1 (DNS rebinding) sends its own name, so it reads nothing; an IP
//!    literal is no name an attacker controls;
//! 2. a mutating request (any method but `GET` and `HEAD`) from another origin (403, field
//!    `origin`): an `Origin` header that is not this request's own scheme and host, or a
//!    `Sec-Fetch-Site: cross-site`. A request with neither (curl, the CLI) is no browser's;
//! 3. a request without the bearer token (401, field `authorization`) when it mutates, or when
//!    the endpoint is public ([`super::ServeOptions::public`]) and it reads anything but the
//!    web view's static pages and assets (they hold no data; their reads need the token).
//!
//! On a public endpoint it then redacts every JSON answer with the endpoint's redaction rules,
//! as `redact=1` would, whatever the query says (a followed log, which is not one body, is
//! redacted event by event in `sse`).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::params::Reject;
use super::token;
use crate::debug::Redactor;
use cairn::error::Error;

/// Who may reach the endpoint, and with what.
pub(super) struct Access {
    /// The bearer token.
    token: Arc<str>,
    /// Reads need the token too, and answers are redacted.
    public: bool,
    /// `host:port` names a request's `Host` may carry (lower case, a port always).
    hosts: Vec<String>,
    /// The port at which any IP literal is accepted (an unspecified bind).
    any_ip_port: Option<u16>,
    redactor: Arc<Redactor>,
}

impl Access {
    /// The rules of an endpoint bound at `addr`: its token, whether it is public, and the
    /// extra names `allow` (`host` or `host:port`; without a port, the served one).
    ///
    /// # Errors
    /// [`Error::Invalid`] naming an allow-list entry that is no host name.
    pub fn new(
        addr: std::net::SocketAddr,
        token: Arc<str>,
        public: bool,
        allow: &[String],
        redactor: Arc<Redactor>,
    ) -> Result<Self, Error> {
        let port = addr.port();
        let mut hosts = vec![addr.to_string()];
        // An unspecified bind listens on loopback too; a loopback name is no attacker's name.
        if addr.ip().is_loopback() || addr.ip().is_unspecified() {
            for name in ["localhost", "127.0.0.1", "[::1]"] {
                hosts.push(format!("{name}:{port}"));
            }
        }
        for entry in allow {
            let bad = |why: &str| Error::Invalid(format!("allowed host {entry:?}: {why}"));
            if entry.is_empty() || entry.len() > HOST_BYTES_MAX {
                return Err(bad("empty or too long"));
            }
            let entry = entry.to_ascii_lowercase();
            let entry = match entry.parse::<std::net::Ipv6Addr>() {
                Ok(ip) => format!("[{ip}]"),
                Err(_) => entry,
            };
            let Some((name, port)) = split_host(&entry, port) else {
                return Err(bad("not a host name or host:port"));
            };
            hosts.push(format!("{name}:{port}"));
        }
        let any_ip_port = addr.ip().is_unspecified().then_some(port);
        Ok(Self { token, public, hosts, any_ip_port, redactor })
    }

    /// Whether a `Host` value names this endpoint.
    fn serves(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        let Some((name, port)) = split_host(&host, DEFAULT_HTTP_PORT) else { return false };
        let canonical = format!("{name}:{port}");
        if self.hosts.contains(&canonical) {
            return true;
        }
        let ip_literal = name.trim_start_matches('[').trim_end_matches(']');
        self.any_ip_port == Some(port) && ip_literal.parse::<std::net::IpAddr>().is_ok()
    }
}

/// The longest `Host` or allow-list entry considered: a DNS name is at most 253 bytes, a port 6.
const HOST_BYTES_MAX: usize = 260;

/// The port a `Host` without one means (a browser leaves out the scheme's default port).
const DEFAULT_HTTP_PORT: u16 = 80;

/// `host` split into its name (an IPv6 literal keeps its brackets) and port (`default` when it
/// has none), or `None` when it is no `host[:port]`.
fn split_host(host: &str, default: u16) -> Option<(&str, u16)> {
    if host.is_empty() || host.len() > HOST_BYTES_MAX {
        return None;
    }
    let (name, port) = if host.starts_with('[') {
        let end = host.find(']')?;
        let (name, rest) = host.split_at(end + 1);
        match rest {
            "" => (name, None),
            _ => (name, Some(rest.strip_prefix(':')?)),
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default,
    };
    // A name is letters, digits, `.`, `-`, `_`; an IPv6 literal, in brackets, also `:`.
    let (inner, colons) = match name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        Some(inner) => (inner, true),
        None => (name, false),
    };
    let allowed =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') || (colons && c == ':');
    (!inner.is_empty() && inner.chars().all(allowed)).then_some((name, port))
}

/// The layer: host, origin and token checks, then the redaction of a public endpoint's JSON.
pub(super) async fn guard(State(access): State<Arc<Access>>, req: Request, next: Next) -> Response {
    match check(&access, req.method(), req.uri(), req.headers()) {
        Ok(()) => {}
        Err(refused) => return refused.into_response(),
    }
    let response = next.run(req).await;
    if access.public { redact(&access.redactor, response).await } else { response }
}

/// Whether a request may reach its route.
fn check(
    access: &Access,
    method: &Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
) -> Result<(), Reject> {
    let host = match uri.authority() {
        Some(a) => Some(a.as_str()),
        None => headers.get(header::HOST).and_then(|h| h.to_str().ok()),
    };
    let Some(host) = host else {
        return Err(Reject::bad("host", "a request needs a Host header"));
    };
    if !access.serves(host) {
        let error = format!(
            "{host:?} is not an address this endpoint serves (allow a name it is reached by with \
             `allow_host`, `--allow-host`)"
        );
        return Err(Reject::new(421, "host", error));
    }
    let mutates = !matches!(*method, Method::GET | Method::HEAD);
    if mutates {
        cross_site(host, headers)?;
    }
    let static_page = !mutates && is_static(uri.path());
    if mutates || (access.public && !static_page) {
        let given = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        if !token::accepts(&access.token, given) {
            let what = if mutates { "a control" } else { "a read of a public endpoint" };
            let error = format!(
                "{what} needs `Authorization: Bearer <token>` (the token file beside the database)"
            );
            return Err(Reject::new(401, "authorization", error));
        }
    }
    Ok(())
}

/// Refuses a request a browser sent from another site: its `Origin` is not `host` over http or
/// https, or it says `Sec-Fetch-Site: cross-site`.
fn cross_site(host: &str, headers: &HeaderMap) -> Result<(), Reject> {
    let refuse = |what: String| Reject::new(403, "origin", what);
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
        if !authority.is_some_and(|a| a.eq_ignore_ascii_case(host)) {
            return Err(refuse(format!(
                "a control from the web page of origin {origin:?} (not this endpoint's own)"
            )));
        }
    }
    let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if site.is_some_and(|s| s.eq_ignore_ascii_case("cross-site")) {
        return Err(refuse("a control from another site's web page".into()));
    }
    Ok(())
}

/// The web view's pages and assets: the same bytes for everyone, no data in them.
fn is_static(path: &str) -> bool {
    path == "/" || path == "/ui" || (path.starts_with("/ui/") && !path.contains(".."))
}

/// `response` with its JSON body redacted (any other body, a page or a followed log, as is).
async fn redact(redactor: &Redactor, response: Response) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"));
    if !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // The body is one of this endpoint's own answers, each bounded where it is made.
    let unreadable = || Reject {
        status: 500,
        error: "the answer could not be redacted".into(),
        field: None,
        retry_after_s: None,
    };
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return unreadable().into_response();
    };
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        // Never sent unredacted: a JSON answer that does not parse is a bug, not a secret's way out.
        tracing::warn!("a JSON answer of the endpoint does not parse; refused");
        return unreadable().into_response();
    };
    redactor.value(&mut value);
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debug::Redaction;

    fn access(addr: &str, allow: &[&str]) -> Access {
        let allow: Vec<String> = allow.iter().map(|s| (*s).to_owned()).collect();
        let redactor = Arc::new(Redactor::new(&Redaction::default()).unwrap());
        Access::new(addr.parse().unwrap(), Arc::from("t"), false, &allow, redactor).unwrap()
    }

    #[test]
    fn a_loopback_bind_serves_its_loopback_names_at_its_port_and_the_allowed() {
        let a = access("127.0.0.1:8080", &["cairn.internal", "Box:9000", "::1"]);
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "[::1]:8080",
            "cairn.internal:8080",
            "box:9000",
        ] {
            assert!(a.serves(ok), "{ok}");
        }
        for refused in [
            "evil.example:8080",
            "localhost:8081",
            "localhost",
            "127.0.0.1",
            "cairn.internal:9000",
            "10.0.0.1:8080",
            "",
            ":8080",
            "localhost:80:80",
            "[::1:8080",
            "localhost:99999",
            "a b:8080",
        ] {
            assert!(!a.serves(refused), "{refused}");
        }
    }

    #[test]
    fn an_unspecified_bind_serves_ip_literals_at_its_port_and_no_unlisted_name() {
        let a = access("0.0.0.0:7000", &[]);
        assert!(
            a.serves("192.168.1.5:7000") && a.serves("[fe80::1]:7000") && a.serves("0.0.0.0:7000")
        );
        assert!(!a.serves("192.168.1.5:7001") && !a.serves("rebound.example:7000"));
        assert!(a.serves("localhost:7000"), "it listens on loopback too");
        assert!(!a.serves("localhost:7001"));
        let on_80 = access("0.0.0.0:80", &["cairn.example"]);
        assert!(on_80.serves("cairn.example") && on_80.serves("10.1.2.3"), "port 80 implied");
    }

    #[test]
    fn an_allow_list_entry_that_is_no_host_is_refused() {
        let redactor = Arc::new(Redactor::new(&Redaction::default()).unwrap());
        for bad in ["", "a/b", "host:port", "x".repeat(300).as_str()] {
            let allow = [bad.to_owned()];
            let made = Access::new(
                "127.0.0.1:1".parse().unwrap(),
                Arc::from("t"),
                false,
                &allow,
                redactor.clone(),
            );
            assert!(made.is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_mutating_request_from_another_origin_is_refused() {
        let with = |name: &'static str, value: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(name, axum::http::HeaderValue::from_static(value));
            h
        };
        let host = "127.0.0.1:8080";
        assert!(cross_site(host, &HeaderMap::new()).is_ok());
        assert!(cross_site(host, &with("origin", "http://127.0.0.1:8080")).is_ok());
        for origin in ["http://evil.example", "null", "http://localhost:8080", "file://"] {
            let refused = cross_site(host, &with("origin", origin)).unwrap_err();
            assert_eq!((refused.status, refused.field.as_deref()), (403, Some("origin")));
        }
        assert!(cross_site(host, &with("sec-fetch-site", "cross-site")).is_err());
        assert!(cross_site(host, &with("sec-fetch-site", "same-origin")).is_ok());
    }

    #[test]
    fn only_pages_and_assets_are_static() {
        assert!(is_static("/") && is_static("/ui") && is_static("/ui/assets/app.css"));
        assert!(!is_static("/api/threads") && !is_static("/metrics") && !is_static("/uix"));
    }
}
