//! Leaf nodes recorded by the collector: sources that are not computed nodes (weights,
//! KV-cache views, graph inputs), read from the target's memory once per address.

use common::{
    engine_abi::{DType, MAX_DIMS, NODE_FLAG_WEIGHT},
    event::LeafNodeEvent,
};
use serde::Serialize;

/// A recorded leaf node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LeafInfo {
    /// Address of the `EngineNode`.
    pub addr: u64,
    /// Its name (`blk.3.attn_q.weight`, `cache_k_l3`, `inp_pos`); may be empty.
    pub name: String,
    /// `DType` value.
    pub dtype: u32,
    /// `NODE_FLAG_*` bits.
    pub flags: u32,
    /// The node's layer field (-1 for none).
    pub layer: i32,
    /// Elements per dimension when it was read (see [`LeafInfo::shape`]).
    pub ne: [i64; MAX_DIMS],
    /// When it was read, ns.
    pub ts_ns: u64,
}

impl LeafInfo {
    /// From the collector's record.
    pub fn from_event(e: &LeafNodeEvent) -> LeafInfo {
        LeafInfo {
            addr: e.node_addr,
            name: e.name_str().to_owned(),
            dtype: e.dtype,
            flags: e.node_flags,
            layer: e.layer,
            ne: e.ne,
            ts_ns: e.header.ts_ns,
        }
    }

    /// Whether it is a model weight (whose shape never changes).
    pub fn is_weight(&self) -> bool {
        self.flags & NODE_FLAG_WEIGHT != 0
    }

    /// Element type name (`q8_0`), `?` for unknown values.
    pub fn dtype_name(&self) -> &'static str {
        DType::from_u32(self.dtype).map_or("?", DType::name)
    }

    /// Shape without trailing 1s (`128x352`) for weights; `None` for graph-local leaves
    /// (KV-cache views, inputs), whose recorded shape is that of the graph current when
    /// they were read, not of every iteration.
    pub fn shape(&self) -> Option<String> {
        if !self.is_weight() {
            return None;
        }
        let mut dims: Vec<i64> = self.ne.to_vec();
        while dims.len() > 1 && dims.last() == Some(&1) {
            dims.pop();
        }
        Some(
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("x"),
        )
    }
}
