//! What the probes need to know about a llama.cpp (ggml) build: where the fields of its
//! `struct ggml_tensor`, `struct ggml_cgraph`, `struct ggml_compute_params` and
//! `struct llama_batch` are ([`GgmlLayout`]), and the per-thread state of the operator
//! probes ([`GgmlThread`]).
//!
//! Unlike the engine's ABI (`engine_abi`, fixed and asserted at compile time), these
//! layouts belong to somebody else's build and change between llama.cpp versions, so the
//! collector detects the build and writes the layout into a map the programs read
//! (`tracer-user/src/target_llama.rs`); the programs read every field at `base + offset`.

use core::mem::{offset_of, size_of};

/// Largest ggml op number the op map holds (`GGML_OP_COUNT` is 101 in ggml 0.26).
pub const MAX_GGML_OPS: u32 = 256;

/// [`GgmlLayout::batch_passing`]: `llama_decode`'s `llama_batch` argument (56 bytes) is
/// copied onto the stack, just above the return address (x86-64 System V: a struct over
/// 16 bytes is passed in memory).
pub const BATCH_ON_STACK: u32 = 0;
/// [`GgmlLayout::batch_passing`]: the caller passes a pointer to a copy in the second
/// argument register (AArch64 AAPCS64: composites over 16 bytes go by reference).
pub const BATCH_BY_REFERENCE: u32 = 1;

/// Field offsets of one ggml build, written by the collector into the `GGML_LAYOUT` map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GgmlLayout {
    /// `ggml_tensor.type` (`enum ggml_type`, 4 bytes).
    pub tensor_type: u32,
    /// `ggml_tensor.ne` (`int64_t[4]`).
    pub tensor_ne: u32,
    /// `ggml_tensor.nb` (`size_t[4]`).
    pub tensor_nb: u32,
    /// `ggml_tensor.op` (`enum ggml_op`, 4 bytes).
    pub tensor_op: u32,
    /// `ggml_tensor.op_params` (`int32_t[]`).
    pub tensor_op_params: u32,
    /// `ggml_tensor.src` (pointers).
    pub tensor_src: u32,
    /// `ggml_tensor.name` (`char[64]`).
    pub tensor_name: u32,
    /// `ggml_cgraph.n_nodes` (`int`).
    pub cgraph_n_nodes: u32,
    /// `ggml_compute_params.ith` (`int`; `nth` follows it).
    pub params_ith: u32,
    /// `llama_batch.n_tokens` (`int32_t`).
    pub batch_n_tokens: u32,
    /// `llama_batch.pos` (`llama_pos *`, may be NULL).
    pub batch_pos: u32,
    /// `BATCH_ON_STACK` or `BATCH_BY_REFERENCE`.
    pub batch_passing: u32,
    /// `llama_batch_ext.tokens` (a `std::vector<token>`: begin, end pointers), the batch
    /// of `llama_process(ctx, type, llama_batch_ext *)`, which newer tools call instead
    /// of `llama_decode`.
    pub batch_ext_tokens: u32,
    /// `sizeof(llama_batch_ext::token)`.
    pub batch_ext_token_size: u32,
    /// `llama_batch_ext::token.pos` (`llama_pos[4]`; the first is the position).
    pub batch_ext_token_pos: u32,
    /// `ggml_tensor.view_src` (the tensor a view shares memory with; ggml resolves
    /// views of views, so this is always a non-view tensor).
    pub tensor_view_src: u32,
}
const _: () = assert!(size_of::<GgmlLayout>() == 64);
const _: () = assert!(offset_of!(GgmlLayout, tensor_type) == 0);
const _: () = assert!(offset_of!(GgmlLayout, batch_passing) == 44);
const _: () = assert!(offset_of!(GgmlLayout, tensor_view_src) == 60);

impl GgmlLayout {
    /// The layout of ggml 0.25 and 0.26 (libllama 0.5/0.6) on a 64-bit target with
    /// libstdc++ (measured with `offsetof` against both builds' headers:
    /// `docs/llama-cpp.md`).
    pub const GGML_0_25_64BIT: GgmlLayout = GgmlLayout {
        tensor_type: 0,
        tensor_ne: 16,
        tensor_nb: 48,
        tensor_op: 80,
        tensor_op_params: 84,
        tensor_src: 152,
        tensor_name: 256,
        cgraph_n_nodes: 4,
        params_ith: 0,
        batch_n_tokens: 0,
        batch_pos: 24,
        batch_passing: BATCH_ON_STACK,
        batch_ext_tokens: 64,
        batch_ext_token_size: 96,
        batch_ext_token_pos: 80,
        tensor_view_src: 232,
    };
}

/// Per-thread state of the llama.cpp operator probes (the `GGML_THREADS` map).
///
/// A node's span on a thread starts at the first probe of its dispatch (the extra-buffer
/// hook, the per-op forward function, or the fused entry) and ends when the outermost of
/// them returns: `depth` counts the probed functions active on the thread, so nested
/// forward functions (`mul_mat` → `mul_mat_tiled`) are folded into their caller.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GgmlThread {
    /// Probed forward functions active on the thread.
    pub depth: u32,
    /// 1 while a node's span is open (its entry emitted, no exit yet).
    pub open: u32,
    /// The open node's tensor.
    pub node: u64,
    /// The second node of a fused pair (`rms_norm_mul_fused`'s MUL), recorded at return.
    pub fused: u64,
    /// The fused call's `ggml_compute_params` (for the second node's `ith`/`nth`).
    pub fused_params: u64,
    /// The graph generation (the `GGML_GRAPH_SEQ` map, bumped at every graph) `index`
    /// counts in.
    pub graph_seq: u64,
    /// Nodes this thread started in the current graph: the next node's index.
    pub index: u32,
    /// Zero.
    pub _pad: u32,
}
const _: () = assert!(size_of::<GgmlThread>() == 48);

#[cfg(feature = "user")]
// SAFETY: `#[repr(C)]`, only `u32` fields, no padding (size asserted above).
unsafe impl aya::Pod for GgmlLayout {}
