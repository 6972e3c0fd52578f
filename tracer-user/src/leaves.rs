//! Leaf nodes for the trace: the collector reads, from the target's memory, every source
//! node of the operators that is not itself a computed node (weights, KV-cache views,
//! graph inputs) and records its name, type, shape and flags (`leaf_node` records,
//! `docs/trace-format.md`), so the analyzer names DAG leaves after the engine's own
//! tensors instead of guessing.
//!
//! Cost: the drain loop only looks at node descriptions (`node_desc` records, sent once
//! per node and graph shape) and does a few hash lookups on their addresses ([`LeafResolver::observe`]). The reads
//! happen outside the drain, batched ([`LeafResolver::due`]): at the first graph
//! boundary (graph or decode exit) after new addresses appeared — by then every source
//! of the graph has been seen — then at most every [`RESOLVE_INTERVAL`], and once more
//! when recording ends. Each address is read once (`pread` of the 224-byte `EngineNode`
//! from `/proc/PID/mem`): a model has a few hundred leaves, so the whole recording does a
//! few hundred small reads. A target that has exited cannot be read; its unread leaves
//! keep the analyzer's heuristic names.

use std::{
    collections::HashSet,
    fs::File,
    hash::{BuildHasherDefault, Hasher},
    mem::offset_of,
    os::unix::fs::FileExt,
    time::{Duration, Instant},
};

use common::{
    engine_abi::{ENGINE_ABI_VERSION, EngineNode, MAX_DIMS, NODE_NAME_LEN, OpType},
    event::{EventHeader, EventKind, LeafNodeEvent, NodeDescEvent, OP_DETAIL_STRUCTURE},
};

/// Least time between two batches of reads (the first batch waits only for a graph
/// boundary).
pub const RESOLVE_INTERVAL: Duration = Duration::from_millis(250);

/// Hashes node addresses (already well spread) with one multiply, not SipHash: the
/// drain loop looks up a few addresses per node.
#[derive(Clone, Copy, Debug, Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0 ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        let x = (self.0 ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        // Fold the well-mixed high half into the low bits the table indexes with.
        self.0 = x ^ (x >> 32);
    }
}

/// A set of node addresses.
pub type AddrSet = HashSet<u64, BuildHasherDefault<AddrHasher>>;

/// What [`LeafResolver`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeafStats {
    /// Leaf records made.
    pub recorded: u64,
    /// Addresses read that were computed nodes or not nodes of this ABI version.
    pub skipped: u64,
    /// Addresses that could not be read (the target had exited, or the memory was
    /// unreadable).
    pub unread: u64,
}

/// Offsets of the fields read from raw node descriptions.
const DESC_NODE_ADDR: usize = offset_of!(NodeDescEvent, node_addr);
const DESC_DETAIL: usize = offset_of!(NodeDescEvent, detail);
const DESC_SRC: usize =
    offset_of!(NodeDescEvent, structure) + offset_of!(common::event::OpStructure, src);

/// Finds the leaf addresses in operator records and reads their nodes from the target.
#[derive(Debug)]
pub struct LeafResolver {
    pid: u32,
    /// `/proc/PID/mem`, opened at the first read (after the target's `exec`).
    mem: Option<File>,
    /// The memory cannot be read any more (the target exited, or access was refused).
    gone: bool,
    /// Addresses of computed nodes.
    op_nodes: AddrSet,
    /// Source addresses already queued (each is read at most once).
    queued: AddrSet,
    /// Source addresses waiting to be read.
    pending: Vec<u64>,
    /// When the oldest pending address was queued.
    pending_since: Option<Instant>,
    last_batch: Option<Instant>,
    stats: LeafStats,
    note: Option<String>,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

impl LeafResolver {
    /// A resolver for the target process `pid`.
    pub fn new(pid: u32) -> LeafResolver {
        LeafResolver {
            pid,
            mem: None,
            gone: false,
            op_nodes: AddrSet::default(),
            queued: AddrSet::default(),
            pending: Vec::new(),
            pending_since: None,
            last_batch: None,
            stats: LeafStats::default(),
            note: None,
        }
    }

    /// Looks at one drained record: a node description with structure gives its node
    /// address (a computed node) and its sources (leaf candidates). Other records cost a
    /// length and kind check.
    #[inline]
    pub fn observe(&mut self, record: &[u8], now: Instant) {
        if record.len() < size_of::<NodeDescEvent>()
            || u32_at(record, 0) != EventKind::NodeDesc as u32
            || u32_at(record, DESC_DETAIL) & OP_DETAIL_STRUCTURE == 0
        {
            return;
        }
        self.op_nodes.insert(u64_at(record, DESC_NODE_ADDR));
        for slot in 0..common::engine_abi::MAX_SRC {
            let src = u64_at(record, DESC_SRC + 8 * slot);
            if src != 0 && !self.gone && self.queued.insert(src) {
                self.pending.push(src);
                self.pending_since.get_or_insert(now);
            }
        }
    }

    /// Whether a batch of reads is due: addresses are waiting and either a graph
    /// boundary was just drained (`boundary`) or they have waited [`RESOLVE_INTERVAL`];
    /// never sooner than [`RESOLVE_INTERVAL`] after the previous batch.
    pub fn due(&self, now: Instant, boundary: bool) -> bool {
        let Some(since) = self.pending_since else {
            return false;
        };
        self.rested(now) && (boundary || now.duration_since(since) >= RESOLVE_INTERVAL)
    }

    /// At least [`RESOLVE_INTERVAL`] since the previous batch (or none yet).
    fn rested(&self, now: Instant) -> bool {
        self.last_batch
            .is_none_or(|t| now.duration_since(t) >= RESOLVE_INTERVAL)
    }

    /// Whether the collector should be woken at graph exits (`CONTROL_FLAG_WAKE_ON_GRAPH`):
    /// nothing read yet, or addresses waiting, and a batch may run now. A short run can
    /// end before the next periodic drain; its leaves must be read while it lives.
    pub fn wants_wakeup(&self, now: Instant) -> bool {
        !self.gone
            && self.rested(now)
            && (self.last_batch.is_none() || self.pending_since.is_some())
    }

    /// Reads the pending addresses that are not computed nodes; returns a record per
    /// leaf node found, each with the header `make_header` gives at its read.
    pub fn resolve(
        &mut self,
        now: Instant,
        make_header: impl Fn() -> EventHeader,
    ) -> Vec<LeafNodeEvent> {
        self.last_batch = Some(now);
        self.pending_since = None;
        let pending = std::mem::take(&mut self.pending);
        let mut out = Vec::new();
        for addr in pending {
            if self.op_nodes.contains(&addr) {
                continue;
            }
            let Some(node) = self.read_node(addr) else {
                self.stats.unread += 1;
                continue;
            };
            match leaf_record(&node, addr, make_header()) {
                Some(ev) => {
                    self.stats.recorded += 1;
                    out.push(ev);
                }
                None => self.stats.skipped += 1,
            }
        }
        out
    }

    /// Addresses still waiting (read them with [`LeafResolver::resolve`]).
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The target is gone: the addresses still waiting count as unread.
    pub fn abandon(&mut self) {
        self.gone = true;
        let unread = self
            .pending
            .drain(..)
            .filter(|a| !self.op_nodes.contains(a))
            .count();
        self.stats.unread += unread as u64;
        self.pending_since = None;
    }

    /// What was done so far.
    pub fn stats(&self) -> LeafStats {
        self.stats
    }

    /// A one-line note when the target's memory could not be read (once).
    pub fn take_note(&mut self) -> Option<String> {
        self.note.take()
    }

    /// The raw bytes of the `EngineNode` at `addr`, if the target can be read.
    fn read_node(&mut self, addr: u64) -> Option<[u8; size_of::<EngineNode>()]> {
        if self.gone {
            return None;
        }
        if self.mem.is_none() {
            let path = format!("/proc/{}/mem", self.pid);
            match File::open(&path) {
                Ok(f) => self.mem = Some(f),
                Err(e) => {
                    self.gone = true;
                    self.note = Some(format!(
                        "cannot read the target's memory ({path}: {e}): the analyzer will guess leaf names"
                    ));
                    return None;
                }
            }
        }
        let mem = self.mem.as_ref()?;
        let mut buf = [0u8; size_of::<EngineNode>()];
        match mem.read_at(&mut buf, addr) {
            Ok(n) if n == buf.len() => Some(buf),
            // 0: the address space is gone (the target exited).
            Ok(0) => {
                self.gone = true;
                None
            }
            // A short read or an unmapped address (EIO): this address only.
            Ok(_) | Err(_) => None,
        }
    }
}

/// The leaf record of the raw `EngineNode` bytes `node` read at `addr`, if it is a node
/// of this ABI version that is never computed (op `NONE` or `VIEW`).
pub fn leaf_record(
    node: &[u8; size_of::<EngineNode>()],
    addr: u64,
    header: EventHeader,
) -> Option<LeafNodeEvent> {
    if u32_at(node, offset_of!(EngineNode, abi_version)) != ENGINE_ABI_VERSION {
        return None;
    }
    let op = u32_at(node, offset_of!(EngineNode, op));
    if op != OpType::None as u32 && op != OpType::View as u32 {
        return None;
    }
    let ne_at = offset_of!(EngineNode, ne);
    let name_at = offset_of!(EngineNode, name);
    let mut name = [0u8; NODE_NAME_LEN];
    name.copy_from_slice(&node[name_at..name_at + NODE_NAME_LEN]);
    Some(LeafNodeEvent {
        header,
        node_addr: addr,
        dtype: u32_at(node, offset_of!(EngineNode, dtype)),
        node_flags: u32_at(node, offset_of!(EngineNode, flags)),
        layer: u32_at(node, offset_of!(EngineNode, layer)) as i32,
        op,
        ne: std::array::from_fn::<i64, MAX_DIMS, _>(|i| u64_at(node, ne_at + 8 * i) as i64),
        name,
    })
}

#[cfg(test)]
mod tests {
    use common::{
        engine_abi::{DType, NODE_FLAG_WEIGHT},
        event::OP_DETAIL_NAME,
    };

    use super::*;

    /// The bytes of a node as the engine lays it out.
    fn node_bytes(n: &EngineNode) -> [u8; size_of::<EngineNode>()] {
        let mut b = [0u8; size_of::<EngineNode>()];
        let mut put = |at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(
            offset_of!(EngineNode, abi_version),
            &n.abi_version.to_le_bytes(),
        );
        put(offset_of!(EngineNode, op), &n.op.to_le_bytes());
        put(offset_of!(EngineNode, dtype), &n.dtype.to_le_bytes());
        put(offset_of!(EngineNode, flags), &n.flags.to_le_bytes());
        for (i, d) in n.ne.iter().enumerate() {
            put(offset_of!(EngineNode, ne) + 8 * i, &d.to_le_bytes());
        }
        put(offset_of!(EngineNode, layer), &n.layer.to_le_bytes());
        put(offset_of!(EngineNode, name), &n.name);
        b
    }

    fn weight() -> EngineNode {
        let mut n = EngineNode::empty();
        n.set_name("blk.3.attn_q.weight");
        n.dtype = DType::Q8_0 as u32;
        n.flags = NODE_FLAG_WEIGHT;
        n.layer = 3;
        n.ne = [128, 96, 1, 1];
        n
    }

    #[test]
    fn leaf_records_carry_the_node_and_refuse_others() {
        let h = EventHeader {
            kind: EventKind::LeafNode as u32,
            ts_ns: 9,
            ..EventHeader::default()
        };
        let ev = leaf_record(&node_bytes(&weight()), 0x77, h).expect("a leaf");
        assert_eq!(ev.name_str(), "blk.3.attn_q.weight");
        assert_eq!(
            (ev.node_addr, ev.dtype, ev.node_flags),
            (0x77, 8, NODE_FLAG_WEIGHT)
        );
        assert_eq!((ev.layer, ev.op, ev.ne), (3, 0, [128, 96, 1, 1]));
        assert_eq!(ev.header.ts_ns, 9);
        let mut computed = weight();
        computed.op = OpType::MulMat as u32;
        assert!(leaf_record(&node_bytes(&computed), 0x77, h).is_none());
        let mut other_abi = weight();
        other_abi.abi_version = ENGINE_ABI_VERSION + 1;
        assert!(leaf_record(&node_bytes(&other_abi), 0x77, h).is_none());
    }

    fn desc(node: u64, src: [u64; 4]) -> NodeDescEvent {
        let mut d = NodeDescEvent::zeroed();
        d.header.kind = EventKind::NodeDesc as u32;
        d.node_addr = node;
        d.detail = OP_DETAIL_NAME | OP_DETAIL_STRUCTURE;
        d.structure.src = src;
        d
    }

    fn bytes(d: &NodeDescEvent) -> &[u8] {
        trace_format::record_bytes(d)
    }

    #[test]
    fn sources_are_queued_once_from_descriptions_and_batched() {
        let t0 = Instant::now();
        let mut r = LeafResolver::new(u32::MAX);
        assert!(!r.due(t0, true), "nothing pending");
        r.observe(bytes(&desc(0x100, [0xA0, 0xB0, 0, 0])), t0);
        // Other records and descriptions without structure are not looked at.
        let span = common::event::OpSpanEvent::new(1, 0x200, 5, 1, 0);
        r.observe(trace_format::record_bytes(&span), t0);
        let mut bare = desc(0x300, [0xD0, 0, 0, 0]);
        bare.detail = OP_DETAIL_NAME;
        r.observe(bytes(&bare), t0);
        // A computed node that is also a source; a repeated source.
        r.observe(bytes(&desc(0xB0, [0xA0, 0x100, 0, 0])), t0);
        assert_eq!(r.pending(), 3, "0xA0, 0xB0, 0x100 once each");
        // The first batch waits for a graph boundary or the interval.
        assert!(!r.due(t0, false));
        assert!(r.due(t0, true));
        assert!(r.due(t0 + RESOLVE_INTERVAL, false));
        // pid u32::MAX does not exist: nothing can be read, computed nodes are not tried.
        let got = r.resolve(t0, EventHeader::default);
        assert!(got.is_empty());
        assert_eq!(r.stats().unread, 1, "only 0xA0 is a leaf candidate");
        assert!(r.take_note().is_some_and(|n| n.contains("/proc/")));
        assert_eq!(r.pending(), 0);
        // After a batch, the next one waits for the interval even at a boundary.
        r.gone = false;
        r.observe(bytes(&desc(0x400, [0xE0, 0, 0, 0])), t0);
        assert!(!r.due(t0 + RESOLVE_INTERVAL / 2, true));
        assert!(r.due(t0 + RESOLVE_INTERVAL, true));
    }

    #[test]
    fn reads_nodes_from_a_live_process() {
        // This test process is a live target: leaves are read from its own memory.
        let node = Box::new(weight());
        let addr = std::ptr::from_ref::<EngineNode>(&node) as u64;
        let mut computed = Box::new(weight());
        computed.op = OpType::Add as u32;
        let computed_addr = std::ptr::from_ref::<EngineNode>(&computed) as u64;
        let t0 = Instant::now();
        let mut r = LeafResolver::new(std::process::id());
        r.observe(bytes(&desc(0x100, [addr, computed_addr, 8, 0])), t0);
        let got = r.resolve(t0, EventHeader::default);
        assert_eq!(got.len(), 1, "{:?}", r.stats());
        assert_eq!(got[0].name_str(), "blk.3.attn_q.weight");
        assert_eq!(got[0].node_addr, addr);
        assert_eq!(got[0].ne, [128, 96, 1, 1]);
        assert_eq!(
            r.stats(),
            LeafStats {
                recorded: 1,
                skipped: 1,
                unread: 1
            },
            "the computed node is skipped, address 8 cannot be read"
        );
        drop((node, computed));
    }
}
