//! Cairn storage: placeholder until the storage crate lands.
