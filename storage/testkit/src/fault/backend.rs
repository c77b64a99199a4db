//! `FaultBackend` (the `redb::StorageBackend`) and `FaultController` (the handle tests hold).

use std::fmt;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::disk::Disk;
use super::model::{Fault, Fired, OpKind};

/// An in-memory `redb::StorageBackend` that simulates a disk with a page cache and can fail or
/// crash at a chosen op under a [`CrashModel`](super::CrashModel).
///
/// It keeps a live image (what reads see) and a durable image (what a power loss leaves):
/// `write` and `set_len` change the live image, `sync_data` copies what changed into the durable
/// one. Every `write`, `set_len` and `sync_data` is a numbered *mutation*, every `read` a numbered
/// read; a [`Fault`] armed through the [`FaultController`] fires at one of them. `len` and
/// `close` always succeed and are not counted. Byte-range locks are unsupported (redb then uses
/// its exclusive-writer mode, which is all an in-memory disk needs).
///
/// # Examples
///
/// ```
/// use cairn_storage_testkit::fault::{CrashModel, Fault, FaultBackend};
/// use redb::StorageBackend;
///
/// let backend = FaultBackend::new();
/// let controller = backend.controller();
/// backend.write(0, b"synced").unwrap(); // mutation 0
/// backend.sync_data().unwrap(); // mutation 1
/// controller.arm(Fault::at(3, CrashModel::LoseUnsynced));
/// backend.write(0, b"cached").unwrap(); // mutation 2: in the page cache only
/// assert!(backend.sync_data().is_err()); // mutation 3: the power goes out
/// assert_eq!(controller.crash_image(), b"synced");
///
/// // Reboot on what the disk held.
/// let rebooted = FaultBackend::from_image(controller.crash_image());
/// let mut buf = [0u8; 6];
/// rebooted.read(0, &mut buf).unwrap();
/// assert_eq!(&buf, b"synced");
/// ```
#[derive(Clone, Default)]
pub struct FaultBackend {
    disk: Arc<Mutex<Disk>>,
}

/// A cloneable, thread-safe handle on a [`FaultBackend`]'s disk: arm faults, read the op
/// counters, and take the images a crash leaves. Stays usable after redb dropped the backend.
#[derive(Clone)]
pub struct FaultController {
    disk: Arc<Mutex<Disk>>,
}

impl FaultBackend {
    /// An empty disk (redb initialises a new database on it).
    #[must_use]
    pub fn new() -> FaultBackend {
        FaultBackend::default()
    }

    /// A disk holding `image`, both live and durable, with fresh op counters and nothing armed:
    /// the file as found after a reboot. Arm its controller before opening the database to crash
    /// again during recovery.
    #[must_use]
    pub fn from_image(image: Vec<u8>) -> FaultBackend {
        FaultBackend { disk: Arc::new(Mutex::new(Disk::from_image(image))) }
    }

    /// The controller of this backend's disk.
    #[must_use]
    pub fn controller(&self) -> FaultController {
        FaultController { disk: Arc::clone(&self.disk) }
    }

    fn disk(&self) -> MutexGuard<'_, Disk> {
        lock(&self.disk)
    }
}

impl fmt::Debug for FaultBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let disk = self.disk();
        f.debug_struct("FaultBackend")
            .field("live_len", &disk.live.len())
            .field("durable_len", &disk.durable.len())
            .field("mutations", &disk.mutations)
            .field("armed", &disk.armed)
            .field("fired", &disk.fired)
            .finish_non_exhaustive()
    }
}

impl ::redb::StorageBackend for FaultBackend {
    fn len(&self) -> Result<u64, io::Error> {
        Ok(self.disk().live_len())
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        let mut disk = self.disk();
        let len = u64::try_from(out.len()).unwrap_or(u64::MAX);
        disk.admit(OpKind::Read { offset, len }, None)?;
        disk.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        let mut disk = self.disk();
        let from = disk.live_len();
        disk.admit(OpKind::SetLen { from, to: len }, None)?;
        disk.set_len(len)
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        let mut disk = self.disk();
        disk.admit(OpKind::Sync, None)?;
        disk.sync();
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        let mut disk = self.disk();
        let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
        disk.admit(OpKind::Write { offset, len }, Some(data))?;
        disk.write(offset, data)
    }
}

impl FaultController {
    /// Arms `fault`, replacing any fault armed and not yet fired. It fires once.
    pub fn arm(&self, fault: Fault) {
        self.disk().armed = Some(fault);
    }

    /// Disarms the pending fault, if any.
    pub fn disarm(&self) {
        self.disk().armed = None;
    }

    /// Where and how the armed fault fired, once it has.
    #[must_use]
    pub fn fired(&self) -> Option<Fired> {
        self.disk().fired
    }

    /// Whether a killing model fired: every op now fails and the crash image is frozen.
    #[must_use]
    pub fn is_dead(&self) -> bool {
        self.disk().frozen.is_some()
    }

    /// Mutating ops received so far (including ones that failed).
    #[must_use]
    pub fn mutations(&self) -> u64 {
        self.disk().mutations
    }

    /// Reads received so far (including ones that failed).
    #[must_use]
    pub fn reads(&self) -> u64 {
        self.disk().reads
    }

    /// Starts (`true`, clearing any earlier record) or stops recording every op received.
    pub fn record_ops(&self, on: bool) {
        self.disk().trace = on.then(Vec::new);
    }

    /// The ops recorded since [`FaultController::record_ops`]`(true)`, reads and mutations
    /// interleaved in arrival order (empty when not recording).
    #[must_use]
    pub fn ops(&self) -> Vec<OpKind> {
        self.disk().trace.clone().unwrap_or_default()
    }

    /// Sets (or with `None` lifts) a capacity: a `write` or `set_len` that would make the file
    /// longer fails with [`io::ErrorKind::StorageFull`].
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.disk().capacity = bytes;
    }

    /// Lifts a persistent I/O error and a disk-full capacity (the operator freed space, the
    /// cable was reseated). A dead backend stays dead: reopen from the crash image instead.
    pub fn clear(&self) {
        let mut disk = self.disk();
        disk.failing = false;
        disk.capacity = None;
    }

    /// What the disk holds after the fault: if a killing model fired, the image frozen at that
    /// moment (see each [`CrashModel`](super::CrashModel)); otherwise the durable image now,
    /// i.e. what a power loss at this instant would leave.
    #[must_use]
    pub fn crash_image(&self) -> Vec<u8> {
        self.disk().crash_image()
    }

    /// The live image now (what a `kill -9` now would leave, if the backend is not dead).
    #[must_use]
    pub fn live_image(&self) -> Vec<u8> {
        self.disk().live.clone()
    }

    /// The durable image now (as of the last successful sync).
    #[must_use]
    pub fn durable_image(&self) -> Vec<u8> {
        self.disk().durable.clone()
    }
}

impl fmt::Debug for FaultController {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let disk = self.disk();
        f.debug_struct("FaultController")
            .field("mutations", &disk.mutations)
            .field("reads", &disk.reads)
            .field("armed", &disk.armed)
            .field("fired", &disk.fired)
            .finish_non_exhaustive()
    }
}

impl FaultController {
    fn disk(&self) -> MutexGuard<'_, Disk> {
        lock(&self.disk)
    }
}

/// Locks the disk. A panic while holding the lock (a bug in a test) leaves the images in a
/// consistent state because every mutation is a single step, so poisoning is read through.
fn lock(disk: &Mutex<Disk>) -> MutexGuard<'_, Disk> {
    disk.lock().unwrap_or_else(PoisonError::into_inner)
}
