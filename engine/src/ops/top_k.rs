//! `TOP_K`: the indices of the `k = ne[0]` largest values of each f32 row of `src0`,
//! largest first, as I32 — ggml's `argsort` (descending) viewed to its first `k` columns,
//! which is how llama.cpp selects a token's experts. Ties keep the lower index first.

use common::engine_abi::EngineNode;

use super::{row, rows_for, src};
use crate::ops::ComputeParams;

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    // SAFETY: source of a node of the graph being computed.
    let a = unsafe { src(node.src[0]) };
    let (n, k) = (a.ne[0] as usize, node.ne[0] as usize);
    let mut order: Vec<usize> = Vec::with_capacity(n);
    for r in rows_for(node.ne[1] as usize, p.ith, p.nth) {
        // SAFETY: f32 row `r` of src0 (validated shapes).
        let x = unsafe { row(a, r, n) };
        descending_order(x, &mut order);
        // SAFETY: dst is contiguous I32 `[k, rows]`; this thread owns row `r`.
        let out = unsafe { std::slice::from_raw_parts_mut((node.data as *mut i32).add(r * k), k) };
        for (o, &i) in out.iter_mut().zip(&order) {
            *o = i as i32;
        }
    }
}

/// The indices of `x` sorted by value, largest first, ties by index (a stable sort).
fn descending_order(x: &[f32], order: &mut Vec<usize>) {
    order.clear();
    order.extend(0..x.len());
    order.sort_by(|&i, &j| x[j].total_cmp(&x[i]));
}

#[cfg(test)]
mod tests {
    use super::descending_order;

    #[test]
    fn largest_first_and_ties_keep_index_order() {
        let mut order = Vec::new();
        descending_order(&[0.1, 0.7, 0.2, 0.7, -1.0], &mut order);
        assert_eq!(order, vec![1, 3, 2, 0, 4]);
    }
}
