//! Synchronisation primitives below the ops and backends: the barrier the threads of a
//! backend meet at between nodes, and the fence one backend waits on for another.

pub mod barrier;
pub mod fence;

pub use barrier::SpinBarrier;
pub use fence::{Fence, WaitMode};
