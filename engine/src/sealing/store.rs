//! [`SealingStore`]: the decorator that seals a batch's bodies on the way in and opens every
//! body a read answers on the way out (see the module doc of `sealing`).

use std::collections::HashMap;
use std::sync::Arc;

use cairn_storage::{
    Append, Batch, Catalog, Checkpoint, CheckpointId, Decorates, Durability, Event, EventKind,
    ForwardMaintenance, Lsn, Page, PayloadRef, Pending, Reading, Scope, Seq, Signal, Store,
    Subscription, ThreadFilter, ThreadId, ThreadLog, ThreadRecord,
};
use cairn_storage::{
    Bookmark, CheckpointFilter, CheckpointInfo, CorrelationQuery, LockRecord, QueueMember,
    QueueState,
};

use super::PayloadCodec;
use super::envelope;
use crate::error::Error;

type StorageError = cairn_storage::Error;

/// The summary a sealed message event is stored with, in place of its content.
const SEALED_MESSAGE: &str = "message (sealed)";

/// A [`Store`] whose bodies are sealed at rest by a [`PayloadCodec`]; installed by
/// [`crate::EngineBuilder::payload_codec`], or wrapped by hand around a store given to
/// [`crate::Engine::with_store`].
///
/// Without a codec ([`SealingStore::without_key`]) it writes plain bodies and answers a read
/// of a sealed one with [`cairn_storage::Error::Sealed`], naming the key, rather than bytes
/// that would not decode (tools opened without `CAIRN_KEYS`).
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use cairn::sealing::{Encoded, PayloadCodec, SealingStore};
/// use cairn::storage::*;
///
/// struct Xor;
/// impl PayloadCodec for Xor {
///     fn codec_id(&self) -> &str { "xor" }
///     fn encode(&self, plain: &[u8]) -> Result<Encoded, cairn::Error> {
///         Ok(Encoded { key: "k".into(), ciphertext: plain.iter().map(|b| b ^ 0x5a).collect() })
///     }
///     fn decode(&self, _key: &str, sealed: &[u8]) -> Result<Vec<u8>, cairn::Error> {
///         Ok(sealed.iter().map(|b| b ^ 0x5a).collect())
///     }
/// }
/// # fn main() -> Result<(), Error> {
/// let dir = tempfile::tempdir().expect("temp dir");
/// let file = RedbStore::open(dir.path().join("c.db"), Options::default())?;
/// let file: Arc<dyn Store> = Arc::new(file);
/// let sealed = SealingStore::new(file.clone(), Arc::new(Xor));
/// let thread = ThreadId::new("t1")?;
/// let workflow = WorkflowRef { id: "demo".into(), version: 1, fingerprint: "f".into() };
/// let signal = NewSignal::new(thread.clone(), "approve", br#"{"ok":true}"#.to_vec(), 0)?;
/// let batch = Batch {
///     threads: vec![ThreadRecord::new(thread.clone(), workflow, 0)],
///     signals: vec![signal],
///     ..Batch::default()
/// };
/// sealed.append(batch)?.wait_blocking()?;
/// assert_eq!(sealed.signals(&thread, 0, 10).wait()?[0].data, br#"{"ok":true}"#);
/// assert!(cairn::sealing::sealed_by(&file.signals(&thread, 0, 10).wait()?[0].data).is_some());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct SealingStore {
    inner: Arc<dyn Store>,
    opener: Opener,
}

impl std::fmt::Debug for SealingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let codec = self.opener.codec.as_ref().map(|c| c.codec_id().to_owned());
        f.debug_struct("SealingStore").field("codec", &codec).finish_non_exhaustive()
    }
}

/// The codec, shared by the store and the reads it answers.
#[derive(Clone)]
struct Opener {
    codec: Option<Arc<dyn PayloadCodec>>,
}

impl SealingStore {
    /// `inner`, with every body sealed by `codec` on its way in and opened on its way out.
    pub fn new(inner: Arc<dyn Store>, codec: Arc<dyn PayloadCodec>) -> SealingStore {
        SealingStore { inner, opener: Opener { codec: Some(codec) } }
    }

    /// `inner` with no codec: plain bodies written and read as they are, a sealed body read
    /// as [`cairn_storage::Error::Sealed`].
    pub fn without_key(inner: Arc<dyn Store>) -> SealingStore {
        SealingStore { inner, opener: Opener { codec: None } }
    }

    /// The batch with its bodies sealed: event data, payloads (and the references to them),
    /// checkpoint snapshots, signal values. A body sealed already is left as it is.
    fn seal_batch(&self, mut batch: Batch) -> Result<Batch, StorageError> {
        let Some(codec) = &self.opener.codec else { return Ok(batch) };
        let seal = |bytes: &mut Vec<u8>| seal(&**codec, bytes);
        let mut moved = HashMap::new();
        for payload in &mut batch.payloads {
            let plain = PayloadRef::of(payload);
            seal(payload)?;
            moved.insert(plain, PayloadRef::of(payload));
        }
        for event in &mut batch.events {
            if !event.data.is_empty() {
                seal(&mut event.data)?;
            }
            // A message's one-line summary quotes its content: the content stays in the
            // sealed body only.
            if event.kind == EventKind::Message {
                event.summary = SEALED_MESSAGE.to_owned();
            }
            if let Some(r) = event.payload.as_mut().and_then(|r| moved.get(r).map(|m| (r, m))) {
                *r.0 = *r.1;
            }
        }
        for checkpoint in &mut batch.checkpoints {
            seal(&mut checkpoint.snapshot)?;
        }
        for data in batch.signals.iter_mut().map(|s| &mut s.data) {
            seal(data)?;
        }
        for data in batch.copied_signals.iter_mut().map(|s| &mut s.data) {
            seal(data)?;
        }
        Ok(batch)
    }
}

/// Seals `bytes` in place (unless sealed already).
fn seal(codec: &dyn PayloadCodec, bytes: &mut Vec<u8>) -> Result<(), StorageError> {
    if envelope::is_sealed(bytes) {
        return Ok(());
    }
    let id = codec.codec_id();
    let encoded = codec.encode(bytes).map_err(|e| to_storage(e, id, "-"))?;
    if !envelope::valid_id(id) || !envelope::valid_id(&encoded.key) {
        let detail = "codec and key ids are 1 to 64 bytes of [A-Za-z0-9._-]".to_owned();
        return Err(StorageError::Invalid { detail });
    }
    *bytes = envelope::write(id, &encoded.key, &encoded.ciphertext);
    Ok(())
}

/// A codec's error as storage's: a sealed body's as it is, another as a sealed body that does
/// not open, naming the codec and key.
fn to_storage(e: Error, codec: &str, key: &str) -> StorageError {
    match e {
        Error::Sealed { codec, key, detail } => StorageError::Sealed { codec, key, detail },
        Error::Storage(e) => e,
        e => StorageError::Sealed { codec: codec.into(), key: key.into(), detail: e.to_string() },
    }
}

impl Opener {
    /// `bytes` opened when sealed, as they are when plain.
    fn open(&self, bytes: Vec<u8>) -> Result<Vec<u8>, StorageError> {
        let envelope = match envelope::parse(&bytes) {
            Ok(None) => return Ok(bytes),
            Ok(Some(envelope)) => envelope,
            Err(detail) => {
                let (codec, key) = ("?".to_owned(), "?".to_owned());
                return Err(StorageError::Sealed { codec, key, detail });
            }
        };
        let sealed = |detail: String| StorageError::Sealed {
            codec: envelope.codec.into(),
            key: envelope.key.into(),
            detail,
        };
        let Some(codec) = &self.codec else {
            return Err(sealed("no payload codec is installed: open with the key".into()));
        };
        if codec.codec_id() != envelope.codec {
            return Err(sealed(format!("this engine's codec is {}", codec.codec_id())));
        }
        codec
            .decode(envelope.key, envelope.ciphertext)
            .map_err(|e| to_storage(e, envelope.codec, envelope.key))
    }

    fn events(&self, mut events: Vec<Event>) -> Result<Vec<Event>, StorageError> {
        for event in &mut events {
            if !event.data.is_empty() {
                event.data = self.open(std::mem::take(&mut event.data))?;
            }
        }
        Ok(events)
    }

    fn checkpoint(
        &self,
        checkpoint: Option<Checkpoint>,
    ) -> Result<Option<Checkpoint>, StorageError> {
        let Some(mut checkpoint) = checkpoint else { return Ok(None) };
        checkpoint.snapshot = self.open(std::mem::take(&mut checkpoint.snapshot))?;
        Ok(Some(checkpoint))
    }

    fn signals(&self, mut signals: Vec<Signal>) -> Result<Vec<Signal>, StorageError> {
        for signal in &mut signals {
            signal.data = self.open(std::mem::take(&mut signal.data))?;
        }
        Ok(signals)
    }

    /// A read of events, opened.
    fn read_events(&self, reading: Reading<Vec<Event>>) -> Reading<Vec<Event>> {
        let opener = self.clone();
        reading.and_then(move |events| opener.events(events))
    }
}

impl Decorates for SealingStore {
    fn inner(&self) -> &dyn Store {
        &*self.inner
    }
}

impl ForwardMaintenance for SealingStore {}

impl Store for SealingStore {}

impl Append for SealingStore {
    fn append(&self, batch: Batch) -> Result<Pending, StorageError> {
        self.inner.append(self.seal_batch(batch)?)
    }
    fn append_async(&self, batch: Batch) -> Reading<Pending> {
        match self.seal_batch(batch) {
            Ok(batch) => self.inner.append_async(batch),
            Err(e) => Reading::ready(Err(e)),
        }
    }
    /// Sealed one by one, handed over together; one that cannot be sealed ends the hand-over
    /// as a refusal up front does (see [`Append::append_all`]).
    fn append_all(&self, batches: &mut Vec<Batch>) -> Vec<Pending> {
        let count = batches.len();
        let mut sealed = Vec::with_capacity(count);
        let mut refused = None;
        for batch in batches.drain(..) {
            match self.seal_batch(batch) {
                Ok(batch) => sealed.push(batch),
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        let mut pending = self.inner.append_all(&mut sealed);
        if let Some(e) = refused {
            pending.resize_with(count, || Pending::ready(Err(e.clone())));
        }
        pending
    }
    fn durability(&self) -> Durability {
        self.inner.durability()
    }
}

impl ThreadLog for SealingStore {
    fn read_since(&self, thread: &ThreadId, after: Seq, limit: usize) -> Reading<Vec<Event>> {
        self.opener.read_events(self.inner.read_since(thread, after, limit))
    }
    fn read_range(&self, thread: &ThreadId, from: Seq, to: Seq) -> Reading<Vec<Event>> {
        self.opener.read_events(self.inner.read_range(thread, from, to))
    }
    fn last_lsn(&self) -> Lsn {
        self.inner.last_lsn()
    }
    fn read_all_since(&self, after: Lsn, limit: usize) -> Reading<Vec<Event>> {
        self.opener.read_events(self.inner.read_all_since(after, limit))
    }
    fn read_correlated(
        &self,
        query: &CorrelationQuery,
        after: Lsn,
        limit: usize,
    ) -> Reading<Vec<Event>> {
        self.opener.read_events(self.inner.read_correlated(query, after, limit))
    }
    fn subscribe(&self, scope: Scope, after: u64) -> Result<Subscription, StorageError> {
        let through: Arc<dyn Store> = Arc::new(self.clone());
        Ok(self.inner.subscribe(scope, after)?.reading_through(through))
    }
    fn payload(&self, r: &PayloadRef) -> Reading<Vec<u8>> {
        let opener = self.opener.clone();
        self.inner.payload(r).and_then(move |bytes| opener.open(bytes))
    }
    fn checkpoint(&self, id: CheckpointId) -> Reading<Option<Checkpoint>> {
        let opener = self.opener.clone();
        self.inner.checkpoint(id).and_then(move |cp| opener.checkpoint(cp))
    }
    fn checkpoint_exists(&self, id: CheckpointId) -> Reading<bool> {
        self.inner.checkpoint_exists(id)
    }
    fn latest_checkpoint_at_or_before(
        &self,
        thread: &ThreadId,
        seq: Seq,
    ) -> Reading<Option<Checkpoint>> {
        let opener = self.opener.clone();
        let reading = self.inner.latest_checkpoint_at_or_before(thread, seq);
        reading.and_then(move |cp| opener.checkpoint(cp))
    }
    fn checkpoint_covering(&self, thread: &ThreadId, seq: Seq) -> Reading<Option<CheckpointId>> {
        self.inner.checkpoint_covering(thread, seq)
    }
    fn list_checkpoints(
        &self,
        filter: &CheckpointFilter,
        page: Page,
    ) -> Reading<Vec<CheckpointInfo>> {
        self.inner.list_checkpoints(filter, page)
    }
}

impl Catalog for SealingStore {
    fn thread(&self, id: &ThreadId) -> Reading<Option<ThreadRecord>> {
        self.inner.thread(id)
    }
    fn last_bookmark(&self, thread: &ThreadId) -> Reading<Option<Bookmark>> {
        self.inner.last_bookmark(thread)
    }
    fn list_threads(&self, filter: &ThreadFilter, page: Page) -> Reading<Vec<ThreadRecord>> {
        self.inner.list_threads(filter, page)
    }
    fn list_threads_after(
        &self,
        filter: &ThreadFilter,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Reading<Vec<ThreadRecord>> {
        self.inner.list_threads_after(filter, after, limit)
    }
    fn signals(&self, thread: &ThreadId, after: u64, limit: usize) -> Reading<Vec<Signal>> {
        let opener = self.opener.clone();
        self.inner.signals(thread, after, limit).and_then(move |s| opener.signals(s))
    }
    fn queues(&self) -> Reading<Vec<QueueState>> {
        self.inner.queues()
    }
    fn queue_member(&self, thread: &ThreadId) -> Reading<Option<QueueMember>> {
        self.inner.queue_member(thread)
    }
    fn locks(&self) -> Reading<Vec<LockRecord>> {
        self.inner.locks()
    }
}
