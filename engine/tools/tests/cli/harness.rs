//! Running the real `cairn` binary on real database files made by `cairn demo`.

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

/// What one run of the binary gave.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Stdout as JSON, or a panic showing the run.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {self:#?}"))
    }

    /// Asserts the exit code, showing the run when it differs.
    #[track_caller]
    pub fn expect(self, code: i32) -> Self {
        assert_eq!(self.code, code, "exit code of {self:#?}");
        self
    }
}

/// The `cairn` binary of this build.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_cairn")
}

/// Runs `cairn ARGS...` and waits for it.
pub fn cairn(args: &[&str]) -> Run {
    let out = Command::new(bin())
        .args(args)
        .env_remove("CAIRN_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("the cairn binary runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `cairn ARGS... --db DB`.
pub fn on(db: &Path, args: &[&str]) -> Run {
    let mut all: Vec<&str> = args.to_vec();
    let db = db.to_str().expect("utf-8 path");
    all.extend(["--db", db]);
    cairn(&all)
}

fn fixtures() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-fixtures");
    std::fs::create_dir_all(&dir).expect("fixture dir");
    dir
}

/// A database made once by `cairn demo --threads 3` (demo-0 and demo-2 answer directly in two
/// steps, demo-1 runs the whole research path); never written by a test (tests copy it).
pub fn demo_db() -> &'static Path {
    static DB: OnceLock<PathBuf> = OnceLock::new();
    DB.get_or_init(|| {
        let path = fixtures().join("demo3.db");
        let _ = std::fs::remove_file(&path);
        on(&path, &["demo", "--threads", "3", "--quiet"]).expect(0);
        path
    })
}

/// A database where the demo process died (abort) after 3 acknowledged steps: demo-1 (seven
/// steps in all) is certainly unfinished and left "running" with no runner.
pub fn crashed_db() -> &'static Path {
    static DB: OnceLock<PathBuf> = OnceLock::new();
    DB.get_or_init(|| {
        let path = fixtures().join("crashed.db");
        let _ = std::fs::remove_file(&path);
        let run = on(&path, &["demo", "--threads", "2", "--quiet", "--crash-after-steps", "3"]);
        assert_ne!(run.code, 0, "the demo was meant to abort: {run:#?}");
        path
    })
}

/// A private copy of `db` in `dir`.
pub fn copy(db: &Path, dir: &Path) -> PathBuf {
    let to = dir.join(db.file_name().expect("file name"));
    std::fs::copy(db, &to).expect("copy the database");
    to
}

/// A fresh temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// The seqs and kinds of a thread's events.
pub fn events(db: &Path, thread: &str) -> Vec<Value> {
    match on(db, &["events", thread, "--json"]).expect(0).json() {
        Value::Array(a) => a,
        other => panic!("events --json gave {other}"),
    }
}

/// A child `cairn` process whose stdout is read line by line; killed if it outlives `limit`
/// (a hang guard, not synchronisation: tests wait on its output and its exit).
pub struct Spawned {
    pub lines: mpsc::Receiver<String>,
    child: Child,
    stdin: Option<ChildStdin>,
    done: mpsc::Sender<()>,
}

impl Spawned {
    pub fn start(args: &[&str], limit: Duration) -> Spawned {
        let mut child: Child = Command::new(bin())
            .args(args)
            .env_remove("CAIRN_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn cairn");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (done, done_rx) = mpsc::channel::<()>();
        let pid = child.id().to_string();
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = done_rx.recv_timeout(limit) {
                let _ = Command::new("kill").args(["-9", &pid]).status();
            }
        });
        Spawned { lines, child, stdin, done }
    }

    /// The next stdout line (None once the child closed stdout).
    pub fn next_line(&self) -> Option<String> {
        self.lines.recv().ok()
    }

    /// Closes the child's stdin.
    pub fn close_stdin(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.flush();
        }
    }

    /// Waits for the child to exit (it is killed at the time limit) and gives its exit code.
    pub fn wait(mut self) -> i32 {
        self.close_stdin();
        let code = self.child.wait().map(|s| s.code().unwrap_or(-1)).unwrap_or(-1);
        let _ = self.done.send(());
        code
    }
}

/// Prints a `RELIABILITY` summary line to the stderr handle directly: libtest captures
/// `eprintln!` of passing tests, and these lines must reach the CI log.
pub fn report(line: &str) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}
