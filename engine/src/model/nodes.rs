//! What the graph builder and the FFN share to add nodes: shapes, `MUL_MAT` parameters and
//! [`Layer`], which names a block's nodes as llama.cpp does (`attn_norm-3`).

use common::DType;
use common::engine_abi::OpType;

use crate::error::EngineError;
use crate::graph::{Graph, NodeAddr};
use crate::ops::mul_mat::LAYOUT_ROWS;

/// The shape `[a, b]`.
pub(super) fn ne(a: usize, b: usize) -> [i64; 4] {
    [a as i64, b as i64, 1, 1]
}

/// The shape `[a, b, c]`.
pub(super) fn ne3(a: usize, b: usize, c: usize) -> [i64; 4] {
    [a as i64, b as i64, c as i64, 1]
}

/// `MUL_MAT` op params for `rows` rows of `k`: src1 layout, dst layout, M, H, K (see
/// `ops::mul_mat`).
pub(super) fn mm(rows: usize, k: usize) -> [u32; 5] {
    [LAYOUT_ROWS, LAYOUT_ROWS, rows as u32, 1, k as u32]
}

/// Where nodes go: transformer block `il`, whose nodes are named `{name}-{il}`, or
/// [`Layer::NONE`], the nodes before and after the blocks, named by their bare name.
#[derive(Clone, Copy, Debug)]
pub(super) struct Layer(i32);

impl Layer {
    /// Outside the blocks (layer -1).
    pub(super) const NONE: Layer = Layer(-1);

    /// Block `il`.
    pub(super) fn of(il: usize) -> Layer {
        Layer(il as i32)
    }

    /// The node's layer field.
    pub(super) fn index(self) -> i32 {
        self.0
    }

    /// The name of this layer's node `base`.
    pub(super) fn name(self, base: &str) -> String {
        if self.0 < 0 {
            base.to_owned()
        } else {
            format!("{base}-{}", self.0)
        }
    }

    /// Adds this layer's f32 node `base` of shape `ne`.
    pub(super) fn f32(
        self,
        g: &mut Graph,
        op: OpType,
        base: &str,
        ne: [i64; 4],
        src: &[NodeAddr],
        params: &[u32],
    ) -> Result<NodeAddr, EngineError> {
        g.op(op, &self.name(base), self.0, DType::F32, ne, src, params)
    }
}
