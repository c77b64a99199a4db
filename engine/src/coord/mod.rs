//! Coordination: who drives which thread, and the signals between drivers and everyone else.

pub(crate) mod claims;
