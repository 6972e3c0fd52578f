//! JSON outputs: the ProfDAG in a canonical form (stable node ids, no addresses, so
//! two recordings of the same run compare equal) and the ProfStat tables.

use std::{collections::HashMap, io::Write};

use petgraph::visit::EdgeRef;
use serde::Serialize;

use crate::{
    dag::{DagNode, LayerDag, ProfDag},
    stats::ProfStat,
};

/// A node of the canonical DAG JSON.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JsonNode {
    /// `n<order>` for computed nodes, `leaf:<consumer order>:<slot>` for leaves.
    pub id: String,
    /// The node.
    #[serde(flatten)]
    pub node: DagNode,
}

/// An edge of the canonical DAG JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JsonEdge {
    /// Source node id.
    pub from: String,
    /// Target node id.
    pub to: String,
    /// Source slot of the target.
    pub slot: u8,
    /// The edge leaves a store into the tensor the target reads (a KV-cache store before
    /// the attention); written only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stored: bool,
}

/// The canonical DAG JSON document.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DagJson {
    /// Decode call.
    pub token: u32,
    /// Phase.
    pub phase: &'static str,
    /// Position.
    pub pos: u32,
    /// Computed nodes the engine announced for the graph.
    pub announced_nodes: u32,
    /// Computed nodes found.
    pub computed_nodes: usize,
    /// Leaves.
    pub leaves: usize,
    /// Nodes: computed by execution order, then leaves by id.
    pub nodes: Vec<JsonNode>,
    /// Edges sorted by (to, slot).
    pub edges: Vec<JsonEdge>,
}

/// Builds the canonical form. With `with_addrs` false, addresses are zeroed.
pub fn dag_json(p: &ProfDag, with_addrs: bool) -> DagJson {
    let mut ids: HashMap<petgraph::graph::NodeIndex, String> = HashMap::new();
    for idx in p.dag.node_indices() {
        if let Some(o) = p.dag[idx].order {
            ids.insert(idx, format!("n{o:05}"));
        }
    }
    for e in p.dag.edge_references() {
        if p.dag[e.source()].is_leaf() && !ids.contains_key(&e.source()) {
            let consumer = p.dag[e.target()].order.unwrap_or(0);
            ids.insert(
                e.source(),
                format!("leaf:{consumer:05}:{}", e.weight().slot),
            );
        }
    }
    let mut nodes: Vec<JsonNode> = p
        .dag
        .node_indices()
        .map(|idx| {
            let mut node = p.dag[idx].clone();
            if !with_addrs {
                node.addr = 0;
            }
            JsonNode {
                id: ids.get(&idx).cloned().unwrap_or_default(),
                node,
            }
        })
        .collect();
    nodes.sort_by(|a, b| (a.node.is_leaf(), &a.id).cmp(&(b.node.is_leaf(), &b.id)));
    let mut edges: Vec<JsonEdge> = p
        .dag
        .edge_references()
        .map(|e| JsonEdge {
            from: ids.get(&e.source()).cloned().unwrap_or_default(),
            to: ids.get(&e.target()).cloned().unwrap_or_default(),
            slot: e.weight().slot,
            stored: e.weight().stored,
        })
        .collect();
    edges.sort_by(|a, b| (&a.to, a.slot, &a.from).cmp(&(&b.to, b.slot, &b.from)));
    let leaves = nodes.iter().filter(|n| n.node.is_leaf()).count();
    DagJson {
        token: p.token,
        phase: p.phase.name(),
        pos: p.pos,
        announced_nodes: p.announced_nodes,
        computed_nodes: nodes.len() - leaves,
        leaves,
        nodes,
        edges,
    }
}

/// Writes the DAG JSON (pretty).
pub fn write_dag(p: &ProfDag, mut w: impl Write) -> serde_json::Result<()> {
    serde_json::to_writer_pretty(&mut w, &dag_json(p, true))?;
    w.write_all(b"\n").map_err(serde_json::Error::io)
}

/// The per-layer view as JSON.
#[derive(Serialize)]
struct LayersJson<'a> {
    n_layers: u32,
    nodes: Vec<&'a crate::dag::LayerNode>,
    edges: Vec<(String, String)>,
}

/// Writes the per-layer view as JSON.
pub fn write_layers(l: &LayerDag, mut w: impl Write) -> serde_json::Result<()> {
    let doc = LayersJson {
        n_layers: l.n_layers,
        nodes: l.dag.node_weights().collect(),
        edges: l
            .dag
            .edge_references()
            .map(|e| {
                (
                    l.dag[e.source()].class.clone(),
                    l.dag[e.target()].class.clone(),
                )
            })
            .collect(),
    };
    serde_json::to_writer_pretty(&mut w, &doc)?;
    w.write_all(b"\n").map_err(serde_json::Error::io)
}

/// Writes the ProfStat tables as one JSON document.
pub fn write_stats(s: &ProfStat, mut w: impl Write) -> serde_json::Result<()> {
    serde_json::to_writer_pretty(&mut w, s)?;
    w.write_all(b"\n").map_err(serde_json::Error::io)
}
