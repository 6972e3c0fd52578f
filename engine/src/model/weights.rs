//! The model's weights: one leaf [`EngineNode`] per tensor. Graph nodes refer to these
//! leaves by address, so a traced DAG shows weights as its constant inputs.
//!
//! Vectors and the `token_embd` lookup table point into the memory-mapped GGUF file
//! (zero-copy). Unless the caller asks for the file layout ([`Repack::Off`]), matrices
//! are copied at load time into huge-page-backed memory, Q4_0/Q4_K ones (and Q8_0 ones on
//! AArch64: the types llama.cpp repacks) repacked into
//! groups of 8 interleaved rows ([`engine_kernels::packed`], flag [`NODE_FLAG_PACKED`]);
//! a tied output projection then gets its own copy of `token_embd`. Expert tensors stay
//! mapped; those llama.cpp repacks are flagged [`NODE_FLAG_PACKED_ORDER`] so that their
//! products round like llama.cpp's repacked ones.

use std::path::Path;

use common::DType;
use common::engine_abi::{EngineNode, NODE_FLAG_PACKED, NODE_FLAG_PACKED_ORDER, NODE_FLAG_WEIGHT};
use engine_gguf::GgufFile;

use super::config::ModelConfig;
use super::tensors::{ExpertShapes, TensorKind, TensorShapes, TensorSpec, tensor_specs};
use crate::error::EngineError;
use crate::graph::{NodeAddr, contiguous_strides};

/// Weights of one transformer block (addresses of leaf nodes).
#[derive(Clone, Debug)]
pub struct LayerWeights {
    /// `blk.N.attn_norm.weight` `[n_embd]`.
    pub attn_norm: NodeAddr,
    /// `blk.N.attn_q.weight` `[n_embd, n_embd_q]`.
    pub wq: NodeAddr,
    /// `blk.N.attn_k.weight` `[n_embd, n_embd_kv]`.
    pub wk: NodeAddr,
    /// `blk.N.attn_v.weight` `[n_embd, n_embd_kv]`.
    pub wv: NodeAddr,
    /// `blk.N.attn_output.weight` `[n_embd, n_embd]`.
    pub wo: NodeAddr,
    /// `blk.N.attn_q.bias` `[n_embd]` (Qwen2).
    pub bq: Option<NodeAddr>,
    /// `blk.N.attn_k.bias` `[n_embd_kv]` (Qwen2).
    pub bk: Option<NodeAddr>,
    /// `blk.N.attn_v.bias` `[n_embd_kv]` (Qwen2).
    pub bv: Option<NodeAddr>,
    /// `blk.N.ffn_norm.weight` `[n_embd]`.
    pub ffn_norm: NodeAddr,
    /// `blk.N.post_attention_norm.weight` `[n_embd]` (Gemma 2).
    pub post_attn_norm: Option<NodeAddr>,
    /// `blk.N.post_ffw_norm.weight` `[n_embd]` (Gemma 2).
    pub post_ffw_norm: Option<NodeAddr>,
    /// The FFN's matrices.
    pub ffn: FfnWeights,
}

/// The weights of a block's FFN.
#[derive(Clone, Debug)]
pub enum FfnWeights {
    /// A gated FFN.
    Dense(GatedFfn),
    /// A mixture of experts.
    Experts(ExpertWeights),
}

/// The three matrices of a gated (SwiGLU) FFN.
#[derive(Clone, Copy, Debug)]
pub struct GatedFfn {
    /// `ffn_gate` `[n_embd, n_ff]`.
    pub gate: NodeAddr,
    /// `ffn_up` `[n_embd, n_ff]`.
    pub up: NodeAddr,
    /// `ffn_down` `[n_ff, n_embd]`.
    pub down: NodeAddr,
}

/// A mixture-of-experts FFN. The expert tensors stay in the memory-mapped file whatever
/// the [`Repack`] choice, so cold experts are paged in from storage when first used.
#[derive(Clone, Copy, Debug)]
pub struct ExpertWeights {
    /// `ffn_gate_inp` `[n_embd, n_expert]`: the router.
    pub router: NodeAddr,
    /// `ffn_gate_exps` `[n_embd, n_ff_exp, n_expert]`.
    pub gate_exps: NodeAddr,
    /// `ffn_up_exps` `[n_embd, n_ff_exp, n_expert]`.
    pub up_exps: NodeAddr,
    /// `ffn_down_exps` `[n_ff_exp, n_embd, n_expert]`.
    pub down_exps: NodeAddr,
    /// The shared expert (`ffn_{gate,up,down}_shexp`) and its gate
    /// (`ffn_gate_inp_shexp` `[n_embd]`), if the architecture has one.
    pub shared: Option<(GatedFfn, NodeAddr)>,
}

/// Whether weight matrices leave the memory-mapped file at load time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Repack {
    /// Copy every matrix (but the embedding lookup table) into huge-page-backed memory,
    /// Q4_0/Q4_K ones (Q8_0 too on AArch64) whose rows come in groups of 8 repacked (the
    /// default).
    #[default]
    On,
    /// Keep the file's row-major layout in the mapping (zero-copy; slower products).
    Off,
}

/// All weights of a model.
pub struct Weights {
    /// Leaf nodes; the box is never resized, so addresses are stable.
    nodes: Box<[EngineNode]>,
    /// Repacked data of the nodes flagged [`NODE_FLAG_PACKED`] (owned here, never moved).
    packed: Vec<memmap2::MmapMut>,
    /// Whether `output` is a copy of `token_embd`'s node (tied embeddings).
    tied_copy: bool,
    /// `token_embd.weight` `[n_embd, n_vocab]`.
    pub token_embd: NodeAddr,
    /// `output_norm.weight` `[n_embd]`.
    pub output_norm: NodeAddr,
    /// `output.weight` `[n_embd, n_vocab]`, or `token_embd` when the embeddings are tied.
    pub output: NodeAddr,
    /// Per-block weights.
    pub layers: Vec<LayerWeights>,
}

impl std::fmt::Debug for Weights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Weights")
            .field("tensors", &self.nodes.len())
            .finish()
    }
}

impl Weights {
    /// Builds leaf nodes for every tensor the configuration needs, checking presence,
    /// shape and type.
    pub fn load(
        file: &GgufFile,
        cfg: &ModelConfig,
        path: &Path,
        repack: Repack,
    ) -> Result<Weights, EngineError> {
        let wanted = tensor_specs(cfg.arch, tensor_shapes(cfg));
        let mut nodes = Vec::with_capacity(wanted.len());
        let mut names = Vec::with_capacity(wanted.len());
        for w in &wanted {
            if let Some(node) = leaf(file, w)? {
                nodes.push(node);
                names.push(w.name.clone());
            }
        }
        let _ = path;
        // Repacking gives a tied output product its own copy; token_embd stays the
        // row-major lookup table.
        let tied_copy = repack == Repack::On && !names.iter().any(|n| n == "output.weight");
        if tied_copy {
            let embd = names.iter().position(|n| n == "token_embd.weight");
            if let Some(i) = embd {
                nodes.push(nodes[i]);
                names.push(TIED_OUTPUT.to_owned());
            }
        }
        let mut packed = Vec::new();
        if repack == Repack::On {
            packed = pack_matrices(&mut nodes, &names)?;
            flag_packed_order(&mut nodes);
        }
        let nodes = nodes.into_boxed_slice();
        let by_name = ByName {
            nodes: &nodes,
            names: &names,
        };
        let token_embd = by_name.must("token_embd.weight".into())?;
        let output = by_name
            .addr("output.weight")
            .or_else(|| by_name.addr(TIED_OUTPUT))
            .unwrap_or(token_embd);
        let output_norm = by_name.must("output_norm.weight".into())?;
        let layers = (0..cfg.n_layer)
            .map(|il| by_name.layer(il, cfg))
            .collect::<Result<Vec<_>, EngineError>>()?;
        Ok(Weights {
            token_embd,
            output_norm,
            output,
            layers,
            nodes,
            packed,
            tied_copy,
        })
    }

    /// Bytes of repacked weight data held in memory (0 with [`Repack::Off`]).
    pub fn packed_bytes(&self) -> usize {
        self.packed.iter().map(|p| p.len()).sum()
    }

    /// The leaf node at `addr`.
    pub fn node(&self, addr: NodeAddr) -> &EngineNode {
        // SAFETY: every address handed out points into `self.nodes`, which lives as long
        // as `self` and is never resized.
        unsafe { &*(addr as *const EngineNode) }
    }

    /// Number of weight tensors.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are no weights (never true for a loaded model).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Total bytes of the model's weight tensors (a tied output's packed copy not
    /// counted twice).
    pub fn bytes(&self) -> u64 {
        self.nodes
            .iter()
            .filter(|n| !(self.tied_copy && std::ptr::eq(*n, self.node(self.output))))
            .map(node_bytes)
            .sum()
    }

    /// The weight data one single-token forward pass reads, as `(address, bytes)` ranges:
    /// every tensor but the embedding lookup table (one row of it is read), with the
    /// output matrix (the embedding table itself when tied without a copy) and, of each
    /// expert tensor, the share of `n_used` of `n_expert` experts (the first `n_used`
    /// stand in for the ones routed to: they are the same size). What decode streams
    /// from memory per token, the bound of a memory-bound decode.
    pub fn decode_ranges(&self, experts: Option<(usize, usize)>) -> Vec<(usize, usize)> {
        let mut expert_nodes: Vec<NodeAddr> = Vec::new();
        for l in &self.layers {
            if let FfnWeights::Experts(e) = &l.ffn {
                expert_nodes.extend([e.gate_exps, e.up_exps, e.down_exps]);
            }
        }
        let mut ranges = Vec::with_capacity(self.nodes.len());
        for n in self.nodes.iter() {
            let addr = n as *const EngineNode as NodeAddr;
            if addr == self.token_embd && self.output != self.token_embd {
                continue;
            }
            let bytes = match experts {
                Some((n_used, n_expert)) if expert_nodes.contains(&addr) && n_expert > 0 => {
                    node_bytes(n) as usize / n_expert * n_used
                }
                _ => node_bytes(n) as usize,
            };
            ranges.push((n.data as usize, bytes));
        }
        ranges
    }
}

/// The shapes of the tensors `cfg` needs.
fn tensor_shapes(cfg: &ModelConfig) -> TensorShapes {
    TensorShapes {
        n_embd: cfg.n_embd as u64,
        n_embd_q: cfg.n_embd_q() as u64,
        n_embd_kv: cfg.n_embd_kv() as u64,
        n_ff: cfg.n_ff as u64,
        n_vocab: cfg.n_vocab as u64,
        n_layer: cfg.n_layer as u32,
        experts: cfg.experts.map(|x| ExpertShapes {
            n_expert: x.n_expert as u64,
            n_ff_exp: x.n_ff_exp as u64,
            n_ff_shexp: x.n_ff_shexp as u64,
        }),
    }
}

/// The leaf node of tensor `w` of `file` (over the mapped data), checked for presence, a
/// type the engine computes with for its kind and the expected shape; `None` for an
/// optional tensor the file does not have.
fn leaf(file: &GgufFile, w: &TensorSpec) -> Result<Option<EngineNode>, EngineError> {
    let Some(t) = file.tensor(&w.name) else {
        if w.optional {
            return Ok(None);
        }
        return Err(EngineError::MissingTensor {
            name: w.name.clone(),
        });
    };
    let dtype = DType::from_u32(t.ggml_type as u32)
        .filter(|&d| match w.kind {
            TensorKind::Matrix | TensorKind::Router => engine_kernels::has_kernels(d),
            TensorKind::Vector => d == DType::F32,
        })
        .ok_or_else(|| EngineError::UnsupportedTensorType {
            name: w.name.clone(),
            ty: t.ggml_type.name().to_owned(),
            supported: match w.kind {
                TensorKind::Matrix | TensorKind::Router => engine_kernels::weight_types()
                    .map(DType::name)
                    .collect::<Vec<_>>()
                    .join(", "),
                _ => DType::F32.name().to_owned(),
            },
        })?;
    let mut dims = t.dims.clone();
    while dims.len() > w.dims.len() && dims.last() == Some(&1) {
        dims.pop();
    }
    if dims != w.dims {
        return Err(EngineError::TensorShape {
            name: w.name.clone(),
            found: t.dims.clone(),
            expected: w.dims.clone(),
        });
    }
    let mut node = EngineNode::empty();
    node.set_name(&w.name);
    node.dtype = dtype as u32;
    node.flags = NODE_FLAG_WEIGHT;
    node.layer = w.layer;
    for (i, d) in w.dims.iter().enumerate() {
        node.ne[i] = *d as i64;
    }
    node.nb = contiguous_strides(dtype, node.ne);
    node.data = file.tensor_data(t).as_ptr() as u64;
    Ok(Some(node))
}

/// Flags the expert tensors (3-D, left in the mapped file) that llama.cpp would repack
/// with [`NODE_FLAG_PACKED_ORDER`], so that their products round like its repacked ones.
fn flag_packed_order(nodes: &mut [EngineNode]) {
    for n in nodes.iter_mut().filter(|n| n.ne[2] > 1) {
        let dtype = n.dtype().unwrap_or(DType::F32);
        let (k, rows) = (n.ne[0] as usize, n.ne[1] as usize);
        if engine_kernels::packed::llama_cpp_repacks(dtype)
            && engine_kernels::packed::can_pack(dtype, k, rows)
        {
            n.flags |= NODE_FLAG_PACKED_ORDER;
        }
    }
}

/// The loaded leaf nodes by tensor name.
struct ByName<'a> {
    nodes: &'a [EngineNode],
    names: &'a [String],
}

impl ByName<'_> {
    /// The address of tensor `name`'s node, if the file has it.
    fn addr(&self, name: &str) -> Option<NodeAddr> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| &self.nodes[i] as *const EngineNode as NodeAddr)
    }

    /// The address of tensor `name`'s node, which the model needs.
    fn must(&self, name: String) -> Result<NodeAddr, EngineError> {
        self.addr(&name).ok_or(EngineError::MissingTensor { name })
    }

    /// Block `il`'s weights.
    fn layer(&self, il: usize, cfg: &ModelConfig) -> Result<LayerWeights, EngineError> {
        let b = |s: &str| format!("blk.{il}.{s}");
        Ok(LayerWeights {
            attn_norm: self.must(b("attn_norm.weight"))?,
            wq: self.must(b("attn_q.weight"))?,
            wk: self.must(b("attn_k.weight"))?,
            wv: self.must(b("attn_v.weight"))?,
            wo: self.must(b("attn_output.weight"))?,
            bq: self.addr(&b("attn_q.bias")),
            bk: self.addr(&b("attn_k.bias")),
            bv: self.addr(&b("attn_v.bias")),
            ffn_norm: self.must(b("ffn_norm.weight"))?,
            post_attn_norm: self.addr(&b("post_attention_norm.weight")),
            post_ffw_norm: self.addr(&b("post_ffw_norm.weight")),
            ffn: match cfg.experts {
                None => FfnWeights::Dense(self.gated(&b, "")?),
                Some(x) => FfnWeights::Experts(ExpertWeights {
                    router: self.must(b("ffn_gate_inp.weight"))?,
                    gate_exps: self.must(b("ffn_gate_exps.weight"))?,
                    up_exps: self.must(b("ffn_up_exps.weight"))?,
                    down_exps: self.must(b("ffn_down_exps.weight"))?,
                    shared: if x.n_ff_shexp > 0 {
                        Some((
                            self.gated(&b, "_shexp")?,
                            self.must(b("ffn_gate_inp_shexp.weight"))?,
                        ))
                    } else {
                        None
                    },
                }),
            },
        })
    }

    /// A gated FFN's `ffn_{gate,up,down}{suffix}.weight` of the block `b` names.
    fn gated(&self, b: &impl Fn(&str) -> String, suffix: &str) -> Result<GatedFfn, EngineError> {
        Ok(GatedFfn {
            gate: self.must(b(&format!("ffn_gate{suffix}.weight")))?,
            up: self.must(b(&format!("ffn_up{suffix}.weight")))?,
            down: self.must(b(&format!("ffn_down{suffix}.weight")))?,
        })
    }
}

/// Bytes of a weight node's data (contiguous: the outermost stride times its extent).
fn node_bytes(n: &EngineNode) -> u64 {
    n.nb[3] * n.ne[3] as u64
}

/// Internal key of the tied output's node (its name stays `token_embd.weight`).
const TIED_OUTPUT: &str = "token_embd.weight (output)";

/// Moves every weight matrix of `nodes` (except the embedding lookup table) into
/// huge-page-backed anonymous memory, repacking the packable ones, on all CPUs; updates
/// data pointers and flags and returns the buffers that now hold the data.
fn pack_matrices(
    nodes: &mut [EngineNode],
    names: &[String],
) -> Result<Vec<memmap2::MmapMut>, EngineError> {
    let jobs: Vec<usize> = (0..nodes.len())
        .filter(|&i| {
            let n = &nodes[i];
            // The embedding lookup reads token_embd row by row from the mapped file;
            // expert tensors (3-D) stay mapped so cold experts page in on demand.
            names[i] != "token_embd.weight" && n.ne[1] > 1 && n.ne[2] <= 1
        })
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let nodes_ref: &[EngineNode] = nodes;
    let results: Vec<Vec<(usize, Moved)>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let j = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&i) = jobs.get(j) else { break };
                        done.push((i, move_one(&nodes_ref[i])));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("packing threads do not panic"))
            .collect()
    });
    let mut buffers = Vec::with_capacity(jobs.len());
    for (i, buf) in results.into_iter().flatten() {
        let (buf, packed) = buf.map_err(|why| EngineError::Repack {
            name: names[i].clone(),
            why,
        })?;
        nodes[i].data = buf.as_ptr() as u64;
        if packed {
            nodes[i].flags |= NODE_FLAG_PACKED;
        }
        buffers.push(buf);
    }
    Ok(buffers)
}

/// Why one matrix could not be packed (a kernel or allocation error, as text).
type PackError = String;

/// A matrix moved into its own buffer, and whether that buffer is packed.
type Moved = Result<(memmap2::MmapMut, bool), PackError>;

/// One matrix node's (mapped, row-major) data copied into anonymous memory backed by
/// transparent huge pages where the kernel allows (fewer TLB misses while decoding
/// streams every weight once per token): repacked if [`packed::can_pack`] and llama.cpp
/// repacks the type ([`packed::llama_cpp_repacks`]), else as is.
/// Returns the buffer and whether it is packed.
fn move_one(node: &EngineNode) -> Moved {
    use engine_kernels::packed;
    let dtype = node.dtype().unwrap_or(DType::F32);
    let (k, n) = (node.ne[0] as usize, node.ne[1] as usize);
    let pack = packed::can_pack(dtype, k, n) && packed::llama_cpp_repacks(dtype);
    let src_len = node.nb[1] as usize * n;
    let len = if pack {
        packed::packed_len(dtype, k, n).map_err(|e| e.to_string())?
    } else {
        src_len
    };
    // SAFETY: the node's data points at its tensor in the mapped file, `nb[1] * ne[1]`
    // bytes long (validated by the GGUF reader), alive as long as the model.
    let src = unsafe { std::slice::from_raw_parts(node.data as *const u8, src_len) };
    let mut dst =
        memmap2::MmapMut::map_anon(len).map_err(|e| format!("allocating {len} bytes: {e}"))?;
    // A hint only: without THP the buffer simply uses normal pages.
    let _ = dst.advise(memmap2::Advice::HugePage);
    if pack {
        packed::pack(dtype, k, n, src, node.nb[1] as usize, &mut dst).map_err(|e| e.to_string())?;
    } else {
        dst.copy_from_slice(src);
    }
    Ok((dst, pack))
}
