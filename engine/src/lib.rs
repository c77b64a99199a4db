//! Cairn: placeholder until the engine lands.
pub use cairn_dsl as dsl;
pub use cairn_storage as storage;
