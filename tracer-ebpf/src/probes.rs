//! One module per probe level.

mod expert;
mod graph;
mod llama_cpp;
mod op;
mod phase;
mod sched;
mod token;
