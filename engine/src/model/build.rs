//! Builds the graph of one forward pass over a batch, for every architecture: the
//! pre-norm transformer block with the switches of [`ArchSpec`](super::arch::ArchSpec).
//! Node names follow llama.cpp (`attn_norm-3`, `Qcur-3`, `kq-3`, `ffn_out-3`, ...), so a
//! trace reads the same as one of llama.cpp.

use common::DType;
use common::engine_abi::{NODE_FLAG_KV_CACHE, OpType};

use super::Model;
use super::ffn::{self, FfnInput};
use super::weights::FfnWeights;
use crate::error::EngineError;
use crate::graph::{Graph, NodeAddr};
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

fn ne(a: usize, b: usize) -> [i64; 4] {
    [a as i64, b as i64, 1, 1]
}

fn ne3(a: usize, b: usize, c: usize) -> [i64; 4] {
    [a as i64, b as i64, c as i64, 1]
}

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
    let w = &model.weights;
    let (e, hd, nh, nkv) = (cfg.n_embd, cfg.head_dim, cfg.n_head, cfg.n_head_kv);
    let ekv = cfg.n_embd_kv();
    let eq = cfg.n_embd_q();
    let t = n_tokens;
    let n_kv = attended_positions(pos + n_tokens, kv.n_ctx());
    let eps = cfg.rms_eps.to_bits();
    let rope = [
        cfg.arch.rope_mode,
        cfg.rope_dims as u32,
        cfg.rope_base.to_bits(),
        1.0f32.to_bits(),
    ];
    // Gemma scales Q after RoPE instead (its own factor), and the scores' softmax by 1.
    let kq_scale = match &cfg.gemma {
        Some(_) => 1.0f32.to_bits(),
        None => (1.0 / (hd as f32).sqrt()).to_bits(),
    };
    // MUL_MAT op params: src1 layout, dst layout, M, H, K (see ops::mul_mat).
    let mm =
        |m: usize, h: usize, k: usize| [LAYOUT_ROWS, LAYOUT_ROWS, m as u32, h as u32, k as u32];

    let inp_embd = g.leaf_input("inp_embd", DType::F32, ne(e, t))?;
    let inp_pos = g.leaf_input("inp_pos", DType::I32, ne(t, 1))?;
    let inp_out_ids = g.leaf_input("inp_out_ids", DType::I32, ne(1, 1))?;

    let mut inp_l = inp_embd;
    if cfg.gemma.is_some() {
        inp_l = g.op(
            OpType::Scale,
            "inp_scaled",
            -1,
            DType::F32,
            ne(e, t),
            &[inp_embd],
            &[(e as f32).sqrt().to_bits()],
        )?;
    }
    for (il, lw) in w.layers.iter().enumerate() {
        let l = il as i32;
        let name = |s: &str| format!("{s}-{il}");
        let inp_sa = inp_l;
        let cur = g.op(
            OpType::RmsNorm,
            &name("norm"),
            l,
            DType::F32,
            ne(e, t),
            &[inp_l],
            &[eps],
        )?;
        let cur = g.op(
            OpType::Mul,
            &name("attn_norm"),
            l,
            DType::F32,
            ne(e, t),
            &[cur, lw.attn_norm],
            &[],
        )?;

        let mut q = g.op(
            OpType::MulMat,
            &name("Qcur"),
            l,
            DType::F32,
            ne(eq, t),
            &[lw.wq, cur],
            &mm(t, 1, e),
        )?;
        let mut k = g.op(
            OpType::MulMat,
            &name("Kcur"),
            l,
            DType::F32,
            ne(ekv, t),
            &[lw.wk, cur],
            &mm(t, 1, e),
        )?;
        let mut v = g.op(
            OpType::MulMat,
            &name("Vcur"),
            l,
            DType::F32,
            ne(ekv, t),
            &[lw.wv, cur],
            &mm(t, 1, e),
        )?;
        if let (Some(bq), Some(bk), Some(bv)) = (lw.bq, lw.bk, lw.bv) {
            q = g.op(
                OpType::Add,
                &name("Qcur_bias"),
                l,
                DType::F32,
                ne(eq, t),
                &[q, bq],
                &[],
            )?;
            k = g.op(
                OpType::Add,
                &name("Kcur_bias"),
                l,
                DType::F32,
                ne(ekv, t),
                &[k, bk],
                &[],
            )?;
            v = g.op(
                OpType::Add,
                &name("Vcur_bias"),
                l,
                DType::F32,
                ne(ekv, t),
                &[v, bv],
                &[],
            )?;
        }
        let mut q = g.op(
            OpType::Rope,
            &name("Qcur_rope"),
            l,
            DType::F32,
            ne3(hd, nh, t),
            &[q, inp_pos],
            &rope,
        )?;
        if let Some(gm) = &cfg.gemma {
            q = g.op(
                OpType::Scale,
                &name("Qcur_scaled"),
                l,
                DType::F32,
                ne3(hd, nh, t),
                &[q],
                &[gm.q_scale.to_bits()],
            )?;
        }
        let k = g.op(
            OpType::Rope,
            &name("Kcur_rope"),
            l,
            DType::F32,
            ne3(hd, nkv, t),
            &[k, inp_pos],
            &rope,
        )?;

        // Under a KV budget, the layer's cache chunks are made resident first.
        let fetch = match kv.swap_state() {
            Some(state) => {
                let f = g.op_into(
                    OpType::KvFetch,
                    &name("kv_fetch"),
                    l,
                    DType::F32,
                    [1, 1, 1, 1],
                    [4, 4, 4, 4],
                    state as *mut u8,
                    &[],
                    NODE_FLAG_KV_CACHE,
                )?;
                // Only positions holding data: the padding up to n_kv is masked out.
                g.set_op_params(f, &[(pos + n_tokens) as u32]);
                Some(f)
            }
            None => None,
        };
        let after_fetch = |x: NodeAddr| -> Vec<NodeAddr> { [x].into_iter().chain(fetch).collect() };

        // Store this batch's K and V into the cache.
        let (k_base, v_base) = (kv.k_ptr(il), kv.v_ptr(il));
        let (k_row, v_row) = (kv.k_row_bytes(), kv.v_row_bytes());
        let k_store = g.op_into(
            OpType::Cpy,
            &name("k_cache_store"),
            l,
            DType::F16,
            ne(ekv, t),
            [2, k_row, k_row * t as u64, k_row * t as u64],
            k_base.wrapping_add(pos * k_row as usize),
            &after_fetch(k),
            NODE_FLAG_KV_CACHE,
        )?;
        let v_store = g.op_into(
            OpType::Cpy,
            &name("v_cache_store"),
            l,
            DType::F16,
            ne(ekv, t),
            [v_row, 2, v_row * ekv as u64, v_row * ekv as u64],
            v_base.wrapping_add(pos * 2),
            &after_fetch(v),
            NODE_FLAG_KV_CACHE,
        )?;

        // Attention over the n_kv cached positions.
        let k_view = g.leaf_external(
            &format!("cache_k_l{il}"),
            DType::F16,
            ne3(hd, n_kv, nkv),
            [2, k_row, (hd * 2) as u64, k_row * n_kv as u64],
            k_base,
            NODE_FLAG_KV_CACHE,
        )?;
        let v_view = g.leaf_external(
            &format!("cache_v_l{il}"),
            DType::F16,
            ne3(n_kv, hd, nkv),
            [2, v_row, v_row * hd as u64, v_row * ekv as u64],
            v_base,
            NODE_FLAG_KV_CACHE,
        )?;
        let kq = g.op(
            OpType::MulMat,
            &name("kq"),
            l,
            DType::F32,
            ne3(n_kv, t, nh),
            &[k_view, q, k_store],
            &[
                LAYOUT_HEADS_INNER,
                LAYOUT_ROWS,
                t as u32,
                nh as u32,
                hd as u32,
            ],
        )?;
        let mut kq = kq;
        let mut window = 0;
        if let Some(gm) = &cfg.gemma {
            let names = [name("kq_scaled_1"), name("kq_tanh"), name("kq_scaled_2")];
            kq = softcap(g, kq, gm.attn_softcap, &names, l, ne3(n_kv, t, nh))?;
            // Even layers attend within a sliding window, odd ones globally.
            if il % 2 == 0 {
                window = gm.sliding_window;
            }
        }
        let kq = g.op(
            OpType::SoftMax,
            &name("kq_soft_max"),
            l,
            DType::F32,
            ne3(n_kv, t, nh),
            &[kq],
            &[kq_scale, pos as u32, 0, window],
        )?;
        let kqv = g.op(
            OpType::MulMat,
            &name("kqv_out"),
            l,
            DType::F32,
            ne3(hd, nh, t),
            &[v_view, kq, v_store],
            &[
                LAYOUT_ROWS,
                LAYOUT_HEADS_INNER,
                t as u32,
                nh as u32,
                n_kv as u32,
            ],
        )?;
        let mut cur = g.op(
            OpType::MulMat,
            &name("attn_out"),
            l,
            DType::F32,
            ne(e, t),
            &[lw.wo, kqv],
            &mm(t, 1, eq),
        )?;
        let mut inp_sa = inp_sa;
        let mut rows = t;
        if il + 1 == w.layers.len() && t > 1 && !all_outputs {
            // Only the last token's logits are needed: drop the other rows here, as
            // llama.cpp does with `inp_out_ids`.
            cur = g.op(
                OpType::GetRows,
                &name("attn_out_rows"),
                l,
                DType::F32,
                ne(e, 1),
                &[cur, inp_out_ids],
                &[],
            )?;
            inp_sa = g.op(
                OpType::GetRows,
                &name("inp_sa_rows"),
                l,
                DType::F32,
                ne(e, 1),
                &[inp_sa, inp_out_ids],
                &[],
            )?;
            rows = 1;
        }
        if let Some(post) = lw.post_attn_norm {
            let names = [name("norm_attn_post"), name("attn_post_norm")];
            cur = weighted_rms_norm(g, cur, post, eps, &names, l, ne(e, rows))?;
        }
        let ffn_inp = g.op(
            OpType::Add,
            &name(if cfg.gemma.is_some() {
                "sa_out"
            } else {
                "ffn_inp"
            }),
            l,
            DType::F32,
            ne(e, rows),
            &[cur, inp_sa],
            &[],
        )?;

        let cur = g.op(
            OpType::RmsNorm,
            &name("norm_ffn"),
            l,
            DType::F32,
            ne(e, rows),
            &[ffn_inp],
            &[eps],
        )?;
        let cur = g.op(
            OpType::Mul,
            &name("ffn_norm"),
            l,
            DType::F32,
            ne(e, rows),
            &[cur, lw.ffn_norm],
            &[],
        )?;
        let x = FfnInput {
            cur,
            n_embd: e,
            rows,
            layer: il,
        };
        let act = if cfg.gemma.is_some() {
            OpType::GeGlu
        } else {
            OpType::SwiGlu
        };
        let mut down = match (&lw.ffn, &cfg.experts) {
            (FfnWeights::Dense(w), _) => ffn::gated_ffn(g, x, *w, cfg.n_ff, act, "")?,
            (FfnWeights::Experts(w), Some(xc)) => ffn::moe_ffn(g, x, *w, xc)?,
            (FfnWeights::Experts(_), None) => {
                unreachable!("expert weights are loaded only with an expert config")
            }
        };
        if let Some(post) = lw.post_ffw_norm {
            let names = [name("norm_ffn_post"), name("ffn_post_norm")];
            down = weighted_rms_norm(g, down, post, eps, &names, l, ne(e, rows))?;
        }
        inp_l = g.op(
            OpType::Add,
            &name("l_out"),
            l,
            DType::F32,
            ne(e, rows),
            &[down, ffn_inp],
            &[],
        )?;
    }
    let n_out = if all_outputs { t } else { 1 };
    let cur = g.op(
        OpType::RmsNorm,
        "norm",
        -1,
        DType::F32,
        ne(e, n_out),
        &[inp_l],
        &[eps],
    )?;
    let cur = g.op(
        OpType::Mul,
        "result_norm",
        -1,
        DType::F32,
        ne(e, n_out),
        &[cur, w.output_norm],
        &[],
    )?;
    let out_name = if cfg.gemma.is_some() {
        "result_output_raw"
    } else {
        "result_output"
    };
    let mut logits = g.op(
        OpType::MulMat,
        out_name,
        -1,
        DType::F32,
        ne(cfg.n_vocab, n_out),
        &[w.output, cur],
        &mm(n_out, 1, e),
    )?;
    if let Some(gm) = &cfg.gemma {
        let names = [
            "result_output_scaled".to_owned(),
            "result_output_tanh".to_owned(),
            "result_output".to_owned(),
        ];
        logits = softcap(
            g,
            logits,
            gm.final_softcap,
            &names,
            -1,
            ne(cfg.n_vocab, n_out),
        )?;
    }
    g.mark_output(logits);
    Ok(BatchNodes {
        inp_embd,
        inp_pos,
        inp_out_ids,
        logits,
        n_out,
    })
}

/// `cap · tanh(x / cap)`: Gemma 2's soft-cap as llama.cpp builds it — a multiply by the
/// f32 `1/cap`, `tanh`, a multiply by `cap` — three nodes named `names`.
fn softcap(
    g: &mut Graph,
    x: NodeAddr,
    cap: f32,
    names: &[String; 3],
    layer: i32,
    shape: [i64; 4],
) -> Result<NodeAddr, EngineError> {
    let down = g.op(
        OpType::Scale,
        &names[0],
        layer,
        DType::F32,
        shape,
        &[x],
        &[(1.0f32 / cap).to_bits()],
    )?;
    let tanh = g.op(
        OpType::Tanh,
        &names[1],
        layer,
        DType::F32,
        shape,
        &[down],
        &[],
    )?;
    g.op(
        OpType::Scale,
        &names[2],
        layer,
        DType::F32,
        shape,
        &[tanh],
        &[cap.to_bits()],
    )
}

/// `rms_norm(x) · weight` as two nodes named `names` (Gemma 2's post-norms).
fn weighted_rms_norm(
    g: &mut Graph,
    x: NodeAddr,
    weight: NodeAddr,
    eps: u32,
    names: &[String; 2],
    layer: i32,
    shape: [i64; 4],
) -> Result<NodeAddr, EngineError> {
    let n = g.op(
        OpType::RmsNorm,
        &names[0],
        layer,
        DType::F32,
        shape,
        &[x],
        &[eps],
    )?;
    g.op(
        OpType::Mul,
        &names[1],
        layer,
        DType::F32,
        shape,
        &[n, weight],
        &[],
    )
}
