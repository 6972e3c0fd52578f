//! One module per probe level.

mod graph;
mod op;
mod phase;
mod sched;
mod token;
