//! What one thread of a backend needs to compute its share of a node: passed as the
//! `params` argument of `engine_op_compute` / `engine_accel_op_compute`.

use crate::sync::{Fence, SpinBarrier};

/// Per-thread compute state of a backend.
#[derive(Debug)]
#[repr(C)]
pub struct ComputeParams {
    /// This thread's index, 0-based.
    pub ith: u32,
    /// Number of threads.
    pub nth: u32,
    /// Shared scratch buffer (activation conversions), `wsize` bytes, 64-byte aligned.
    pub wdata: *mut u8,
    /// Size of `wdata` in bytes.
    pub wsize: usize,
    /// The barrier all threads of this graph computation meet at.
    pub barrier: *const SpinBarrier,
    /// Id of the graph being computed.
    pub graph_id: u64,
    /// The fence of the other backend's submitted work, which `BACKEND_SYNC` waits on;
    /// null when there is no other backend.
    pub fence: *const Fence,
    /// Each op takes this many times its compute time: the accel backend's throttle
    /// (`--accel-speed`), 1 on the CPU.
    pub slowdown: f32,
}

impl ComputeParams {
    /// Waits for the other threads (a barrier inside an op).
    pub fn sync(&self) {
        // SAFETY: `barrier` points into the backend's shared state, which outlives every
        // graph computation (the backend joins its workers before dropping it).
        unsafe { &*self.barrier }.wait();
    }

    /// The other backend's fence, if there is one.
    pub fn fence(&self) -> Option<&Fence> {
        // SAFETY: a non-null `fence` points at the accel backend's fence, which the
        // context keeps alive for as long as it computes graphs.
        unsafe { self.fence.as_ref() }
    }
}
