//! The QueueBox relay as a library: the binary in `main.rs` and the integration tests use it.

pub mod brokers;
