//! CPU time of processes, from `/proc`: what a run cost the machine, split by process, so a
//! figure measured on a loaded or CPU-bound machine still says where the cycles went.

use anyhow::Context as _;

/// Clock ticks per second of `/proc/<pid>/stat`'s times (`USER_HZ`, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// CPU seconds (user + system) spent by this process, all its threads, so far.
///
/// # Errors
/// When `/proc/self/stat` cannot be read or parsed.
pub fn own_seconds() -> anyhow::Result<f64> {
    let t = times("self")?;
    Ok((t.own as f64) / TICKS_PER_SECOND)
}

/// CPU seconds spent so far by process `root` and its children: its own time, that of its
/// children that have exited and been waited for, and that of those alive now. For a
/// PostgreSQL postmaster that is the whole server (backends, background writer, WAL writer...).
///
/// # Errors
/// When `/proc/<root>/stat` cannot be read or parsed.
pub fn tree_seconds(root: u32) -> anyhow::Result<f64> {
    let me = times(&root.to_string())?;
    let mut ticks = me.own + me.waited_children;
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|n| n.bytes().all(|b| b.is_ascii_digit())) else {
            continue;
        };
        // A process may end between the listing and the read: skip it (its time moves to
        // the parent's waited-for children once reaped).
        if let Ok(t) = times(pid)
            && t.parent == root
        {
            ticks += t.own;
        }
    }
    Ok(ticks as f64 / TICKS_PER_SECOND)
}

/// The fields of `/proc/<pid>/stat` the functions above use.
struct Times {
    parent: u32,
    /// utime + stime.
    own: u64,
    /// cutime + cstime.
    waited_children: u64,
}

fn times(pid: &str) -> anyhow::Result<Times> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| path.clone())?;
    // The command name (field 2) is in parentheses and may hold spaces: fields count from
    // after its closing one, where field 3 (the state) is index 0.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).context("no ')' in stat")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| -> anyhow::Result<u64> {
        f.get(i).context("a short stat line")?.parse().with_context(|| format!("{path}: field {i}"))
    };
    Ok(Times {
        parent: u32::try_from(num(1)?)?,
        own: num(11)? + num(12)?,
        waited_children: num(13)? + num(14)?,
    })
}
