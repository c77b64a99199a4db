//! The simulated disk: a live and a durable image, the unsynced ranges between them, the op
//! counters and the armed fault. Pure data plus the rules of each crash model; the locking and
//! the `StorageBackend` glue live in `backend.rs`.

use std::io;
use std::ops::Range;

use super::model::{CrashModel, Fault, Fired, OpKind, SECTOR_SIZE, Trigger};

/// Everything the backend and its controllers share, behind one mutex.
#[derive(Debug, Default)]
pub(super) struct Disk {
    /// What reads see: the OS page cache.
    pub(super) live: Vec<u8>,
    /// The live image as of the last successful sync.
    pub(super) durable: Vec<u8>,
    /// What changed in `live` since the last successful sync, in issue order. A sync copies
    /// exactly these ranges into `durable`, so it costs what was written, not the file size; the
    /// write payloads are kept because a reordered crash applies each write as it was issued.
    pub(super) unsynced: Vec<Unsynced>,
    /// Mutating ops received so far (the next one gets this number).
    pub(super) mutations: u64,
    /// Reads received so far.
    pub(super) reads: u64,
    /// Every op received, when recording is on.
    pub(super) trace: Option<Vec<OpKind>>,
    pub(super) armed: Option<Fault>,
    pub(super) fired: Option<Fired>,
    /// The disk image frozen when a killing model fired; `Some` means the backend is dead.
    pub(super) frozen: Option<Vec<u8>>,
    /// Set by `IoErrorPersistent`: every op fails until cleared.
    pub(super) failing: bool,
    /// Set by `DiskFull` (or directly): the file may not grow past this many bytes.
    pub(super) capacity: Option<u64>,
}

impl Disk {
    /// A disk whose live and durable images are both `image` (a file as found after a reboot).
    pub(super) fn from_image(image: Vec<u8>) -> Disk {
        Disk { durable: image.clone(), live: image, ..Disk::default() }
    }

    /// Numbers the op, records it, and decides whether it may proceed. `data` is the payload of a
    /// write (a torn write needs it). `Ok` means: perform the op.
    pub(super) fn admit(&mut self, op: OpKind, data: Option<&[u8]>) -> io::Result<()> {
        let trigger = match op {
            OpKind::Read { .. } => {
                self.reads += 1;
                Trigger::Read(self.reads - 1)
            }
            OpKind::Write { .. } | OpKind::SetLen { .. } | OpKind::Sync => {
                self.mutations += 1;
                Trigger::Mutation(self.mutations - 1)
            }
        };
        if let Some(trace) = &mut self.trace {
            trace.push(op);
        }
        if self.frozen.is_some() {
            return Err(dead(trigger));
        }
        if self.failing {
            return Err(io_error(trigger, "persistent I/O error"));
        }
        if let Some(fault) = self.armed
            && fires(fault, trigger, op)
        {
            self.armed = None;
            self.fired = Some(Fired { trigger, op, model: fault.model });
            match fault.model {
                CrashModel::Kill => self.frozen = Some(self.live.clone()),
                CrashModel::LoseUnsynced | CrashModel::FailedSync => {
                    self.frozen = Some(self.durable.clone());
                }
                CrashModel::TornWrite => self.frozen = Some(self.torn_image(op, data, fault.seed)),
                CrashModel::ReorderedUnsynced => {
                    self.frozen = Some(self.reordered_image(fault.seed));
                }
                CrashModel::GarbageUnsynced => self.frozen = Some(self.garbage_image(fault.seed)),
                CrashModel::IoErrorTransient => {
                    return Err(io_error(trigger, "transient I/O error"));
                }
                CrashModel::IoErrorPersistent => {
                    self.failing = true;
                    return Err(io_error(trigger, "persistent I/O error"));
                }
                CrashModel::DiskFull => self.capacity = Some(self.live_len()),
            }
            if fault.model.kills() {
                return Err(dead(trigger));
            }
        }
        if let Some(capacity) = self.capacity
            && op.grows_past(capacity)
        {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!("fault injection: disk full ({capacity} bytes) at {trigger:?}"),
            ));
        }
        Ok(())
    }

    pub(super) fn live_len(&self) -> u64 {
        len_u64(&self.live)
    }

    /// Applies an admitted write to the live image, extending the file like `pwrite` does.
    pub(super) fn write(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        let (start, end) = span(offset, data.len())?;
        if end > self.live.len() {
            self.live.resize(end, 0);
        }
        self.live[start..end].copy_from_slice(data);
        self.unsynced.push(Unsynced::Write { offset, data: data.to_vec() });
        Ok(())
    }

    /// Applies an admitted `set_len`; new bytes are zero.
    pub(super) fn set_len(&mut self, len: u64) -> io::Result<()> {
        let new_len = usize::try_from(len).map_err(|_| out_of_range(len))?;
        let old_len = self.live_len();
        self.live.resize(new_len, 0);
        if len > old_len {
            // The zeroed extension is new content the durable image does not have yet.
            self.unsynced.push(Unsynced::Zeroed(old_len..len));
        }
        Ok(())
    }

    /// Applies an admitted sync: the durable image catches up with the live one.
    pub(super) fn sync(&mut self) {
        let len = self.live.len();
        self.durable.resize(len, 0);
        for change in self.unsynced.drain(..) {
            let range = change.range();
            let start = usize::try_from(range.start).unwrap_or(usize::MAX).min(len);
            let end = usize::try_from(range.end).unwrap_or(usize::MAX).min(len);
            self.durable[start..end].copy_from_slice(&self.live[start..end]);
        }
    }

    /// Copies live bytes into `out`; an out-of-range read is an error, as for a real file.
    pub(super) fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let (start, end) = span(offset, out.len())?;
        let bytes = self.live.get(start..end).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "read of {} bytes at {offset} past the end ({})",
                    out.len(),
                    self.live.len()
                ),
            )
        })?;
        out.copy_from_slice(bytes);
        Ok(())
    }

    /// The crash image: frozen when a killing model fired, otherwise a power loss now.
    pub(super) fn crash_image(&self) -> Vec<u8> {
        self.frozen.clone().unwrap_or_else(|| self.durable.clone())
    }

    /// Durable image plus a seeded sector-aligned prefix of the faulting write.
    fn torn_image(&self, op: OpKind, data: Option<&[u8]>, seed: u64) -> Vec<u8> {
        let mut image = self.durable.clone();
        let (OpKind::Write { offset, len }, Some(data)) = (op, data) else {
            return image;
        };
        let end = offset.saturating_add(len);
        // Candidate cut points: the start, every sector boundary strictly inside, the end.
        let mut cuts = vec![offset];
        let mut boundary = (offset / SECTOR_SIZE + 1) * SECTOR_SIZE;
        while boundary < end {
            cuts.push(boundary);
            boundary += SECTOR_SIZE;
        }
        cuts.push(end);
        let pick = SplitMix64::new(seed).below(len_u64(&cuts));
        let cut = cuts[usize::try_from(pick).unwrap_or(0)];
        let landed = cut.min(len_u64(&image)).saturating_sub(offset);
        let landed = usize::try_from(landed).unwrap_or(0);
        if let Ok(start) = usize::try_from(offset)
            && landed > 0
        {
            image[start..start + landed].copy_from_slice(&data[..landed]);
        }
        image
    }

    /// Durable image plus a seeded subset of the unsynced changes, each whole.
    fn reordered_image(&self, seed: u64) -> Vec<u8> {
        let mut image = self.durable.clone();
        let mut rng = SplitMix64::new(seed);
        let len = len_u64(&image);
        for change in &self.unsynced {
            if rng.below(2) == 0 {
                continue;
            }
            let range = change.range();
            let (Ok(start), Ok(end)) =
                (usize::try_from(range.start.min(len)), usize::try_from(range.end.min(len)))
            else {
                continue;
            };
            match change {
                Unsynced::Write { data, .. } => {
                    image[start..end].copy_from_slice(&data[..end - start]);
                }
                Unsynced::Zeroed(_) => image[start..end].fill(0),
            }
        }
        image
    }

    /// Durable image with every unsynced written byte replaced by seeded garbage.
    fn garbage_image(&self, seed: u64) -> Vec<u8> {
        let mut image = self.durable.clone();
        let mut rng = SplitMix64::new(seed);
        let len = len_u64(&image);
        for range in self.unsynced.iter().map(Unsynced::range) {
            // Whole sectors are scrambled together, but only inside the written range: bytes
            // never written keep their value (powersafe overwrite).
            let mut sector = range.start / SECTOR_SIZE * SECTOR_SIZE;
            while sector < range.end.min(len) {
                let lo = range.start.max(sector);
                let hi = range.end.min(sector + SECTOR_SIZE).min(len);
                for byte in lo..hi {
                    if let Some(slot) = usize::try_from(byte).ok().and_then(|b| image.get_mut(b)) {
                        *slot = rng.byte();
                    }
                }
                sector += SECTOR_SIZE;
            }
        }
        image
    }
}

/// One change to the live image not yet synced.
#[derive(Debug)]
pub(super) enum Unsynced {
    /// A `write` as issued.
    Write { offset: u64, data: Vec<u8> },
    /// A `set_len` that grew the file: this range became zeros.
    Zeroed(Range<u64>),
}

impl Unsynced {
    fn range(&self) -> Range<u64> {
        match self {
            Unsynced::Write { offset, data } => *offset..offset.saturating_add(len_u64(data)),
            Unsynced::Zeroed(range) => range.clone(),
        }
    }
}

fn fires(fault: Fault, at: Trigger, op: OpKind) -> bool {
    match (fault.model, fault.trigger, at) {
        (CrashModel::FailedSync, Trigger::Mutation(armed), Trigger::Mutation(now)) => {
            now >= armed && op == OpKind::Sync
        }
        (CrashModel::FailedSync, _, _) => false,
        (_, armed, now) => armed == now,
    }
}

fn dead(at: Trigger) -> io::Error {
    io::Error::other(format!("fault injection: simulated crash, backend is dead ({at:?})"))
}

fn io_error(at: Trigger, what: &str) -> io::Error {
    io::Error::other(format!("fault injection: {what} at {at:?}"))
}

fn out_of_range(value: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("offset or length {value} does not fit in memory"),
    )
}

/// `offset..offset+len` as in-memory indexes, or an error if it does not fit.
fn span(offset: u64, len: usize) -> io::Result<(usize, usize)> {
    let start = usize::try_from(offset).map_err(|_| out_of_range(offset))?;
    let end = start.checked_add(len).ok_or_else(|| out_of_range(offset))?;
    Ok((start, end))
}

fn len_u64<T>(slice: &[T]) -> u64 {
    u64::try_from(slice.len()).unwrap_or(u64::MAX)
}

/// SplitMix64: tiny, seedable, and good enough to pick cut points and garbage bytes; the fault
/// module must not depend on a random-number crate the storage crate does not otherwise need.
#[derive(Debug, Clone)]
pub(super) struct SplitMix64(u64);

impl SplitMix64 {
    pub(super) const fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`0` when `n` is 0); the modulo bias is irrelevant for test choices.
    pub(super) fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    fn byte(&mut self) -> u8 {
        self.next_u64().to_le_bytes()[0]
    }
}
