//! Graph level: one [`GraphSpan`] per `engine_graph_compute` call.

use serde::Serialize;

/// One graph computation on a backend.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GraphSpan {
    /// Position among all graph computations of the trace (0-based).
    pub index: u32,
    /// The decode call it ran in, if any.
    pub token: Option<u32>,
    /// Calling thread (thread 0 of the pool).
    pub tid: u32,
    /// `EngineGraph::graph_id`.
    pub graph_id: u64,
    /// Address of the `EngineGraph`.
    pub graph_addr: u64,
    /// Computed nodes the engine announced.
    pub n_nodes: u32,
    /// Backend instance.
    pub backend_id: u32,
    /// `BackendKind` value (0 CPU, 1 GPU, 2 NPU, 3 accel).
    pub backend_kind: u32,
    /// Tokens in the batch.
    pub n_tokens: u32,
    /// Position of the batch's first token.
    pub pos: u32,
    /// Entry, ns.
    pub start_ns: u64,
    /// Exit, ns (`None` while open or never seen).
    pub end_ns: Option<u64>,
    /// Range of this graph's node spans in [`crate::TraceModel::node_spans`].
    pub nodes: std::ops::Range<u32>,
}

impl GraphSpan {
    /// Backend name (`cpu`, `gpu`, `npu`, `accel`, `backend<k>`).
    pub fn backend_name(&self) -> String {
        backend_name(self.backend_kind)
    }

    /// Duration, ns (0 while open).
    pub fn dur_ns(&self) -> u64 {
        self.end_ns.map_or(0, |e| e.saturating_sub(self.start_ns))
    }
}

/// The name of a `BackendKind` value (`cpu`, `gpu`, `npu`, `accel`, `backend<k>`).
pub fn backend_name(kind: u32) -> String {
    common::BackendKind::from_u32(kind)
        .map_or_else(|| format!("backend{kind}"), |k| k.name().to_owned())
}
