//! The FFN half of a block: a gated (SwiGLU) FFN, or a mixture of experts as llama.cpp's
//! `build_moe_ffn` builds it — router logits, softmax, top-k, the selected experts'
//! weights (renormalised for Mixtral), expert-indexed gate/up/down products, weighting
//! and the sum over experts — plus Qwen-MoE's gated shared expert. Node names are
//! llama.cpp's (`ffn_moe_logits-3`, `ffn_moe_topk-3`, `ffn_moe_up-3`, ...).

use common::DType;
use common::engine_abi::{GET_ROWS_PER_TOKEN, OpType, SOFT_MAX_UNMASKED};

use super::config::ExpertConfig;
use super::nodes::{Layer, mm, ne, ne3};
use super::weights::{ExpertWeights, GatedFfn};
use crate::error::EngineError;
use crate::graph::{Graph, NodeAddr};

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
    let (e, rows, l) = (x.n_embd, x.rows, Layer::of(x.layer));
    let name = |s: &str| format!("{s}{suffix}");
    let inner = ne(n_ff, rows);
    let gate = l.f32(
        g,
        OpType::MulMat,
        &name("ffn_gate"),
        inner,
        &[w.gate, x.cur],
        &mm(rows, e),
    )?;
    let up = l.f32(
        g,
        OpType::MulMat,
        &name("ffn_up"),
        inner,
        &[w.up, x.cur],
        &mm(rows, e),
    )?;
    let act_name = if act == OpType::GeGlu {
        "ffn_geglu"
    } else {
        "ffn_swiglu"
    };
    let act = l.f32(g, act, &name(act_name), inner, &[gate, up], &[])?;
    let down_name = if suffix.is_empty() {
        name("ffn_out")
    } else {
        name("ffn_down")
    };
    l.f32(
        g,
        OpType::MulMat,
        &down_name,
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
    let route = route(g, x, w.router, cfg)?;
    let moe_out = experts(g, x, &w, cfg, route)?;
    let Some((shared, gate_inp)) = w.shared else {
        return Ok(moe_out);
    };
    let shexp_out = shared_expert(g, x, shared, gate_inp, cfg.n_ff_shexp)?;
    let shape = ne(x.n_embd, x.rows);
    let l = Layer::of(x.layer);
    l.f32(g, OpType::Add, "ffn_out", shape, &[moe_out, shexp_out], &[])
}

/// Which experts each token goes to, and with what weight.
#[derive(Clone, Copy, Debug)]
struct Route {
    /// `ffn_moe_topk` `[n_used, rows]` i32: the selected experts.
    topk: NodeAddr,
    /// `[n_used, rows]` f32: their weights.
    weights: NodeAddr,
}

/// The router: logits, softmax, the top `n_used` experts and their probabilities as
/// weights (divided by their sum where the architecture renormalises them).
fn route(
    g: &mut Graph,
    x: FfnInput,
    router: NodeAddr,
    cfg: &ExpertConfig,
) -> Result<Route, EngineError> {
    let (e, t, l) = (x.n_embd, x.rows, Layer::of(x.layer));
    let (n_expert, k) = (cfg.n_expert, cfg.n_used);
    let all = ne(n_expert, t);
    let logits = l.f32(
        g,
        OpType::MulMat,
        "ffn_moe_logits",
        all,
        &[router, x.cur],
        &mm(t, e),
    )?;
    let softmax = [1.0f32.to_bits(), 0, SOFT_MAX_UNMASKED];
    let probs = l.f32(
        g,
        OpType::SoftMax,
        "ffn_moe_probs",
        all,
        &[logits],
        &softmax,
    )?;
    let topk = g.op(
        OpType::TopK,
        &l.name("ffn_moe_topk"),
        l.index(),
        DType::I32,
        ne(k, t),
        &[probs],
        &[],
    )?;
    let per_token = [GET_ROWS_PER_TOKEN];
    let mut weights = l.f32(
        g,
        OpType::GetRows,
        "ffn_moe_weights",
        ne(k, t),
        &[probs, topk],
        &per_token,
    )?;
    if cfg.normalize_weights {
        let sum = l.f32(
            g,
            OpType::SumRows,
            "ffn_moe_weights_sum",
            ne(1, t),
            &[weights],
            &[],
        )?;
        // llama.cpp: "avoid division by zero, clamp to smallest number representable by F16".
        let clamp = [6.103_515_6e-5_f32.to_bits(), f32::INFINITY.to_bits()];
        let sum = l.f32(
            g,
            OpType::Clamp,
            "ffn_moe_weights_sum_clamped",
            ne(1, t),
            &[sum],
            &clamp,
        )?;
        weights = l.f32(
            g,
            OpType::Div,
            "ffn_moe_weights_norm",
            ne(k, t),
            &[weights, sum],
            &[],
        )?;
    }
    Ok(Route { topk, weights })
}

/// The routed experts: expert-indexed gate/up products, SwiGLU, the down product,
/// weighting and the sum over the selected experts (`ffn_moe_out` `[n_embd, rows]`).
fn experts(
    g: &mut Graph,
    x: FfnInput,
    w: &ExpertWeights,
    cfg: &ExpertConfig,
    r: Route,
) -> Result<NodeAddr, EngineError> {
    let (e, t, l) = (x.n_embd, x.rows, Layer::of(x.layer));
    let (n_expert, k, ff) = (cfg.n_expert, cfg.n_used, cfg.n_ff_exp);
    // MUL_MAT_ID op params: S, k, T, E, K (see ops::mul_mat_id).
    let id_params =
        |s: usize, inner: usize| [s as u32, k as u32, t as u32, n_expert as u32, inner as u32];
    let inner = ne3(ff, k, t);
    let up_srcs = [w.up_exps, x.cur, r.topk, r.weights];
    let up = l.f32(
        g,
        OpType::MulMatId,
        "ffn_moe_up",
        inner,
        &up_srcs,
        &id_params(1, e),
    )?;
    let gate_srcs = [w.gate_exps, x.cur, r.topk, r.weights];
    let gate = l.f32(
        g,
        OpType::MulMatId,
        "ffn_moe_gate",
        inner,
        &gate_srcs,
        &id_params(1, e),
    )?;
    let act = l.f32(g, OpType::SwiGlu, "ffn_moe_swiglu", inner, &[gate, up], &[])?;
    let per_expert = ne3(e, k, t);
    let down_srcs = [w.down_exps, act, r.topk, r.weights];
    let down = l.f32(
        g,
        OpType::MulMatId,
        "ffn_moe_down",
        per_expert,
        &down_srcs,
        &id_params(k, ff),
    )?;
    let weighted = l.f32(
        g,
        OpType::Mul,
        "ffn_moe_weighted",
        per_expert,
        &[down, r.weights],
        &[],
    )?;
    l.f32(g, OpType::MoeSum, "ffn_moe_out", ne(e, t), &[weighted], &[])
}

/// Qwen-MoE's shared expert, `n_ff` wide, scaled by `sigmoid(gate_inp · x)`, which
/// llama.cpp computes as `silu(v) / v` (`ffn_shexp_out` `[n_embd, rows]`).
fn shared_expert(
    g: &mut Graph,
    x: FfnInput,
    shared: GatedFfn,
    gate_inp: NodeAddr,
    n_ff: usize,
) -> Result<NodeAddr, EngineError> {
    let (e, t, l) = (x.n_embd, x.rows, Layer::of(x.layer));
    let one = ne(1, t);
    let gate_logit = l.f32(
        g,
        OpType::MulMat,
        "ffn_shexp_gate_inp",
        one,
        &[gate_inp, x.cur],
        &mm(t, e),
    )?;
    let silu = l.f32(
        g,
        OpType::Silu,
        "ffn_shexp_gate_silu",
        one,
        &[gate_logit],
        &[],
    )?;
    let sigmoid = l.f32(
        g,
        OpType::Div,
        "ffn_shexp_gate",
        one,
        &[silu, gate_logit],
        &[],
    )?;
    let shexp = gated_ffn(g, x, shared, n_ff, OpType::SwiGlu, "_shexp")?;
    l.f32(
        g,
        OpType::Mul,
        "ffn_shexp_out",
        ne(e, t),
        &[shexp, sigmoid],
        &[],
    )
}
