//! Compute backends. Only the CPU thread-pool backend exists today; the graph ABI
//! carries a backend id and kind so that partitioned graphs on several backends trace
//! the same way (seed 002, section 3.3.2).

pub mod barrier;
pub mod cpu;
