//! The exporter's HTTP client: ureq (blocking) with a deadline on every request. The SDK runs
//! its exports on its own threads (the batch span processor's and the periodic metric reader's),
//! never on an async runtime's, so a blocking request there stalls nobody but that thread, and
//! for at most the deadline.

use std::time::Duration;

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};

/// A ureq agent whose every request ends within `timeout` (connection, send and answer).
#[derive(Debug)]
pub(super) struct Ureq(ureq::Agent);

impl Ureq {
    pub(super) fn new(timeout: Duration) -> Ureq {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            // The exporter reads the status itself (a 4xx/5xx is its error to report).
            .http_status_as_error(false)
            .build();
        Ureq(config.new_agent())
    }
}

#[async_trait::async_trait]
impl HttpClient for Ureq {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let request = Request::from_parts(parts, body.to_vec());
        let (parts, mut body) = self.0.run(request)?.into_parts();
        // The collector's answer is small; a bounded read (ureq's default limit, 10 MB).
        let bytes = body.read_to_vec()?;
        Ok(Response::from_parts(parts, Bytes::from(bytes)))
    }
}
