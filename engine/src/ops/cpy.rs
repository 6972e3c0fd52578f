//! `CPY`: copy the f32 `src0` into the node's own view (strides `nb`, type `dtype`),
//! element by element in the view's logical order. Used to store K and V rows into the
//! f16 KV cache, including the transposed V layout.

use common::DType;
use common::engine_abi::EngineNode;
use half::f16;

use super::{rows_for, src};
use crate::ops::ComputeParams;

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    // SAFETY: source of a node of the graph being computed.
    let a = unsafe { src(node.src[0]) };
    let dtype = node.dtype();
    let ne0 = node.ne[0] as usize;
    let rows = (node.ne[1] * node.ne[2] * node.ne[3]) as usize;
    let x = a.data as *const f32; // contiguous source
    for r in rows_for(rows, p.ith, p.nth) {
        let (ne1, ne2) = (node.ne[1] as usize, node.ne[2] as usize);
        let (i1, i2, i3) = (r % ne1, (r / ne1) % ne2, r / (ne1 * ne2));
        let row =
            node.data + i1 as u64 * node.nb[1] + i2 as u64 * node.nb[2] + i3 as u64 * node.nb[3];
        for i0 in 0..ne0 {
            // SAFETY: `x` has rows*ne0 elements (same element count as the view), and the
            // destination element lies in the view this node describes.
            unsafe {
                let v = *x.add(r * ne0 + i0);
                let dst = (row + i0 as u64 * node.nb[0]) as *mut u8;
                match dtype {
                    Some(DType::F16) => (dst as *mut f16).write_unaligned(f16::from_f32(v)),
                    _ => (dst as *mut f32).write_unaligned(v),
                }
            }
        }
    }
}
