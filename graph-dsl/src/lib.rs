//! Cairn workflow DSL: placeholder until the DSL crate lands.
