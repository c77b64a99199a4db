//! The file's identity and the meta table's keys (a leaf: the table modules and the open path
//! read them without reaching each other).

use redb::TableDefinition;

use crate::codec::table;

/// Magic value of the meta table's `magic` key.
pub(crate) const MAGIC: &[u8] = b"CAIRNDB";
/// The first bytes of every redb file: 'redb' then 0x1A 0x0A 0xA9 0x0D 0x0A.
pub(crate) const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

pub(crate) const META_MAGIC: &str = "magic";
pub(crate) const META_FORMAT_VERSION: &str = "format_version";
pub(crate) const META_CREATED_AT_MS: &str = "created_at_ms";
pub(crate) const META_LAST_LSN: &str = "last_lsn";
pub(crate) const META_LAST_CHECKPOINT_ID: &str = "last_checkpoint_id";
/// Only while a v1 file is migrated: the last lsn the correlation index covers (`migrate.rs`).
pub(crate) const META_CORRELATIONS_BUILT_TO: &str = "correlations_built_to";

pub(crate) const META: TableDefinition<'_, &str, &[u8]> = TableDefinition::new(table::META);
