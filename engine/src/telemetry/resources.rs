//! The machine's side of a health pass (seed 004's resource checks): free space on the disk
//! that holds the database file, and this process's resident memory, each read from the
//! operating system at the pass, with what to do when one is short.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::limits::HEALTH_DISK_FREE_MIN_PERCENT;

/// What a health pass read of the machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceHealth {
    /// The disk holding the database file (absent: a database on a server, a store given
    /// without a path, or a system without `statvfs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskSpace>,
    /// This process's resident memory, bytes (Linux `/proc/self/statm`; absent elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// The bound `memory_bytes` is held to (`Config::health_memory_max_bytes`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_max_bytes: Option<u64>,
}

/// Space on the disk holding the database file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskSpace {
    /// The database file.
    pub path: String,
    /// Bytes an unprivileged writer may still take.
    pub free_bytes: u64,
    /// The file system's size, bytes.
    pub total_bytes: u64,
    /// Below this many free bytes (or 5% of the total) the disk is short.
    pub free_min_bytes: u64,
}

impl DiskSpace {
    /// Whether the disk is short: under its floor in bytes, or under 5% free.
    pub fn is_short(&self) -> bool {
        self.free_bytes < self.free_min_bytes
            || self.free_bytes.saturating_mul(100)
                < self.total_bytes.saturating_mul(HEALTH_DISK_FREE_MIN_PERCENT)
    }
}

impl ResourceHealth {
    /// Reads the disk of `database` (if any) and this process's memory.
    pub(crate) fn read(
        database: Option<&Path>,
        free_min_bytes: u64,
        memory_max_bytes: Option<u64>,
    ) -> ResourceHealth {
        ResourceHealth {
            disk: database.and_then(|path| disk_space(path, free_min_bytes)),
            memory_bytes: resident_bytes(),
            memory_max_bytes,
        }
    }

    /// What to do about what is short, one sentence each (none when nothing is).
    pub fn actions(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(disk) = self.disk.as_ref().filter(|d| d.is_short()) {
            out.push(format!(
                "free space on the disk of {} ({} of {} bytes free): writes fail once it is \
                 full (the store then refuses them until space returns); prune \
                 (`cairn prune`), delete finished threads, or move the database",
                disk.path, disk.free_bytes, disk.total_bytes
            ));
        }
        if let (Some(used), Some(max)) = (self.memory_bytes, self.memory_max_bytes)
            && used > max
        {
            out.push(format!(
                "this process holds {used} bytes of memory, over its bound of {max}: lower the \
                 concurrency or the page cache (`EngineBuilder::concurrency`, \
                 `page_cache_bytes`), or look for a node that keeps large values"
            ));
        }
        out
    }
}

/// Free and total space of the file system holding `path` (its directory when the file does
/// not exist yet).
#[cfg(unix)]
fn disk_space(path: &Path, free_min_bytes: u64) -> Option<DiskSpace> {
    let probe = if path.exists() { path } else { path.parent().filter(|p| p.exists())? };
    let stat = rustix::fs::statvfs(probe).ok()?;
    Some(DiskSpace {
        path: path.display().to_string(),
        free_bytes: stat.f_bavail.saturating_mul(stat.f_frsize),
        total_bytes: stat.f_blocks.saturating_mul(stat.f_frsize),
        free_min_bytes,
    })
}

#[cfg(not(unix))]
fn disk_space(_path: &Path, _free_min_bytes: u64) -> Option<DiskSpace> {
    None
}

/// This process's resident set, bytes: the second field of `/proc/self/statm`, in pages.
#[cfg(unix)]
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages.saturating_mul(rustix::param::page_size() as u64))
}

#[cfg(not(unix))]
fn resident_bytes() -> Option<u64> {
    None
}
