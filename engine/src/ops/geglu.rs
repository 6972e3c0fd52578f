//! `GEGLU`: `gelu(src0) * src1`, Gemma's gated FFN activation, as ggml computes it with
//! `GGML_GELU_FP16`: `x ≤ −10` gives 0, `x ≥ 10` gives `x·g`, otherwise GELU is looked up
//! in a table over every f16 value (`x` rounded to f16), which ggml fills with the tanh
//! approximation `0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²)))` rounded to f16 — computed
//! as the oracle's compiler contracted it (`fmaf(0.044715·x, x, 1)`).

use std::sync::OnceLock;

use common::engine_abi::EngineNode;
use half::f16;

use super::{n_rows, row, rows_for, src};
use crate::ops::ComputeParams;

/// GELU of every f16 value, rounded to f16.
fn table() -> &'static [f16] {
    static TABLE: OnceLock<Vec<f16>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|h| {
                let x = f16::from_bits(h).to_f32();
                let inner = (0.044_715_f32 * x).mul_add(x, 1.0);
                let t = (0.797_884_6_f32 * x * inner).tanh();
                f16::from_f32((x * 0.5) * (t + 1.0))
            })
            .collect()
    })
}

/// ggml's `gelu(x) * g` for one element.
fn geglu(x: f32, g: f32, table: &[f16]) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x * g
    } else {
        table[f16::from_f32(x).to_bits() as usize].to_f32() * g
    }
}

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    // SAFETY: sources of a node of the graph being computed.
    let (a, b) = unsafe { (src(node.src[0]), src(node.src[1])) };
    let len = node.ne[0] as usize;
    let table = table();
    for r in rows_for(n_rows(node), p.ith, p.nth) {
        // SAFETY: f32 rows of validated shapes; this thread owns row `r` of dst.
        let (x, g, out) = unsafe { (row(a, r, len), row(b, r, len), super::row_mut(node, r)) };
        for ((o, &x), &g) in out.iter_mut().zip(x).zip(g) {
            *o = geglu(x, g, table);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_table_is_close_to_the_formula_and_ends_are_exact() {
        let t = table();
        for x in [-3.0f32, -0.5, 0.0, 0.25, 1.0, 2.5] {
            let exact = 0.5 * x * (1.0 + (0.797_884_6 * x * (1.0 + 0.044_715 * x * x)).tanh());
            assert!(
                (geglu(x, 1.0, t) - exact).abs() <= 2e-3 * exact.abs().max(1.0),
                "{x}"
            );
        }
        assert_eq!(geglu(-10.0, 5.0, t), 0.0);
        assert_eq!(geglu(12.0, 0.5, t), 6.0);
    }
}
