//! Kernel-side probes of profinfer. Filled by the tracer issue; the probes read the
//! engine's structures through the layouts in [`common::engine_abi`].
#![no_std]

pub use common::engine_abi;
