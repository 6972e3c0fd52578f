//! Builds the graph of one forward pass over a batch, for every architecture: the
//! pre-norm transformer block with the switches of [`ArchSpec`](super::arch::ArchSpec).
//! Node names follow llama.cpp (`attn_norm-3`, `Qcur-3`, `kq-3`, `ffn_out-3`, ...), so a
//! trace reads the same as one of llama.cpp.

use common::DType;
use common::engine_abi::{NODE_FLAG_KV_CACHE, OpType};

use super::Model;
use super::config::ModelConfig;
use super::ffn::{self, FfnInput};
use super::nodes::{Layer, mm, ne, ne3};
use super::weights::{FfnWeights, LayerWeights, Weights};
use crate::error::EngineError;
use crate::graph::{ExternalTensor, Graph, NodeAddr};
use crate::kv_cache::KvCache;
use crate::ops::mul_mat::{LAYOUT_HEADS_INNER, LAYOUT_ROWS};

/// Graph inputs the caller fills, and the output it reads.
#[derive(Clone, Copy, Debug)]
pub struct BatchNodes {
    /// `inp_embd` `[n_embd, n_tokens]` f32: token embeddings.
    pub inp_embd: NodeAddr,
    /// `inp_pos` `[n_tokens]` i32: positions.
    pub inp_pos: NodeAddr,
    /// `inp_out_ids` `[1]` i32: the batch row whose logits are wanted (unused when every
    /// row's logits are).
    pub inp_out_ids: NodeAddr,
    /// `result_output` `[n_vocab, n_out]` f32: logits of the wanted rows (the last one, or
    /// all of them).
    pub logits: NodeAddr,
    /// Rows of `logits`: 1, or `n_tokens` when every row's logits are wanted.
    pub n_out: usize,
}

/// Upper bound on computed nodes per layer (for capacity reservation).
pub const MAX_NODES_PER_LAYER: usize = 64;
/// Upper bound on leaves per layer.
pub const MAX_LEAFS_PER_LAYER: usize = 4;

/// KV positions llama.cpp attends over: the used ones rounded up to a multiple of
/// [`KV_PAD`], within the cache. The extra positions are masked (zero weights), but they
/// decide how llama.cpp's `kqv` product rounds: `ggml_vec_dot_f16` / tinyBLAS over a K
/// that is a multiple of 32 keeps every product in the vector accumulators, while the
/// unpadded length sent short rows through the `f64` tail — a last-bit difference that
/// grew to 3% of the largest logit over SmolLM2's 30 layers.
fn attended_positions(used: usize, n_ctx: usize) -> usize {
    used.div_ceil(KV_PAD)
        .saturating_mul(KV_PAD)
        .min(n_ctx)
        .max(used)
}

/// llama.cpp's KV padding (`llama_kv_cache::get_padding` without flash attention in the
/// oracle's version: `n_kv` is a multiple of 256).
const KV_PAD: usize = 256;

/// Builds the graph for `n_tokens` tokens starting at position `pos`, with the logits of
/// the last token, or of every token with `all_outputs` (llama.cpp's `logits_all`: the
/// last layer and the output product then see every row, as in llama.cpp).
pub fn build_graph(
    g: &mut Graph,
    model: &Model,
    kv: &mut KvCache,
    n_tokens: usize,
    pos: usize,
    all_outputs: bool,
) -> Result<BatchNodes, EngineError> {
    let cfg = &model.config;
    let t = n_tokens;
    let inp_embd = g.leaf_input("inp_embd", DType::F32, ne(cfg.n_embd, t))?;
    let inp_pos = g.leaf_input("inp_pos", DType::I32, ne(t, 1))?;
    let inp_out_ids = g.leaf_input("inp_out_ids", DType::I32, ne(1, 1))?;
    let b = Batch {
        cfg,
        weights: &model.weights,
        style: Style::of(cfg),
        t,
        pos,
        n_kv: attended_positions(pos + n_tokens, kv.n_ctx()),
        eps: cfg.rms_eps.to_bits(),
        rope: [
            cfg.arch.rope_mode,
            cfg.rope_dims as u32,
            cfg.rope_base.to_bits(),
            1.0f32.to_bits(),
        ],
        inp_pos,
        inp_out_ids,
    };
    let mut inp_l = b.input_embedding(g, inp_embd)?;
    let n_layer = model.weights.layers.len();
    for (il, lw) in model.weights.layers.iter().enumerate() {
        // Only the last token's logits are needed: the last block drops the other rows
        // after its attention.
        let last_row_only = il + 1 == n_layer && t > 1 && !all_outputs;
        let (ffn_inp, rows) = b.attention_block(g, kv, il, lw, inp_l, last_row_only)?;
        inp_l = b.ffn_block(g, il, lw, ffn_inp, rows)?;
    }
    let n_out = if all_outputs { t } else { 1 };
    let logits = b.output_head(g, inp_l, n_out)?;
    g.mark_output(logits);
    Ok(BatchNodes {
        inp_embd,
        inp_pos,
        inp_out_ids,
        logits,
        n_out,
    })
}

/// How an architecture's block departs from the LLaMA one, as data the builder reads:
/// Gemma 2's switches (the LLaMA block has none of them). The others (Q/K/V biases,
/// post-norms, experts) follow from which weights the model has.
struct Style {
    /// Factor on the token embeddings (`inp_scaled`).
    embd_scale: Option<f32>,
    /// Factor on Q after RoPE (`Qcur_scaled`).
    q_scale: Option<f32>,
    /// Factor on the attention scores inside their softmax.
    kq_scale: f32,
    /// Soft-cap of the attention scores.
    attn_softcap: Option<f32>,
    /// Sliding window of the even layers (0: every layer attends to every position).
    even_window: u32,
    /// Name of the sum of the attention's output and the block's input.
    attn_sum: &'static str,
    /// The FFN's gated activation.
    ffn_act: OpType,
    /// Name of the output product (before the final soft-cap, if any).
    output: &'static str,
    /// Soft-cap of the logits.
    final_softcap: Option<f32>,
}

impl Style {
    fn of(cfg: &ModelConfig) -> Style {
        match &cfg.gemma {
            // Gemma scales Q after RoPE instead (its own factor), and the scores' softmax
            // by 1.
            Some(gm) => Style {
                embd_scale: Some((cfg.n_embd as f32).sqrt()),
                q_scale: Some(gm.q_scale),
                kq_scale: 1.0,
                attn_softcap: Some(gm.attn_softcap),
                even_window: gm.sliding_window,
                attn_sum: "sa_out",
                ffn_act: OpType::GeGlu,
                output: "result_output_raw",
                final_softcap: Some(gm.final_softcap),
            },
            None => Style {
                embd_scale: None,
                q_scale: None,
                kq_scale: 1.0 / (cfg.head_dim as f32).sqrt(),
                attn_softcap: None,
                even_window: 0,
                attn_sum: "ffn_inp",
                ffn_act: OpType::SwiGlu,
                output: "result_output",
                final_softcap: None,
            },
        }
    }
}

/// One batch's graph being built: the model, the batch, and the inputs every block reads.
struct Batch<'a> {
    cfg: &'a ModelConfig,
    weights: &'a Weights,
    style: Style,
    /// Tokens in the batch.
    t: usize,
    /// Position of its first token.
    pos: usize,
    /// KV positions attended over ([`attended_positions`]).
    n_kv: usize,
    /// RMSNorm epsilon (bits).
    eps: u32,
    /// RoPE op params: mode, rotated dimensions, base, frequency scale.
    rope: [u32; 4],
    inp_pos: NodeAddr,
    inp_out_ids: NodeAddr,
}

/// A block's KV-cache nodes: this batch's stores and the views attention reads.
struct CacheNodes {
    k_store: NodeAddr,
    v_store: NodeAddr,
    k_view: NodeAddr,
    v_view: NodeAddr,
}

impl Batch<'_> {
    /// The input of the first block: the token embeddings, scaled where the
    /// architecture scales them.
    fn input_embedding(&self, g: &mut Graph, inp_embd: NodeAddr) -> Result<NodeAddr, EngineError> {
        let Some(scale) = self.style.embd_scale else {
            return Ok(inp_embd);
        };
        let shape = ne(self.cfg.n_embd, self.t);
        Layer::NONE.f32(
            g,
            OpType::Scale,
            "inp_scaled",
            shape,
            &[inp_embd],
            &[scale.to_bits()],
        )
    }

    /// Block `il`'s attention half over its input `inp`: Q/K/V, RoPE, the KV cache,
    /// attention and its output. Returns the FFN's input and its rows (1 with
    /// `last_row_only`, else the batch's).
    fn attention_block(
        &self,
        g: &mut Graph,
        kv: &mut KvCache,
        il: usize,
        lw: &LayerWeights,
        inp: NodeAddr,
        last_row_only: bool,
    ) -> Result<(NodeAddr, usize), EngineError> {
        let l = Layer::of(il);
        let (q, k, v) = self.qkv(g, l, lw, inp)?;
        let (q, k) = self.rope_qk(g, l, q, k)?;
        let cache = self.store_kv(g, kv, il, k, v)?;
        let kqv = self.attention(g, il, q, &cache)?;
        self.attention_out(g, l, lw, kqv, inp, last_row_only)
    }

    /// The attention norm and the Q, K and V projections (with their biases, where the
    /// model has them).
    fn qkv(
        &self,
        g: &mut Graph,
        l: Layer,
        lw: &LayerWeights,
        inp: NodeAddr,
    ) -> Result<(NodeAddr, NodeAddr, NodeAddr), EngineError> {
        let (e, t) = (self.cfg.n_embd, self.t);
        let (eq, ekv) = (self.cfg.n_embd_q(), self.cfg.n_embd_kv());
        let names = ["norm", "attn_norm"];
        let cur = weighted_rms_norm(g, l, inp, lw.attn_norm, self.eps, names, ne(e, t))?;
        let project = |g: &mut Graph, name: &str, w: NodeAddr, width: usize| {
            l.f32(g, OpType::MulMat, name, ne(width, t), &[w, cur], &mm(t, e))
        };
        let mut q = project(g, "Qcur", lw.wq, eq)?;
        let mut k = project(g, "Kcur", lw.wk, ekv)?;
        let mut v = project(g, "Vcur", lw.wv, ekv)?;
        if let (Some(bq), Some(bk), Some(bv)) = (lw.bq, lw.bk, lw.bv) {
            let bias = |g: &mut Graph, name: &str, x: NodeAddr, b: NodeAddr, width: usize| {
                l.f32(g, OpType::Add, name, ne(width, t), &[x, b], &[])
            };
            q = bias(g, "Qcur_bias", q, bq, eq)?;
            k = bias(g, "Kcur_bias", k, bk, ekv)?;
            v = bias(g, "Vcur_bias", v, bv, ekv)?;
        }
        Ok((q, k, v))
    }

    /// RoPE on Q and K, Q scaled after it where the architecture scales it.
    fn rope_qk(
        &self,
        g: &mut Graph,
        l: Layer,
        q: NodeAddr,
        k: NodeAddr,
    ) -> Result<(NodeAddr, NodeAddr), EngineError> {
        let (hd, t) = (self.cfg.head_dim, self.t);
        let q_shape = ne3(hd, self.cfg.n_head, t);
        let mut q = l.f32(
            g,
            OpType::Rope,
            "Qcur_rope",
            q_shape,
            &[q, self.inp_pos],
            &self.rope,
        )?;
        if let Some(scale) = self.style.q_scale {
            q = l.f32(
                g,
                OpType::Scale,
                "Qcur_scaled",
                q_shape,
                &[q],
                &[scale.to_bits()],
            )?;
        }
        let k_shape = ne3(hd, self.cfg.n_head_kv, t);
        let k = l.f32(
            g,
            OpType::Rope,
            "Kcur_rope",
            k_shape,
            &[k, self.inp_pos],
            &self.rope,
        )?;
        Ok((q, k))
    }

    /// Stores this batch's K and V into layer `il`'s cache and views the `n_kv` attended
    /// positions of it.
    fn store_kv(
        &self,
        g: &mut Graph,
        kv: &mut KvCache,
        il: usize,
        k: NodeAddr,
        v: NodeAddr,
    ) -> Result<CacheNodes, EngineError> {
        let l = Layer::of(il);
        let (t, n_kv) = (self.t, self.n_kv);
        let (hd, nkv, ekv) = (self.cfg.head_dim, self.cfg.n_head_kv, self.cfg.n_embd_kv());
        let fetch = self.kv_fetch(g, kv, l)?;
        let after_fetch = |x: NodeAddr| -> Vec<NodeAddr> { [x].into_iter().chain(fetch).collect() };
        let (k_base, v_base) = (kv.k_ptr(il), kv.v_ptr(il));
        let (k_row, v_row) = (kv.k_row_bytes(), kv.v_row_bytes());
        let f16 = |shape, strides, data: *mut u8| ExternalTensor {
            dtype: DType::F16,
            ne: shape,
            nb: strides,
            data,
        };
        let k_store = g.op_into(
            OpType::Cpy,
            &l.name("k_cache_store"),
            l.index(),
            f16(
                ne(ekv, t),
                [2, k_row, k_row * t as u64, k_row * t as u64],
                k_base.wrapping_add(self.pos * k_row as usize),
            ),
            &after_fetch(k),
            NODE_FLAG_KV_CACHE,
        )?;
        let v_store = g.op_into(
            OpType::Cpy,
            &l.name("v_cache_store"),
            l.index(),
            f16(
                ne(ekv, t),
                [v_row, 2, v_row * ekv as u64, v_row * ekv as u64],
                v_base.wrapping_add(self.pos * 2),
            ),
            &after_fetch(v),
            NODE_FLAG_KV_CACHE,
        )?;
        let k_view = g.leaf_external(
            &format!("cache_k_l{il}"),
            f16(
                ne3(hd, n_kv, nkv),
                [2, k_row, (hd * 2) as u64, k_row * n_kv as u64],
                k_base,
            ),
            NODE_FLAG_KV_CACHE,
        )?;
        let v_view = g.leaf_external(
            &format!("cache_v_l{il}"),
            f16(
                ne3(n_kv, hd, nkv),
                [2, v_row, v_row * hd as u64, v_row * ekv as u64],
                v_base,
            ),
            NODE_FLAG_KV_CACHE,
        )?;
        Ok(CacheNodes {
            k_store,
            v_store,
            k_view,
            v_view,
        })
    }

    /// Under a KV budget, the node that makes the layer's cache chunks resident first.
    fn kv_fetch(
        &self,
        g: &mut Graph,
        kv: &KvCache,
        l: Layer,
    ) -> Result<Option<NodeAddr>, EngineError> {
        let Some(state) = kv.swap_state() else {
            return Ok(None);
        };
        let state = ExternalTensor {
            dtype: DType::F32,
            ne: [1, 1, 1, 1],
            nb: [4, 4, 4, 4],
            data: state,
        };
        let f = g.op_into(
            OpType::KvFetch,
            &l.name("kv_fetch"),
            l.index(),
            state,
            &[],
            NODE_FLAG_KV_CACHE,
        )?;
        // Only positions holding data: the padding up to n_kv is masked out.
        g.set_op_params(f, &[(self.pos + self.t) as u32]);
        Ok(Some(f))
    }

    /// Attention of block `il` over the `n_kv` cached positions: the scores (soft-capped
    /// where the architecture caps them), their softmax (within the sliding window on
    /// the even layers of an architecture that has one) and the weighted sum of V.
    fn attention(
        &self,
        g: &mut Graph,
        il: usize,
        q: NodeAddr,
        c: &CacheNodes,
    ) -> Result<NodeAddr, EngineError> {
        let l = Layer::of(il);
        let (t, n_kv) = (self.t, self.n_kv);
        let (hd, nh) = (self.cfg.head_dim, self.cfg.n_head as u32);
        let scores = ne3(n_kv, t, nh as usize);
        let kq_params = [LAYOUT_HEADS_INNER, LAYOUT_ROWS, t as u32, nh, hd as u32];
        let mut kq = l.f32(
            g,
            OpType::MulMat,
            "kq",
            scores,
            &[c.k_view, q, c.k_store],
            &kq_params,
        )?;
        if let Some(cap) = self.style.attn_softcap {
            let names = ["kq_scaled_1", "kq_tanh", "kq_scaled_2"];
            kq = softcap(g, l, kq, cap, names, scores)?;
        }
        // Even layers attend within the sliding window, odd ones globally.
        let window = if il.is_multiple_of(2) {
            self.style.even_window
        } else {
            0
        };
        let soft_max = [self.style.kq_scale.to_bits(), self.pos as u32, 0, window];
        let kq = l.f32(g, OpType::SoftMax, "kq_soft_max", scores, &[kq], &soft_max)?;
        let kqv_params = [LAYOUT_ROWS, LAYOUT_HEADS_INNER, t as u32, nh, n_kv as u32];
        let srcs = [c.v_view, kq, c.v_store];
        l.f32(
            g,
            OpType::MulMat,
            "kqv_out",
            ne3(hd, nh as usize, t),
            &srcs,
            &kqv_params,
        )
    }

    /// The attention's output projection (post-normed where the model has the weight)
    /// plus the block's input `inp`. With `last_row_only` only the last row goes on, as
    /// llama.cpp does with `inp_out_ids`.
    fn attention_out(
        &self,
        g: &mut Graph,
        l: Layer,
        lw: &LayerWeights,
        kqv: NodeAddr,
        inp: NodeAddr,
        last_row_only: bool,
    ) -> Result<(NodeAddr, usize), EngineError> {
        let (e, t) = (self.cfg.n_embd, self.t);
        let out_params = mm(t, self.cfg.n_embd_q());
        let mut cur = l.f32(
            g,
            OpType::MulMat,
            "attn_out",
            ne(e, t),
            &[lw.wo, kqv],
            &out_params,
        )?;
        let (mut inp, mut rows) = (inp, t);
        if last_row_only {
            let ids = self.inp_out_ids;
            cur = l.f32(
                g,
                OpType::GetRows,
                "attn_out_rows",
                ne(e, 1),
                &[cur, ids],
                &[],
            )?;
            inp = l.f32(
                g,
                OpType::GetRows,
                "inp_sa_rows",
                ne(e, 1),
                &[inp, ids],
                &[],
            )?;
            rows = 1;
        }
        if let Some(post) = lw.post_attn_norm {
            let names = ["norm_attn_post", "attn_post_norm"];
            cur = weighted_rms_norm(g, l, cur, post, self.eps, names, ne(e, rows))?;
        }
        let sum = l.f32(
            g,
            OpType::Add,
            self.style.attn_sum,
            ne(e, rows),
            &[cur, inp],
            &[],
        )?;
        Ok((sum, rows))
    }

    /// Block `il`'s FFN half over `ffn_inp` (`rows` rows): norm, the dense FFN or the
    /// mixture of experts (post-normed where the model has the weight), plus its input.
    fn ffn_block(
        &self,
        g: &mut Graph,
        il: usize,
        lw: &LayerWeights,
        ffn_inp: NodeAddr,
        rows: usize,
    ) -> Result<NodeAddr, EngineError> {
        let l = Layer::of(il);
        let e = self.cfg.n_embd;
        let names = ["norm_ffn", "ffn_norm"];
        let cur = weighted_rms_norm(g, l, ffn_inp, lw.ffn_norm, self.eps, names, ne(e, rows))?;
        let x = FfnInput {
            cur,
            n_embd: e,
            rows,
            layer: il,
        };
        let act = self.style.ffn_act;
        let mut down = match (&lw.ffn, &self.cfg.experts) {
            (FfnWeights::Dense(w), _) => ffn::gated_ffn(g, x, *w, self.cfg.n_ff, act, "")?,
            (FfnWeights::Experts(w), Some(xc)) => ffn::moe_ffn(g, x, *w, xc)?,
            (FfnWeights::Experts(_), None) => {
                unreachable!("expert weights are loaded only with an expert config")
            }
        };
        if let Some(post) = lw.post_ffw_norm {
            let names = ["norm_ffn_post", "ffn_post_norm"];
            down = weighted_rms_norm(g, l, down, post, self.eps, names, ne(e, rows))?;
        }
        l.f32(g, OpType::Add, "l_out", ne(e, rows), &[down, ffn_inp], &[])
    }

    /// The output head over the last block's output `inp`: the final norm and the
    /// output product (soft-capped where the architecture caps it), `n_out` rows of logits.
    fn output_head(
        &self,
        g: &mut Graph,
        inp: NodeAddr,
        n_out: usize,
    ) -> Result<NodeAddr, EngineError> {
        let (e, w, l) = (self.cfg.n_embd, self.weights, Layer::NONE);
        let names = ["norm", "result_norm"];
        let cur = weighted_rms_norm(g, l, inp, w.output_norm, self.eps, names, ne(e, n_out))?;
        let shape = ne(self.cfg.n_vocab, n_out);
        let out_params = mm(n_out, e);
        let logits = l.f32(
            g,
            OpType::MulMat,
            self.style.output,
            shape,
            &[w.output, cur],
            &out_params,
        )?;
        match self.style.final_softcap {
            Some(cap) => {
                let names = [
                    "result_output_scaled",
                    "result_output_tanh",
                    "result_output",
                ];
                softcap(g, l, logits, cap, names, shape)
            }
            None => Ok(logits),
        }
    }
}

/// `cap · tanh(x / cap)`: Gemma 2's soft-cap as llama.cpp builds it — a multiply by the
/// f32 `1/cap`, `tanh`, a multiply by `cap` — three nodes of layer `l` named `names`.
fn softcap(
    g: &mut Graph,
    l: Layer,
    x: NodeAddr,
    cap: f32,
    names: [&str; 3],
    shape: [i64; 4],
) -> Result<NodeAddr, EngineError> {
    let down = l.f32(
        g,
        OpType::Scale,
        names[0],
        shape,
        &[x],
        &[(1.0f32 / cap).to_bits()],
    )?;
    let tanh = l.f32(g, OpType::Tanh, names[1], shape, &[down], &[])?;
    l.f32(g, OpType::Scale, names[2], shape, &[tanh], &[cap.to_bits()])
}

/// `rms_norm(x) · weight` as two nodes of layer `l` named `names` (every norm of the
/// graph: before attention, before the FFN, Gemma 2's post-norms, before the output).
fn weighted_rms_norm(
    g: &mut Graph,
    l: Layer,
    x: NodeAddr,
    weight: NodeAddr,
    eps: u32,
    names: [&str; 2],
    shape: [i64; 4],
) -> Result<NodeAddr, EngineError> {
    let n = l.f32(g, OpType::RmsNorm, names[0], shape, &[x], &[eps])?;
    l.f32(g, OpType::Mul, names[1], shape, &[n, weight], &[])
}
