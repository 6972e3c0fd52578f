//! Kernel-side probes of profinfer: uprobes/uretprobes on the engine's probe ABI (token,
//! graph, operator and phase levels) and scheduler tracepoints for the target's threads.
//!
//! Built for `bpfel-unknown-none` by `tracer-user`'s build script (aya-build). Every
//! program first reads the control map (target filter and the levels the QoS controller
//! keeps on), then emits one record of `common::event` into the ring buffer (or the perf
//! buffer), counting produced and lost records per CPU. On the host this crate compiles
//! to an empty binary so `cargo clippy --workspace` works.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]
// `atomic_xadd` for the statistics counters (see `emit::bump`); the BPF build is nightly.
#![cfg_attr(target_arch = "bpf", feature(core_intrinsics))]
#![cfg_attr(
    target_arch = "bpf",
    expect(internal_features, reason = "core_intrinsics for BPF's atomic add")
)]

#[cfg(target_arch = "bpf")]
mod emit;
#[cfg(target_arch = "bpf")]
mod maps;
#[cfg(target_arch = "bpf")]
mod probes;

#[cfg(target_arch = "bpf")]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects any program that could reach this; it is never called.
    loop {}
}

/// Host builds: nothing to run, the programs only exist for the BPF target.
#[cfg(not(target_arch = "bpf"))]
fn main() {}
