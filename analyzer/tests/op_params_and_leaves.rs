//! Trace format 2: matrix products sized from their recorded op params (`K·N·M·H`), with
//! the format-1 shape heuristic only as the fallback, and DAG leaves named from the
//! collector's leaf records, with the heuristic for leaves it did not record.

mod support;

use analyzer::{IterSelector, TraceModel, dag, stats};
use common::{
    engine_abi::{DType, NODE_FLAG_INPUT, NODE_FLAG_KV_CACHE, NODE_FLAG_WEIGHT, OpType},
    event::{
        DecodeEvent, EVENT_FLAG_EXIT, EventHeader, EventKind, GraphEvent, LeafNodeEvent,
        OP_DETAIL_NAME, OP_DETAIL_OP_PARAMS, OP_DETAIL_STRUCTURE, OpEvent,
    },
};
use support::{analyze, output, write};
use trace_format::{Event, TraceFooter};

const PID: u32 = 50;
const TID: u32 = 51;
/// `blk.0.attn_q.weight` (recorded), `[K = 128, N = 64]`.
const W_Q: u64 = 0xA000;
/// `blk.0.ffn_up.weight`: not recorded (the heuristic names it).
const W_UP: u64 = 0xA100;
/// `cache_v_l0` (recorded, a KV-cache view).
const V_VIEW: u64 = 0xA200;
/// `inp_embd` (recorded, a graph input): `src1` of `Qcur-0`, never computed.
const INP: u64 = 0xA300;
const NODE_BASE: u64 = 0x1000;

fn hdr(kind: EventKind, exit: bool, ts: u64) -> EventHeader {
    EventHeader {
        kind: kind as u32,
        flags: if exit { EVENT_FLAG_EXIT } else { 0 },
        ts_ns: ts,
        pid: PID,
        tid: TID,
        cpu: 0,
        _pad: 0,
    }
}

struct Node {
    name: &'static str,
    op: OpType,
    ne: [i64; 4],
    src: [u64; 4],
    /// `None`: a format-1 style record (no `OP_DETAIL_OP_PARAMS`, params zero).
    op_params: Option<[u32; 8]>,
}

fn name64(s: &str) -> [u8; 64] {
    let mut n = [0u8; 64];
    n[..s.len()].copy_from_slice(s.as_bytes());
    n
}

/// One decode call of one graph computing `nodes` in order on one thread, each 1 µs
/// long; returns the events and the next timestamp.
fn decode_call(nodes: &[Node], pos: u32, graph_id: u64, mut t: u64) -> (Vec<Event>, u64) {
    let mut out = Vec::new();
    let d = |exit, ts| {
        Event::Decode(DecodeEvent {
            header: hdr(EventKind::Decode, exit, ts),
            n_tokens: 1,
            pos,
            ret: 0,
            ..DecodeEvent::default()
        })
    };
    let g = |exit, ts| {
        Event::Graph(GraphEvent {
            header: hdr(EventKind::GraphCompute, exit, ts),
            graph_addr: 0x99,
            graph_id,
            n_nodes: nodes.len() as u32,
            backend_id: 0,
            backend_kind: 0,
            n_tokens: 1,
            pos,
            ret: 0,
        })
    };
    out.push(d(false, t));
    out.push(g(false, t + 10));
    t += 100;
    for (i, n) in nodes.iter().enumerate() {
        let mut op = OpEvent::zeroed();
        op.node_addr = NODE_BASE + 224 * i as u64;
        op.op = n.op as u32;
        op.nth = 1;
        op.index = i as u32;
        op.layer = 0;
        op.name = name64(n.name);
        op.detail = OP_DETAIL_NAME | OP_DETAIL_STRUCTURE;
        op.structure.dtype = DType::F32 as u32;
        op.structure.ne = n.ne;
        op.structure.src = n.src;
        if let Some(p) = n.op_params {
            op.structure.op_params = p;
            op.detail |= OP_DETAIL_OP_PARAMS;
        }
        op.header = hdr(EventKind::OpCompute, false, t);
        out.push(Event::Op(Box::new(op)));
        op.header = hdr(EventKind::OpCompute, true, t + 1000);
        out.push(Event::Op(Box::new(op)));
        t += 2000;
    }
    out.push(g(true, t));
    out.push(d(true, t + 10));
    (out, t + 1000)
}

fn leaf(addr: u64, name: &str, dtype: DType, flags: u32, ne: [i64; 4]) -> Event {
    Event::LeafNode(LeafNodeEvent {
        header: EventHeader {
            kind: EventKind::LeafNode as u32,
            ts_ns: 5,
            pid: PID,
            cpu: u32::MAX,
            ..EventHeader::default()
        },
        node_addr: addr,
        dtype: dtype as u32,
        node_flags: flags,
        layer: 0,
        op: 0,
        ne,
        name: name64(name),
    })
}

/// Node addresses: node `i` of the graph is at `NODE_BASE + 224·i`.
fn addr(i: u64) -> u64 {
    NODE_BASE + 224 * i
}

/// The graph of decode step at position `pos` (context `n_kv = pos + 1`):
/// 0 `Qcur-0` = W_Q · inp_embd (src1 a leaf: the heuristic cannot size it),
/// 1 `kq_soft_max-0` (a stand-in producer, ne[0] = 7 on purpose ≠ the real K),
/// 2 `kqv_out-0` = V_VIEW · #1, heads inner: `[hd 16, nh 4, t 1]`, K = n_kv,
/// 3 `ffn_up-0` = W_UP · #0 without op params (format-1 record: heuristic K = 64).
fn graph(pos: u32) -> Vec<Node> {
    let n_kv = pos + 1;
    vec![
        Node {
            name: "Qcur-0",
            op: OpType::MulMat,
            ne: [64, 1, 1, 1],
            src: [W_Q, INP, 0, 0],
            op_params: Some([0, 0, 1, 1, 128, 0, 0, 0]),
        },
        Node {
            name: "kq_soft_max-0",
            op: OpType::SoftMax,
            ne: [7, 1, 4, 1],
            src: [addr(0), 0, 0, 0],
            op_params: Some([0, pos, 0, 0, 0, 0, 0, 0]),
        },
        Node {
            name: "kqv_out-0",
            op: OpType::MulMat,
            ne: [16, 4, 1, 1],
            src: [V_VIEW, addr(1), 0, 0],
            op_params: Some([0, 1, 1, 4, n_kv, 0, 0, 0]),
        },
        Node {
            name: "ffn_up-0",
            op: OpType::MulMat,
            ne: [352, 1, 1, 1],
            src: [W_UP, addr(0), 0, 0],
            op_params: None,
        },
    ]
}

fn events() -> Vec<Event> {
    let mut all = vec![
        leaf(
            W_Q,
            "blk.0.attn_q.weight",
            DType::Q8_0,
            NODE_FLAG_WEIGHT,
            [128, 64, 1, 1],
        ),
        leaf(
            V_VIEW,
            "cache_v_l0",
            DType::F16,
            NODE_FLAG_KV_CACHE,
            [5, 16, 4, 1],
        ),
        leaf(INP, "inp_embd", DType::F32, NODE_FLAG_INPUT, [128, 5, 1, 1]),
    ];
    let mut t = 1_000;
    for (i, pos) in [4u32, 5, 6].into_iter().enumerate() {
        let (evs, next) = decode_call(&graph(pos), pos, i as u64 + 1, t);
        all.extend(evs);
        t = next;
    }
    all
}

fn model() -> TraceModel {
    let mut m = TraceModel::new(&analyzer::synthetic::synth_header());
    for e in events() {
        m.apply(&e);
    }
    m.finish(None);
    m
}

#[test]
fn matmul_sizes_come_from_op_params_and_fall_back_to_the_shape() {
    let m = model();
    for step in 0..3 {
        let d = dag::build(&m, IterSelector::Decode(step)).expect("dag");
        let n_kv = 5 + step as u64;
        let c = |name: &str| {
            d.dag
                .node_weights()
                .find(|n| n.name == name)
                .unwrap_or_else(|| panic!("{name}"))
                .complexity
        };
        // K = op_params[4] = 128, N = ne[0] = 64, M = H = 1; the heuristic would need
        // src1 (a leaf) and give nothing.
        assert_eq!(c("Qcur-0"), Some(128 * 64));
        // K = n_kv from the op params, not src1's ne[0] = 7; N = 16, M = 1, H = 4.
        assert_eq!(c("kqv_out-0"), Some(n_kv * 16 * 4), "step {step}");
        // No op params: K guessed as src1's (Qcur-0) ne[0] = 64, times 352 outputs.
        assert_eq!(c("ffn_up-0"), Some(64 * 352));
        assert_eq!(c("kq_soft_max-0"), None);
        let s = stats::compute(&m, Some(&d));
        let row = |name: &str| {
            s.matmul
                .iter()
                .find(|r| r.name == name)
                .unwrap_or_else(|| panic!("{name}"))
                .complexity
        };
        assert_eq!(row("kqv_out-0"), n_kv * 64);
        assert_eq!(row("Qcur-0"), 128 * 64);
        assert_eq!(s.matmul.len(), 3);
    }
    // kqv_out keeps its shape while K grows: one node description per K.
    let kqv: Vec<_> = m.nodes().iter().filter(|n| n.name == "kqv_out-0").collect();
    assert_eq!(kqv.len(), 3);
    let dims = kqv[0].mul_mat_dims().expect("dims");
    assert_eq!((dims.k, dims.n, dims.m, dims.h), (5, 16, 1, 4));
    let up = m
        .nodes()
        .iter()
        .find(|n| n.name == "ffn_up-0")
        .expect("ffn_up");
    assert!(!up.has_op_params && up.mul_mat_dims().is_none());
}

#[test]
fn leaves_use_recorded_names_and_fall_back_to_the_heuristic() {
    let m = model();
    assert_eq!(m.recorded_leaves(), 3);
    let d = dag::build(&m, IterSelector::FirstDecode).expect("dag");
    let leaf = |addr: u64| {
        d.dag
            .node_weights()
            .find(|n| n.is_leaf() && n.addr == addr)
            .unwrap_or_else(|| panic!("leaf {addr:#x}"))
    };
    let q = leaf(W_Q);
    assert_eq!(q.name, "blk.0.attn_q.weight");
    assert_eq!(
        (q.dtype.as_deref(), q.shape.as_str()),
        (Some("q8_0"), "128x64")
    );
    // A KV-cache view: its recorded shape is of one graph only, so it is not shown.
    let v = leaf(V_VIEW);
    assert_eq!(
        (v.name.as_str(), v.dtype.as_deref()),
        ("cache_v_l0", Some("f16"))
    );
    assert_eq!(v.shape, "?");
    // `src1` of `Qcur-0` is not in the heuristic's table: only the record names it.
    assert_eq!(leaf(INP).name, "inp_embd");
    // Not recorded: the consumer-based guess, no type.
    let up = leaf(W_UP);
    assert_eq!(
        (up.name.as_str(), up.dtype.as_deref()),
        ("blk.0.ffn_up.weight", None)
    );

    // The same through the files `analyze` writes (DOT, JSON, matmul.csv).
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.pftrace");
    let footer = TraceFooter {
        end_reason: "test".into(),
        ..TraceFooter::default()
    };
    write(
        &path,
        &analyzer::synthetic::synth_header(),
        Some(&footer),
        &events(),
    );
    let (out, report) = analyze(&path);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let dot = output(&out, "dag.dot");
    assert!(
        dot.contains("label=\"blk.0.attn_q.weight\\nq8_0 128x64\""),
        "{dot}"
    );
    assert!(dot.contains("label=\"cache_v_l0\\nf16\""), "{dot}");
    assert!(dot.contains("label=\"blk.0.ffn_up.weight\""), "{dot}");
    let json: serde_json::Value =
        serde_json::from_str(&output(&out, "dag.json")).expect("dag.json");
    let names: Vec<&str> = json["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["op"] == "LEAF")
        .filter_map(|n| n["name"].as_str())
        .collect();
    for want in [
        "blk.0.attn_q.weight",
        "cache_v_l0",
        "inp_embd",
        "blk.0.ffn_up.weight",
    ] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    let csv = output(&out, "matmul.csv");
    assert!(csv.contains("kqv_out-0,kqv_out,0,320,"), "{csv}");
    assert!(csv.contains("Qcur-0,Qcur,0,8192,"), "{csv}");
}
