//! A GGUF LLM inference engine in the spirit of ggml/llama.cpp, built to be traced.
//!
//! A forward pass is a graph of [`common::engine_abi::EngineNode`]s computed by a CPU
//! thread pool ([`backend::cpu`]); the token, graph, operator and phase entry points are
//! exported `extern "C"` symbols whose arguments a uprobe can read, each declared beside
//! the body it marks with [`probe`]'s macro. The engine knows nothing about the tracer.
//!
//! Layout: [`model`] (hyper-parameters, weights, architectures, graph building),
//! [`graph`] (nodes and activation memory), [`ops`] (one module per operator),
//! [`backend`] (thread pool), [`context`] (KV cache + decode), [`sampler`],
//! [`generate`] (the generation loop and timings), [`chat`] (chat templates and
//! conversations), [`utf8_stream`] (streamed text), [`info`] (what a model file holds),
//! [`bench`], [`presets`] (`gen-model`), [`self_profile`] (ground-truth timestamps).

pub mod backend;
pub mod bench;
pub mod chat;
pub mod context;
pub mod error;
pub mod generate;
pub mod graph;
pub mod info;
pub mod kv_cache;
pub mod mem_limit;
pub mod model;
pub mod ops;
pub mod presets;
pub mod probe;
pub mod probe_bench;
pub mod quant_mix;
pub mod sampler;
pub mod self_profile;
pub mod sync;
pub mod utf8_stream;

pub use context::{Context, ContextParams};
pub use error::EngineError;
pub use model::Model;
