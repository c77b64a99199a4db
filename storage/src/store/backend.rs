//! [`Backend`]: what a store offers beyond its roles (a database other processes share, write
//! intents, metrics, refusals, the state of its database). Each backend declares it, method by
//! method, with no default to fall back on; a decorator ([`crate::Decorates`]) carries its
//! inner store's by a provided implementation it cannot override, so no wrapper turns a shared
//! PostgreSQL database into a private file by forgetting a method.

use tokio::sync::watch;

use crate::error::Error;
use crate::intent::WriteIntent;
use crate::telemetry::{DatabaseState, StoreMetrics};

use super::shared::SharedDatabase;

/// What a backend offers beyond the roles, declared by the backend: every method but
/// [`Backend::database`] is required, so a new backend says what it offers, and a decorator
/// gets its inner store's through [`crate::Decorates`] (implementing this trait for a
/// decorator too is a conflicting implementation: it does not compile).
///
/// # Examples
/// A decorator carries its inner store's offers with no code of its own:
/// ```
/// use std::sync::Arc;
/// use cairn_storage::*;
///
/// struct Quiet { inner: Arc<dyn Store> }
/// impl Decorates for Quiet {
///     fn inner(&self) -> &dyn Store { &*self.inner }
/// }
/// impl ForwardAppend for Quiet {}
/// impl ForwardLog for Quiet {}
/// impl ForwardCatalog for Quiet {}
/// impl ForwardMaintenance for Quiet {}
/// impl Store for Quiet {}
///
/// # fn main() -> Result<(), Error> {
/// let dir = tempfile::tempdir().expect("temp dir");
/// let file = RedbStore::open(dir.path().join("cairn.db"), Options::default())?;
/// let quiet = Quiet { inner: Arc::new(file) };
/// assert!(quiet.shared().is_none()); // a file: this process's alone, as its backend says
/// assert!(quiet.metrics().is_some()); // the file's writer's, carried
/// # Ok(())
/// # }
/// ```
/// and cannot drop them:
/// ```compile_fail,E0119
/// use std::sync::Arc;
/// use cairn_storage::*;
///
/// struct Lying { inner: Arc<dyn Store> }
/// impl Decorates for Lying {
///     fn inner(&self) -> &dyn Store { &*self.inner }
/// }
/// impl Backend for Lying {
///     fn shared(&self) -> Option<&dyn SharedDatabase> { None }
///     fn intend_write(&self) -> Option<WriteIntent> { None }
///     fn metrics(&self) -> Option<&telemetry::StoreMetrics> { None }
///     fn refusals(&self) -> Option<tokio::sync::watch::Receiver<Option<Error>>> { None }
/// }
/// ```
pub trait Backend: Send + Sync + 'static {
    /// What a database several processes write offers ([`SharedDatabase`]); `None` where only
    /// this process writes it (a redb file, held by its lock), so that a lease found on a
    /// thread belongs to a process that died.
    fn shared(&self) -> Option<&dyn SharedDatabase>;

    /// Announces a write the caller is computing and will queue soon (see [`WriteIntent`]):
    /// while the returned guard is held, a store that gathers writes into group commits may
    /// keep a group open for it, within its usual gathering bound. `None`: this store does not
    /// use intents. Grouping only: what is written, and when a write is acknowledged (after the
    /// commit that holds it), is the same either way.
    fn intend_write(&self) -> Option<WriteIntent>;

    /// The metric handles this store's writer reports its group commits to
    /// ([`crate::telemetry`]); `None` for a store that reports none (a read-only one).
    fn metrics(&self) -> Option<&StoreMetrics>;

    /// The failure that makes this store refuse every write now (`None` while it accepts
    /// them), as a channel that follows it: a [`crate::RedbStore`] sets it at a failed commit
    /// (the disk is full, an I/O error: writes are then refused with [`Error::Poisoned`] naming
    /// it) and clears it once it has reopened its database from what is durable. An engine
    /// ends its callers' waits with the cause while it is set, and restores its unfinished
    /// threads when it clears. `None`: a store that never refuses writes as a whole
    /// (PostgreSQL retries each write on a fresh connection).
    fn refusals(&self) -> Option<watch::Receiver<Option<Error>>>;

    /// Whether the database answers, as the store's connections last found (a store on a
    /// server: PostgreSQL), and whether it takes writes (false while a failed commit keeps the
    /// store poisoned); `None` for a file store that never had a commit fail. Known without a
    /// round trip, so a health check asks it first. Provided: what [`Backend::metrics`] says.
    fn database(&self) -> Option<DatabaseState> {
        self.metrics().and_then(StoreMetrics::database)
    }
}
