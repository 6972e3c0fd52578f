//! Operator level: node descriptions ([`NodeInfo`], interned), per-thread operator
//! slices ([`OpSlice`], 32 bytes each), per-node spans ([`NodeSpan`], Algorithm 1 of
//! seed 002: first entry to last exit, counters summed over threads) and incremental
//! per-op-type / per-class aggregates.

use common::{
    engine_abi::{MAX_DIMS, MAX_OP_PARAMS, MAX_SRC, OpType},
    event::{OP_DETAIL_OP_PARAMS, OP_DETAIL_STRUCTURE, OpEvent, op_detail_store_slot},
    op_catalog::{self, OP_UNKNOWN_BASE},
};
use serde::Serialize;

/// "No index" marker in the compact records.
pub const NONE_U32: u32 = u32::MAX;
/// A counter value that was not read on both sides of an operator.
pub const PMC_MISSING: u64 = u64::MAX;

/// The upper-case name of an op id (`MUL_MAT`, `common::op_catalog`): `GGML_OP_<n>` for
/// an op of a llama.cpp build profinfer had no name for, `OP_<n>` for other values.
pub fn op_name(op: u32) -> String {
    if let Some(name) = op_catalog::op_name(op) {
        return name.to_owned();
    }
    if op & OP_UNKNOWN_BASE != 0 && op != u32::MAX {
        return format!("GGML_OP_{}", op & !OP_UNKNOWN_BASE);
    }
    format!("OP_{op}")
}

/// A computed node as seen at operator entry (nodes with the same address but a
/// different shape, name or sources are different `NodeInfo`s).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeInfo {
    /// Address of the `EngineNode`.
    pub addr: u64,
    /// `OpType` value.
    pub op: u32,
    /// Position in the graph's execution order.
    pub index: u32,
    /// Transformer layer, or -1.
    pub layer: i32,
    /// Node name (`ffn_up-3`), empty if not recorded.
    pub name: String,
    /// Class: the name without its `-<layer>` suffix (`ffn_up`), interned id.
    pub class: u32,
    /// Whether dtype/shape/sources were recorded (structure parsing on).
    pub has_structure: bool,
    /// `DType` value.
    pub dtype: u32,
    /// Elements per dimension.
    pub ne: [i64; MAX_DIMS],
    /// Source node addresses (0 where unused).
    pub src: [u64; MAX_SRC],
    /// Whether `op_params` were recorded (trace format 2 with structure on).
    pub has_op_params: bool,
    /// The node's op parameters (all zero when not recorded).
    pub op_params: [u32; MAX_OP_PARAMS],
    /// The source slot whose tensor the node stores into (a KV-cache store), when the
    /// probe recorded it (`OP_DETAIL_STORE_SHIFT`).
    pub stores_into: Option<usize>,
}

/// The sizes of a matrix product, from a `MUL_MAT` node's shape and op params.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatMulDims {
    /// Output rows per (row, head): `ne[0]`.
    pub n: u64,
    /// Rows of `src1` (`op_params[2]`).
    pub m: u64,
    /// Heads (`op_params[3]`).
    pub h: u64,
    /// Inner dimension (`op_params[4]`).
    pub k: u64,
}

impl MatMulDims {
    /// Multiply-adds: `K·N·M·H`.
    pub fn complexity(&self) -> u64 {
        self.k
            .saturating_mul(self.n)
            .saturating_mul(self.m)
            .saturating_mul(self.h)
    }
}

impl NodeInfo {
    /// Builds the description from an entry record, with the node's class and layer
    /// (the probe's layer, else the one its name or sources tell).
    pub(crate) fn from_event(e: &OpEvent, class: u32, layer: i32) -> NodeInfo {
        let s = OP_DETAIL_STRUCTURE & e.detail != 0;
        let p = s && OP_DETAIL_OP_PARAMS & e.detail != 0;
        NodeInfo {
            addr: e.node_addr,
            op: e.op,
            index: e.index,
            layer,
            name: e.name_str().to_owned(),
            class,
            has_structure: s,
            dtype: if s { e.structure.dtype } else { 0 },
            ne: if s { e.structure.ne } else { [0; MAX_DIMS] },
            src: if s { e.structure.src } else { [0; MAX_SRC] },
            has_op_params: p,
            op_params: if p {
                e.structure.op_params
            } else {
                [0; MAX_OP_PARAMS]
            },
            stores_into: if s {
                op_detail_store_slot(e.detail)
            } else {
                None
            },
        }
    }

    /// Whether this description matches an entry record.
    pub(crate) fn matches(&self, e: &OpEvent) -> bool {
        let s = OP_DETAIL_STRUCTURE & e.detail != 0;
        let p = s && OP_DETAIL_OP_PARAMS & e.detail != 0;
        self.addr == e.node_addr
            && self.op == e.op
            && self.index == e.index
            // Without the probe's layer, equal names (below) mean equal layers.
            && (e.layer < 0 || self.layer == e.layer)
            && self.has_structure == s
            && (!s
                || (self.dtype == e.structure.dtype
                    && self.ne == e.structure.ne
                    && self.src == e.structure.src))
            // A node whose shape stays while its parameters change (the KV length `K`
            // of `kqv_out` grows every decode step) is another description.
            && self.has_op_params == p
            && (!p || self.op_params == e.structure.op_params)
            && self.stores_into == (if s { op_detail_store_slot(e.detail) } else { None })
            && self.name.as_bytes() == e.name_str().as_bytes()
    }

    /// `K`, `N`, `M`, `H` of a `MUL_MAT` from its recorded op params (`N = ne[0]`, see
    /// `docs/probe-abi.md`); `None` for other ops, without op params (format-1 traces) or
    /// with a zero size among them.
    pub fn mul_mat_dims(&self) -> Option<MatMulDims> {
        if self.op != OpType::MulMat as u32 || !self.has_structure || !self.has_op_params {
            return None;
        }
        let d = MatMulDims {
            n: u64::try_from(self.ne[0]).ok()?,
            m: u64::from(self.op_params[2]),
            h: u64::from(self.op_params[3]),
            k: u64::from(self.op_params[4]),
        };
        (d.n > 0 && d.m > 0 && d.h > 0 && d.k > 0).then_some(d)
    }

    /// Op type name (`MUL_MAT`).
    pub fn op_name(&self) -> String {
        op_name(self.op)
    }

    /// Shape without trailing 1s, `64x8` style ("?" without structure).
    pub fn shape(&self) -> String {
        if !self.has_structure {
            return "?".to_owned();
        }
        let mut dims: Vec<i64> = self.ne.to_vec();
        while dims.len() > 1 && dims.last() == Some(&1) {
            dims.pop();
        }
        dims.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("x")
    }

    /// Number of elements of the node (product of `ne`), 0 without structure.
    pub fn elements(&self) -> u64 {
        if !self.has_structure {
            return 0;
        }
        self.ne.iter().map(|&d| d.max(0) as u64).product()
    }
}

/// One thread's execution of one node: 32 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OpSlice {
    /// Entry, ns.
    pub start_ns: u64,
    /// Exit, ns.
    pub end_ns: u64,
    /// [`NodeInfo`] id; [`NONE_U32`] for a span (trace format 4) whose node is not known
    /// yet (its graph is still open) or could not be interned (a limit was reached: such
    /// a span belongs to no [`NodeSpan`]).
    pub node: u32,
    /// Graph index, or [`NONE_U32`] when no graph was open.
    pub graph: u32,
    /// Thread index in [`crate::TraceModel::threads`].
    pub thread: u32,
    /// Offset of its counter deltas in the slice counter arena, or [`NONE_U32`].
    pub pmc: u32,
}
const _: () = assert!(size_of::<OpSlice>() == 32);

impl OpSlice {
    /// Duration, ns.
    pub fn dur_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// One node of one graph computation (seed 002 Algorithm 1): from the first thread's
/// entry to the last thread's exit; counters summed over threads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeSpan {
    /// Graph index.
    pub graph: u32,
    /// [`NodeInfo`] id.
    pub node: u32,
    /// First entry, ns.
    pub start_ns: u64,
    /// Last exit, ns.
    pub end_ns: u64,
    /// Sum of the threads' own durations, ns.
    pub busy_ns: u64,
    /// Threads that ran it.
    pub n_threads: u32,
    /// Range of its slice ids in [`crate::TraceModel::node_slice_ids`].
    pub slices: std::ops::Range<u32>,
    /// Counter sums over threads ([`PMC_MISSING`] where no thread had that counter).
    pub pmc: Vec<u64>,
    /// What the GPU did for it, for a node of a GPU split whose timestamps were read
    /// (`GpuTimestampsEvent`); the span's own times are then the CPU recording it.
    pub gpu: Option<GpuTime>,
}

/// A node's execution on a GPU, from the timestamps the GPU wrote around it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GpuTime {
    /// Start on the trace's clock, ns (values on another clock are placed so the split's
    /// last one falls where the target read them).
    pub start_ns: u64,
    /// Duration, ns (a fused pair's second node's time included in the first's).
    pub dur_ns: u64,
}

impl NodeSpan {
    /// Duration, ns.
    pub fn dur_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// Aggregate over every node span of one op type (or one class).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OpAggregate {
    /// Node executions.
    pub count: u64,
    /// Sum of node durations (first entry to last exit), ns.
    pub total_ns: u64,
    /// Sum of per-thread busy time, ns.
    pub busy_ns: u64,
    /// Sum of `n_threads × duration` (thread time available), ns.
    pub thread_span_ns: u64,
    /// Counter sums (index = counter).
    pub pmc: Vec<u64>,
    /// Node executions that had each counter.
    pub pmc_nodes: Vec<u64>,
}

impl OpAggregate {
    /// Adds one node span.
    pub fn add(&mut self, span: &NodeSpan) {
        self.count += 1;
        self.total_ns += span.dur_ns();
        self.busy_ns += span.busy_ns;
        self.thread_span_ns += span.dur_ns() * u64::from(span.n_threads);
        if self.pmc.len() < span.pmc.len() {
            self.pmc.resize(span.pmc.len(), 0);
            self.pmc_nodes.resize(span.pmc.len(), 0);
        }
        for (i, &v) in span.pmc.iter().enumerate() {
            if v != PMC_MISSING {
                self.pmc[i] = self.pmc[i].saturating_add(v);
                self.pmc_nodes[i] += 1;
            }
        }
    }

    /// Mean node duration, ns.
    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.count as f64
        }
    }

    /// Share of the threads' time inside the op that they were idle (waiting at the
    /// barrier for the slowest thread).
    pub fn idle_share(&self) -> f64 {
        if self.thread_span_ns == 0 {
            0.0
        } else {
            1.0 - self.busy_ns as f64 / self.thread_span_ns as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregate_idle_share_is_one_minus_busy_over_available() {
        let mut a = OpAggregate::default();
        // Two threads, span 100: one busy 100, the other 60 → idle 40 of 200.
        a.add(&NodeSpan {
            graph: 0,
            node: 0,
            start_ns: 0,
            end_ns: 100,
            busy_ns: 160,
            n_threads: 2,
            gpu: None,
            slices: 0..2,
            pmc: vec![5, PMC_MISSING],
        });
        assert!((a.idle_share() - 0.2).abs() < 1e-12);
        assert_eq!(a.pmc, vec![5, 0]);
        assert_eq!(a.pmc_nodes, vec![1, 0]);
        assert_eq!(a.mean_ns(), 100.0);
    }
}
