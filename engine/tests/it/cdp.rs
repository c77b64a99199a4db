//! A small Chrome DevTools Protocol client for the web view's browser test: starts Debian's
//! headless `chromium` with a fresh profile, opens one page, and evaluates scripts, waits for
//! conditions and takes screenshots in it over the browser's WebSocket (blocking `tungstenite`).
//!
//! Chromium is found at `/usr/bin/chromium` (or `$CHROMIUM`); when it is missing the test fails
//! and says how to install it (`.ci/run` installs it).

use std::io::ErrorKind;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

/// Where Debian puts the browser.
const CHROMIUM: &str = "/usr/bin/chromium";

/// A running headless Chromium with one page attached.
pub struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    ws: WebSocket<TcpStream>,
    session: String,
    next_id: u64,
}

/// The browser's path, or a panic saying how to install it.
fn executable() -> PathBuf {
    let path = std::env::var_os("CHROMIUM").map_or_else(|| PathBuf::from(CHROMIUM), PathBuf::from);
    assert!(
        path.exists(),
        "the web view's browser test needs Debian's headless Chromium at {}: install it with \
         `apt-get install -y chromium` (.ci/run does), or point $CHROMIUM at another build",
        path.display()
    );
    path
}

impl Browser {
    /// Starts the browser with a `width` x `height` window and attaches to a blank page.
    ///
    /// # Panics
    /// When Chromium is missing or does not start.
    pub fn launch(width: u32, height: u32) -> Browser {
        let exe = executable();
        let profile = tempfile::tempdir().expect("a profile directory");
        let child = Command::new(&exe)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
                &format!("--window-size={width},{height}"),
                &format!("--user-data-dir={}", profile.path().display()),
                "about:blank",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.display()));
        // The browser writes its DevTools port and path once it listens.
        let port_file = profile.path().join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(60);
        let (port, path) = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                let mut lines = text.lines();
                if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                    break (port.trim().to_owned(), path.trim().to_owned());
                }
            }
            assert!(Instant::now() < deadline, "chromium did not open its DevTools port in 60 s");
            std::thread::sleep(Duration::from_millis(50));
        };
        let stream = TcpStream::connect(format!("127.0.0.1:{port}")).expect("DevTools port");
        stream.set_read_timeout(Some(Duration::from_secs(120))).expect("a read timeout");
        let (ws, _) = tungstenite::client(format!("ws://127.0.0.1:{port}{path}"), stream)
            .expect("the DevTools WebSocket");
        let mut browser =
            Browser { child, _profile: profile, ws, session: String::new(), next_id: 0 };
        let target = browser.call_browser("Target.createTarget", json!({"url": "about:blank"}));
        let target_id = target["targetId"].as_str().expect("a target id").to_owned();
        let attached = browser
            .call_browser("Target.attachToTarget", json!({"targetId": target_id, "flatten": true}));
        browser.session = attached["sessionId"].as_str().expect("a session id").to_owned();
        browser.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
        browser
    }

    /// The answer to `method`, or the error DevTools gave.
    fn send(
        &mut self,
        session: Option<String>,
        method: &str,
        params: Value,
    ) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::text(msg.to_string())).expect("a DevTools request");
        loop {
            let frame = match self.ws.read() {
                Ok(f) => f,
                Err(tungstenite::Error::Io(e)) if e.kind() == ErrorKind::WouldBlock => {
                    panic!("{method}: no answer from chromium in 120 s")
                }
                Err(e) => panic!("{method}: the DevTools connection failed: {e}"),
            };
            let Message::Text(text) = frame else { continue };
            let v: Value = serde_json::from_str(text.as_str()).expect("DevTools JSON");
            if v["id"] == id {
                return match v.get("error") {
                    Some(error) => Err(error.clone()),
                    None => Ok(v["result"].clone()),
                };
            }
            // Events (and answers to nobody) are ignored.
        }
    }

    fn call_browser(&mut self, method: &str, params: Value) -> Value {
        self.send(None, method, params).unwrap_or_else(|e| panic!("{method} failed: {e}"))
    }

    /// A command to the page.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.try_call(method, params).unwrap_or_else(|e| panic!("{method} failed: {e}"))
    }

    fn try_call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        let session = Some(self.session.clone());
        self.send(session, method, params)
    }

    /// Loads `url` and waits until its document has loaded.
    pub fn navigate(&mut self, url: &str) {
        let r = self.call("Page.navigate", json!({"url": url}));
        assert!(r.get("errorText").is_none(), "navigating to {url}: {r}");
        self.wait_for("document.readyState === 'complete'", Duration::from_secs(30));
    }

    /// The value of `expression` (awaited if a promise), as JSON.
    pub fn eval(&mut self, expression: &str) -> Value {
        self.try_eval(expression).unwrap_or_else(|e| panic!("Runtime.evaluate failed: {e}"))
    }

    /// As [`Browser::eval`], or why not: the error DevTools gave (the page navigated meanwhile,
    /// say) or the exception `expression` threw.
    fn try_eval(&mut self, expression: &str) -> Result<Value, Value> {
        let r = self.try_call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        )?;
        if let Some(e) = r.get("exceptionDetails") {
            return Err(json!({"threw": e}));
        }
        Ok(r["result"]["value"].clone())
    }

    /// Waits until `expression` is truthy; returns its value.
    ///
    /// # Panics
    /// After `timeout`, with the page's error text and `expression`.
    pub fn wait_for(&mut self, expression: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        let mut threw = Value::Null;
        loop {
            // A page that navigates (a link clicked) drops an evaluation in flight, and one
            // evaluated while the next document has no body yet throws: both are "not yet".
            let v = match self.try_eval(expression) {
                Ok(v) => v,
                Err(e) if e.to_string().contains("navigated or closed") => Value::Null,
                Err(e) if e.get("threw").is_some() => {
                    threw = e;
                    Value::Null
                }
                Err(e) => panic!("Runtime.evaluate failed: {e}"),
            };
            let truthy = match &v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return v;
            }
            if Instant::now() >= deadline {
                let error = self
                    .eval("(document.getElementById('error') || {textContent: ''}).textContent");
                panic!(
                    "waited {timeout:?} for `{expression}` (page error: {error}; last exception: {threw})"
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Saves the page as a PNG at `path`: its whole height (not only the window), at most
    /// `max_height` pixels of it.
    pub fn screenshot(&mut self, path: &Path, max_height: f64) {
        let metrics = self.call("Page.getLayoutMetrics", json!({}));
        let size = &metrics["cssContentSize"];
        let width = size["width"].as_f64().unwrap_or(1400.);
        let height = size["height"].as_f64().unwrap_or(1000.).min(max_height);
        let clip = json!({"x": 0, "y": 0, "width": width, "height": height, "scale": 1});
        let r = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true, "clip": clip}),
        );
        let data = r["data"].as_str().expect("screenshot data");
        use base64::Engine as _;
        let png = base64::engine::general_purpose::STANDARD.decode(data).expect("base64 PNG");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("the screenshot directory");
        }
        std::fs::write(path, png).expect("the screenshot file");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.ws.close(None);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
