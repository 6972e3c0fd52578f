//! End to end: synthetic traces written, exported, and read back as Parquet. Every
//! column of every table with input is compared, value by value, with an independent
//! reading of the same trace (`raw`: its records through `trace_format::TraceReader`,
//! paired without the analyzer), and the row counts are that reading's.

mod raw;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

use analyzer::synthetic::{
    SYNTH_MAIN_TID, SYNTH_WEIGHT, SynthRecords, SynthSpec, synth_header, write_trace,
};
use arrow_array::types::{Int32Type, Int64Type, UInt32Type, UInt64Type};
use arrow_array::{
    Array, ArrowPrimitiveType, BooleanArray, PrimitiveArray, RecordBatch, StringArray,
};
use common::event::{
    COMM_LEN, EventHeader, EventKind, LeafNodeEvent, MAX_PMC, OP_DETAIL_OP_PARAMS, OP_DETAIL_PMC,
    OpEvent, OpExitEvent, OpStructure, PmcReading, SchedSwitchEvent,
};
use common::{BackendKind, DType, OpType};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use trace_format::{CounterInfo, Event, TraceFooter, TraceHeader, TraceWriter, record_bytes};

use raw::Raw;

/// Every batch of one Parquet file.
fn read(path: &Path) -> Vec<RecordBatch> {
    ParquetRecordBatchReaderBuilder::try_new(File::open(path).expect("file"))
        .expect("parquet")
        .build()
        .expect("reader")
        .map(|b| b.expect("batch"))
        .collect()
}

/// One exported table of one run, read back.
struct Table {
    name: &'static str,
    schema: arrow_schema::SchemaRef,
    batches: Vec<RecordBatch>,
}

impl Table {
    /// `out/<name>/<run_id>.parquet`.
    fn read(out: &Path, name: &'static str, run_id: &str) -> Table {
        let path = out.join(name).join(format!("{run_id}.parquet"));
        let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).expect("file"))
            .expect("parquet");
        Table {
            name,
            schema: builder.schema().clone(),
            batches: read(&path),
        }
    }

    /// Rows over all batches.
    fn rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// The table's columns are exactly `names`, in this order: a column added or renamed
    /// fails here until its test compares it too.
    fn assert_columns(&self, names: &[&str]) {
        let have: Vec<&str> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(have, names, "columns of {}", self.name);
    }

    /// Column `col` of every batch, as Arrow type `A`.
    fn column<A: Array + 'static>(&self, col: &str) -> Vec<&A> {
        self.batches
            .iter()
            .map(|b| {
                b.column_by_name(col)
                    .unwrap_or_else(|| panic!("{}: no column {col}", self.name))
                    .as_any()
                    .downcast_ref::<A>()
                    .unwrap_or_else(|| panic!("{}.{col}: another type", self.name))
            })
            .collect()
    }

    /// A primitive column, nulls as `None`.
    fn opt<T: ArrowPrimitiveType>(&self, col: &str) -> Vec<Option<T::Native>> {
        self.column::<PrimitiveArray<T>>(col)
            .into_iter()
            .flat_map(|a| a.iter())
            .collect()
    }

    /// A column without nulls.
    fn req<T: ArrowPrimitiveType>(&self, col: &str) -> Vec<T::Native> {
        self.opt::<T>(col)
            .into_iter()
            .map(|v| v.unwrap_or_else(|| panic!("{}.{col}: a null", self.name)))
            .collect()
    }

    /// A `UInt64` column without nulls.
    fn u64(&self, col: &str) -> Vec<u64> {
        self.req::<UInt64Type>(col)
    }

    /// A `UInt32` column without nulls.
    fn u32(&self, col: &str) -> Vec<u32> {
        self.req::<UInt32Type>(col)
    }

    /// An `Int32` column without nulls.
    fn i32(&self, col: &str) -> Vec<i32> {
        self.req::<Int32Type>(col)
    }

    /// A string column, nulls as `None`.
    fn opt_str(&self, col: &str) -> Vec<Option<String>> {
        self.column::<StringArray>(col)
            .into_iter()
            .flat_map(|a| a.iter().map(|v| v.map(str::to_owned)))
            .collect()
    }

    /// A string column without nulls.
    fn str(&self, col: &str) -> Vec<String> {
        self.opt_str(col)
            .into_iter()
            .map(|v| v.unwrap_or_else(|| panic!("{}.{col}: a null", self.name)))
            .collect()
    }

    /// A boolean column without nulls.
    fn bool(&self, col: &str) -> Vec<bool> {
        self.column::<BooleanArray>(col)
            .into_iter()
            .flat_map(|a| a.iter().map(|v| v.expect("no null")))
            .collect()
    }
}

// ---- the test trace ----

/// The counters the test traces' header declares (`operator_counters` reads them).
fn test_counters() -> Vec<CounterInfo> {
    [("task-clock", 1), ("page-faults", 2)]
        .into_iter()
        .map(|(name, config)| CounterInfo {
            name: name.to_owned(),
            source: "software".to_owned(),
            perf_type: 1,
            perf_config: config,
        })
        .collect()
}

/// The header of the test traces: the synthetic one with a host to sanitise, a clock
/// offset, arguments, a build id, settings and counters.
fn test_header() -> TraceHeader {
    let mut h = synth_header();
    h.host = "rk3588 board".to_owned();
    h.kernel = "6.1.0-test".to_owned();
    h.monotonic_to_wall_offset_ns = 1_700_000_000_000_000_000;
    h.target.args = vec!["run".into(), "-m".into(), "model.gguf".into()];
    h.target.build_id = Some("0123abcd".to_owned());
    h.settings = BTreeMap::from([
        ("levels".to_owned(), "token,graph,op".to_owned()),
        ("qos".to_owned(), "off".to_owned()),
    ]);
    h.counters = test_counters();
    h
}

/// The worker whose scheduler switches the test traces record.
const SWITCHED_TID: u32 = SYNTH_MAIN_TID + 1;
/// Its comm.
const SWITCHED_COMM: &str = "synth-worker";
/// The weight leaf's name.
const WEIGHT_NAME: &str = "blk.0.ffn_up.weight";
/// `K` of the matrix products (op param 4).
const MATMUL_K: u32 = 128;

/// A NUL-padded comm.
fn comm(name: &str) -> [u8; COMM_LEN] {
    let mut c = [0; COMM_LEN];
    c[..name.len()].copy_from_slice(name.as_bytes());
    c
}

/// A `MUL_MAT` as the probe ABI lays it out (`docs/probe-abi.md`): source 0 the weight,
/// 1 the activations; op params 2, 3, 4 = M, H, K. The synthetic generator puts the
/// weight second and leaves the params zero.
fn as_weight_product(op: u32, detail: &mut u32, s: &mut OpStructure) {
    if op != OpType::MulMat as u32 {
        return;
    }
    s.src = [SYNTH_WEIGHT, s.src[0], 0, 0];
    s.op_params[2] = u32::try_from(s.ne[1]).expect("M");
    s.op_params[3] = 1;
    s.op_params[4] = MATMUL_K;
    *detail |= OP_DETAIL_OP_PARAMS;
}

/// Counter readings per thread: every operator entry reads the running totals, its exit
/// reads them after they advanced by the operator's deltas.
#[derive(Default)]
struct Counters {
    totals: BTreeMap<u32, [PmcReading; MAX_PMC]>,
    /// The node index of the operator open on each thread.
    open: BTreeMap<u32, u32>,
}

impl Counters {
    /// An operator entry reads the totals of its thread.
    fn entry(&mut self, op: &mut OpEvent) {
        let tid = op.header.tid;
        op.detail |= OP_DETAIL_PMC;
        op.pmc_ok = 0b11;
        op.pmc = *self.totals.entry(tid).or_default();
        self.open.insert(tid, op.index);
    }

    /// Its exit reads them advanced by the operator's deltas (task-clock 700 ns + 10 per
    /// node index + the tid's last digit, page faults the node index mod 3).
    fn exit(&mut self, x: &mut OpExitEvent) {
        let tid = x.header.tid;
        let index = self.open.remove(&tid).expect("an entry before");
        let totals = self.totals.entry(tid).or_default();
        let deltas = [
            700 + 10 * u64::from(index) + u64::from(tid % 10),
            u64::from(index % 3),
        ];
        for (r, d) in totals.iter_mut().zip(deltas) {
            r.counter += d;
            r.enabled += 1_000;
            r.running += 1_000;
        }
        x.detail = OP_DETAIL_PMC;
        x.pmc = *totals;
        // The page-fault counter fails to read at the exits of the worker's odd nodes.
        x.pmc_ok = if tid == SWITCHED_TID && index % 2 == 1 {
            0b01
        } else {
            0b11
        };
    }
}

/// The extra records: the weight leaf, and the worker switched in, preempted, switched in
/// again and blocked, from `t0` on.
fn extra_records(t0: u64, mut push: impl FnMut(&[u8])) {
    let header = |kind: EventKind, ts, pid, tid| EventHeader {
        kind: kind as u32,
        ts_ns: ts,
        pid,
        tid,
        cpu: 1,
        ..EventHeader::default()
    };
    let mut leaf = LeafNodeEvent {
        header: header(EventKind::LeafNode, t0, 1000, 0),
        node_addr: SYNTH_WEIGHT,
        dtype: DType::Q4_0 as u32,
        node_flags: 0,
        layer: 0,
        op: 0,
        ne: [i64::from(MATMUL_K), 64, 1, 1],
        name: [0; 64],
    };
    leaf.name[..WEIGHT_NAME.len()].copy_from_slice(WEIGHT_NAME.as_bytes());
    push(record_bytes(&leaf));
    // (time after t0, switched out with this prev_state, or switched in).
    for (dt, out) in [(10, None), (100, Some(0)), (150, None), (190, Some(1))] {
        let (pid, tid, prev, next, state) = match out {
            None => (0, 0, 0, SWITCHED_TID, 0),
            Some(state) => (1000, SWITCHED_TID, SWITCHED_TID, 0, state),
        };
        let s = SchedSwitchEvent {
            header: header(EventKind::SchedSwitch, t0 + dt, pid, tid),
            prev_tid: prev,
            next_tid: next,
            prev_state: state,
            prev_comm: if prev == 0 {
                comm("swapper/1")
            } else {
                comm(SWITCHED_COMM)
            },
            next_comm: if next == 0 {
                comm("swapper/1")
            } else {
                comm(SWITCHED_COMM)
            },
            ..SchedSwitchEvent::default()
        };
        push(record_bytes(&s));
    }
}

/// Writes the synthetic run `spec` as a test trace: [`test_header`], the weight products
/// laid out as the ABI says with their weight leaf recorded, counter readings at both
/// bounds of every operator entry and exit (formats 1 to 3: format-4 spans carry none),
/// the worker's scheduler switches, and a footer that counts 5 lost events.
fn write_test_trace(path: &Path, spec: &SynthSpec) {
    let mut w = TraceWriter::create(path, &test_header()).expect("create");
    let mut counters = Counters::default();
    let mut last = 0u64;
    let mut first = None;
    let mut records: Vec<Vec<u8>> = Vec::new();
    analyzer::synthetic::generate(spec, |rec| {
        let kind = EventKind::from_u32(u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]));
        let ev = kind
            .and_then(|k| trace_format::decode_record(k, rec))
            .expect("synthetic records decode");
        let ts = ev.header().ts_ns;
        first.get_or_insert(ts);
        last = last.max(ts);
        let bytes = match ev {
            Event::Op(mut op) => {
                as_weight_product(op.op, &mut op.detail, &mut op.structure);
                counters.entry(&mut op);
                record_bytes(&*op).to_vec()
            }
            Event::OpExit(mut x) => {
                counters.exit(&mut x);
                record_bytes(&x).to_vec()
            }
            Event::NodeDesc(mut d) => {
                as_weight_product(d.op, &mut d.detail, &mut d.structure);
                record_bytes(&*d).to_vec()
            }
            _ => rec.to_vec(),
        };
        records.push(bytes);
    });
    extra_records(first.expect("records") + 20, |rec| {
        records.push(rec.to_vec())
    });
    for rec in &records {
        w.push_raw(rec).expect("push");
    }
    let n = w.records();
    w.finish(&TraceFooter {
        events_produced: n + 5,
        events_written: n,
        events_lost: 5,
        end_reason: "stopped".to_owned(),
        end_ts_ns: last + 10_000,
        ..TraceFooter::default()
    })
    .expect("finish");
}

// ---- expected rows, from the raw reading ----

/// The decode call a graph ran in: the one whose entry and exit enclose the graph's entry.
fn call_of(raw: &Raw, graph: usize) -> Option<u32> {
    let start = raw.graphs[graph].start_ns;
    raw.calls
        .iter()
        .position(|c| c.start_ns <= start && c.end_ns.is_some_and(|e| start <= e))
        .map(|i| i as u32)
}

/// The name of a `DType` value (`q4_0`).
fn dtype_name(v: u32) -> Option<String> {
    DType::from_u32(v).map(|d| d.name().to_owned())
}

/// The spec's own shape of the raw reading: `tokens` calls (the first a prefill of 4
/// tokens at 0, then one token at `3 + k`), one graph each, `nodes × threads` operators
/// per graph. Guards the raw reader, which every other check trusts.
fn assert_raw_is_the_spec(raw: &Raw, spec: &SynthSpec) {
    let shape: Vec<(u32, u32)> = raw.calls.iter().map(|c| (c.n_tokens, c.pos)).collect();
    let want: Vec<(u32, u32)> = (0..spec.tokens)
        .map(|k| if k == 0 { (4, 0) } else { (1, 3 + k) })
        .collect();
    assert_eq!(shape, want, "raw decode calls");
    assert_eq!(raw.graphs.len(), spec.tokens as usize, "raw graphs");
    assert_eq!(
        raw.ops.len(),
        (spec.tokens * spec.nodes * spec.threads) as usize,
        "raw operator slices"
    );
    for o in &raw.ops {
        assert!(o.start_ns <= o.end_ns, "{o:?}");
        assert!(o.desc.index < spec.nodes, "{o:?}");
    }
}

// ---- the tables ----

/// A `runs` row.
#[derive(Debug, PartialEq)]
struct RunRow {
    run_id: String,
    label: String,
    trace: String,
    host: String,
    kernel: String,
    cpus: u32,
    target: String,
    target_args: String,
    build_id: Option<String>,
    pid: u32,
    settings: serde_json::Value,
    counters: String,
    first_ns: u64,
    last_ns: u64,
    start_unix_ns: i64,
    calls: u64,
    prefill_calls: u64,
    decode_calls: u64,
    events_produced: Option<u64>,
    events_lost: Option<u64>,
    end_reason: Option<String>,
}

/// `runs`: one row, the header's and footer's fields and the calls counted by phase
/// (prefill: more than one token, or position 0).
fn check_runs(out: &Path, run_id: &str, raw: &Raw, trace: &Path, label: &str) {
    let t = Table::read(out, "runs", run_id);
    t.assert_columns(&[
        "run_id",
        "label",
        "trace",
        "host",
        "kernel",
        "cpus",
        "target",
        "target_args",
        "build_id",
        "pid",
        "settings",
        "counters",
        "first_ns",
        "last_ns",
        "start_unix_ns",
        "calls",
        "prefill_calls",
        "decode_calls",
        "events_produced",
        "events_lost",
        "end_reason",
    ]);
    let got: Vec<RunRow> = (0..t.rows())
        .map(|i| RunRow {
            run_id: t.str("run_id")[i].clone(),
            label: t.str("label")[i].clone(),
            trace: t.str("trace")[i].clone(),
            host: t.str("host")[i].clone(),
            kernel: t.str("kernel")[i].clone(),
            cpus: t.u32("cpus")[i],
            target: t.str("target")[i].clone(),
            target_args: t.str("target_args")[i].clone(),
            build_id: t.opt_str("build_id")[i].clone(),
            pid: t.u32("pid")[i],
            settings: serde_json::from_str(&t.str("settings")[i]).expect("settings JSON"),
            counters: t.str("counters")[i].clone(),
            first_ns: t.u64("first_ns")[i],
            last_ns: t.u64("last_ns")[i],
            start_unix_ns: t.req::<Int64Type>("start_unix_ns")[i],
            calls: t.u64("calls")[i],
            prefill_calls: t.u64("prefill_calls")[i],
            decode_calls: t.u64("decode_calls")[i],
            events_produced: t.opt::<UInt64Type>("events_produced")[i],
            events_lost: t.opt::<UInt64Type>("events_lost")[i],
            end_reason: t.opt_str("end_reason")[i].clone(),
        })
        .collect();
    let h = &raw.header;
    let f = raw.footer.as_ref();
    let prefill = raw
        .calls
        .iter()
        .filter(|c| c.n_tokens > 1 || c.pos == 0)
        .count() as u64;
    let start_unix = raw.first_ns as i64 + h.monotonic_to_wall_offset_ns;
    let want = RunRow {
        // `host-pid-unixns`, the host's space made file-name safe.
        run_id: format!("rk3588_board-{}-{start_unix}", h.target.pid),
        label: label.to_owned(),
        trace: trace.display().to_string(),
        host: h.host.clone(),
        kernel: h.kernel.clone(),
        cpus: h.cpus,
        target: h.target.path.clone(),
        target_args: h.target.args.join(" "),
        build_id: h.target.build_id.clone(),
        pid: h.target.pid,
        settings: serde_json::to_value(&h.settings).expect("settings"),
        counters: h
            .counters
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(","),
        first_ns: raw.first_ns,
        last_ns: raw.last_ns,
        start_unix_ns: start_unix,
        calls: raw.calls.len() as u64,
        prefill_calls: prefill,
        decode_calls: raw.calls.len() as u64 - prefill,
        events_produced: f.map(|f| f.events_produced),
        events_lost: f.map(|f| f.events_lost),
        end_reason: f.map(|f| f.end_reason.clone()),
    };
    assert_eq!(got, [want], "runs");
}

/// A `tokens` row (`run_id` checked apart).
#[derive(Debug, PartialEq)]
struct TokenRow {
    call: u32,
    tid: u32,
    phase: String,
    n_tokens: u32,
    pos: u32,
    sequence_run: u32,
    chunk: Option<u32>,
    start_ns: u64,
    end_ns: Option<u64>,
    dur_ns: u64,
    sampled_ns: Option<u64>,
    ret: i32,
}

/// `tokens`: one row per decode call, with its entry and exit, the end of the sampling
/// after it; one sequence (run 0), the prompt in one chunk (0).
fn check_tokens(out: &Path, run_id: &str, raw: &Raw) {
    let t = Table::read(out, "tokens", run_id);
    t.assert_columns(&[
        "run_id",
        "call",
        "tid",
        "phase",
        "n_tokens",
        "pos",
        "sequence_run",
        "chunk",
        "start_ns",
        "end_ns",
        "dur_ns",
        "sampled_ns",
        "ret",
    ]);
    let (chunk, end, sampled) = (
        t.opt::<UInt32Type>("chunk"),
        t.opt::<UInt64Type>("end_ns"),
        t.opt::<UInt64Type>("sampled_ns"),
    );
    let got: Vec<TokenRow> = (0..t.rows())
        .map(|i| TokenRow {
            call: t.u32("call")[i],
            tid: t.u32("tid")[i],
            phase: t.str("phase")[i].clone(),
            n_tokens: t.u32("n_tokens")[i],
            pos: t.u32("pos")[i],
            sequence_run: t.u32("sequence_run")[i],
            chunk: chunk[i],
            start_ns: t.u64("start_ns")[i],
            end_ns: end[i],
            dur_ns: t.u64("dur_ns")[i],
            sampled_ns: sampled[i],
            ret: t.i32("ret")[i],
        })
        .collect();
    let want: Vec<TokenRow> = raw
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            // The spec: the first call is the prompt, every later one a decode step.
            let prefill = i == 0;
            TokenRow {
                call: i as u32,
                tid: c.tid,
                phase: if prefill { "prefill" } else { "decode" }.to_owned(),
                n_tokens: c.n_tokens,
                pos: c.pos,
                sequence_run: 0,
                chunk: prefill.then_some(0),
                start_ns: c.start_ns,
                end_ns: c.end_ns,
                dur_ns: c.end_ns.expect("exit") - c.start_ns,
                sampled_ns: c.sampled_ns,
                ret: c.ret,
            }
        })
        .collect();
    assert_eq!(got, want, "tokens");
}

/// A `graphs` row.
#[derive(Debug, PartialEq)]
struct GraphRow {
    graph: u32,
    graph_id: u64,
    call: Option<u32>,
    tid: u32,
    n_nodes: u32,
    backend: String,
    n_tokens: u32,
    pos: u32,
    start_ns: u64,
    end_ns: Option<u64>,
    dur_ns: u64,
}

/// `graphs`: one row per graph computation, in the decode call that encloses it.
fn check_graphs(out: &Path, run_id: &str, raw: &Raw) {
    let t = Table::read(out, "graphs", run_id);
    t.assert_columns(&[
        "run_id", "graph", "graph_id", "call", "tid", "n_nodes", "backend", "n_tokens", "pos",
        "start_ns", "end_ns", "dur_ns",
    ]);
    let (call, end) = (t.opt::<UInt32Type>("call"), t.opt::<UInt64Type>("end_ns"));
    let got: Vec<GraphRow> = (0..t.rows())
        .map(|i| GraphRow {
            graph: t.u32("graph")[i],
            graph_id: t.u64("graph_id")[i],
            call: call[i],
            tid: t.u32("tid")[i],
            n_nodes: t.u32("n_nodes")[i],
            backend: t.str("backend")[i].clone(),
            n_tokens: t.u32("n_tokens")[i],
            pos: t.u32("pos")[i],
            start_ns: t.u64("start_ns")[i],
            end_ns: end[i],
            dur_ns: t.u64("dur_ns")[i],
        })
        .collect();
    let want: Vec<GraphRow> = raw
        .graphs
        .iter()
        .enumerate()
        .map(|(i, g)| GraphRow {
            graph: i as u32,
            graph_id: g.graph_id,
            call: call_of(raw, i),
            tid: g.tid,
            n_nodes: g.n_nodes,
            backend: BackendKind::from_u32(g.backend_kind)
                .expect("a known backend")
                .name()
                .to_owned(),
            n_tokens: g.n_tokens,
            pos: g.pos,
            start_ns: g.start_ns,
            end_ns: g.end_ns,
            dur_ns: g.end_ns.expect("exit") - g.start_ns,
        })
        .collect();
    assert_eq!(got, want, "graphs");
}

/// An `operators` row, its key first.
#[derive(Debug, PartialEq)]
struct OpRow {
    graph: u32,
    node: u32,
    tid: u32,
    graph_id: u64,
    call: Option<u32>,
    name: String,
    op: String,
    class: String,
    layer: i32,
    dtype: Option<String>,
    src0: Option<String>,
    src0_dtype: Option<String>,
    ne: [Option<u64>; 4],
    /// `mm_n`, `mm_m`, `mm_k`, `mm_h`.
    mm: [Option<u64>; 4],
    start_ns: u64,
    end_ns: u64,
    dur_ns: u64,
    node_start_ns: u64,
    node_end_ns: u64,
    node_threads: u32,
}

/// The operator rows the raw reading gives: each slice with its node's description, its
/// weight leaf, the node's span over its threads; a product's dimensions from its ne and
/// op params (`docs/probe-abi.md`: N = ne0, M, H, K = params 2, 3, 4).
fn raw_op_rows(raw: &Raw) -> Vec<OpRow> {
    let mut rows: Vec<OpRow> = raw
        .ops
        .iter()
        .map(|o| {
            let d = &o.desc;
            let same: Vec<&raw::Op> = raw
                .ops
                .iter()
                .filter(|p| p.graph == o.graph && p.desc.index == d.index)
                .collect();
            let s = d.structure;
            let leaf = s.and_then(|s| raw.leaves.get(&s.src[0]));
            let mm = match s {
                Some(s) if d.op == OpType::MulMat as u32 && d.has_op_params => [
                    Some(s.ne[0] as u64),
                    Some(u64::from(s.op_params[2])),
                    Some(u64::from(s.op_params[4])),
                    Some(u64::from(s.op_params[3])),
                ],
                _ => [None; 4],
            };
            OpRow {
                graph: o.graph as u32,
                node: d.index,
                tid: o.tid,
                graph_id: raw.graphs[o.graph].graph_id,
                call: call_of(raw, o.graph),
                name: d.name.clone(),
                op: OpType::from_u32(d.op)
                    .expect("a known op")
                    .name()
                    .to_owned(),
                // The engine names nodes `<class>-<layer>`.
                class: d
                    .name
                    .rsplit_once('-')
                    .expect("a layer suffix")
                    .0
                    .to_owned(),
                layer: d.layer,
                dtype: s.and_then(|s| dtype_name(s.dtype)),
                src0: leaf.map(|l| l.0.clone()),
                src0_dtype: leaf.and_then(|l| dtype_name(l.1)),
                ne: std::array::from_fn(|i| s.map(|s| s.ne[i] as u64)),
                mm,
                start_ns: o.start_ns,
                end_ns: o.end_ns,
                dur_ns: o.end_ns - o.start_ns,
                node_start_ns: same.iter().map(|p| p.start_ns).min().expect("itself"),
                node_end_ns: same.iter().map(|p| p.end_ns).max().expect("itself"),
                node_threads: same.len() as u32,
            }
        })
        .collect();
    rows.sort_by_key(|r| (r.graph, r.node, r.tid));
    let key = |r: &OpRow| (r.graph, r.node, r.tid);
    assert!(
        rows.windows(2).all(|w| key(&w[0]) != key(&w[1])),
        "one raw slice per node, thread and graph"
    );
    rows
}

/// `operators`: one row per node, thread and graph, every column against the raw
/// reading's (rows compared in (graph, node, tid) order, a key each row has once).
fn check_operators(out: &Path, run_id: &str, raw: &Raw) {
    let t = Table::read(out, "operators", run_id);
    t.assert_columns(&[
        "run_id",
        "graph",
        "graph_id",
        "call",
        "node",
        "name",
        "op",
        "class",
        "layer",
        "dtype",
        "src0",
        "src0_dtype",
        "ne0",
        "ne1",
        "ne2",
        "ne3",
        "mm_n",
        "mm_m",
        "mm_k",
        "mm_h",
        "tid",
        "start_ns",
        "end_ns",
        "dur_ns",
        "node_start_ns",
        "node_end_ns",
        "node_threads",
    ]);
    let call = t.opt::<UInt32Type>("call");
    let (dtype, src0, src0_dtype) = (
        t.opt_str("dtype"),
        t.opt_str("src0"),
        t.opt_str("src0_dtype"),
    );
    let ne: Vec<Vec<Option<u64>>> = ["ne0", "ne1", "ne2", "ne3"]
        .iter()
        .map(|c| t.opt::<UInt64Type>(c))
        .collect();
    let mm: Vec<Vec<Option<u64>>> = ["mm_n", "mm_m", "mm_k", "mm_h"]
        .iter()
        .map(|c| t.opt::<UInt64Type>(c))
        .collect();
    let (graph, node, tid) = (t.u32("graph"), t.u32("node"), t.u32("tid"));
    let (name, op, class) = (t.str("name"), t.str("op"), t.str("class"));
    let (start, end, dur) = (t.u64("start_ns"), t.u64("end_ns"), t.u64("dur_ns"));
    let (node_start, node_end) = (t.u64("node_start_ns"), t.u64("node_end_ns"));
    let (graph_id, layer, threads) = (t.u64("graph_id"), t.i32("layer"), t.u32("node_threads"));
    let mut got: Vec<OpRow> = (0..t.rows())
        .map(|i| OpRow {
            graph: graph[i],
            node: node[i],
            tid: tid[i],
            graph_id: graph_id[i],
            call: call[i],
            name: name[i].clone(),
            op: op[i].clone(),
            class: class[i].clone(),
            layer: layer[i],
            dtype: dtype[i].clone(),
            src0: src0[i].clone(),
            src0_dtype: src0_dtype[i].clone(),
            ne: std::array::from_fn(|k| ne[k][i]),
            mm: std::array::from_fn(|k| mm[k][i]),
            start_ns: start[i],
            end_ns: end[i],
            dur_ns: dur[i],
            node_start_ns: node_start[i],
            node_end_ns: node_end[i],
            node_threads: threads[i],
        })
        .collect();
    got.sort_by_key(|r| (r.graph, r.node, r.tid));
    let want = raw_op_rows(raw);
    assert_eq!(got.len(), want.len(), "operator rows");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(
            g, w,
            "operators: (graph, node, tid) = ({}, {}, {})",
            w.graph, w.node, w.tid
        );
    }
    // A product reads its weight: the leaf's name and type reach the table.
    assert!(
        got.iter().any(|r| r.src0.as_deref() == Some(WEIGHT_NAME) && r.mm[2] == Some(u64::from(MATMUL_K))),
        "a weight product"
    );
}

/// `operator_counters`: one row per operator slice and counter read at both its bounds,
/// valued the difference of the two readings.
fn check_operator_counters(out: &Path, run_id: &str, raw: &Raw) {
    let t = Table::read(out, "operator_counters", run_id);
    t.assert_columns(&["run_id", "graph", "node", "tid", "counter", "value"]);
    let (graph, node, tid) = (t.u32("graph"), t.u32("node"), t.u32("tid"));
    let (counter, value) = (t.str("counter"), t.u64("value"));
    let mut got: Vec<(u32, u32, u32, String, u64)> = (0..t.rows())
        .map(|i| (graph[i], node[i], tid[i], counter[i].clone(), value[i]))
        .collect();
    got.sort();
    let names = &raw.header.counters;
    let mut want: Vec<(u32, u32, u32, String, u64)> = raw
        .ops
        .iter()
        .flat_map(|o| {
            o.pmc.iter().zip(names).filter_map(move |(v, c)| {
                v.map(|v| (o.graph as u32, o.desc.index, o.tid, c.name.clone(), v))
            })
        })
        .collect();
    want.sort();
    assert_eq!(got, want, "operator_counters");
}

/// A `threads` row.
#[derive(Debug, PartialEq)]
struct ThreadRow {
    tid: u32,
    pid: Option<u32>,
    comm: String,
    is_main: bool,
    is_target: bool,
    op_slices: u64,
    op_busy_ns: u64,
    running_ns: u64,
    runnable_ns: u64,
    sleeping_ns: u64,
}

/// `threads`: one row per thread the records name, its operator time, and its time per
/// scheduler state (switched in: running; out with `prev_state` 0: runnable; out
/// otherwise: sleeping; the last state lasting to the footer's end).
fn check_threads(out: &Path, run_id: &str, raw: &Raw) {
    let t = Table::read(out, "threads", run_id);
    t.assert_columns(&[
        "run_id",
        "tid",
        "pid",
        "comm",
        "is_main",
        "is_target",
        "op_slices",
        "op_busy_ns",
        "running_ns",
        "runnable_ns",
        "sleeping_ns",
    ]);
    let pid = t.opt::<UInt32Type>("pid");
    let (is_main, is_target) = (t.bool("is_main"), t.bool("is_target"));
    let mut got: Vec<ThreadRow> = (0..t.rows())
        .map(|i| ThreadRow {
            tid: t.u32("tid")[i],
            pid: pid[i],
            comm: t.str("comm")[i].clone(),
            is_main: is_main[i],
            is_target: is_target[i],
            op_slices: t.u64("op_slices")[i],
            op_busy_ns: t.u64("op_busy_ns")[i],
            running_ns: t.u64("running_ns")[i],
            runnable_ns: t.u64("runnable_ns")[i],
            sleeping_ns: t.u64("sleeping_ns")[i],
        })
        .collect();
    got.sort_by_key(|r| r.tid);
    let target = raw.header.target.pid;
    let want: Vec<ThreadRow> = raw
        .threads
        .values()
        .map(|th| {
            let ops: Vec<&raw::Op> = raw.ops.iter().filter(|o| o.tid == th.tid).collect();
            ThreadRow {
                tid: th.tid,
                pid: th.pid,
                comm: th.comm.clone(),
                is_main: th.is_main,
                is_target: th.is_main || !ops.is_empty() || th.pid == Some(target),
                op_slices: ops.len() as u64,
                op_busy_ns: ops.iter().map(|o| o.end_ns - o.start_ns).sum(),
                running_ns: th.running_ns,
                runnable_ns: th.runnable_ns,
                sleeping_ns: th.sleeping_ns,
            }
        })
        .collect();
    assert_eq!(got, want, "threads");
    let switched = want
        .iter()
        .find(|r| r.tid == SWITCHED_TID)
        .expect("the worker");
    assert_eq!(
        (
            switched.running_ns,
            switched.runnable_ns,
            switched.comm.as_str()
        ),
        (90 + 40, 50, SWITCHED_COMM),
        "the switches the test wrote"
    );
}

/// `counters`: the header's counters, by slot.
fn check_counters(out: &Path, run_id: &str, raw: &Raw) {
    let t = Table::read(out, "counters", run_id);
    t.assert_columns(&[
        "run_id",
        "slot",
        "counter",
        "source",
        "perf_type",
        "perf_config",
    ]);
    let got: Vec<(u32, String, String, u32, u64)> = (0..t.rows())
        .map(|i| {
            (
                t.u32("slot")[i],
                t.str("counter")[i].clone(),
                t.str("source")[i].clone(),
                t.u32("perf_type")[i],
                t.u64("perf_config")[i],
            )
        })
        .collect();
    let want: Vec<(u32, String, String, u32, u64)> = raw
        .header
        .counters
        .iter()
        .enumerate()
        .map(|(i, c)| {
            (
                i as u32,
                c.name.clone(),
                c.source.clone(),
                c.perf_type,
                c.perf_config,
            )
        })
        .collect();
    assert_eq!(got, want, "counters");
}

/// Every table of `run_id` keys its rows by it.
fn check_run_ids(out: &Path, run_id: &str) {
    for &table in run_tables::TABLES {
        let t = Table::read(out, table, run_id);
        let ids = t.str("run_id");
        assert!(ids.iter().all(|v| v == run_id), "{table}: {ids:?}");
    }
}

/// Exports `spec` recorded with `records` and compares every table with the raw reading.
fn export_and_compare(records: SynthRecords) {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("a.pftrace");
    let spec = SynthSpec::sized(5, 6, 3).with_records(records);
    write_test_trace(&trace, &spec);
    let raw = raw::read(&trace);
    assert_raw_is_the_spec(&raw, &spec);
    // The test trace's own input: two readings per operator entry and exit but the
    // page faults of the worker's odd nodes (3 of 6 per graph); format-4 spans carry none.
    let readings: usize = raw.ops.iter().map(|o| o.pmc.iter().flatten().count()).sum();
    let want_readings = match records {
        SynthRecords::Entries => 2 * raw.ops.len() - 5 * 3,
        _ => 0,
    };
    assert_eq!(
        readings, want_readings,
        "counter readings in the raw records"
    );
    let out = dir.path().join("runs");
    let run = run_tables::export_quietly(&trace, &out, "lab/synthetic").unwrap();
    check_run_ids(&out, &run.run_id);
    check_runs(&out, &run.run_id, &raw, &trace, "lab/synthetic");
    check_tokens(&out, &run.run_id, &raw);
    check_graphs(&out, &run.run_id, &raw);
    check_operators(&out, &run.run_id, &raw);
    check_operator_counters(&out, &run.run_id, &raw);
    check_threads(&out, &run.run_id, &raw);
    check_counters(&out, &run.run_id, &raw);
    // No synthetic input: the generator's model is dense (no `MUL_MAT_ID`, no routing
    // records), so `experts` stays empty; its values are tested in
    // `tracer-user/tests/experts.rs` on a real mixture of experts.
    assert_eq!(raw.expert_routes, 0);
    assert_eq!(
        Table::read(&out, "experts", &run.run_id).rows(),
        0,
        "experts"
    );
    // The exporter's own count of each table agrees with the files.
    for (table, n) in &run.rows {
        assert_eq!(Table::read(&out, table, &run.run_id).rows(), *n, "{table}");
    }
}

#[test]
fn every_table_of_an_entry_exit_trace_holds_its_raw_records_values() {
    export_and_compare(SynthRecords::Entries);
}

/// Format 4: spans with durations, and spans whose starts are the barrier releases.
#[test]
fn every_table_of_a_format_4_trace_holds_its_raw_records_values() {
    export_and_compare(SynthRecords::Spans);
    export_and_compare(SynthRecords::Ends);
}

/// A synthetic trace whose header names another target pid.
fn write_with_pid(path: &Path, spec: &SynthSpec, pid: u32) {
    let mut header = synth_header();
    header.target.pid = pid;
    let mut w = TraceWriter::create(path, &header).unwrap();
    analyzer::synthetic::generate(spec, |rec| w.push_raw(rec).unwrap());
    let n = w.records();
    w.finish(&TraceFooter {
        events_produced: n,
        events_written: n,
        ..TraceFooter::default()
    })
    .unwrap();
}

/// Rows of every file of one table directory.
fn rows(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .expect("table dir")
        .map(|e| {
            read(&e.expect("entry").path())
                .iter()
                .map(RecordBatch::num_rows)
                .sum::<usize>()
        })
        .sum()
}

#[test]
fn exports_append_and_a_second_export_of_a_trace_rewrites_its_own_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let a = dir.path().join("a.pftrace");
    write_trace(&a, &SynthSpec::sized(3, 2, 1)).unwrap();
    let first = run_tables::export_quietly(&a, &out, "a").unwrap();
    let again = run_tables::export_quietly(&a, &out, "a").unwrap();
    assert_eq!(
        first.run_id, again.run_id,
        "the key is the trace's, not the export's"
    );
    // The spec's 3 decode calls, once.
    assert_eq!(rows(&out.join("tokens")), 3, "rewritten, not doubled");
    // Another recording (another target pid in its header) adds its own files.
    let b = dir.path().join("b.pftrace");
    write_with_pid(&b, &SynthSpec::sized(4, 2, 1), 4242);
    let other = run_tables::export_quietly(&b, &out, "b").unwrap();
    assert_ne!(other.run_id, first.run_id);
    assert_eq!(rows(&out.join("tokens")), 3 + 4);
    assert_eq!(rows(&out.join("runs")), 2);
    let labels: Vec<String> = [&first, &other]
        .iter()
        .map(|r| Table::read(&out, "runs", &r.run_id).str("label").concat())
        .collect();
    assert_eq!(labels, ["a", "b"]);
}

#[test]
fn a_file_that_is_not_a_trace_is_one_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.pftrace");
    std::fs::write(&bad, b"not a trace").unwrap();
    let e = run_tables::export_quietly(&bad, &dir.path().join("runs"), "").unwrap_err();
    assert!(e.to_string().contains("bad.pftrace"), "{e}");
    assert!(!dir.path().join("runs").exists(), "nothing written");
}
