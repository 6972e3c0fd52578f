//! Types shared by the traced engine, the eBPF probes and the user-space collector.
//!
//! Everything here is `no_std`, `#[repr(C)]`, built from fixed-width integers only, and
//! guarded by compile-time size and offset assertions: the eBPF programs read these
//! structures out of the traced process with `bpf_probe_read_user`, so their layout is a
//! contract. See `docs/probe-abi.md` and `docs/trace-format.md`.
#![no_std]

pub mod control;
pub mod engine_abi;
pub mod event;
pub mod ggml_abi;
pub mod ggml_backends;
pub mod ggml_type;
pub mod op_catalog;
pub mod op_thread;

pub use engine_abi::{BackendKind, DType, EngineGraph, EngineNode, OpType};
