//! One module per probe level.

mod graph;
mod llama_cpp;
mod op;
mod phase;
mod sched;
mod token;
