//! What every command does with every kind of thing at `--db`: the documented exit code, one
//! line on stderr, and the path's type and bytes unchanged unless the command succeeded in
//! writing a database (no command may replace what is not a Cairn database: it used to turn a
//! zero-length file, a symlink or `/dev/null` into a fresh database).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{bin, copy, demo_db, on, tempdir};

/// The kinds of path of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Missing,
    MissingDir,
    Directory,
    Fifo,
    DevNull,
    LinkToEmpty,
    LinkToDatabase,
    Empty,
    RandomBytes,
    TruncatedHalf,
    ReadOnly,
    Held,
}

const KINDS: [Kind; 12] = [
    Kind::Missing,
    Kind::MissingDir,
    Kind::Directory,
    Kind::Fifo,
    Kind::DevNull,
    Kind::LinkToEmpty,
    Kind::LinkToDatabase,
    Kind::Empty,
    Kind::RandomBytes,
    Kind::TruncatedHalf,
    Kind::ReadOnly,
    Kind::Held,
];

/// Whether a command reads, writes an existing database, or may create one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Does {
    Read,
    Write,
    Create,
}

/// What the path looks like from outside: its type, and its bytes for a regular file.
fn look(path: &Path) -> String {
    match std::fs::symlink_metadata(path) {
        Err(_) => "nothing".into(),
        Ok(m) if m.file_type().is_symlink() => {
            format!("link to {}", std::fs::read_link(path).expect("link").display())
        }
        Ok(m) if m.is_dir() => "directory".into(),
        Ok(m) if m.is_file() => {
            let bytes = std::fs::read(path).expect("read");
            format!("file {}", blake3::hash(&bytes).to_hex())
        }
        Ok(m) => format!("special {:?}", m.file_type()),
    }
}

/// `cairn ARGS --db DB`, killed if it runs past `limit` (a FIFO or a device must never make a
/// command hang); as user `nobody` when `nobody_bin` gives a copy of the binary that user can
/// reach (the build directory may be private to its owner).
fn run(db: &Path, args: &[&str], nobody_bin: Option<&Path>) -> (i32, String) {
    let mut command = match nobody_bin {
        Some(copy) => {
            let mut c = Command::new("runuser");
            c.args(["-u", "nobody", "--"]).arg(copy);
            c
        }
        None => Command::new(bin()),
    };
    command
        .args(args)
        .arg("--db")
        .arg(db)
        .env_remove("CAIRN_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn cairn");
    let limit = Duration::from_secs(60);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("cairn {args:?} --db {} hung", db.display());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    (status.code().unwrap_or(-1), stderr)
}

/// Root can write a read-only file; the read-only case runs its commands as `nobody` then.
fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

struct Setup {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    database: PathBuf,
    bundle: PathBuf,
}

fn setup() -> Setup {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let database = copy(demo_db(), &path);
    let bundle = path.join("demo-0.json");
    let bundle_arg = bundle.to_str().expect("utf-8");
    on(&database, &["bundle", "export", "demo-0", "-o", bundle_arg]).expect(0);
    // `nobody` must be able to reach the files of the read-only case.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let open = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(&path, open).expect("chmod dir");
        let readable = std::fs::Permissions::from_mode(0o644);
        std::fs::set_permissions(&bundle, readable).expect("chmod bundle");
    }
    Setup { _dir: dir, dir: path, database, bundle }
}

/// A copy of the binary in `dir` that any user may run.
fn shared_binary(dir: &Path) -> PathBuf {
    let copy = dir.join("cairn-for-nobody");
    std::fs::copy(bin(), &copy).expect("copy the binary");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    copy
}

/// Makes a path of `kind` under `dir` (named after `tag`), holding a copy of `database` where
/// the kind has one.
fn make(kind: Kind, dir: &Path, tag: &str, database: &Path) -> PathBuf {
    let at = dir.join(format!("{tag}.db"));
    match kind {
        Kind::Missing => {}
        Kind::MissingDir => return dir.join(format!("no-such-dir-{tag}")).join("x.db"),
        Kind::Directory => std::fs::create_dir(&at).expect("dir"),
        Kind::Fifo => {
            let made = Command::new("mkfifo").arg(&at).status().expect("mkfifo");
            assert!(made.success(), "mkfifo");
        }
        Kind::DevNull => link(Path::new("/dev/null"), &at),
        Kind::LinkToEmpty => {
            let target = dir.join(format!("{tag}-target"));
            std::fs::write(&target, b"").expect("empty");
            link(&target, &at);
        }
        Kind::LinkToDatabase => {
            let target = dir.join(format!("{tag}-target"));
            std::fs::copy(database, &target).expect("copy");
            link(&target, &at);
        }
        Kind::Empty => std::fs::write(&at, b"").expect("empty"),
        Kind::RandomBytes => {
            let bytes: Vec<u8> =
                (0..40_000_u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
            std::fs::write(&at, bytes).expect("write");
        }
        Kind::TruncatedHalf => {
            let bytes = std::fs::read(database).expect("read");
            std::fs::write(&at, &bytes[..bytes.len() / 2]).expect("write");
        }
        Kind::ReadOnly | Kind::Held => {
            std::fs::copy(database, &at).expect("copy");
            #[cfg(unix)]
            if kind == Kind::ReadOnly {
                use std::os::unix::fs::PermissionsExt as _;
                let ro = std::fs::Permissions::from_mode(0o444);
                std::fs::set_permissions(&at, ro).expect("chmod");
            }
        }
    }
    at
}

fn link(target: &Path, at: &Path) {
    #[cfg(unix)]
    std::os::unix::fs::symlink(target, at).expect("symlink");
    #[cfg(not(unix))]
    let _ = (target, at);
}

/// The exit code the README documents for `does` on `kind` (`None`: as on the database
/// itself, which the matrix runs for reference).
fn expected(kind: Kind, does: Does, command: &str) -> Option<i32> {
    let init = command == "init";
    Some(match (kind, does) {
        (Kind::Missing, Does::Create) => 0,
        (Kind::Missing | Kind::MissingDir | Kind::Directory | Kind::Fifo | Kind::DevNull, _) => 4,
        (Kind::LinkToEmpty | Kind::Empty, Does::Create) if init => 0,
        (Kind::LinkToEmpty | Kind::Empty | Kind::RandomBytes, _) if !init => 4,
        (Kind::TruncatedHalf, _) if !init => 3,
        // `init` never writes over content.
        (Kind::RandomBytes | Kind::TruncatedHalf | Kind::LinkToDatabase | Kind::ReadOnly, _)
            if init =>
        {
            1
        }
        (Kind::Held, Does::Write | Does::Create) if !init => 4,
        (Kind::Held, _) if init => 1,
        // An engine holds it and serves no endpoint: said up front, no copy is read (`prune
        // --dry-run`, which no endpoint answers, still reads a snapshot).
        (Kind::Held, Does::Read) if command != "prune" => 4,
        (Kind::ReadOnly, Does::Write | Does::Create) => 4,
        (Kind::LinkToDatabase | Kind::ReadOnly | Kind::Held, _) => return None,
        other => unreachable!("no expectation for {other:?}"),
    })
}

#[test]
fn every_command_on_every_kind_of_path_gives_its_code_and_changes_nothing_it_should_not() {
    let s = setup();
    let bundle = s.bundle.to_str().expect("utf-8").to_owned();
    // Where any user (`nobody` too) may write the exported bundle.
    let out = s.dir.join("out");
    std::fs::create_dir(&out).expect("out dir");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    let export_to = out.join("out.json");
    let export_to = export_to.to_str().expect("utf-8").to_owned();
    let commands: Vec<(Does, Vec<&str>)> = vec![
        (Does::Read, vec!["threads"]),
        (Does::Read, vec!["show", "demo-0"]),
        (Does::Read, vec!["events", "demo-0"]),
        (Does::Read, vec!["state", "demo-0"]),
        (Does::Read, vec!["checkpoints"]),
        (Does::Read, vec!["verify"]),
        (Does::Read, vec!["bundle", "export", "demo-0", "-o", &export_to]),
        (Does::Read, vec!["prune", "--dry-run"]),
        (Does::Write, vec!["pause", "demo-0"]),
        (Does::Write, vec!["cancel", "demo-0"]),
        (Does::Write, vec!["resume", "demo-0"]),
        (Does::Write, vec!["resumable"]),
        (Does::Create, vec!["bundle", "import", &bundle]),
        (Does::Create, vec!["demo", "--threads", "1", "--quiet"]),
        (Does::Create, vec!["init"]),
    ];
    let nobody_bin = is_root().then(|| shared_binary(&s.dir));
    let mut cases = 0;
    for (n, kind) in KINDS.into_iter().enumerate() {
        for (c, (does, args)) in commands.iter().enumerate() {
            let tag = format!("k{n}-c{c}");
            let path = make(kind, &s.dir, &tag, &s.database);
            let holder = (kind == Kind::Held).then(|| {
                let held = crate::harness::Spawned::start(
                    &["__hold", "--db", path.to_str().expect("utf-8")],
                    Duration::from_secs(120),
                );
                let first = held.next_line().expect("the holder holds the file");
                assert!(first.starts_with("holding"), "{first}");
                held
            });
            let as_nobody = nobody_bin.as_deref().filter(|_| kind == Kind::ReadOnly);
            // A bundle an earlier case exported (as another user) is not in the way.
            let _ = std::fs::remove_file(&export_to);
            let before = look(&path);
            let null_before = look(Path::new("/dev/null"));
            let (code, stderr) = run(&path, args, as_nobody);
            let want = expected(kind, *does, args[0]).unwrap_or_else(|| {
                // As on a plain copy of the database.
                let reference = make(Kind::Held, &s.dir, &format!("{tag}-ref"), &s.database);
                run(&reference, args, None).0
            });
            let what = format!("cairn {args:?} on {kind:?} ({})", path.display());
            assert_eq!(code, want, "{what}: {stderr}");
            let lines: Vec<&str> = stderr.lines().collect();
            if code == 0 {
                assert!(lines.is_empty(), "{what}: nothing on stderr, got {stderr}");
            } else {
                assert_eq!(lines.len(), 1, "{what}: one line on stderr, got {stderr}");
                assert!(lines[0].starts_with("error: "), "{what}: {stderr}");
                assert!(
                    !lines[0].contains("Some(") && !lines[0].contains("_MAX"),
                    "{what}: {stderr}"
                );
            }
            let wrote = code == 0 && *does != Does::Read;
            if !wrote {
                assert_eq!(look(&path), before, "{what}: the path changed");
            }
            if matches!(kind, Kind::LinkToEmpty | Kind::LinkToDatabase | Kind::DevNull) {
                assert!(look(&path).starts_with("link to"), "{what}: the link was replaced");
            }
            assert_eq!(look(Path::new("/dev/null")), null_before, "{what}: /dev/null changed");
            if let Some(holder) = holder {
                assert_eq!(holder.wait(), 0, "{what}: the holder");
            }
            cases += 1;
        }
    }
    assert_eq!(cases, KINDS.len() * commands.len());
}

/// A read command on `/dev/zero` (a device that never ends) is refused before reading: it used
/// to read until it ran out of memory.
#[test]
fn a_device_that_never_ends_is_refused_before_reading() {
    let dir = tempdir();
    let zero = dir.path().join("zero.db");
    link(Path::new("/dev/zero"), &zero);
    for args in [&["threads"][..], &["verify", "--json"], &["pause", "x"]] {
        let (code, stderr) = run(&zero, args, None);
        assert_eq!(code, 4, "{args:?}: {stderr}");
        assert!(stderr.contains("a character device"), "{args:?}: {stderr}");
    }
}
