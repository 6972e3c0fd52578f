//! The probe ABI: exported `extern "C"` entry points, one per level (token, graph,
//! operator, phase), that the engine really calls to do its work. A tracer attaches
//! uprobes/uretprobes to these symbols; see `docs/probe-abi.md`.
//!
//! # Cheap to probe
//! A uprobe on a function whose first instruction the kernel must single-step costs
//! ~6 µs per hit; one on a 5-byte `nop` ~0.35 µs (`shared/reference.md`). Compilers put
//! whatever prologue they like first, so every entry point here is a *naked* trampoline
//! whose first instruction is a 5-byte `nop` (x86-64: `0f 1f 44 00 00`, the same
//! instruction `-fpatchable-function-entry` emits) followed by a tail jump to the real
//! body. The tail jump keeps uretprobes exact: the return address they hook at entry is
//! the one the body returns through.

use core::ffi::c_void;

use common::engine_abi::{EngineGraph, EngineNode, EngineOpTimes};

/// Emits a naked trampoline `$name` with the given C signature that starts with a 5-byte
/// nop and tail-jumps to `$imp`.
macro_rules! probe_entry {
    ($(#[$meta:meta])* fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $imp:path) => {
        $(#[$meta])*
        ///
        /// # Safety
        /// Pointer arguments must be valid for what the body reads and writes, as
        /// `docs/probe-abi.md` describes; null context/graph/model pointers are refused.
        #[unsafe(no_mangle)]
        #[unsafe(naked)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!(
                ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00", // nopl 0x0(%rax,%rax,1)
                "jmp {imp}",
                imp = sym $imp,
            );
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!(
                "nop",
                "b {imp}",
                imp = sym $imp,
            );
        }
    };
}

probe_entry! {
    /// Token level: decode one batch of `n_tokens` tokens starting at position `pos`.
    /// `ctx` is the engine's `Context`. Returns 0 on success, a negative code on error.
    fn engine_decode(ctx: *mut c_void, n_tokens: u32, pos: u32, tokens: *const i32) -> i32
        => crate::context::decode_entry
}

probe_entry! {
    /// Graph level: compute `graph` (of `n_nodes` nodes) on backend `backend_id` of kind
    /// `backend_kind`; `backend` is the backend object. Returns 0 on success.
    fn engine_graph_compute(graph: *const EngineGraph, backend_id: u32, backend_kind: u32, n_nodes: u32, backend: *const c_void) -> i32
        => crate::backend::graph_compute_entry
}

probe_entry! {
    /// Operator level: thread `ith` of `nth` computes its share of `node`. `params` is the
    /// backend's per-thread compute state.
    fn engine_op_compute(node: *const EngineNode, ith: u32, nth: u32, params: *mut c_void)
        => crate::ops::op_compute_entry
}

probe_entry! {
    /// Operator level on the accel backend: thread `ith` of `nth` of the accel's pool
    /// computes its share of `node`. `params` is the accel's per-thread compute state.
    fn engine_accel_op_compute(node: *const EngineNode, ith: u32, nth: u32, params: *mut c_void)
        => crate::backend::accel::op_compute_entry
}

probe_entry! {
    /// Operator level: thread `ith` of `nth` of a backend of kind `backend_kind` has
    /// finished its share of `node` and goes on to wait at the barrier for the others.
    /// A tracer takes the node's end on this thread here (one uprobe on a 5-byte nop),
    /// and its next node's start where the last thread arrives.
    fn engine_op_done(node: *const EngineNode, ith: u32, nth: u32, backend_kind: u32)
        => crate::backend::pool::op_done_entry
}

probe_entry! {
    /// Operator level: thread `ith` of `nth` begins its walk over `graph` (a worker that
    /// slept between graphs starts here, after its wake-up): the start of its first
    /// node. Every later node starts when the barrier after the one before releases.
    fn engine_graph_thread(graph: *const EngineGraph, ith: u32, nth: u32)
        => crate::backend::pool::graph_thread_entry
}

probe_entry! {
    /// Operator level, batched: thread `ith` of `nth` of a backend of kind `backend_kind`
    /// hands over when its share of each of up to 32 nodes ended (`times`, in execution
    /// order; `backend::node_ends` says when). Called only while
    /// `engine_op_times_semaphore` is nonzero, i.e. while a tracer attached here with it
    /// as the uprobe's reference counter.
    fn engine_op_times(times: *const EngineOpTimes, ith: u32, nth: u32, backend_kind: u32)
        => crate::backend::pool::op_times_entry
}

probe_entry! {
    /// Phase: look up the embeddings of `n_tokens` tokens into `out` (`n_embd` floats each).
    fn engine_phase_embed(ctx: *const c_void, tokens: *const i32, n_tokens: u32, out: *mut f32)
        => crate::context::embed_entry
}

probe_entry! {
    /// Phase: copy `n` logits out of the graph's output tensor.
    fn engine_phase_copy_logits(dst: *mut f32, src: *const f32, n: u32)
        => crate::sampler::copy_logits_entry
}

probe_entry! {
    /// Phase: `probs = softmax(logits / temp)` over the vocabulary.
    fn engine_phase_softmax(logits: *const f32, probs: *mut f32, n_vocab: u32, temp: f32)
        => crate::sampler::softmax_entry
}

probe_entry! {
    /// Phase: draw the next token from `probs` with `sampler`. Returns the token id.
    fn engine_phase_sample(sampler: *mut c_void, probs: *const f32, n_vocab: u32) -> i32
        => crate::sampler::sample_entry
}

probe_entry! {
    /// Phase: quantize chunk `chunk` of layer `layer`'s KV cache into `bytes` bytes
    /// before it is swapped out (`--kv-compress`). `swap` is the cache's swap state.
    fn engine_phase_kv_compress(swap: *mut c_void, layer: u32, chunk: u32, bytes: u32)
        => crate::kv_cache::swap::compress_entry
}

probe_entry! {
    /// Phase: write `bytes` bytes of chunk `chunk` of layer `layer`'s KV cache to its
    /// swap file. Returns 0 or `-errno`.
    fn engine_phase_kv_swap_out(swap: *mut c_void, layer: u32, chunk: u32, bytes: u32) -> i32
        => crate::kv_cache::swap::swap_out_entry
}

probe_entry! {
    /// Phase: read `bytes` bytes of chunk `chunk` of layer `layer`'s KV cache back from
    /// its swap file. Returns 0 or `-errno`.
    fn engine_phase_kv_swap_in(swap: *mut c_void, layer: u32, chunk: u32, bytes: u32) -> i32
        => crate::kv_cache::swap::swap_in_entry
}

probe_entry! {
    /// Phase: dequantize a chunk read back into `bytes` bytes of f16 K/V.
    fn engine_phase_kv_decompress(swap: *mut c_void, layer: u32, chunk: u32, bytes: u32)
        => crate::kv_cache::swap::decompress_entry
}

/// Reference point for the probe-cost benchmark: starts with the same 5-byte nop and
/// does nothing.
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn engine_probe_ref_nop() {
    #[cfg(target_arch = "x86_64")]
    core::arch::naked_asm!(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00", "ret");
    #[cfg(target_arch = "aarch64")]
    core::arch::naked_asm!("nop", "ret");
}

/// Reference point for the probe-cost benchmark: starts with an instruction the kernel
/// must single-step (`lea`), the cost a compiler-generated prologue would have.
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn engine_probe_ref_singlestep() {
    #[cfg(target_arch = "x86_64")]
    core::arch::naked_asm!("lea rax, [rip]", "ret");
    #[cfg(target_arch = "aarch64")]
    core::arch::naked_asm!("adr x9, .", "ret");
}

// x86-64 only: its entry points begin with the 5-byte nop the kernel optimizes.
#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// The first bytes of every entry point are the 5-byte nop.
    #[test]
    fn entry_points_start_with_a_five_byte_nop() {
        let entries: [(&str, *const u8); 16] = [
            ("engine_op_done", engine_op_done as *const u8),
            ("engine_op_times", engine_op_times as *const u8),
            ("engine_graph_thread", engine_graph_thread as *const u8),
            ("engine_decode", engine_decode as *const u8),
            ("engine_graph_compute", engine_graph_compute as *const u8),
            ("engine_op_compute", engine_op_compute as *const u8),
            (
                "engine_accel_op_compute",
                engine_accel_op_compute as *const u8,
            ),
            ("engine_phase_embed", engine_phase_embed as *const u8),
            (
                "engine_phase_copy_logits",
                engine_phase_copy_logits as *const u8,
            ),
            ("engine_phase_softmax", engine_phase_softmax as *const u8),
            ("engine_phase_sample", engine_phase_sample as *const u8),
            ("engine_probe_ref_nop", engine_probe_ref_nop as *const u8),
            (
                "engine_phase_kv_compress",
                engine_phase_kv_compress as *const u8,
            ),
            (
                "engine_phase_kv_swap_out",
                engine_phase_kv_swap_out as *const u8,
            ),
            (
                "engine_phase_kv_swap_in",
                engine_phase_kv_swap_in as *const u8,
            ),
            (
                "engine_phase_kv_decompress",
                engine_phase_kv_decompress as *const u8,
            ),
        ];
        for (name, p) in entries {
            // SAFETY: reading the first 5 bytes of a function's machine code, which is
            // mapped readable in this process.
            let head = unsafe { core::slice::from_raw_parts(p, 5) };
            assert_eq!(head, &[0x0f, 0x1f, 0x44, 0x00, 0x00], "{name}");
        }
    }
}
