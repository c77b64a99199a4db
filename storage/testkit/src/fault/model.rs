//! What can go wrong, and when: the crash models and the trigger that fires one.

use std::fmt;

/// Size of a simulated disk sector in bytes: the unit at which [`CrashModel::TornWrite`] cuts a
/// write and at which [`CrashModel::GarbageUnsynced`] scrambles unsynced data.
///
/// 512 bytes is the smallest sector any disk the engine runs on writes atomically (4 KiB disks
/// are coarser, so tearing at 512 B is the more adversarial choice).
pub const SECTOR_SIZE: u64 = 512;

/// A crash model: what the disk holds, and what the process sees, when a fault fires.
///
/// Terms used below. The *live* image is what reads return (the OS page cache). The *durable*
/// image is the live image as of the last successful `sync_data` (what survives a power loss).
/// *Unsynced writes* are the byte ranges written since that sync. *Dead* means the backend fails
/// every later `read`, `write`, `set_len` and `sync_data` with an error (the process is gone; the
/// store above only gets to unwind). The *crash image* is what
/// [`FaultController::crash_image`](super::FaultController::crash_image) returns.
///
/// Every model keeps "powersafe overwrite": bytes that were never written keep their durable
/// value. All but [`CrashModel::GarbageUnsynced`] also keep redb's assumption that a written byte
/// holds either its old or its new value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CrashModel {
    /// Process death (`kill -9`): the faulting op is not performed and the backend is dead.
    /// Crash image: the live image, because every write already issued sits in the OS page cache
    /// and reaches the disk even though the process died.
    Kill,
    /// Power loss: the faulting op is not performed and the backend is dead. Crash image: the
    /// durable image; every unsynced write and every unsynced length change is lost.
    LoseUnsynced,
    /// Power loss in the middle of a write. If the faulting op is a write, a seeded prefix of it,
    /// cut at a [`SECTOR_SIZE`] boundary of the file (possibly empty, possibly whole), lands on
    /// the durable image (bytes past the durable length are dropped: the file extension was not
    /// synced); all other unsynced writes are lost. The backend is dead. If the faulting op is
    /// not a write, this is exactly [`CrashModel::LoseUnsynced`].
    TornWrite,
    /// Power loss after the disk wrote back some of the unsynced writes, in no particular
    /// order: each unsynced write (and each unsynced zero-extension) is applied whole to the
    /// durable image or not at all, independently with probability 1/2 from the seed; bytes past
    /// the durable length are dropped. The faulting op is not performed; the backend is dead.
    /// This is exactly what an `fsync` barrier guards against (for example redb's header reaching
    /// the disk before the data pages it points at).
    ReorderedUnsynced,
    /// Power loss where every sector touched by an unsynced write holds garbage (seeded bytes)
    /// instead of its old or new content, within the written byte range and the durable length.
    /// The faulting op is not performed; the backend is dead. This is SQLite's harshest crash
    /// model and lies OUTSIDE redb's media contract (single-byte writes are atomic), so a
    /// database may legitimately fail to open afterwards; it must never return wrong data.
    GarbageUnsynced,
    /// `fsync` fails (fsyncgate): the trigger fires at the first `sync_data` at or after the
    /// trigger's op index, which returns an error. What reached the disk is then undefined, so the
    /// backend is dead from there on and the crash image is the durable image as of the last
    /// successful sync. Never fires on a [`Trigger::Read`].
    FailedSync,
    /// One op (the faulting one) returns an error and does nothing; later ops succeed. Crash
    /// image: the durable image at the time of the call (the error was followed by a power loss).
    IoErrorTransient,
    /// The faulting op and every later op (reads included) return an error and do nothing, until
    /// [`FaultController::clear`](super::FaultController::clear). Crash image: the durable image.
    IoErrorPersistent,
    /// The disk fills up: when the trigger fires, the capacity becomes the current live length.
    /// From then on (the faulting op included) a `write` or `set_len` that would make the file
    /// longer returns [`std::io::ErrorKind::StorageFull`] and does nothing; other ops succeed.
    /// Lifted by [`FaultController::clear`](super::FaultController::clear). Crash image: the
    /// durable image.
    DiskFull,
}

impl CrashModel {
    /// Every model, in declaration order.
    pub const ALL: [CrashModel; 9] = [
        CrashModel::Kill,
        CrashModel::LoseUnsynced,
        CrashModel::TornWrite,
        CrashModel::ReorderedUnsynced,
        CrashModel::GarbageUnsynced,
        CrashModel::FailedSync,
        CrashModel::IoErrorTransient,
        CrashModel::IoErrorPersistent,
        CrashModel::DiskFull,
    ];

    /// A stable snake_case name, for test output.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            CrashModel::Kill => "kill",
            CrashModel::LoseUnsynced => "lose_unsynced",
            CrashModel::TornWrite => "torn_write",
            CrashModel::ReorderedUnsynced => "reordered_unsynced",
            CrashModel::GarbageUnsynced => "garbage_unsynced",
            CrashModel::FailedSync => "failed_sync",
            CrashModel::IoErrorTransient => "io_error_transient",
            CrashModel::IoErrorPersistent => "io_error_persistent",
            CrashModel::DiskFull => "disk_full",
        }
    }

    /// Whether firing this model kills the backend (every later op fails and the crash image is
    /// frozen at the moment of the fault).
    #[must_use]
    pub const fn kills(self) -> bool {
        matches!(
            self,
            CrashModel::Kill
                | CrashModel::LoseUnsynced
                | CrashModel::TornWrite
                | CrashModel::ReorderedUnsynced
                | CrashModel::GarbageUnsynced
                | CrashModel::FailedSync
        )
    }

    /// Whether the resulting disk state stays within redb's media assumptions (powersafe
    /// overwrite and atomic single-byte writes), so redb promises to recover every durable commit.
    #[must_use]
    pub const fn within_redb_contract(self) -> bool {
        !matches!(self, CrashModel::GarbageUnsynced)
    }
}

impl fmt::Display for CrashModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which op a fault fires at. Ops are numbered from 0 in the order the backend receives them,
/// separately for mutations and reads; the numbering restarts for each
/// [`FaultBackend`](super::FaultBackend), including one made by `from_image`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// The n-th mutating op: `write`, `set_len` or `sync_data` (`len` and `close` are not ops).
    Mutation(u64),
    /// The n-th `read`.
    Read(u64),
}

/// A fault to arm: a trigger, a model and the seed of every random choice the model makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fault {
    /// When it fires.
    pub trigger: Trigger,
    /// What happens then.
    pub model: CrashModel,
    /// Seeds the torn-write cut and the garbage bytes; same seed, same image.
    pub seed: u64,
}

impl Fault {
    /// A fault at mutating op `op` with seed 0.
    #[must_use]
    pub const fn at(op: u64, model: CrashModel) -> Fault {
        Fault { trigger: Trigger::Mutation(op), model, seed: 0 }
    }

    /// A fault at read number `read` with seed 0.
    #[must_use]
    pub const fn at_read(read: u64, model: CrashModel) -> Fault {
        Fault { trigger: Trigger::Read(read), model, seed: 0 }
    }

    /// The same fault with another seed.
    #[must_use]
    pub const fn with_seed(self, seed: u64) -> Fault {
        Fault { seed, ..self }
    }
}

/// One op as the backend received it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// `write(offset, data)` of `len` bytes.
    Write {
        /// Byte offset in the file.
        offset: u64,
        /// Number of bytes.
        len: u64,
    },
    /// `set_len(to)` on a file that was `from` bytes long.
    SetLen {
        /// Length before.
        from: u64,
        /// Length asked for.
        to: u64,
    },
    /// `sync_data()`.
    Sync,
    /// `read(offset, out)` of `len` bytes.
    Read {
        /// Byte offset in the file.
        offset: u64,
        /// Number of bytes.
        len: u64,
    },
}

impl OpKind {
    /// Whether the op would make the file longer than `len` bytes.
    #[must_use]
    pub const fn grows_past(&self, len: u64) -> bool {
        match *self {
            OpKind::Write { offset, len: n } => offset.saturating_add(n) > len,
            OpKind::SetLen { to, .. } => to > len,
            OpKind::Sync | OpKind::Read { .. } => false,
        }
    }
}

/// Where and how an armed fault fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fired {
    /// The op it fired at (the trigger's counter value, which for [`CrashModel::FailedSync`] may
    /// be later than the armed index).
    pub trigger: Trigger,
    /// The op it fired at.
    pub op: OpKind,
    /// The model applied.
    pub model: CrashModel,
}
