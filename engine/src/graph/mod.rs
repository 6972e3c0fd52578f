//! A forward pass as a graph of [`EngineNode`]s in execution order, the structure the
//! probes read. Nodes live in vectors whose capacity is reserved up front and never
//! exceeded, so a node's address — what `src` fields and the tracer refer to — is stable
//! while the graph is alive. Activation memory comes from one arena whose offsets are
//! planned after the graph is built: a node's buffer is freed after its last consumer
//! (ggml-alloc's idea), so a prefill graph needs a few activations' worth of memory,
//! not one per node.

use common::DType;
use common::engine_abi::{
    BackendKind, ENGINE_ABI_VERSION, EngineGraph, EngineNode, MAX_DIMS, MAX_OP_PARAMS, MAX_SRC,
    MUL_MAT_ROW_BEGIN_PARAM, MUL_MAT_ROW_END_PARAM, NODE_FLAG_INPUT, NODE_FLAG_KV_CACHE,
    NODE_FLAG_OUTPUT, NODE_FLAG_WEIGHT, OpType,
};

use crate::error::EngineError;

mod arena;
pub mod placement;

use arena::{ARENA_ALIGN, ArenaPlan};
pub use placement::{Placement, Split};

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
    /// The memory of node `of` (a tensor split's second band, a sync's result).
    Alias { of: usize },
}

impl Storage {
    /// Arena memory for a contiguous `dtype` tensor of shape `ne`, freed after its last
    /// consumer.
    fn arena(dtype: DType, ne: [i64; MAX_DIMS]) -> Storage {
        Storage::Arena {
            bytes: byte_size(dtype, ne),
        }
    }
}

/// A tensor in memory outside the arena (the KV cache): its type, shape, byte strides
/// and address.
#[derive(Clone, Copy, Debug)]
pub struct ExternalTensor {
    /// Element type.
    pub dtype: DType,
    /// Elements per dimension.
    pub ne: [i64; MAX_DIMS],
    /// Byte stride per dimension.
    pub nb: [u64; MAX_DIMS],
    /// Address of the first element.
    pub data: *const u8,
}

/// Everything a computed node is made of, as [`Graph::push_node`] records it.
struct NewNode<'a> {
    op: OpType,
    name: &'a str,
    layer: i32,
    dtype: DType,
    ne: [i64; MAX_DIMS],
    nb: [u64; MAX_DIMS],
    src: &'a [NodeAddr],
    params: &'a [u32],
    storage: Storage,
    /// Address of external memory (0 for arena and alias storage).
    data: u64,
    backend: BackendKind,
}

impl<'a> NewNode<'a> {
    /// A CPU node of no sources and no params with its own contiguous arena buffer; the
    /// callers override what differs.
    fn arena(op: OpType, name: &'a str, layer: i32, dtype: DType, ne: [i64; MAX_DIMS]) -> Self {
        NewNode {
            op,
            name,
            layer,
            dtype,
            ne,
            nb: contiguous_strides(dtype, ne),
            src: &[],
            params: &[],
            storage: Storage::arena(dtype, ne),
            data: 0,
            backend: BackendKind::Cpu,
        }
    }
}

/// A graph being built or computed, plus the memory of its activations.
pub struct Graph {
    nodes: Vec<EngineNode>,
    node_storage: Vec<Storage>,
    leafs: Vec<EngineNode>,
    leaf_storage: Vec<Storage>,
    arena: Vec<u64>,
    header: EngineGraph,
    /// Backend of each node (all CPU without a placement).
    node_backend: Vec<BackendKind>,
    placement: Option<Placement>,
    /// Copies made so far: (source, backend) → the copy on that backend.
    copies: Vec<(NodeAddr, BackendKind, NodeAddr)>,
    /// Whether accel nodes were added since the last `BACKEND_SYNC`.
    accel_pending: bool,
    splits: Vec<Split>,
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

/// The index of the node at `addr` in `slots` (`None`: not one of them).
fn slot_index(slots: &[EngineNode], addr: NodeAddr) -> Option<usize> {
    let base = slots.as_ptr() as u64;
    let size = size_of::<EngineNode>() as u64;
    if addr < base || addr >= base + size * slots.len() as u64 {
        return None;
    }
    Some(((addr - base) / size) as usize)
}

/// Bytes of a contiguous node's data (0 for an unknown type).
pub fn node_bytes(node: &EngineNode) -> usize {
    node.dtype().map_or(0, |t| byte_size(t, node.ne))
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
                ..EngineGraph::zeroed()
            },
            node_backend: Vec::with_capacity(max_nodes),
            placement: None,
            copies: Vec::new(),
            accel_pending: false,
            splits: Vec::new(),
        }
    }

    /// Places the nodes of the graphs built from now on on the CPU and accel backends
    /// (`None`: everything on the CPU, one split).
    pub fn set_placement(&mut self, placement: Option<Placement>) {
        self.placement = placement;
    }

    /// Starts a new graph, keeping the allocations (and so the node addresses).
    pub fn reset(&mut self) {
        self.nodes.clear();
        self.node_storage.clear();
        self.leafs.clear();
        self.leaf_storage.clear();
        self.node_backend.clear();
        self.copies.clear();
        self.accel_pending = false;
        self.splits.clear();
    }

    /// Adds a leaf whose data lives outside the arena (a KV-cache view).
    pub fn leaf_external(
        &mut self,
        name: &str,
        t: ExternalTensor,
        flags: u32,
    ) -> Result<NodeAddr, EngineError> {
        let mut n = EngineNode::empty();
        n.set_name(name);
        n.dtype = t.dtype as u32;
        n.ne = t.ne;
        n.nb = t.nb;
        n.data = t.data as u64;
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
        let backend = self.backend_of(op, layer);
        if let Some(band) = self.tensor_split_band(op, src, params) {
            return self.split_matmul(name, layer, dtype, ne, src, params, band);
        }
        let src = self.route_sources(src, backend, layer)?;
        self.push_node(NewNode {
            src: &src[..],
            params,
            backend,
            ..NewNode::arena(op, name, layer, dtype, ne)
        })
    }

    /// Adds a computed node that writes into external memory `dst` (a copy into the KV
    /// cache).
    pub fn op_into(
        &mut self,
        op: OpType,
        name: &str,
        layer: i32,
        dst: ExternalTensor,
        src: &[NodeAddr],
        flags: u32,
    ) -> Result<NodeAddr, EngineError> {
        let backend = self.backend_of(op, layer);
        if backend == BackendKind::Cpu && self.accel_pending {
            // The CPU writes shared memory the accel may still read.
            self.push_sync(&[], layer)?;
        }
        let src = self.route_sources(src, backend, layer)?;
        let a = self.push_node(NewNode {
            nb: dst.nb,
            src: &src[..],
            storage: Storage::External,
            data: dst.data as u64,
            backend,
            ..NewNode::arena(op, name, layer, dst.dtype, dst.ne)
        })?;
        if let Some(n) = self.nodes.last_mut() {
            n.flags |= flags;
        }
        Ok(a)
    }

    fn push_node(&mut self, new: NewNode<'_>) -> Result<NodeAddr, EngineError> {
        let (src, params, backend) = (new.src, new.params, new.backend);
        if self.nodes.len() == self.nodes.capacity() {
            return Err(EngineError::GraphFull {
                what: "nodes",
                capacity: self.nodes.capacity(),
            });
        }
        debug_assert!(src.len() <= MAX_SRC && params.len() <= MAX_OP_PARAMS);
        let mut n = EngineNode::empty();
        n.op = new.op as u32;
        n.set_name(new.name);
        n.layer = new.layer;
        n.dtype = new.dtype as u32;
        n.ne = new.ne;
        n.nb = new.nb;
        n.data = new.data;
        n.index = self.nodes.len() as u32;
        n.src[..src.len()].copy_from_slice(src);
        n.op_params[..params.len()].copy_from_slice(params);
        self.nodes.push(n);
        self.node_storage.push(new.storage);
        self.node_backend.push(backend);
        if backend == BackendKind::Accel {
            self.accel_pending = true;
        }
        Ok(self
            .nodes
            .last()
            .map_or(0, |l| l as *const EngineNode as u64))
    }

    /// Sets the op params of the node at `addr` (built by [`Graph::op_into`], which
    /// takes none).
    pub fn set_op_params(&mut self, addr: NodeAddr, params: &[u32]) {
        if let Some(i) = self.node_index(addr) {
            let n = &mut self.nodes[i];
            n.op_params = [0; MAX_OP_PARAMS];
            n.op_params[..params.len()].copy_from_slice(params);
        }
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
        slot_index(&self.nodes, addr)
    }

    fn leaf_index(&self, addr: NodeAddr) -> Option<usize> {
        slot_index(&self.leafs, addr)
    }

    /// Plans arena offsets, allocates the arena, fills in every node's `data` and cuts
    /// the nodes into splits, the first with graph id `first_graph_id`. Returns the
    /// number of splits (graph ids used).
    pub fn finish(&mut self, first_graph_id: u64, n_tokens: u32, pos: u32) -> u64 {
        let n = self.nodes.len();
        let root = |mut i: usize, storage: &[Storage]| {
            while let Storage::Alias { of } = storage[i] {
                i = of;
            }
            i
        };
        // Last consumer of every buffer (aliases count as uses of their owner).
        let mut last_use: Vec<usize> = (0..n).collect();
        for i in 0..n {
            let own = root(i, &self.node_storage);
            last_use[own] = last_use[own].max(i);
            for s in self.nodes[i].src {
                if let Some(j) = self.node_index(s) {
                    let j = root(j, &self.node_storage);
                    last_use[j] = last_use[j].max(i);
                }
            }
        }
        // The accel computes while the CPU goes on: what an accel node reads or writes
        // stays allocated until the CPU has synced with it.
        let mut next_sync = n.saturating_sub(1);
        for j in (0..n).rev() {
            if self.nodes[j].op == OpType::BackendSync as u32 {
                next_sync = j;
            }
            if self.node_backend[j] != BackendKind::Accel {
                continue;
            }
            let own = root(j, &self.node_storage);
            last_use[own] = last_use[own].max(next_sync);
            for s in self.nodes[j].src {
                if let Some(k) = self.node_index(s) {
                    let k = root(k, &self.node_storage);
                    last_use[k] = last_use[k].max(next_sync);
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
                Storage::External | Storage::Alias { .. } => {}
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
        for i in 0..n {
            if let Storage::Alias { .. } = self.node_storage[i] {
                self.nodes[i].data = self.nodes[root(i, &self.node_storage)].data;
            }
        }
        let header = |first: usize, len: usize, id: u64, kind: BackendKind| EngineGraph {
            abi_version: ENGINE_ABI_VERSION,
            n_nodes: len as u32,
            nodes: self.nodes.as_ptr().wrapping_add(first) as u64,
            graph_id: id,
            backend_id: u32::from(kind != BackendKind::Cpu),
            backend_kind: kind as u32,
            n_tokens,
            pos,
        };
        self.header = header(0, n, first_graph_id, BackendKind::Cpu);
        let mut splits = std::mem::take(&mut self.splits);
        splits.clear();
        let mut start = 0;
        for i in 1..=n {
            if i == n || self.node_backend[i] != self.node_backend[start] {
                let kind = self.node_backend[start];
                let id = first_graph_id + splits.len() as u64;
                splits.push(Split {
                    backend: kind,
                    header: header(start, i - start, id, kind),
                });
                start = i;
            }
        }
        self.splits = splits;
        self.splits.len().max(1) as u64
    }

    /// The splits of the finished graph, in execution order (one CPU split without a
    /// placement).
    pub fn splits(&self) -> &[Split] {
        &self.splits
    }

    /// The backend of the node at `addr` (CPU for leaves and unknown addresses).
    pub fn backend(&self, addr: NodeAddr) -> BackendKind {
        self.node_index(addr)
            .map_or(BackendKind::Cpu, |i| self.node_backend[i])
    }

    fn backend_of(&self, op: OpType, layer: i32) -> BackendKind {
        self.placement
            .as_ref()
            .map_or(BackendKind::Cpu, |p| p.backend_of(op, layer))
    }

    /// The accel's band of a `MUL_MAT` under a tensor split: a product of a 2-D model
    /// weight with a one-head activation, large enough to split.
    fn tensor_split_band(
        &self,
        op: OpType,
        src: &[NodeAddr],
        params: &[u32],
    ) -> Option<std::ops::Range<usize>> {
        let p = self.placement.as_ref()?;
        if op != OpType::MulMat || params.get(3) != Some(&1) || src.len() != 2 {
            return None;
        }
        // SAFETY: a weight source is a live node of the model (never of this graph).
        let w = unsafe { &*(src[0] as *const EngineNode) };
        if self.node_index(src[0]).is_some()
            || w.flags & NODE_FLAG_WEIGHT == 0
            || w.ne[2] != 1
            || w.ne[3] != 1
        {
            return None;
        }
        p.matmul_band(usize::try_from(w.ne[1]).ok()?)
    }

    /// A tensor split of `dst = w·x`: the accel computes output rows `band` (with its
    /// own copy of `x`), the CPU the rows before it into the same buffer, then a
    /// `BACKEND_SYNC` completes the tensor; consumers read the sync node.
    #[expect(
        clippy::too_many_arguments,
        reason = "the arguments of Graph::op plus the band"
    )]
    fn split_matmul(
        &mut self,
        name: &str,
        layer: i32,
        dtype: DType,
        ne: [i64; MAX_DIMS],
        src: &[NodeAddr],
        params: &[u32],
        band: std::ops::Range<usize>,
    ) -> Result<NodeAddr, EngineError> {
        let n_rows = band.end;
        // The accel's band first (it owns the buffer, and is submitted before the CPU
        // computes its own band), then the CPU's band into the same buffer.
        let mut halves = [0; 2];
        for (half, (backend, rows)) in [
            (BackendKind::Accel, band.start..n_rows),
            (BackendKind::Cpu, 0..band.start),
        ]
        .into_iter()
        .enumerate()
        {
            let mut band_params = [0u32; MAX_OP_PARAMS];
            band_params[..params.len()].copy_from_slice(params);
            band_params[MUL_MAT_ROW_BEGIN_PARAM] = rows.start as u32;
            band_params[MUL_MAT_ROW_END_PARAM] = rows.end as u32;
            let storage = match half {
                0 => Storage::arena(dtype, ne),
                _ => Storage::Alias {
                    of: self
                        .node_index(halves[0])
                        .expect("the accel band was added"),
                },
            };
            let src = self.route_sources(src, backend, layer)?;
            halves[half] = self.push_node(NewNode {
                src: &src[..],
                params: &band_params,
                storage,
                backend,
                ..NewNode::arena(OpType::MulMat, name, layer, dtype, ne)
            })?;
        }
        let [on_accel, on_cpu] = halves;
        self.push_sync(&[on_cpu, on_accel], layer)
    }

    /// A `BACKEND_SYNC` node on the CPU: a view of `src[0]` (of nothing if empty) that
    /// waits for the accel's submitted work.
    fn push_sync(&mut self, src: &[NodeAddr], layer: i32) -> Result<NodeAddr, EngineError> {
        let mode = self.placement.as_ref().map_or(0, |p| p.sync.op_param());
        let (storage, ne, nb, dtype, name) = match src.first().and_then(|&s| self.node_index(s)) {
            Some(j) => {
                let of = match self.node_storage[j] {
                    Storage::Alias { of } => of,
                    _ => j,
                };
                let n = &self.nodes[j];
                let storage = if self.node_storage[j] == Storage::External {
                    Storage::External
                } else {
                    Storage::Alias { of }
                };
                (
                    storage,
                    n.ne,
                    n.nb,
                    n.dtype().unwrap_or(DType::F32),
                    format!("sync.{}", n.name_str()),
                )
            }
            None => (
                Storage::External,
                [1; MAX_DIMS],
                contiguous_strides(DType::F32, [1; MAX_DIMS]),
                DType::F32,
                format!("sync-{layer}"),
            ),
        };
        let data = match (storage, src.first().and_then(|&s| self.get(s))) {
            (Storage::External, Some(n)) => n.data,
            _ => 0,
        };
        let a = self.push_node(NewNode {
            nb,
            src,
            params: &[mode],
            storage,
            data,
            ..NewNode::arena(OpType::BackendSync, &name, layer, dtype, ne)
        })?;
        self.accel_pending = false;
        Ok(a)
    }

    /// The sources a node on `backend` reads: an activation computed on the other
    /// backend is replaced by a `BACKEND_COPY` on `backend` (made once per source and
    /// backend; on the CPU after a sync). Shared memory (the KV-cache stores, which
    /// attention products name only as an ordering dependency) is not copied, but the
    /// CPU syncs before reading it.
    fn route_sources(
        &mut self,
        src: &[NodeAddr],
        backend: BackendKind,
        layer: i32,
    ) -> Result<[NodeAddr; MAX_SRC], EngineError> {
        let mut out = [0; MAX_SRC];
        out[..src.len()].copy_from_slice(src);
        if self.placement.is_none() {
            return Ok(out);
        }
        for slot in out.iter_mut().take(src.len()) {
            let s = *slot;
            let mut read_from = s;
            if backend == BackendKind::Cpu && self.accel_pending && self.reads_accel_memory(s) {
                let waited_on = if self.node_index(s).is_some() {
                    &[s][..]
                } else {
                    &[]
                };
                read_from = self.push_sync(waited_on, layer)?;
            }
            let Some(j) = self.node_index(s) else {
                continue;
            };
            if self.node_backend[j] == backend || self.node_storage[j] == Storage::External {
                continue;
            }
            if let Some(&(_, _, c)) = self
                .copies
                .iter()
                .find(|&&(from, b, _)| from == s && b == backend)
            {
                *slot = c;
                continue;
            }
            let n = self.nodes[j];
            let dtype = n.dtype().unwrap_or(DType::F32);
            let name = format!("to_{}.{}", backend.name(), n.name_str());
            let copy = self.push_node(NewNode {
                src: &[read_from],
                backend,
                ..NewNode::arena(OpType::BackendCopy, &name, layer, dtype, n.ne)
            })?;
            self.copies.push((s, backend, copy));
            *slot = copy;
        }
        Ok(out)
    }

    /// Whether `addr` is memory the accel may be writing: one of its nodes, or the KV
    /// cache (which accel nodes store into).
    fn reads_accel_memory(&self, addr: NodeAddr) -> bool {
        if let Some(j) = self.node_index(addr) {
            return self.node_backend[j] == BackendKind::Accel;
        }
        self.leaf_index(addr)
            .is_some_and(|i| self.leafs[i].flags & NODE_FLAG_KV_CACHE != 0)
    }

    /// The graph header handed to the backend.
    pub fn header(&self) -> &EngineGraph {
        &self.header
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
        g.finish(1, 2, 0);
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
        g.finish(1, 1, 0);
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
