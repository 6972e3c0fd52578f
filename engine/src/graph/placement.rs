//! Which backend computes each node, and the graph splits that follow from it (ggml's
//! scheduler, seed 002 §3.3.2): consecutive nodes on one backend form a split, computed
//! by one `engine_graph_compute` call on that backend. Where a node reads an activation
//! computed on the other backend, the graph gets an explicit `BACKEND_COPY` node (on the
//! reading backend), and before the CPU reads anything the accel wrote, a
//! `BACKEND_SYNC` node (the CPU waits for the accel's submitted splits).
//!
//! Two ways to use the accel (each behind an engine option):
//! - a layer split: every node of the offloaded layers that the accel supports runs
//!   there; unsupported ones fall back to the CPU (more splits);
//! - a tensor split: each large 2-D matrix product is cut by output rows; the accel
//!   computes its band while the CPU computes the rest, then the CPU syncs (seed 003).
//!
//! Weights, inputs and the KV cache are shared memory (like the unified memory of the
//! phones of seeds 001/003): only activations are copied.

use std::ops::Range;

use common::engine_abi::{BackendKind, EngineGraph, OpType};

use crate::sync::WaitMode;

/// Where the nodes of a graph run.
#[derive(Clone, Debug)]
pub struct Placement {
    /// Layers whose (supported) nodes run on the accel backend.
    pub offload_layers: Range<i32>,
    /// Fraction of the output rows of each large 2-D matrix product that the accel
    /// computes (a tensor split), if any.
    pub split_matmul: Option<f32>,
    /// How the CPU waits for the accel at a `BACKEND_SYNC` node.
    pub sync: WaitMode,
    /// The op types the accel backend computes.
    pub accel_supports: fn(OpType) -> bool,
}

impl Placement {
    /// The backend an op of `layer` runs on, before tensor splits.
    pub fn backend_of(&self, op: OpType, layer: i32) -> BackendKind {
        if self.offload_layers.contains(&layer) && (self.accel_supports)(op) {
            BackendKind::Accel
        } else {
            BackendKind::Cpu
        }
    }

    /// Output rows of an `n`-row product the accel computes under a tensor split:
    /// `[begin, n)`, `begin` a whole number of row blocks (so packed weights split
    /// between groups); `None` if the product is too small to split.
    pub fn matmul_band(&self, n: usize) -> Option<Range<usize>> {
        let ratio = self.split_matmul?;
        let block = engine_kernels::matmul::ROW_BLOCK;
        let accel_rows = ((n as f64 * f64::from(ratio)) / block as f64).round() as usize * block;
        let begin = n.saturating_sub(accel_rows);
        (n >= 4 * block && begin > 0 && begin < n).then_some(begin..n)
    }
}

/// One graph split: a run of consecutive nodes on one backend.
#[derive(Clone, Copy, Debug)]
pub struct Split {
    /// The backend that computes it.
    pub backend: BackendKind,
    /// The header handed to `engine_graph_compute` (its nodes are a sub-range of the
    /// graph's nodes; `EngineNode::index` stays the position in the whole graph).
    pub header: EngineGraph,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement(ratio: f32) -> Placement {
        Placement {
            offload_layers: 2..4,
            split_matmul: Some(ratio),
            sync: WaitMode::Spin,
            accel_supports: |op| op != OpType::SoftMax,
        }
    }

    #[test]
    fn layers_and_supported_ops_decide_the_backend() {
        let p = placement(0.5);
        assert_eq!(p.backend_of(OpType::MulMat, 1), BackendKind::Cpu);
        assert_eq!(p.backend_of(OpType::MulMat, 2), BackendKind::Accel);
        assert_eq!(p.backend_of(OpType::SoftMax, 2), BackendKind::Cpu);
        assert_eq!(p.backend_of(OpType::MulMat, 4), BackendKind::Cpu);
        assert_eq!(p.backend_of(OpType::MulMat, -1), BackendKind::Cpu);
    }

    #[test]
    fn bands_are_whole_row_blocks_at_the_end() {
        let block = engine_kernels::matmul::ROW_BLOCK;
        assert_eq!(placement(0.5).matmul_band(256), Some(128..256));
        let b = placement(0.3).matmul_band(1000).expect("splits");
        assert_eq!(b.end, 1000);
        assert_eq!((1000 - b.start) % block, 0);
        assert_eq!(placement(0.5).matmul_band(8), None, "too small");
        assert_eq!(
            placement(0.0).matmul_band(256),
            None,
            "nothing on the accel"
        );
        assert_eq!(placement(1.0).matmul_band(256), None, "nothing on the CPU");
    }
}
