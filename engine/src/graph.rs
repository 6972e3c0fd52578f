//! A forward pass as a graph of [`EngineNode`]s in execution order, the structure the
//! probes read. Nodes live in vectors whose capacity is reserved up front and never
//! exceeded, so a node's address — what `src` fields and the tracer refer to — is stable
//! while the graph is alive. Activation memory comes from one arena whose offsets are
//! planned after the graph is built: a node's buffer is freed after its last consumer
//! (ggml-alloc's idea), so a prefill graph needs a few activations' worth of memory,
//! not one per node.

use common::DType;
use common::engine_abi::{
    ENGINE_ABI_VERSION, EngineGraph, EngineNode, MAX_DIMS, MAX_OP_PARAMS, MAX_SRC, NODE_FLAG_INPUT,
    NODE_FLAG_OUTPUT, OpType,
};

use crate::error::EngineError;

/// Alignment of every arena buffer.
const ARENA_ALIGN: usize = 64;

/// Address of a node, as stored in `EngineNode::src`.
pub type NodeAddr = u64;

/// Where a node's data lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Storage {
    /// Planned in the arena; freed after the last consumer.
    Arena { bytes: usize },
    /// Planned in the arena and kept for the whole graph (inputs, outputs).
    Pinned { bytes: usize },
    /// Memory outside the arena (weights, KV cache).
    External,
}

/// A graph being built or computed, plus the memory of its activations.
pub struct Graph {
    nodes: Vec<EngineNode>,
    node_storage: Vec<Storage>,
    leafs: Vec<EngineNode>,
    leaf_storage: Vec<Storage>,
    arena: Vec<u64>,
    header: EngineGraph,
    work_bytes: usize,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("n_nodes", &self.nodes.len())
            .field("n_leafs", &self.leafs.len())
            .finish()
    }
}

/// Contiguous byte strides for a shape.
pub fn contiguous_strides(dtype: DType, ne: [i64; MAX_DIMS]) -> [u64; MAX_DIMS] {
    let t = dtype.block_bytes() as u64;
    let row = (ne[0] as u64 / dtype.block_len() as u64) * t;
    [
        t,
        row,
        row * ne[1] as u64,
        row * ne[1] as u64 * ne[2] as u64,
    ]
}

fn byte_size(dtype: DType, ne: [i64; MAX_DIMS]) -> usize {
    let nb = contiguous_strides(dtype, ne);
    (nb[3] * ne[3] as u64) as usize
}

impl Graph {
    /// An empty graph that can hold `max_nodes` computed nodes and `max_leafs` leaves.
    pub fn with_capacity(max_nodes: usize, max_leafs: usize) -> Graph {
        Graph {
            nodes: Vec::with_capacity(max_nodes),
            node_storage: Vec::with_capacity(max_nodes),
            leafs: Vec::with_capacity(max_leafs),
            leaf_storage: Vec::with_capacity(max_leafs),
            arena: Vec::new(),
            header: EngineGraph {
                abi_version: ENGINE_ABI_VERSION,
                n_nodes: 0,
                nodes: 0,
                graph_id: 0,
                backend_id: 0,
                backend_kind: 0,
                n_tokens: 0,
                pos: 0,
            },
            work_bytes: 0,
        }
    }

    /// Starts a new graph, keeping the allocations (and so the node addresses).
    pub fn reset(&mut self) {
        self.nodes.clear();
        self.node_storage.clear();
        self.leafs.clear();
        self.leaf_storage.clear();
        self.work_bytes = 0;
    }

    /// Adds a leaf whose data lives outside the arena (a KV-cache view).
    pub fn leaf_external(
        &mut self,
        name: &str,
        dtype: DType,
        ne: [i64; MAX_DIMS],
        nb: [u64; MAX_DIMS],
        data: *const u8,
        flags: u32,
    ) -> Result<NodeAddr, EngineError> {
        let mut n = EngineNode::empty();
        n.set_name(name);
        n.dtype = dtype as u32;
        n.ne = ne;
        n.nb = nb;
        n.data = data as u64;
        n.flags = flags;
        self.push_leaf(n, Storage::External)
    }

    /// Adds an input leaf with arena memory that the caller fills before computing.
    pub fn leaf_input(
        &mut self,
        name: &str,
        dtype: DType,
        ne: [i64; MAX_DIMS],
    ) -> Result<NodeAddr, EngineError> {
        let mut n = EngineNode::empty();
        n.set_name(name);
        n.dtype = dtype as u32;
        n.ne = ne;
        n.nb = contiguous_strides(dtype, ne);
        n.flags = NODE_FLAG_INPUT;
        self.push_leaf(
            n,
            Storage::Pinned {
                bytes: byte_size(dtype, ne),
            },
        )
    }

    fn push_leaf(&mut self, n: EngineNode, s: Storage) -> Result<NodeAddr, EngineError> {
        if self.leafs.len() == self.leafs.capacity() {
            return Err(EngineError::GraphFull {
                what: "leaves",
                capacity: self.leafs.capacity(),
            });
        }
        self.leafs.push(n);
        self.leaf_storage.push(s);
        Ok(self
            .leafs
            .last()
            .map_or(0, |l| l as *const EngineNode as u64))
    }

    /// Adds a computed node with a fresh contiguous f32 (or `dtype`) arena buffer.
    #[expect(
        clippy::too_many_arguments,
        reason = "mirrors the node's fields one to one"
    )]
    pub fn op(
        &mut self,
        op: OpType,
        name: &str,
        layer: i32,
        dtype: DType,
        ne: [i64; MAX_DIMS],
        src: &[NodeAddr],
        params: &[u32],
    ) -> Result<NodeAddr, EngineError> {
        let nb = contiguous_strides(dtype, ne);
        self.push_node(
            op,
            name,
            layer,
            dtype,
            ne,
            nb,
            src,
            params,
            Storage::Arena {
                bytes: byte_size(dtype, ne),
            },
            0,
        )
    }

    /// Adds a computed node that writes into external memory described by `nb`/`data`
    /// (a copy into the KV cache).
    #[expect(
        clippy::too_many_arguments,
        reason = "mirrors the node's fields one to one"
    )]
    pub fn op_into(
        &mut self,
        op: OpType,
        name: &str,
        layer: i32,
        dtype: DType,
        ne: [i64; MAX_DIMS],
        nb: [u64; MAX_DIMS],
        data: *mut u8,
        src: &[NodeAddr],
        flags: u32,
    ) -> Result<NodeAddr, EngineError> {
        let a = self.push_node(
            op,
            name,
            layer,
            dtype,
            ne,
            nb,
            src,
            &[],
            Storage::External,
            data as u64,
        )?;
        if let Some(n) = self.nodes.last_mut() {
            n.flags |= flags;
        }
        Ok(a)
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "mirrors the node's fields one to one"
    )]
    fn push_node(
        &mut self,
        op: OpType,
        name: &str,
        layer: i32,
        dtype: DType,
        ne: [i64; MAX_DIMS],
        nb: [u64; MAX_DIMS],
        src: &[NodeAddr],
        params: &[u32],
        storage: Storage,
        data: u64,
    ) -> Result<NodeAddr, EngineError> {
        if self.nodes.len() == self.nodes.capacity() {
            return Err(EngineError::GraphFull {
                what: "nodes",
                capacity: self.nodes.capacity(),
            });
        }
        debug_assert!(src.len() <= MAX_SRC && params.len() <= MAX_OP_PARAMS);
        let mut n = EngineNode::empty();
        n.op = op as u32;
        n.set_name(name);
        n.layer = layer;
        n.dtype = dtype as u32;
        n.ne = ne;
        n.nb = nb;
        n.data = data;
        n.index = self.nodes.len() as u32;
        n.src[..src.len()].copy_from_slice(src);
        n.op_params[..params.len()].copy_from_slice(params);
        self.nodes.push(n);
        self.node_storage.push(storage);
        Ok(self
            .nodes
            .last()
            .map_or(0, |l| l as *const EngineNode as u64))
    }

    /// Marks a node as a graph output: its memory is kept to the end.
    pub fn mark_output(&mut self, addr: NodeAddr) {
        if let Some(i) = self.node_index(addr) {
            self.nodes[i].flags |= NODE_FLAG_OUTPUT;
            if let Storage::Arena { bytes } = self.node_storage[i] {
                self.node_storage[i] = Storage::Pinned { bytes };
            }
        }
    }

    fn node_index(&self, addr: NodeAddr) -> Option<usize> {
        let base = self.nodes.as_ptr() as u64;
        let size = size_of::<EngineNode>() as u64;
        if addr < base || addr >= base + size * self.nodes.len() as u64 {
            return None;
        }
        Some(((addr - base) / size) as usize)
    }

    fn leaf_index(&self, addr: NodeAddr) -> Option<usize> {
        let base = self.leafs.as_ptr() as u64;
        let size = size_of::<EngineNode>() as u64;
        if addr < base || addr >= base + size * self.leafs.len() as u64 {
            return None;
        }
        Some(((addr - base) / size) as usize)
    }

    /// Plans arena offsets, allocates the arena and fills in every node's `data`, and
    /// fills the graph header. `work_bytes` is the scratch the backend must provide.
    pub fn finish(&mut self, graph_id: u64, backend_id: u32, n_tokens: u32, pos: u32) {
        let n = self.nodes.len();
        // Last consumer of every node.
        let mut last_use: Vec<usize> = (0..n).collect();
        for i in 0..n {
            for s in self.nodes[i].src {
                if let Some(j) = self.node_index(s) {
                    last_use[j] = last_use[j].max(i);
                }
            }
        }
        let mut alloc = ArenaPlan::default();
        let mut leaf_offsets = vec![None; self.leafs.len()];
        for (i, s) in self.leaf_storage.iter().enumerate() {
            if let Storage::Pinned { bytes } = *s {
                leaf_offsets[i] = Some(alloc.alloc(bytes));
            }
        }
        let mut node_offsets: Vec<Option<usize>> = vec![None; n];
        let mut frees: Vec<Vec<usize>> = vec![Vec::new(); n];
        for j in 0..n {
            if matches!(self.node_storage[j], Storage::Arena { .. }) && last_use[j] > j {
                frees[last_use[j]].push(j);
            }
        }
        for i in 0..n {
            match self.node_storage[i] {
                Storage::Arena { bytes } | Storage::Pinned { bytes } => {
                    node_offsets[i] = Some(alloc.alloc(bytes))
                }
                Storage::External => {}
            }
            if matches!(self.node_storage[i], Storage::Arena { .. }) && last_use[i] == i {
                // Never read: free right away (still written by its op).
                if let (Some(off), Storage::Arena { bytes }) =
                    (node_offsets[i], self.node_storage[i])
                {
                    alloc.free(off, bytes);
                }
            }
            for &j in &frees[i] {
                if let (Some(off), Storage::Arena { bytes }) =
                    (node_offsets[j], self.node_storage[j])
                {
                    alloc.free(off, bytes);
                }
            }
        }
        let words = alloc.high_water.div_ceil(8) + ARENA_ALIGN / 8;
        if self.arena.len() < words {
            self.arena = vec![0u64; words];
        }
        let base = {
            let p = self.arena.as_ptr() as usize;
            (p.div_ceil(ARENA_ALIGN) * ARENA_ALIGN) as u64
        };
        for (i, off) in leaf_offsets.iter().enumerate() {
            if let Some(off) = off {
                self.leafs[i].data = base + *off as u64;
            }
        }
        for (i, off) in node_offsets.iter().enumerate() {
            if let Some(off) = off {
                self.nodes[i].data = base + *off as u64;
            }
        }
        self.work_bytes = self
            .nodes
            .iter()
            .map(crate::ops::work_size)
            .max()
            .unwrap_or(0);
        self.header = EngineGraph {
            abi_version: ENGINE_ABI_VERSION,
            n_nodes: n as u32,
            nodes: self.nodes.as_ptr() as u64,
            graph_id,
            backend_id,
            backend_kind: common::BackendKind::Cpu as u32,
            n_tokens,
            pos,
        };
    }

    /// The graph header handed to the backend.
    pub fn header(&self) -> &EngineGraph {
        &self.header
    }

    /// Scratch bytes the backend must provide.
    pub fn work_bytes(&self) -> usize {
        self.work_bytes
    }

    /// The computed nodes, in order.
    pub fn nodes(&self) -> &[EngineNode] {
        &self.nodes
    }

    /// Bytes of arena in use.
    pub fn arena_bytes(&self) -> usize {
        self.arena.len() * 8
    }

    /// The node or leaf at `addr`, if it belongs to this graph.
    pub fn get(&self, addr: NodeAddr) -> Option<&EngineNode> {
        self.node_index(addr)
            .map(|i| &self.nodes[i])
            .or_else(|| self.leaf_index(addr).map(|i| &self.leafs[i]))
    }

    /// Mutable data of an input leaf as `T` (after [`Graph::finish`]).
    pub fn input_mut<T: bytemuck::Pod>(&mut self, addr: NodeAddr) -> &mut [T] {
        let i = self
            .leaf_index(addr)
            .expect("input_mut takes a leaf of this graph");
        let bytes = match self.leaf_storage[i] {
            Storage::Pinned { bytes } => bytes,
            _ => panic!("input_mut takes an input leaf"),
        };
        // SAFETY: the leaf's data points at `bytes` bytes of this graph's arena, aligned
        // to ARENA_ALIGN (≥ align_of::<T>() for the Pod types used: f32, i32), and no
        // other reference to it exists while `self` is borrowed mutably.
        unsafe {
            std::slice::from_raw_parts_mut(self.leafs[i].data as *mut T, bytes / size_of::<T>())
        }
    }
}

/// First-fit free-list planner of arena offsets.
#[derive(Default)]
struct ArenaPlan {
    free: Vec<(usize, usize)>,
    /// End of the highest block in use.
    top: usize,
    /// Highest `top` ever reached: the arena size needed.
    high_water: usize,
}

impl ArenaPlan {
    fn alloc(&mut self, bytes: usize) -> usize {
        let bytes = bytes.div_ceil(ARENA_ALIGN) * ARENA_ALIGN;
        // Best fit among free blocks.
        let best = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, (_, size))| *size >= bytes)
            .min_by_key(|(_, (_, size))| *size)
            .map(|(i, _)| i);
        if let Some(i) = best {
            let (off, size) = self.free[i];
            if size == bytes {
                self.free.remove(i);
            } else {
                self.free[i] = (off + bytes, size - bytes);
            }
            return off;
        }
        let off = self.top;
        self.top += bytes;
        self.high_water = self.high_water.max(self.top);
        off
    }

    fn free(&mut self, off: usize, bytes: usize) {
        let bytes = bytes.div_ceil(ARENA_ALIGN) * ARENA_ALIGN;
        self.free.push((off, bytes));
        self.free.sort_unstable();
        // Merge neighbours.
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(self.free.len());
        for (o, s) in self.free.drain(..) {
            if let Some(last) = merged.last_mut()
                && last.0 + last.1 == o
            {
                last.1 += s;
                continue;
            }
            merged.push((o, s));
        }
        // A free block at the top shrinks the arena.
        if let Some(&(o, s)) = merged.last()
            && o + s == self.top
        {
            self.top = o;
            merged.pop();
        }
        self.free = merged;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ne(a: i64, b: i64) -> [i64; 4] {
        [a, b, 1, 1]
    }

    #[test]
    fn addresses_are_stable_and_sources_resolve() {
        let mut g = Graph::with_capacity(8, 4);
        let x = g.leaf_input("x", DType::F32, ne(4, 2)).expect("room");
        let a = g
            .op(OpType::RmsNorm, "norm", 0, DType::F32, ne(4, 2), &[x], &[])
            .expect("room");
        let b = g
            .op(OpType::Add, "add", 0, DType::F32, ne(4, 2), &[a, x], &[])
            .expect("room");
        g.mark_output(b);
        g.finish(1, 0, 2, 0);
        assert_eq!(g.header().n_nodes, 2);
        assert_eq!(g.get(b).expect("b").src[0], a);
        assert_eq!(g.get(a).expect("a").src[0], x);
        assert!(g.get(x).expect("x").data != 0);
    }

    #[test]
    fn full_graph_is_an_error_not_a_reallocation() {
        let mut g = Graph::with_capacity(1, 1);
        g.op(OpType::Add, "a", 0, DType::F32, ne(1, 1), &[], &[])
            .expect("room for one");
        assert!(matches!(
            g.op(OpType::Add, "b", 0, DType::F32, ne(1, 1), &[], &[]),
            Err(EngineError::GraphFull { .. })
        ));
    }

    #[test]
    fn memory_is_reused_after_the_last_consumer() {
        // A chain a -> b -> c -> d of equal sizes needs at most two live buffers.
        let mut g = Graph::with_capacity(8, 1);
        let size = 1024i64;
        let mut prev = g
            .op(OpType::Add, "n0", 0, DType::F32, ne(size, 1), &[], &[])
            .expect("room");
        for i in 1..6 {
            prev = g
                .op(
                    OpType::Add,
                    &format!("n{i}"),
                    0,
                    DType::F32,
                    ne(size, 1),
                    &[prev],
                    &[],
                )
                .expect("room");
        }
        g.mark_output(prev);
        g.finish(1, 0, 1, 0);
        assert!(
            g.arena_bytes() <= 2 * 4 * size as usize + 2 * ARENA_ALIGN,
            "arena {}",
            g.arena_bytes()
        );
        // Live buffers never overlap: each node's buffer differs from its source's.
        for n in g.nodes() {
            if n.src[0] != 0 {
                assert_ne!(g.get(n.src[0]).expect("src").data, n.data);
            }
        }
    }
}
