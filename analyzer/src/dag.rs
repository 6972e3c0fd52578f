//! ProfDAG (seed 002 §4.1, Algorithm 1): the DAG of one iteration, rebuilt from the
//! operator spans of its graph — computed nodes in execution order with their time
//! (first entry to last exit) and counters (summed over threads), edges from the
//! recorded source addresses, and the sources never computed in the iteration (weights,
//! KV cache, inputs) as leaf nodes. [`LayerDag`] collapses repeated transformer blocks.

use std::collections::{BTreeMap, HashMap};

use common::{
    engine_abi::{DType, OpType},
    op_catalog,
};
use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;

use crate::{
    leaf::leaf_label,
    model::{LeafInfo, NodeInfo, TokenPhase, TraceModel},
};

/// Which iteration (decode call) to rebuild.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum IterSelector {
    /// The first decode step (the default).
    #[default]
    FirstDecode,
    /// The n-th decode step, 0-based.
    Decode(usize),
    /// The n-th prefill call of the run, 0-based (`prefill` = `prefill:0`; a long
    /// prompt is prefilled in chunks of the batch size).
    Prefill(usize),
}

impl std::str::FromStr for IterSelector {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "prefill" => Ok(IterSelector::Prefill(0)),
            "first" | "decode" => Ok(IterSelector::FirstDecode),
            n => match n.strip_prefix("prefill:") {
                Some(c) => c
                    .parse::<usize>()
                    .map(IterSelector::Prefill)
                    .map_err(|_| format!("`{n}`: the prefill chunk is a number (`prefill:2`)")),
                None => n.parse::<usize>().map(IterSelector::Decode).map_err(|_| {
                    format!("`{n}` is not a decode step number, `prefill` or `prefill:N`")
                }),
            },
        }
    }
}

/// One node of a ProfDAG.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DagNode {
    /// Address of the engine node (computed) or of the source tensor (leaf).
    pub addr: u64,
    /// Execution order (`None` for leaves).
    pub order: Option<u32>,
    /// Node name; leaves have the name the collector recorded for their address
    /// ([`crate::model::LeafInfo`]), else one guessed from their first consumer
    /// ([`leaf_name`]: `blk.0.attn_q.weight` for `src0` of `Qcur-0`, else
    /// `src0 of <consumer>`).
    pub name: String,
    /// What the node is in every layer: its name without the layer (`ffn_up` for
    /// `ffn_up-3`; `flash_attn_ext` for llama.cpp's unnamed `node_21`); the name for
    /// leaves.
    pub class: String,
    /// Op type name; `LEAF` for leaves.
    pub op: String,
    /// Transformer layer or -1.
    pub layer: i32,
    /// Shape (`64x8`), `?` if unknown (leaves: known for recorded weights only).
    pub shape: String,
    /// Element type name, if known.
    pub dtype: Option<String>,
    /// First entry to last exit, ns (0 for leaves).
    pub time_ns: u64,
    /// Threads that ran it.
    pub threads: u32,
    /// Sum of the threads' busy time, ns.
    pub busy_ns: u64,
    /// Counter sums over threads, by counter name (absent counters left out).
    pub counters: BTreeMap<String, u64>,
    /// Multiply-adds of a `MUL_MAT` (`K·N·M·H`), when `K` is known.
    pub complexity: Option<u64>,
    /// Bytes written plus bytes of computed sources read (a lower bound on traffic:
    /// leaves' sizes are not in the trace).
    pub bytes: Option<u64>,
    /// The backend that computed it (`cpu`, `accel`); empty for leaves.
    pub backend: String,
}

impl DagNode {
    /// Whether the node is a leaf (never computed in the iteration).
    pub fn is_leaf(&self) -> bool {
        self.order.is_none()
    }
}

/// An edge: `src` slot `slot` of the target node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DagEdge {
    /// Source slot (0..4).
    pub slot: u8,
    /// Whether the edge enters or leaves a `BACKEND_COPY` node (data crossing backends).
    pub copy: bool,
    /// Whether the edge leaves a node that stored into the tensor the target reads (a
    /// KV-cache store before the attention), rather than the tensor's producer.
    pub stored: bool,
}

/// ggml's ops that only look at their source in another shape: a node of these that is
/// a view of its source stores nothing (builds that dispatch views run them as nodes).
const VIEW_OPS: [&str; 4] = ["VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"];

/// The tensor a node stores into, when it writes into one of its sources instead of a
/// tensor of its own (the source slot the probe named as the tensor the node is a view
/// of: ggml's `SET_ROWS` and `CPY`, the KV-cache stores of llama.cpp, are views of the
/// cache they write). The probes record a source that is a view as the tensor it views,
/// so this is the cache itself.
fn store_destination(info: &NodeInfo) -> Option<u64> {
    let dst = *info.src.get(info.stores_into?)?;
    let view = VIEW_OPS
        .iter()
        .any(|v| op_catalog::op_id(v) == Some(info.op));
    (dst != 0 && !view).then_some(dst)
}

/// The ProfDAG of one iteration.
#[derive(Clone, Debug)]
pub struct ProfDag {
    /// Decode call index.
    pub token: u32,
    /// Its phase.
    pub phase: TokenPhase,
    /// Its position.
    pub pos: u32,
    /// Graph index in the model (the first split's, when the pass was split).
    pub graph: u32,
    /// Graph indices of every split of the pass, in order.
    pub graphs: Vec<u32>,
    /// Computed nodes the engine announced for the graph (summed over splits).
    pub announced_nodes: u32,
    /// The DAG.
    pub dag: DiGraph<DagNode, DagEdge>,
    /// Whether the trace had structure (sources); without it there are no edges.
    pub has_structure: bool,
}

/// Why a DAG could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DagError {
    /// The selected iteration is not in the trace.
    #[error("the trace has no {what}")]
    NoSuchIteration {
        /// What was asked for.
        what: String,
    },
    /// The iteration has no graph with operator events.
    #[error("decode call {token} has no graph with operator events (was the op level on?)")]
    NoOperators {
        /// The decode call.
        token: u32,
    },
}

/// Bytes of a tensor of `ne` elements of `dtype`, if the type is known.
pub fn tensor_bytes(dtype: u32, ne: &[i64; 4]) -> Option<u64> {
    let t = DType::from_u32(dtype)?;
    let row = t.row_bytes(usize::try_from(ne[0]).ok()?)? as u64;
    Some(ne[1..].iter().map(|&d| d.max(0) as u64).product::<u64>() * row)
}

/// Multiply-adds of a `MUL_MAT` node, `K·N·M·H`: from the node's op params when the
/// trace has them ([`NodeInfo::mul_mat_dims`], format 2), otherwise (format-1 traces)
/// `K` guessed as the inner dimension of `src1` (read from the source node `src1_info`,
/// so unknown when `src1` is not a computed node of the graph) times the elements of the
/// output (`N·M·H`).
pub fn matmul_complexity(node: &NodeInfo, src1_info: Option<&NodeInfo>) -> Option<u64> {
    if node.op != OpType::MulMat as u32 || !node.has_structure {
        return None;
    }
    if let Some(d) = node.mul_mat_dims() {
        return Some(d.complexity());
    }
    let k = src1_info.filter(|s| s.has_structure)?.ne[0];
    u64::try_from(k).ok().map(|k| k * node.elements())
}

/// Picks the decode call for a selector.
pub fn select_token(model: &TraceModel, sel: IterSelector) -> Result<u32, DagError> {
    let tok = match sel {
        IterSelector::FirstDecode => model.decode_step(0),
        IterSelector::Decode(n) => model.decode_step(n),
        IterSelector::Prefill(n) => model
            .tokens()
            .iter()
            .filter(|t| t.phase == TokenPhase::Prefill)
            .nth(n),
    };
    tok.map(|t| t.index)
        .ok_or_else(|| DagError::NoSuchIteration {
            what: match sel {
                IterSelector::Decode(n) => format!("decode step {n}"),
                IterSelector::Prefill(n) => format!("prefill call {n}"),
                _ => "decode step".to_owned(),
            },
        })
}

/// Rebuilds the ProfDAG of the selected iteration (Algorithm 1).
///
/// # Errors
/// [`DagError`] if the iteration is missing or has no operator events.
pub fn build(model: &TraceModel, sel: IterSelector) -> Result<ProfDag, DagError> {
    let token = select_token(model, sel)?;
    build_for_token(model, token)
}

/// Rebuilds the ProfDAG of decode call `token`: the nodes of all its graph splits (one
/// graph unless the pass was split between backends), in execution order.
///
/// # Errors
/// [`DagError::NoOperators`] if none of its graphs has operator events.
pub fn build_for_token(model: &TraceModel, token: u32) -> Result<ProfDag, DagError> {
    let tok = model
        .tokens()
        .get(token as usize)
        .ok_or_else(|| DagError::NoSuchIteration {
            what: format!("decode call {token}"),
        })?;
    let splits: Vec<&crate::model::GraphSpan> = model
        .token_graphs(token)
        .filter(|g| !g.nodes.is_empty())
        .collect();
    let graph = *splits.first().ok_or(DagError::NoOperators { token })?;
    let mut spans: Vec<&crate::model::NodeSpan> = splits
        .iter()
        .flat_map(|g| model.graph_node_spans(g))
        .collect();
    spans.sort_by_key(|s| (model.nodes()[s.node as usize].index, s.start_ns));
    let nodes = model.nodes();
    let mut dag = DiGraph::new();
    let mut by_addr: HashMap<u64, NodeIndex> = HashMap::new();
    let info_by_addr: HashMap<u64, &NodeInfo> = spans
        .iter()
        .map(|s| (nodes[s.node as usize].addr, &nodes[s.node as usize]))
        .collect();
    let mut has_structure = false;
    // Nodes in execution order (spans are sorted by index).
    for &span in &spans {
        let info = &nodes[span.node as usize];
        has_structure |= info.has_structure;
        let idx = dag.add_node(computed_node(model, span, &info_by_addr));
        by_addr.insert(info.addr, idx);
    }
    // The stores into tensors the iteration does not compute, by destination, in
    // execution order: a later reader of the destination reads what the last store
    // before it wrote.
    let mut stores: HashMap<u64, Vec<(u32, NodeIndex)>> = HashMap::new();
    for &span in &spans {
        let info = &nodes[span.node as usize];
        if let (Some(dst), Some(&node)) = (store_destination(info), by_addr.get(&info.addr)) {
            stores.entry(dst).or_default().push((info.index, node));
        }
    }
    let store_before = |dst: u64, order: u32| {
        stores
            .get(&dst)?
            .iter()
            .rev()
            .find(|&&(o, _)| o < order)
            .map(|&(_, n)| n)
    };
    // Edges; sources not computed in the iteration become leaves.
    let copy_op = OpType::BackendCopy as u32;
    for &span in &spans {
        let info = &nodes[span.node as usize];
        let Some(&to) = by_addr.get(&info.addr) else {
            continue;
        };
        for (slot, &src) in info.src.iter().enumerate() {
            if src == 0 {
                continue;
            }
            let stored = store_before(src, info.index);
            let from = match stored.or_else(|| by_addr.get(&src).copied()) {
                Some(f) => f,
                None => {
                    let leaf = dag.add_node(leaf_node(model, src, info, slot));
                    by_addr.insert(src, leaf);
                    leaf
                }
            };
            let copy =
                info.op == copy_op || info_by_addr.get(&src).is_some_and(|s| s.op == copy_op);
            dag.add_edge(
                from,
                to,
                DagEdge {
                    slot: slot as u8,
                    copy,
                    stored: stored.is_some(),
                },
            );
        }
    }
    Ok(ProfDag {
        token,
        phase: tok.phase,
        pos: tok.pos,
        graph: graph.index,
        graphs: splits.iter().map(|g| g.index).collect(),
        announced_nodes: splits.iter().map(|g| g.n_nodes).sum(),
        dag,
        has_structure,
    })
}

/// The DAG node of an operator the iteration computed.
fn computed_node(
    model: &TraceModel,
    span: &crate::model::NodeSpan,
    info_by_addr: &HashMap<u64, &NodeInfo>,
) -> DagNode {
    let info = &model.nodes()[span.node as usize];
    let counters = model.counter_names();
    let backend = model
        .graphs()
        .get(span.graph as usize)
        .map_or_else(String::new, |g| g.backend_name());
    let src1 = info.src[1];
    let complexity = matmul_complexity(info, info_by_addr.get(&src1).copied());
    let bytes = info.has_structure.then(|| {
        let own = tensor_bytes(info.dtype, &info.ne).unwrap_or(0);
        let read: u64 = info
            .src
            .iter()
            .filter(|&&a| a != 0)
            .filter_map(|a| info_by_addr.get(a))
            .filter_map(|s| tensor_bytes(s.dtype, &s.ne))
            .sum();
        own + read
    });
    DagNode {
        addr: info.addr,
        order: Some(info.index),
        name: info.name.clone(),
        class: model
            .classes()
            .get(info.class as usize)
            .cloned()
            .unwrap_or_else(|| info.name.clone()),
        op: info.op_name(),
        layer: info.layer,
        shape: info.shape(),
        dtype: info.has_structure.then(|| {
            DType::from_u32(info.dtype)
                .map_or("?", DType::name)
                .to_owned()
        }),
        time_ns: span.dur_ns(),
        threads: span.n_threads,
        busy_ns: span.busy_ns,
        counters: counters
            .iter()
            .zip(&span.pmc)
            .filter(|(_, v)| **v != crate::model::PMC_MISSING)
            .map(|(k, v)| (k.clone(), *v))
            .collect(),
        complexity,
        bytes,
        backend,
    }
}

/// The DAG node of a tensor the iteration read but did not compute (a weight, the KV
/// cache, an input): source `slot` of `info`.
fn leaf_node(model: &TraceModel, src: u64, info: &NodeInfo, slot: usize) -> DagNode {
    let recorded = model.leaf(src);
    let name = leaf_label(recorded, &info.name, info.layer, slot);
    DagNode {
        addr: src,
        order: None,
        class: name.clone(),
        name,
        op: "LEAF".to_owned(),
        layer: info.layer,
        shape: recorded
            .and_then(LeafInfo::shape)
            .unwrap_or_else(|| "?".to_owned()),
        dtype: recorded.map(|l| l.dtype_name().to_owned()),
        time_ns: 0,
        threads: 0,
        busy_ns: 0,
        counters: BTreeMap::new(),
        complexity: None,
        bytes: None,
        backend: String::new(),
    }
}

impl ProfDag {
    /// Computed (non-leaf) nodes.
    pub fn computed_nodes(&self) -> usize {
        self.dag.node_weights().filter(|n| !n.is_leaf()).count()
    }
}

/// A node of the per-layer view: one node class across all layers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerNode {
    /// Class (`ffn_up`; `norm #2` for a class's second node in a block) or the node
    /// name outside layers.
    pub class: String,
    /// Op type name.
    pub op: String,
    /// Whether it repeats in every transformer block.
    pub in_block: bool,
    /// Layers it occurs in.
    pub layers: u32,
    /// Time summed over layers, ns.
    pub time_ns: u64,
    /// Execution order of its first occurrence.
    pub first_order: u32,
}

/// The per-layer view: repeated transformer blocks collapsed into one.
#[derive(Clone, Debug)]
pub struct LayerDag {
    /// Number of transformer layers.
    pub n_layers: u32,
    /// The collapsed DAG (leaves left out); edge weight: the edge joins two different
    /// layers (a residual or the block-to-block hand-over).
    pub dag: DiGraph<LayerNode, bool>,
}

/// Collapses every layer's copy of a node into one node. A node is known across layers
/// by its class and, where a class occurs more than once in a layer on one backend
/// (llama.cpp names both RMS norms of a block `norm-N`, a product and its RoPE
/// `Qcur-N`), by which occurrence it is: the second becomes `norm #2`. (The two bands
/// of a tensor split, one per backend, stay one node.) Nodes outside the blocks stay
/// apart.
pub fn collapse_layers(p: &ProfDag) -> LayerDag {
    let mut computed: Vec<NodeIndex> = p
        .dag
        .node_indices()
        .filter(|&i| p.dag[i].order.is_some())
        .collect();
    computed.sort_by_key(|&i| p.dag[i].order);
    // (in a block, label) per node; occurrences of (layer, class, backend) so far.
    let mut key_of: HashMap<NodeIndex, (bool, String)> = HashMap::new();
    let mut seen_in_layer: HashMap<(i32, &str, &str), u32> = HashMap::new();
    let mut nodes: HashMap<(bool, String), LayerNode> = HashMap::new();
    let mut counted: std::collections::HashSet<((bool, String), i32)> = Default::default();
    let mut layers = std::collections::BTreeSet::new();
    for &idx in &computed {
        let n = &p.dag[idx];
        let order = n.order.unwrap_or(0);
        let in_block = n.layer >= 0;
        let label = if in_block {
            layers.insert(n.layer);
            let k = seen_in_layer
                .entry((n.layer, &n.class, &n.backend))
                .or_insert(0);
            *k += 1;
            match *k {
                1 => n.class.clone(),
                k => format!("{} #{k}", n.class),
            }
        } else {
            n.name.clone()
        };
        let key = (in_block, label);
        key_of.insert(idx, key.clone());
        let e = nodes.entry(key.clone()).or_insert_with(|| LayerNode {
            class: key.1.clone(),
            op: n.op.clone(),
            in_block,
            layers: 0,
            time_ns: 0,
            first_order: order,
        });
        // A layer counts once (a tensor split's two bands are one node in one layer).
        if in_block && counted.insert((key.clone(), n.layer)) {
            e.layers += 1;
        }
        e.time_ns += n.time_ns;
        e.first_order = e.first_order.min(order);
    }
    // llama.cpp names the final norm `norm`, like the blocks' `norm-N`: one label each.
    let block_labels: std::collections::HashSet<String> = nodes
        .keys()
        .filter(|(in_block, _)| *in_block)
        .map(|(_, l)| l.clone())
        .collect();
    for ((in_block, label), n) in nodes.iter_mut() {
        if !*in_block && block_labels.contains(label) {
            n.class = format!("{label} (outside the blocks)");
        }
    }
    let mut ordered: Vec<((bool, String), LayerNode)> = nodes.into_iter().collect();
    ordered.sort_by_key(|(_, n)| n.first_order);
    let mut dag = DiGraph::new();
    let mut idx_of: HashMap<(bool, String), NodeIndex> = HashMap::new();
    for (key, n) in ordered {
        idx_of.insert(key, dag.add_node(n));
    }
    let mut edges = std::collections::HashSet::new();
    for e in p.dag.edge_indices() {
        let Some((a, b)) = p.dag.edge_endpoints(e) else {
            continue;
        };
        let (Some(ka), Some(kb)) = (key_of.get(&a), key_of.get(&b)) else {
            continue;
        };
        let cross = p.dag[a].layer != p.dag[b].layer;
        if ka != kb && edges.insert((ka, kb, cross)) {
            dag.add_edge(idx_of[ka], idx_of[kb], cross);
        }
    }
    LayerDag {
        n_layers: layers.len() as u32,
        dag,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_bytes_follow_block_sizes() {
        assert_eq!(tensor_bytes(DType::F32 as u32, &[64, 2, 1, 1]), Some(512));
        assert_eq!(tensor_bytes(DType::Q8_0 as u32, &[64, 1, 1, 1]), Some(68));
        assert_eq!(tensor_bytes(DType::Q8_0 as u32, &[33, 1, 1, 1]), None);
        assert_eq!(tensor_bytes(99, &[1, 1, 1, 1]), None);
    }

    #[test]
    fn iter_selector_parses() {
        assert_eq!("prefill".parse(), Ok(IterSelector::Prefill(0)));
        assert_eq!("prefill:2".parse(), Ok(IterSelector::Prefill(2)));
        assert!("prefill:x".parse::<IterSelector>().is_err());
        assert_eq!("3".parse(), Ok(IterSelector::Decode(3)));
        assert!("x".parse::<IterSelector>().is_err());
    }
}

#[cfg(test)]
mod store_edge_tests {
    use common::event::{OP_DETAIL_OP_PARAMS, OP_DETAIL_STORE_SHIFT, OP_DETAIL_STRUCTURE};
    use trace_format::Event;

    use super::*;
    use crate::synthetic::{
        SYNTH_MAIN_TID,
        records::{build, decode, desc, graph, span},
    };

    const CACHE_K: u64 = 0xcac0;
    const CACHE_V: u64 = 0xcac8;
    const IDX: u64 = 0x1d0;
    const Q: u64 = 0x9000;

    /// A node: address, op name, name, sources, the slot it stores into.
    type Node<'a> = (u64, &'a str, &'a str, [u64; 4], Option<u32>);

    /// The description of `n` (graph index `index`), with structure.
    fn describe(ts: u64, index: u32, n: Node) -> Event {
        let (addr, op, name, src, store) = n;
        let op = op_catalog::op_id(op).expect(op);
        let mut e = desc(ts, addr, index, op, name);
        if let Event::NodeDesc(d) = &mut e {
            d.detail |= OP_DETAIL_STRUCTURE | OP_DETAIL_OP_PARAMS;
            d.detail |= store.map_or(0, |slot| (slot + 1) << OP_DETAIL_STORE_SHIFT);
            d.structure.dtype = DType::F32 as u32;
            d.structure.ne = [8, 1, 1, 1];
            d.structure.src = src;
        }
        e
    }

    /// One decode call whose graph runs `nodes` in order.
    fn dag_of(nodes: &[Node]) -> ProfDag {
        let mut events = vec![decode(0, false, 1, 4), graph(100, false)];
        let mut t = 1_000;
        for (i, &n) in nodes.iter().enumerate() {
            events.push(describe(t, i as u32, n));
            events.push(span(SYNTH_MAIN_TID, n.0, t + 500, 400, 0));
            t += 1_000;
        }
        events.push(graph(t, true));
        events.push(decode(t + 100, true, 1, 4));
        build_for_token(&build(&events), 0).expect("a DAG")
    }

    /// `(from address, to name, stored)` of every edge.
    fn edges(p: &ProfDag) -> Vec<(u64, String, bool)> {
        let mut v: Vec<_> = p
            .dag
            .edge_indices()
            .filter_map(|e| {
                let (a, b) = p.dag.edge_endpoints(e)?;
                Some((p.dag[a].addr, p.dag[b].name.clone(), p.dag[e].stored))
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_attention_reads_the_kv_cache_through_the_store_before_it() {
        // llama.cpp: `SET_ROWS` stores K (into its `src[2]` in ggml 0.26), `CPY` stores V
        // (into its `src[1]`); the attention products read the caches.
        let p = dag_of(&[
            (0x100, "ROPE", "Kcur-0", [0; 4], None),
            (
                0x200,
                "SET_ROWS",
                "cache_k_l0 (view)",
                [0x100, IDX, CACHE_K, 0],
                Some(2),
            ),
            (0x300, "CPY", "v_store-0", [0x100, CACHE_V, 0, 0], Some(1)),
            (0x400, "MUL_MAT", "kq-0", [CACHE_K, Q, 0, 0], None),
            (0x500, "MUL_MAT", "kqv-0", [CACHE_V, 0x400, 0, 0], None),
            // A view dispatched as a node (older builds) stores nothing.
            (
                0x600,
                "PERMUTE",
                "kqv-0 (permuted)",
                [0x500, 0, 0, 0],
                Some(0),
            ),
            (0x700, "CONT", "kqv_out-0", [0x500, 0, 0, 0], None),
        ]);
        let e = edges(&p);
        let into = |to: &str| -> Vec<(u64, bool)> {
            e.iter()
                .filter(|(_, t, _)| t == to)
                .map(|&(f, _, s)| (f, s))
                .collect()
        };
        assert_eq!(into("kq-0"), [(0x200, true), (Q, false)], "{e:?}");
        assert_eq!(into("kqv-0"), [(0x300, true), (0x400, false)], "{e:?}");
        // The caches stay leaves, feeding the stores.
        assert_eq!(
            into("cache_k_l0 (view)"),
            [(0x100, false), (IDX, false), (CACHE_K, false)],
            "{e:?}"
        );
        assert_eq!(
            into("v_store-0"),
            [(0x100, false), (CACHE_V, false)],
            "{e:?}"
        );
        assert_eq!(into("kqv_out-0"), [(0x500, false)], "{e:?}");
    }

    #[test]
    fn a_node_without_a_store_slot_stores_nothing() {
        // The engine's `CPY` reads both its sources (the value, a KV fetch node); its
        // probes name no store slot, so a later reader of the fetch node keeps its edge.
        let p = dag_of(&[
            (0x100, "ROPE", "Kcur", [0; 4], None),
            (0x150, "KV_FETCH", "kv_fetch", [0; 4], None),
            (0x200, "CPY", "k_cache_store", [0x100, 0x150, 0, 0], None),
            (0x300, "CPY", "v_cache_store", [0x100, 0x150, 0, 0], None),
        ]);
        let e = edges(&p);
        assert!(e.iter().all(|&(_, _, stored)| !stored), "{e:?}");
        assert!(e.contains(&(0x150, "v_cache_store".into(), false)), "{e:?}");
    }
}
