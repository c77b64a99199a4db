//! Test tools for Cairn's storage, kept out of the library crate `cairn-storage`: nothing here
//! runs in production, and a library user's build compiles none of it.
//!
//! - [`fault`]: a fault-injecting redb storage backend (a simulated disk that can crash, tear,
//!   scramble and fail), for crash and bit-flip tests; `cairn-testkit` crashes users' workflows
//!   on it.
//! - [`pg_cluster`] and [`pg_proxy`] (feature `postgres`): a throwaway PostgreSQL cluster and a
//!   wire proxy that cuts, delays or stalls its connections.
//!
//! None of the tools depends on `cairn-storage`: a store opens on a [`fault::FaultBackend`]
//! through `cairn_storage::RedbStore::with_backend`, and on a cluster through its URL.

pub mod fault;
#[cfg(feature = "postgres")]
pub mod pg_cluster;
#[cfg(feature = "postgres")]
pub mod pg_proxy;
