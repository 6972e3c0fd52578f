//! `engine run --self-profile FILE`: timestamps taken inside the engine around every
//! token, graph, operator and phase, with `CLOCK_MONOTONIC` — the clock
//! `bpf_ktime_get_ns` reads — so they are the ground truth a tracer's timings are
//! measured against. Off by default; when off, each probe body pays one relaxed atomic
//! load.
//!
//! Output: JSON Lines, one object per span:
//! `{"level":"op","name":"ffn_up-3","op":"MUL_MAT","layer":3,"tid":1234,"ith":0,
//!   "graph":5,"node":12,"start_ns":...,"end_ns":...}`; `level` is `token`, `graph`,
//! `op` or `phase`; and, for every expert-indexed product (`MUL_MAT_ID`), the routing
//! decision it computes with — `{"level":"experts","name":"ffn_moe_up-0","layer":0,
//! "graph":5,"node":12,"n_used":4,"ids":[..],"weights":[..],...}` (`ids`: `n_used` per
//! token), the ground truth of the tracer's expert records.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::engine_abi::{EngineGraph, EngineNode, NODE_NAME_LEN, OpType};

static ENABLED: AtomicBool = AtomicBool::new(false);
static BUFFERS: Mutex<Vec<Arc<Mutex<Vec<Record>>>>> = Mutex::new(Vec::new());

thread_local! {
    static LOCAL: Arc<Mutex<Vec<Record>>> = {
        let buf = Arc::new(Mutex::new(Vec::with_capacity(1 << 14)));
        BUFFERS.lock().unwrap_or_else(|e| e.into_inner()).push(buf.clone());
        buf
    };
}

/// Level of a recorded span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// One `engine_decode` call.
    Token,
    /// One `engine_graph_compute` call.
    Graph,
    /// One thread's share of one node (`engine_op_compute`).
    Op,
    /// One phase function.
    Phase,
    /// The experts an expert-indexed product uses (an instant: start = end).
    Experts,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Token => "token",
            Level::Graph => "graph",
            Level::Op => "op",
            Level::Phase => "phase",
            Level::Experts => "experts",
        }
    }
}

/// One recorded span.
#[derive(Clone, Debug)]
pub struct Record {
    /// Level of the span.
    pub level: Level,
    /// Phase name (`embed`, `softmax`, ...), or empty.
    pub phase: &'static str,
    /// Node name for ops (NUL-padded).
    pub name: [u8; NODE_NAME_LEN],
    /// Op type for ops.
    pub op: u32,
    /// Layer for ops, else -1.
    pub layer: i32,
    /// Kernel thread id.
    pub tid: i32,
    /// Thread index within the backend for ops.
    pub ith: u32,
    /// Graph id (graph and op spans).
    pub graph: u64,
    /// Node index for ops; number of nodes for graphs; batch size for tokens.
    pub index: u32,
    /// Start position (tokens).
    pub pos: u32,
    /// Start, ns of CLOCK_MONOTONIC.
    pub start_ns: u64,
    /// End, ns of CLOCK_MONOTONIC.
    pub end_ns: u64,
    /// Experts: the ids, `pos` (the number used) per token; empty for other levels.
    pub ids: Vec<i32>,
    /// Experts: the routing weights matching `ids` (empty if the node has none).
    pub weights: Vec<f32>,
}

/// Reads CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Turns recording on for the rest of the process.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether recording is on.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// A span being timed; recorded when dropped. Inert when self-profiling is off.
#[must_use]
pub struct Span(Option<Record>);

impl Span {
    #[inline]
    fn start(make: impl FnOnce() -> Record) -> Span {
        if !enabled() {
            return Span(None);
        }
        let mut r = make();
        r.tid = gettid();
        r.start_ns = monotonic_ns();
        Span(Some(r))
    }

    fn blank(level: Level) -> Record {
        Record {
            level,
            phase: "",
            name: [0; NODE_NAME_LEN],
            op: 0,
            layer: -1,
            tid: 0,
            ith: 0,
            graph: 0,
            index: 0,
            pos: 0,
            start_ns: 0,
            end_ns: 0,
            ids: Vec::new(),
            weights: Vec::new(),
        }
    }

    /// A token-level span (one decode of `n_tokens` at `pos`).
    #[inline]
    pub fn token(n_tokens: u32, pos: u32) -> Span {
        Span::start(|| Record {
            index: n_tokens,
            pos,
            ..Span::blank(Level::Token)
        })
    }

    /// A graph-level span.
    #[inline]
    pub fn graph(g: &EngineGraph) -> Span {
        Span::start(|| Record {
            graph: g.graph_id,
            index: g.n_nodes,
            pos: g.pos,
            ..Span::blank(Level::Graph)
        })
    }

    /// An op-level span of thread `ith`.
    #[inline]
    pub fn op(node: &EngineNode, ith: u32, graph: u64) -> Span {
        Span::start(|| Record {
            name: node.name,
            op: node.op,
            layer: node.layer,
            ith,
            graph,
            index: node.index,
            ..Span::blank(Level::Op)
        })
    }

    /// A phase span.
    #[inline]
    pub fn phase(name: &'static str) -> Span {
        Span::start(|| Record {
            phase: name,
            ..Span::blank(Level::Phase)
        })
    }
}

/// Records the routing decision an expert-indexed product `node` of graph `graph`
/// computes with: `ids` (`n_used` per token) and their `weights` (may be empty).
pub fn record_experts(node: &EngineNode, graph: u64, n_used: u32, ids: &[i32], weights: &[f32]) {
    if !enabled() {
        return;
    }
    let now = monotonic_ns();
    let r = Record {
        name: node.name,
        op: node.op,
        layer: node.layer,
        graph,
        index: node.index,
        pos: n_used,
        tid: gettid(),
        start_ns: now,
        end_ns: now,
        ids: ids.to_vec(),
        weights: weights.to_vec(),
        ..Span::blank(Level::Experts)
    };
    LOCAL.with(|buf| buf.lock().unwrap_or_else(|e| e.into_inner()).push(r));
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(mut r) = self.0.take() {
            r.end_ns = monotonic_ns();
            LOCAL.with(|buf| buf.lock().unwrap_or_else(|e| e.into_inner()).push(r));
        }
    }
}

/// Takes every record so far from every thread, sorted by start time.
pub fn drain() -> Vec<Record> {
    let mut all = Vec::new();
    for buf in BUFFERS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        all.append(&mut buf.lock().unwrap_or_else(|e| e.into_inner()));
    }
    all.sort_by_key(|r| (r.start_ns, r.tid));
    all
}

/// Writes records as JSON Lines.
pub fn write_jsonl(records: &[Record], mut out: impl Write) -> std::io::Result<()> {
    for r in records {
        let mut obj = serde_json::json!({
            "level": r.level.name(),
            "tid": r.tid,
            "start_ns": r.start_ns,
            "end_ns": r.end_ns,
        });
        let m = obj
            .as_object_mut()
            .expect("json! of an object literal is an object");
        match r.level {
            Level::Token => {
                m.insert("n_tokens".into(), r.index.into());
                m.insert("pos".into(), r.pos.into());
            }
            Level::Graph => {
                m.insert("graph".into(), r.graph.into());
                m.insert("n_nodes".into(), r.index.into());
                m.insert("pos".into(), r.pos.into());
            }
            Level::Op | Level::Experts => {
                let len = r.name.iter().position(|&b| b == 0).unwrap_or(NODE_NAME_LEN);
                m.insert(
                    "name".into(),
                    String::from_utf8_lossy(&r.name[..len]).into(),
                );
                let op = OpType::from_u32(r.op).map_or("?", OpType::name);
                m.insert("op".into(), op.into());
                m.insert("layer".into(), r.layer.into());
                m.insert("ith".into(), r.ith.into());
                m.insert("graph".into(), r.graph.into());
                m.insert("node".into(), r.index.into());
                if r.level == Level::Experts {
                    m.insert("n_used".into(), r.pos.into());
                    m.insert("ids".into(), r.ids.clone().into());
                    m.insert("weights".into(), r.weights.clone().into());
                }
            }
            Level::Phase => {
                m.insert("name".into(), r.phase.into());
            }
        }
        serde_json::to_writer(&mut out, &obj)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_inert_when_off_and_recorded_when_on() {
        // Off: nothing is recorded.
        drop(Span::phase("off"));
        assert!(drain().iter().all(|r| r.phase != "off"));
        enable();
        let t0 = monotonic_ns();
        drop(Span::phase("on"));
        let rec = drain()
            .into_iter()
            .find(|r| r.phase == "on")
            .expect("recorded");
        assert!(rec.start_ns >= t0 && rec.end_ns >= rec.start_ns);
        let mut out = Vec::new();
        write_jsonl(&[rec], &mut out).expect("write to Vec");
        let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
        assert_eq!(v["level"], "phase");
        assert_eq!(v["name"], "on");
    }
}
