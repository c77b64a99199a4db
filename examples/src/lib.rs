//! Runnable examples of Cairn live in `examples/examples/`; this library only holds helpers they share.
