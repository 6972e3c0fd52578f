//! The engine's probe ABI: the `#[repr(C)]` graph and node structures that the engine's
//! probe entry points receive, and the symbol names of those entry points.
//!
//! The layout is versioned by [`ENGINE_ABI_VERSION`]; every structure starts with that
//! version so a probe can refuse a layout it does not know. Pointers are stored as `u64`
//! addresses so the layout is the same on every target the tracer reads it from.

use core::mem::{offset_of, size_of};

use crate::ggml_type::GgmlType;

/// Version of the layout of [`EngineNode`] and [`EngineGraph`]. Bump on any change.
pub const ENGINE_ABI_VERSION: u32 = 1;

/// Maximum number of source nodes of one node (ggml has 10; our ops need at most 4).
pub const MAX_SRC: usize = 4;
/// Maximum number of dimensions of a tensor.
pub const MAX_DIMS: usize = 4;
/// Size in bytes of a node's NUL-padded name.
pub const NODE_NAME_LEN: usize = 64;
/// Number of 32-bit operator parameters in a node.
pub const MAX_OP_PARAMS: usize = 8;

/// Declares [`DType`] from the list of the ggml types the engine's ABI carries; every
/// per-type fact comes from that type's row of [`GgmlType`], so they cannot disagree.
macro_rules! dtypes {
    ($( $variant:ident ),* $(,)?) => {
        /// Element type of a tensor. The numbers are ggml's `ggml_type` values, so a GGUF
        /// tensor type id and a node's `dtype` mean the same thing (the tracer reads them:
        /// never renumber).
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[expect(non_camel_case_types, reason = "variants spell ggml's type names (Q4_0, Q6_K)")]
        pub enum DType {
            $( #[doc = concat!("ggml's [`GgmlType::", stringify!($variant), "`].")]
            $variant = GgmlType::$variant as u32, )*
        }

        impl DType {
            /// All types of the ABI, in id order.
            pub const ALL: &'static [DType] = &[$(DType::$variant),*];

            /// The type for a ggml type id, if the ABI has it.
            pub const fn from_u32(v: u32) -> Option<DType> {
                match GgmlType::from_id(v) {
                    $( Some(GgmlType::$variant) => Some(DType::$variant), )*
                    _ => None,
                }
            }

            /// The ggml type this is.
            pub const fn ggml_type(self) -> GgmlType {
                match self {
                    $( DType::$variant => GgmlType::$variant, )*
                }
            }
        }
    };
}

dtypes! { F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, I32, BF16 }

impl DType {
    /// The type named `name` as ggml spells it, ignoring ASCII case (`q4_k` finds
    /// [`DType::Q4_K`]).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// Name as ggml spells it (`f32`, `q8_0`, `q6_K`, `bf16`, ...).
    pub const fn name(self) -> &'static str {
        self.ggml_type().name()
    }

    /// Number of elements in one block (1 for plain types).
    pub const fn block_len(self) -> usize {
        self.ggml_type().block_len() as usize
    }

    /// Size in bytes of one block.
    pub const fn block_bytes(self) -> usize {
        self.ggml_type().block_bytes() as usize
    }

    /// Whether the type stores elements in blocks of more than one.
    pub const fn is_quantized(self) -> bool {
        self.block_len() > 1
    }

    /// Bytes taken by a row of `n` elements; `None` if `n` is not a whole number of blocks.
    pub const fn row_bytes(self, n: usize) -> Option<usize> {
        if !n.is_multiple_of(self.block_len()) {
            return None;
        }
        Some(n / self.block_len() * self.block_bytes())
    }
}

/// Declares [`OpType`] from one table: variant, value and ggml's name. The value of an op
/// is its id in [`crate::op_catalog::OP_NAMES`] (checked by a test), so the engine and a
/// traced llama.cpp build share one numbering.
macro_rules! op_types {
    ($( $(#[$doc:meta])* $variant:ident = $id:literal, $name:literal; )*) => {
        /// Operator of a graph node. Numbers are stable: never renumber, only add. The
        /// first eleven are the engine's original ops; later ones take the id of their
        /// name in the op catalog.
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum OpType {
            $( $(#[$doc])* $variant = $id, )*
        }

        impl OpType {
            /// Every op, in id order.
            pub const ALL: &'static [OpType] = &[$(OpType::$variant),*];

            /// The op for a stored value.
            pub const fn from_u32(v: u32) -> Option<OpType> {
                match v {
                    $( $id => Some(OpType::$variant), )*
                    _ => None,
                }
            }

            /// Upper-case name as ggml spells it (`MUL_MAT`, `RMS_NORM`, ...).
            pub const fn name(self) -> &'static str {
                match self {
                    $( OpType::$variant => $name, )*
                }
            }
        }
    };
}

op_types! {
    /// Not computed in the graph: a weight, a KV-cache view or an input.
    None = 0, "NONE";
    /// Select rows of a matrix by index (`inp_out_ids`, embedding lookups); with op param
    /// 0 = [`GET_ROWS_PER_TOKEN`], one value per (slot, token) of an `[E, T]` matrix
    /// (the routing weights of the selected experts).
    GetRows = 1, "GET_ROWS";
    /// Root-mean-square normalisation over rows.
    RmsNorm = 2, "RMS_NORM";
    /// Element-wise product with broadcasting of `src1` (norm weights; a one-column
    /// `src1` scales whole rows).
    Mul = 3, "MUL";
    /// Element-wise sum with broadcasting of `src1` (residuals, biases).
    Add = 4, "ADD";
    /// Matrix product `src0ᵀ · src1` in ggml's convention (`src0` rows are weights).
    MulMat = 5, "MUL_MAT";
    /// Rotary position embedding (NeoX or normal mode, op param 0).
    Rope = 6, "ROPE";
    /// Copy `src0` into `src1` (store K/V rows into the cache).
    Cpy = 7, "CPY";
    /// Scaled softmax over rows, causally masked unless op param 2 is
    /// [`SOFT_MAX_UNMASKED`], within a sliding window when op param 3 is not 0.
    SoftMax = 8, "SOFT_MAX";
    /// SwiGLU: `silu(src0) * src1`.
    SwiGlu = 9, "SWIGLU";
    /// Reshape/permute/view without computing (kept in the graph only as a source).
    View = 10, "VIEW";
    /// Element-wise quotient with broadcasting of `src1` like [`OpType::Mul`].
    Div = 16, "DIV";
    /// Sum of each row: `[n, rows]` to `[1, rows]`.
    SumRows = 23, "SUM_ROWS";
    /// Expert-indexed matrix product (ggml's `MUL_MAT_ID`): `src0` holds `E` weight
    /// matrices `[K, N, E]`, `src2` the `[k, T]` I32 ids of the experts each token uses;
    /// `dst[:, j, t] = src0[:, :, ids[j, t]]ᵀ · src1[:, j mod S, t]`. `src3`, when set, is
    /// the `[k, T]` f32 routing weights (read by probes, not by the op).
    MulMatId = 36, "MUL_MAT_ID";
    /// Multiply by a constant (op param 0, f32 bits).
    Scale = 38, "SCALE";
    /// Clamp into `[op param 0, op param 1]` (f32 bits).
    Clamp = 51, "CLAMP";
    /// The indices of the `k = ne[0]` largest values of each row, largest first (ggml's
    /// `argsort` descending, then a view of its first `k` columns).
    TopK = 71, "TOP_K";
    /// SiLU, `x·σ(x)` (ggml computes it as a `UNARY` op).
    Silu = 102, "SILU";
    /// Sum of the `k` weighted expert outputs of each token: `[N, k, T]` to `[N, T]`,
    /// added slot by slot in order, as llama.cpp's `k − 1` `ADD`s of views do.
    MoeSum = 103, "MOE_SUM";
    /// Hyperbolic tangent (ggml's `UNARY` tanh): the middle of a logit soft-cap.
    Tanh = 104, "TANH";
    /// GEGLU: `gelu(src0) * src1`, GELU from ggml's f16 lookup table (Gemma's FFN).
    GeGlu = 105, "GEGLU";
    /// Copy of a tensor between two backends' buffers (`src0` → this node's buffer,
    /// contiguous): the explicit transfer a graph split needs at a backend boundary.
    BackendCopy = 106, "BACKEND_COPY";
    /// Wait until the other backend has finished the work submitted to it; a view of
    /// `src0` (the tensor the wait completes; with a tensor split, `src1` is the other
    /// backend's half). Op param 0: [`SYNC_SPIN`] or [`SYNC_BLOCK`].
    BackendSync = 107, "BACKEND_SYNC";
    /// Make layer `layer`'s KV-cache chunks resident under a KV budget before its
    /// attention (swap others out, its own in); `data` is the cache's swap state, op
    /// param 0 the positions holding data after this batch. Computed by thread 0.
    KvFetch = 108, "KV_FETCH";
}

/// [`OpType::BackendSync`] op param 0: spin until the other backend is done.
pub const SYNC_SPIN: u32 = 0;
/// [`OpType::BackendSync`] op param 0: sleep (futex) until the other backend is done.
pub const SYNC_BLOCK: u32 = 1;
/// [`OpType::MulMat`] op param 5: first output row this node computes (with a tensor
/// split, each backend computes a band of rows of the same output).
pub const MUL_MAT_ROW_BEGIN_PARAM: usize = 5;
/// [`OpType::MulMat`] op param 6: one past the last output row this node computes (0:
/// all rows).
pub const MUL_MAT_ROW_END_PARAM: usize = 6;

/// [`OpType::SoftMax`] op param 3: a sliding window — a token at position `p` sees only
/// the keys at positions `p − window < q ≤ p` (0: no window).
pub const SOFT_MAX_WINDOW_PARAM: usize = 3;
/// [`OpType::SoftMax`] op param 2: no causal mask (the routing softmax over experts).
pub const SOFT_MAX_UNMASKED: u32 = 1;
/// [`OpType::GetRows`] op param 0: select one value per (slot, token), see the op.
pub const GET_ROWS_PER_TOKEN: u32 = 1;

/// Kind of backend a graph runs on.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// The CPU thread-pool backend.
    Cpu = 0,
    /// A GPU backend (reserved).
    Gpu = 1,
    /// An NPU backend (reserved).
    Npu = 2,
    /// The engine's accelerator stand-in: its own worker threads (optionally pinned and
    /// throttled), its own operator entry point ([`symbols::ACCEL_OP_COMPUTE`]) and a
    /// subset of op types; graphs are split between it and the CPU.
    Accel = 3,
    /// llama.cpp's Vulkan backend (`ggml-vulkan`).
    Vulkan = 4,
    /// llama.cpp's OpenCL backend (`ggml-opencl`: Adreno).
    OpenCl = 5,
    /// llama.cpp's CUDA backend.
    Cuda = 6,
    /// llama.cpp's Metal backend.
    Metal = 7,
    /// llama.cpp's BLAS backend (runs on the CPU through a BLAS library).
    Blas = 8,
    /// llama.cpp's RPC backend (a remote machine).
    Rpc = 9,
}

impl BackendKind {
    /// The kind for a stored value.
    pub const fn from_u32(v: u32) -> Option<BackendKind> {
        match v {
            0 => Some(BackendKind::Cpu),
            1 => Some(BackendKind::Gpu),
            2 => Some(BackendKind::Npu),
            3 => Some(BackendKind::Accel),
            4 => Some(BackendKind::Vulkan),
            5 => Some(BackendKind::OpenCl),
            6 => Some(BackendKind::Cuda),
            7 => Some(BackendKind::Metal),
            8 => Some(BackendKind::Blas),
            9 => Some(BackendKind::Rpc),
            _ => None,
        }
    }

    /// Lower-case name (`cpu`, `gpu`, `npu`, `accel`, `vulkan`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Gpu => "gpu",
            BackendKind::Npu => "npu",
            BackendKind::Accel => "accel",
            BackendKind::Vulkan => "vulkan",
            BackendKind::OpenCl => "opencl",
            BackendKind::Cuda => "cuda",
            BackendKind::Metal => "metal",
            BackendKind::Blas => "blas",
            BackendKind::Rpc => "rpc",
        }
    }
}

/// [`EngineNode::flags`]: the node is a model weight (read-only, memory-mapped).
pub const NODE_FLAG_WEIGHT: u32 = 1 << 0;
/// [`EngineNode::flags`]: the node is a graph input (embeddings, positions, mask).
pub const NODE_FLAG_INPUT: u32 = 1 << 1;
/// [`EngineNode::flags`]: the node is a graph output (logits).
pub const NODE_FLAG_OUTPUT: u32 = 1 << 2;
/// [`EngineNode::flags`]: the node views the KV cache.
pub const NODE_FLAG_KV_CACHE: u32 = 1 << 3;
/// [`EngineNode::flags`]: the weight's data is repacked for the CPU backend (groups of 8
/// rows interleaved block by block, `engine_kernels::packed`); `ne`/`nb` still describe
/// the logical row-major tensor, so sizes and shapes read the same.
pub const NODE_FLAG_PACKED: u32 = 1 << 4;
/// [`EngineNode::flags`]: the weight stays row-major (expert tensors, left in the
/// mapping) but its products must round like the repacked ones, because llama.cpp repacks
/// it; the CPU backend repacks the rows it multiplies on the fly.
pub const NODE_FLAG_PACKED_ORDER: u32 = 1 << 5;

/// One tensor of the engine: a computed graph node or a leaf (weight, input, cache view).
///
/// Shaped like ggml's `ggml_tensor`: `ne` counts elements per dimension (innermost
/// first), `nb` is the stride in bytes per dimension, `src` holds the addresses of the
/// source nodes (0 when unused).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EngineNode {
    /// [`ENGINE_ABI_VERSION`] of this layout.
    pub abi_version: u32,
    /// [`OpType`] value.
    pub op: u32,
    /// [`DType`] value of the node's data.
    pub dtype: u32,
    /// `NODE_FLAG_*` bits.
    pub flags: u32,
    /// Elements per dimension, innermost first.
    pub ne: [i64; MAX_DIMS],
    /// Stride in bytes per dimension.
    pub nb: [u64; MAX_DIMS],
    /// Addresses of the source nodes; 0 where unused.
    pub src: [u64; MAX_SRC],
    /// Address of the node's data.
    pub data: u64,
    /// Operator parameters (eps, scale, RoPE settings...), meaning fixed per op type.
    pub op_params: [u32; MAX_OP_PARAMS],
    /// Transformer layer the node belongs to, or -1.
    pub layer: i32,
    /// Position in the graph's execution order; `u32::MAX` for leaves.
    pub index: u32,
    /// NUL-padded UTF-8 name such as `attn_q-3` or `blk.3.attn_q.weight`.
    pub name: [u8; NODE_NAME_LEN],
}

const _: () = assert!(size_of::<EngineNode>() == 224);
const _: () = assert!(offset_of!(EngineNode, abi_version) == 0);
const _: () = assert!(offset_of!(EngineNode, op) == 4);
const _: () = assert!(offset_of!(EngineNode, dtype) == 8);
const _: () = assert!(offset_of!(EngineNode, flags) == 12);
const _: () = assert!(offset_of!(EngineNode, ne) == 16);
const _: () = assert!(offset_of!(EngineNode, nb) == 48);
const _: () = assert!(offset_of!(EngineNode, src) == 80);
const _: () = assert!(offset_of!(EngineNode, data) == 112);
const _: () = assert!(offset_of!(EngineNode, op_params) == 120);
const _: () = assert!(offset_of!(EngineNode, layer) == 152);
const _: () = assert!(offset_of!(EngineNode, index) == 156);
const _: () = assert!(offset_of!(EngineNode, name) == 160);

impl EngineNode {
    /// A zeroed node of the current ABI version with no op, no sources and no name.
    pub const fn empty() -> EngineNode {
        EngineNode {
            abi_version: ENGINE_ABI_VERSION,
            op: OpType::None as u32,
            dtype: DType::F32 as u32,
            flags: 0,
            ne: [1; MAX_DIMS],
            nb: [0; MAX_DIMS],
            src: [0; MAX_SRC],
            data: 0,
            op_params: [0; MAX_OP_PARAMS],
            layer: -1,
            index: u32::MAX,
            name: [0; NODE_NAME_LEN],
        }
    }

    /// The name up to its first NUL (empty if it is not UTF-8).
    pub fn name_str(&self) -> &str {
        let len = self
            .name
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(NODE_NAME_LEN);
        core::str::from_utf8(&self.name[..len]).unwrap_or("")
    }

    /// Sets the name, truncated to fit with a terminating NUL.
    pub fn set_name(&mut self, name: &str) {
        self.name = [0; NODE_NAME_LEN];
        let bytes = name.as_bytes();
        let mut len = bytes.len().min(NODE_NAME_LEN - 1);
        // Never cut a UTF-8 sequence in half.
        while len > 0 && len < bytes.len() && (bytes[len] & 0xC0) == 0x80 {
            len -= 1;
        }
        self.name[..len].copy_from_slice(&bytes[..len]);
    }

    /// The op type, if the stored value is known.
    pub const fn op_type(&self) -> Option<OpType> {
        OpType::from_u32(self.op)
    }

    /// The element type, if the stored value is known.
    pub const fn dtype(&self) -> Option<DType> {
        DType::from_u32(self.dtype)
    }

    /// Total number of elements.
    pub const fn n_elements(&self) -> i64 {
        self.ne[0] * self.ne[1] * self.ne[2] * self.ne[3]
    }
}

/// One graph computation handed to a backend: the nodes to compute, in order.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EngineGraph {
    /// [`ENGINE_ABI_VERSION`] of this layout.
    pub abi_version: u32,
    /// Number of computed nodes.
    pub n_nodes: u32,
    /// Address of the first of `n_nodes` contiguous [`EngineNode`]s, in execution order.
    pub nodes: u64,
    /// Sequence number of this graph within the process (one per graph computation).
    pub graph_id: u64,
    /// Backend id (index of the backend instance in the engine).
    pub backend_id: u32,
    /// [`BackendKind`] value.
    pub backend_kind: u32,
    /// Tokens in the batch this graph computes.
    pub n_tokens: u32,
    /// Position of the first token of the batch.
    pub pos: u32,
}

impl EngineGraph {
    /// An all-zero graph (ABI version 0, no nodes).
    pub const fn zeroed() -> EngineGraph {
        EngineGraph {
            abi_version: 0,
            n_nodes: 0,
            nodes: 0,
            graph_id: 0,
            backend_id: 0,
            backend_kind: 0,
            n_tokens: 0,
            pos: 0,
        }
    }
}

const _: () = assert!(size_of::<EngineGraph>() == 40);
const _: () = assert!(offset_of!(EngineGraph, abi_version) == 0);
const _: () = assert!(offset_of!(EngineGraph, n_nodes) == 4);
const _: () = assert!(offset_of!(EngineGraph, nodes) == 8);
const _: () = assert!(offset_of!(EngineGraph, graph_id) == 16);
const _: () = assert!(offset_of!(EngineGraph, backend_id) == 24);
const _: () = assert!(offset_of!(EngineGraph, backend_kind) == 28);
const _: () = assert!(offset_of!(EngineGraph, n_tokens) == 32);
const _: () = assert!(offset_of!(EngineGraph, pos) == 36);

/// Entries of one [`EngineOpTimes`] table (one `engine_op_times` call).
pub const OP_TIMES_CHUNK: usize = 32;

/// When a thread finished its share of a node (`CLOCK_MONOTONIC` ns).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineOpTime {
    /// The node's address.
    pub node: u64,
    /// When this thread's share of it ended.
    pub end_ns: u64,
}
const _: () = assert!(size_of::<EngineOpTime>() == 16);

/// The node ends of up to [`OP_TIMES_CHUNK`] nodes of one thread, in execution order
/// (`engine_op_times`). A table ends early after an expert-indexed product
/// (`MUL_MAT_ID`), so a tracer reads that node's routing while its sources hold it: only
/// a table's last entry can be one.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EngineOpTimes {
    /// [`ENGINE_ABI_VERSION`].
    pub abi_version: u32,
    /// Entries filled.
    pub n: u32,
    /// The entries.
    pub entries: [EngineOpTime; OP_TIMES_CHUNK],
}
const _: () = assert!(offset_of!(EngineOpTimes, n) == 4);
const _: () = assert!(offset_of!(EngineOpTimes, entries) == 8);

/// Exported symbol names of the probe entry points (see `docs/probe-abi.md`).
pub mod symbols {
    /// Token level: `i32 engine_decode(ctx *, u32 n_tokens, u32 pos, const i32 *tokens)`.
    pub const DECODE: &str = "engine_decode";
    /// Graph level: `i32 engine_graph_compute(const EngineGraph *, u32 backend_id, u32 backend_kind, u32 n_nodes, backend *)`.
    pub const GRAPH_COMPUTE: &str = "engine_graph_compute";
    /// Operator level: `void engine_op_compute(const EngineNode *, u32 ith, u32 nth, void *params)`.
    pub const OP_COMPUTE: &str = "engine_op_compute";
    /// Operator level on the accel backend: same signature as [`OP_COMPUTE`]; `params`
    /// is the accel backend's per-thread state.
    pub const ACCEL_OP_COMPUTE: &str = "engine_accel_op_compute";
    /// Operator level: `void engine_op_done(const EngineNode *, u32 ith, u32 nth, u32
    /// backend_kind)`, called by thread `ith` when it has finished its share of the node
    /// and goes on to wait at the barrier (either backend): the node's end on that thread.
    pub const OP_DONE: &str = "engine_op_done";
    /// Operator level: `void engine_graph_thread(const EngineGraph *, u32 ith, u32 nth)`,
    /// called by thread `ith` when it begins its walk over a graph: its first node's start.
    pub const GRAPH_THREAD: &str = "engine_graph_thread";
    /// Operator level, batched: `void engine_op_times(const EngineOpTimes *, u32 ith,
    /// u32 nth, u32 backend_kind)`, a thread's node ends in tables of up to
    /// [`super::OP_TIMES_CHUNK`]; called only while [`OP_TIMES_SEMAPHORE`] is nonzero.
    pub const OP_TIMES: &str = "engine_op_times";
    /// `u16 engine_op_times_semaphore`: the reference counter to attach
    /// [`OP_TIMES`] with (the kernel counts it up while the uprobe is attached).
    pub const OP_TIMES_SEMAPHORE: &str = "engine_op_times_semaphore";
    /// Phase: `void engine_phase_kv_compress(swap *, u32 layer, u32 chunk, u32 bytes)`.
    pub const PHASE_KV_COMPRESS: &str = "engine_phase_kv_compress";
    /// Phase: `i32 engine_phase_kv_swap_out(swap *, u32 layer, u32 chunk, u32 bytes)`.
    pub const PHASE_KV_SWAP_OUT: &str = "engine_phase_kv_swap_out";
    /// Phase: `i32 engine_phase_kv_swap_in(swap *, u32 layer, u32 chunk, u32 bytes)`.
    pub const PHASE_KV_SWAP_IN: &str = "engine_phase_kv_swap_in";
    /// Phase: `void engine_phase_kv_decompress(swap *, u32 layer, u32 chunk, u32 bytes)`.
    pub const PHASE_KV_DECOMPRESS: &str = "engine_phase_kv_decompress";
    /// Phase: `void engine_phase_embed(ctx *, const i32 *tokens, u32 n_tokens, f32 *out)`.
    pub const PHASE_EMBED: &str = "engine_phase_embed";
    /// Phase: `void engine_phase_copy_logits(f32 *dst, const f32 *src, u32 n)`.
    pub const PHASE_COPY_LOGITS: &str = "engine_phase_copy_logits";
    /// Phase: `void engine_phase_softmax(const f32 *logits, f32 *probs, u32 n_vocab, f32 temp)`.
    pub const PHASE_SOFTMAX: &str = "engine_phase_softmax";
    /// Phase: `i32 engine_phase_sample(sampler *, const f32 *probs, u32 n_vocab)`.
    pub const PHASE_SAMPLE: &str = "engine_phase_sample";
    /// Every probe entry point, in level order.
    pub const ALL: [&str; 15] = [
        DECODE,
        GRAPH_COMPUTE,
        OP_COMPUTE,
        ACCEL_OP_COMPUTE,
        OP_DONE,
        GRAPH_THREAD,
        OP_TIMES,
        PHASE_EMBED,
        PHASE_COPY_LOGITS,
        PHASE_SOFTMAX,
        PHASE_SAMPLE,
        PHASE_KV_COMPRESS,
        PHASE_KV_SWAP_OUT,
        PHASE_KV_SWAP_IN,
        PHASE_KV_DECOMPRESS,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_ids_and_names_round_trip() {
        for &t in DType::ALL {
            assert_eq!(DType::from_u32(t as u32), Some(t));
            assert_eq!(DType::from_name(t.name()), Some(t));
        }
        assert_eq!(DType::from_name("Q4_k"), Some(DType::Q4_K));
        for id in [4, 5, 16, 27, 31, u32::MAX] {
            assert_eq!(DType::from_u32(id), None, "{id}");
        }
        assert_eq!(DType::from_name("q4_2"), None);
    }

    /// ggml's type ids and block sizes (ggml.h `enum ggml_type`, ggml-common.h block
    /// structs), written out independently of the table.
    #[test]
    fn dtype_table_matches_ggml() {
        let ggml: [(DType, u32, usize, usize); 16] = [
            (DType::F32, 0, 1, 4),
            (DType::F16, 1, 1, 2),
            (DType::Q4_0, 2, 32, 2 + 16),
            (DType::Q4_1, 3, 32, 2 * 2 + 16),
            (DType::Q5_0, 6, 32, 2 + 4 + 16),
            (DType::Q5_1, 7, 32, 2 * 2 + 4 + 16),
            (DType::Q8_0, 8, 32, 2 + 32),
            (DType::Q8_1, 9, 32, 2 * 2 + 32),
            (DType::Q2_K, 10, 256, 256 / 16 + 256 / 4 + 2 * 2),
            (DType::Q3_K, 11, 256, 256 / 8 + 256 / 4 + 12 + 2),
            (DType::Q4_K, 12, 256, 2 * 2 + 12 + 256 / 2),
            (DType::Q5_K, 13, 256, 2 * 2 + 12 + 256 / 8 + 256 / 2),
            (DType::Q6_K, 14, 256, 256 / 2 + 256 / 4 + 256 / 16 + 2),
            (DType::Q8_K, 15, 256, 4 + 256 + 16 * 2),
            (DType::I32, 26, 1, 4),
            (DType::BF16, 30, 1, 2),
        ];
        assert_eq!(ggml.len(), DType::ALL.len());
        for (t, id, len, bytes) in ggml {
            assert_eq!(
                (t as u32, t.block_len(), t.block_bytes()),
                (id, len, bytes),
                "{}",
                t.name()
            );
        }
    }

    #[test]
    fn op_ids_round_trip() {
        for &op in OpType::ALL {
            assert_eq!(OpType::from_u32(op as u32), Some(op));
        }
        assert_eq!(OpType::from_u32(11), None);
        assert!(
            OpType::ALL
                .windows(2)
                .all(|w| (w[0] as u32) < (w[1] as u32))
        );
    }

    #[test]
    fn row_bytes_follow_blocks() {
        assert_eq!(DType::Q8_0.row_bytes(64), Some(68));
        assert_eq!(DType::Q4_0.row_bytes(64), Some(36));
        assert_eq!(DType::F16.row_bytes(3), Some(6));
        assert_eq!(DType::Q4_0.row_bytes(33), None);
    }

    #[test]
    fn names_are_truncated_on_char_boundaries() {
        let mut n = EngineNode::empty();
        n.set_name("attn_q-3");
        assert_eq!(n.name_str(), "attn_q-3");
        let long = "é".repeat(40); // 80 bytes
        n.set_name(&long);
        assert!(n.name_str().len() < NODE_NAME_LEN);
        assert!(n.name_str().chars().all(|c| c == 'é'));
    }
}
