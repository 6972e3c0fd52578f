//! `engine probe-bench`: calls every probe entry point in a tight loop with arguments
//! that make its body return at once, and reports nanoseconds per call. Run once plain
//! and once with uprobes attached (`cargo xtask bench probes` does both), the difference
//! is the per-hit cost of a probe on each entry point, next to the reference functions
//! that start with a 5-byte nop and with a single-stepped instruction.

use core::ffi::c_void;
use std::hint::black_box;
use std::time::Instant;

use common::engine_abi::EngineNode;
use serde::Serialize;

use crate::backend::{self, pool};
use crate::ops::{self, ComputeParams};
use crate::sampler::{self, Sampler, SamplerParams};
use crate::sync::SpinBarrier;
use crate::{context, probe};

/// Nanoseconds per call of one entry point.
#[derive(Clone, Debug, Serialize)]
pub struct ProbeCost {
    /// Symbol name.
    pub symbol: &'static str,
    /// Calls made.
    pub calls: u64,
    /// Mean nanoseconds per call.
    pub ns_per_call: f64,
}

fn time(symbol: &'static str, calls: u64, mut f: impl FnMut()) -> ProbeCost {
    for _ in 0..calls / 10 {
        f(); // warm-up
    }
    let t = Instant::now();
    for _ in 0..calls {
        f();
    }
    ProbeCost {
        symbol,
        calls,
        ns_per_call: t.elapsed().as_nanos() as f64 / calls as f64,
    }
}

/// Times `calls` calls of every entry point.
pub fn run(calls: u64) -> Vec<ProbeCost> {
    let node = EngineNode::empty(); // op NONE: the body returns at once
    let barrier = SpinBarrier::new(1);
    let params = ComputeParams {
        ith: 0,
        nth: 1,
        wdata: std::ptr::null_mut(),
        wsize: 0,
        barrier: &barrier,
        graph_id: 0,
        fence: std::ptr::null(),
        slowdown: 1.0,
    };
    let mut sampler = Sampler::new(SamplerParams::default());
    let mut buf = [0f32; 1];
    let src = [0f32; 1];
    let np = &node as *const EngineNode;
    let pp = &params as *const ComputeParams as *mut c_void;
    let sp = &mut sampler as *mut Sampler as *mut c_void;
    // Each entry point gets arguments for which its body returns without dereferencing
    // anything invalid: null context/graph/model pointers are checked first, a NONE node
    // computes nothing, zero-length buffers are not read.
    vec![
        time("engine_probe_ref_nop", calls, || {
            probe::engine_probe_ref_nop()
        }),
        time("engine_probe_ref_singlestep", calls, || {
            probe::engine_probe_ref_singlestep()
        }),
        time("engine_decode", calls, || {
            // SAFETY: a null context is refused before any dereference.
            black_box(unsafe {
                context::engine_decode(std::ptr::null_mut(), 0, 0, std::ptr::null())
            });
        }),
        time("engine_graph_compute", calls, || {
            // SAFETY: a null graph is refused before any dereference.
            black_box(unsafe {
                backend::engine_graph_compute(std::ptr::null(), 0, 0, 0, std::ptr::null())
            });
        }),
        time("engine_op_compute", calls, || {
            // SAFETY: a live NONE node (nothing to compute) and live single-thread params.
            unsafe { ops::engine_op_compute(black_box(np), 0, 1, pp) }
        }),
        time("engine_op_done", calls, || {
            // SAFETY: the body reads nothing.
            unsafe { pool::engine_op_done(black_box(np), 0, 1, 0) }
        }),
        // A node as the pool runs it: its start, then its end on this thread.
        time("engine_op_compute+done", calls, || {
            // SAFETY: as above.
            unsafe {
                ops::engine_op_compute(black_box(np), 0, 1, pp);
                pool::engine_op_done(black_box(np), 0, 1, 0);
            }
        }),
        time("engine_phase_embed", calls, || {
            // SAFETY: a null model and zero tokens return before any dereference.
            unsafe {
                context::engine_phase_embed(
                    std::ptr::null(),
                    std::ptr::null(),
                    0,
                    std::ptr::null_mut(),
                )
            }
        }),
        time("engine_phase_copy_logits", calls, || {
            // SAFETY: two live buffers, zero elements copied.
            unsafe { sampler::engine_phase_copy_logits(buf.as_mut_ptr(), src.as_ptr(), 0) }
        }),
        time("engine_phase_softmax", calls, || {
            // SAFETY: two live buffers, zero elements read or written.
            unsafe { sampler::engine_phase_softmax(src.as_ptr(), buf.as_mut_ptr(), 0, 1.0) }
        }),
        time("engine_phase_sample", calls, || {
            // SAFETY: a live sampler and an empty probability vector.
            black_box(unsafe { sampler::engine_phase_sample(sp, src.as_ptr(), 0) });
        }),
    ]
}
