//! The FFN half of a block: a gated (SwiGLU) FFN, or a mixture of experts as llama.cpp's
//! `build_moe_ffn` builds it — router logits, softmax, top-k, the selected experts'
//! weights (renormalised for Mixtral), expert-indexed gate/up/down products, weighting
//! and the sum over experts — plus Qwen-MoE's gated shared expert. Node names are
//! llama.cpp's (`ffn_moe_logits-3`, `ffn_moe_topk-3`, `ffn_moe_up-3`, ...).

use common::DType;
use common::engine_abi::{GET_ROWS_PER_TOKEN, OpType, SOFT_MAX_UNMASKED};

use super::config::ExpertConfig;
use super::weights::{ExpertWeights, GatedFfn};
use crate::error::EngineError;
use crate::graph::{Graph, NodeAddr};
use crate::ops::mul_mat::LAYOUT_ROWS;

fn ne(a: usize, b: usize) -> [i64; 4] {
    [a as i64, b as i64, 1, 1]
}

fn ne3(a: usize, b: usize, c: usize) -> [i64; 4] {
    [a as i64, b as i64, c as i64, 1]
}

/// `MUL_MAT` op params for `rows` rows of `k` (see `ops::mul_mat`).
fn mm(rows: usize, k: usize) -> [u32; 5] {
    [LAYOUT_ROWS, LAYOUT_ROWS, rows as u32, 1, k as u32]
}

/// A block's FFN input and where its nodes go.
#[derive(Clone, Copy, Debug)]
pub struct FfnInput {
    /// The normed input `[n_embd, rows]`.
    pub cur: NodeAddr,
    /// Hidden size.
    pub n_embd: usize,
    /// Rows (tokens) of `cur`.
    pub rows: usize,
    /// Layer index.
    pub layer: usize,
}

/// `down(act(gate·x, up·x))`, `n_ff` wide, with `act` [`OpType::SwiGlu`] or
/// [`OpType::GeGlu`]; `suffix` tells the shared expert's nodes (`_shexp`) from a dense
/// FFN's.
pub fn gated_ffn(
    g: &mut Graph,
    x: FfnInput,
    w: GatedFfn,
    n_ff: usize,
    act: OpType,
    suffix: &str,
) -> Result<NodeAddr, EngineError> {
    let (e, rows, il) = (x.n_embd, x.rows, x.layer);
    let l = il as i32;
    let name = |s: &str| format!("{s}{suffix}-{il}");
    let gate = g.op(
        OpType::MulMat,
        &name("ffn_gate"),
        l,
        DType::F32,
        ne(n_ff, rows),
        &[w.gate, x.cur],
        &mm(rows, e),
    )?;
    let up = g.op(
        OpType::MulMat,
        &name("ffn_up"),
        l,
        DType::F32,
        ne(n_ff, rows),
        &[w.up, x.cur],
        &mm(rows, e),
    )?;
    let act_name = if act == OpType::GeGlu {
        "ffn_geglu"
    } else {
        "ffn_swiglu"
    };
    let act = g.op(
        act,
        &name(act_name),
        l,
        DType::F32,
        ne(n_ff, rows),
        &[gate, up],
        &[],
    )?;
    let down_name = if suffix.is_empty() {
        name("ffn_out")
    } else {
        name("ffn_down")
    };
    g.op(
        OpType::MulMat,
        &down_name,
        l,
        DType::F32,
        ne(e, rows),
        &[w.down, act],
        &mm(rows, n_ff),
    )
}

/// The mixture-of-experts FFN of one block; returns `ffn_out` `[n_embd, rows]` (with the
/// shared expert added when there is one).
pub fn moe_ffn(
    g: &mut Graph,
    x: FfnInput,
    w: ExpertWeights,
    cfg: &ExpertConfig,
) -> Result<NodeAddr, EngineError> {
    let (e, t, il) = (x.n_embd, x.rows, x.layer);
    let l = il as i32;
    let (n_expert, k, ff) = (cfg.n_expert, cfg.n_used, cfg.n_ff_exp);
    let name = |s: &str| format!("{s}-{il}");
    let logits = g.op(
        OpType::MulMat,
        &name("ffn_moe_logits"),
        l,
        DType::F32,
        ne(n_expert, t),
        &[w.router, x.cur],
        &mm(t, e),
    )?;
    let probs = g.op(
        OpType::SoftMax,
        &name("ffn_moe_probs"),
        l,
        DType::F32,
        ne(n_expert, t),
        &[logits],
        &[1.0f32.to_bits(), 0, SOFT_MAX_UNMASKED],
    )?;
    let topk = g.op(
        OpType::TopK,
        &name("ffn_moe_topk"),
        l,
        DType::I32,
        ne(k, t),
        &[probs],
        &[],
    )?;
    let mut weights = g.op(
        OpType::GetRows,
        &name("ffn_moe_weights"),
        l,
        DType::F32,
        ne(k, t),
        &[probs, topk],
        &[GET_ROWS_PER_TOKEN],
    )?;
    if cfg.normalize_weights {
        let sum = g.op(
            OpType::SumRows,
            &name("ffn_moe_weights_sum"),
            l,
            DType::F32,
            ne(1, t),
            &[weights],
            &[],
        )?;
        // llama.cpp: "avoid division by zero, clamp to smallest number representable by F16".
        let sum = g.op(
            OpType::Clamp,
            &name("ffn_moe_weights_sum_clamped"),
            l,
            DType::F32,
            ne(1, t),
            &[sum],
            &[6.103_515_6e-5_f32.to_bits(), f32::INFINITY.to_bits()],
        )?;
        weights = g.op(
            OpType::Div,
            &name("ffn_moe_weights_norm"),
            l,
            DType::F32,
            ne(k, t),
            &[weights, sum],
            &[],
        )?;
    }
    // MUL_MAT_ID op params: S, k, T, E, K (see ops::mul_mat_id).
    let id_params =
        |s: usize, inner: usize| [s as u32, k as u32, t as u32, n_expert as u32, inner as u32];
    let up = g.op(
        OpType::MulMatId,
        &name("ffn_moe_up"),
        l,
        DType::F32,
        ne3(ff, k, t),
        &[w.up_exps, x.cur, topk, weights],
        &id_params(1, e),
    )?;
    let gate = g.op(
        OpType::MulMatId,
        &name("ffn_moe_gate"),
        l,
        DType::F32,
        ne3(ff, k, t),
        &[w.gate_exps, x.cur, topk, weights],
        &id_params(1, e),
    )?;
    let act = g.op(
        OpType::SwiGlu,
        &name("ffn_moe_swiglu"),
        l,
        DType::F32,
        ne3(ff, k, t),
        &[gate, up],
        &[],
    )?;
    let down = g.op(
        OpType::MulMatId,
        &name("ffn_moe_down"),
        l,
        DType::F32,
        ne3(e, k, t),
        &[w.down_exps, act, topk, weights],
        &id_params(k, ff),
    )?;
    let weighted = g.op(
        OpType::Mul,
        &name("ffn_moe_weighted"),
        l,
        DType::F32,
        ne3(e, k, t),
        &[down, weights],
        &[],
    )?;
    let moe_out = g.op(
        OpType::MoeSum,
        &name("ffn_moe_out"),
        l,
        DType::F32,
        ne(e, t),
        &[weighted],
        &[],
    )?;
    let Some((shared, gate_inp)) = w.shared else {
        return Ok(moe_out);
    };
    // The shared expert, scaled by sigmoid(gate_inp · x), which llama.cpp computes as
    // silu(v) / v.
    let gate_logit = g.op(
        OpType::MulMat,
        &name("ffn_shexp_gate_inp"),
        l,
        DType::F32,
        ne(1, t),
        &[gate_inp, x.cur],
        &mm(t, e),
    )?;
    let silu = g.op(
        OpType::Silu,
        &name("ffn_shexp_gate_silu"),
        l,
        DType::F32,
        ne(1, t),
        &[gate_logit],
        &[],
    )?;
    let sigmoid = g.op(
        OpType::Div,
        &name("ffn_shexp_gate"),
        l,
        DType::F32,
        ne(1, t),
        &[silu, gate_logit],
        &[],
    )?;
    let shexp = gated_ffn(g, x, shared, cfg.n_ff_shexp, OpType::SwiGlu, "_shexp")?;
    let shexp_out = g.op(
        OpType::Mul,
        &name("ffn_shexp_out"),
        l,
        DType::F32,
        ne(e, t),
        &[shexp, sigmoid],
        &[],
    )?;
    g.op(
        OpType::Add,
        &name("ffn_out"),
        l,
        DType::F32,
        ne(e, t),
        &[moe_out, shexp_out],
        &[],
    )
}
