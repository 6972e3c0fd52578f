//! One module per probe level.

mod cpu_sample;
mod expert;
mod ggml_backend;
mod gpu_node;
mod graph;
mod llama_cpp;
mod op;
mod op_span;
mod phase;
mod sched;
mod token;
