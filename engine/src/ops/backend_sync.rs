//! `BACKEND_SYNC`: the CPU waits until the accel backend has finished everything
//! submitted to it (op param 0: spin or block). Thread 0 waits; the other threads meet
//! it at the barrier after the node, so the node's span is the wait.

use common::engine_abi::EngineNode;

use super::ComputeParams;
use crate::sync::WaitMode;

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    if p.ith != 0 {
        return;
    }
    if let Some(fence) = p.fence() {
        fence.wait_all(WaitMode::from_op_param(node.op_params[0]));
    }
}
