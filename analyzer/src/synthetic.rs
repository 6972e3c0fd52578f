//! Synthetic traces with a known shape, for tests and benchmarks: `tokens` decode calls
//! (the first a prefill of 4 tokens), each with one graph of `nodes` chained nodes run
//! by `threads` threads, every operator `op_ns` long on thread 0 and shorter on the
//! others, plus a sample phase per call.

use std::path::Path;

use common::{
    engine_abi::OpType,
    event::{
        DecodeEvent, EVENT_FLAG_EXIT, EventHeader, EventKind, GraphEvent, OP_DETAIL_NAME,
        OP_DETAIL_STRUCTURE, OpEvent, OpExitEvent, PhaseEvent,
    },
};
use trace_format::{TraceError, TraceFooter, TraceHeader, TraceWriter, event_kind_table};

/// Shape of a synthetic run.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct SynthSpec {
    /// Decode calls (the first is a prefill).
    pub tokens: u32,
    /// Nodes per graph.
    pub nodes: u32,
    /// Worker threads (tid 1001 is the main thread).
    pub threads: u32,
    /// Operator duration on thread 0, ns.
    pub op_ns: u64,
}

impl Default for SynthSpec {
    fn default() -> Self {
        SynthSpec {
            tokens: 4,
            nodes: 8,
            threads: 2,
            op_ns: 10_000,
        }
    }
}

impl SynthSpec {
    /// Sets the size.
    pub fn sized(tokens: u32, nodes: u32, threads: u32) -> SynthSpec {
        SynthSpec {
            tokens,
            nodes,
            threads: threads.max(1),
            ..SynthSpec::default()
        }
    }

    /// Number of events [`write_trace`] writes.
    pub fn event_count(&self) -> u64 {
        u64::from(self.tokens) * (4 + 2 + u64::from(self.nodes) * u64::from(self.threads) * 2)
    }
}

/// Process id of synthetic traces.
pub const SYNTH_PID: u32 = 1000;
/// Main thread id of synthetic traces (workers follow).
pub const SYNTH_MAIN_TID: u32 = 1001;
/// Event bytes per chunk of synthetic traces (small, so truncation tests find chunks).
pub const SYNTH_CHUNK_BYTES: usize = 64 << 10;
/// Address of node 0 (node `i` is at `+ 224·i`).
pub const SYNTH_NODE_BASE: u64 = 0x10_0000;
/// Address of the weight leaf every node reads as `src1`.
pub const SYNTH_WEIGHT: u64 = 0x90_0000;

fn header(kind: EventKind, exit: bool, ts: u64, tid: u32) -> EventHeader {
    EventHeader {
        kind: kind as u32,
        flags: if exit { EVENT_FLAG_EXIT } else { 0 },
        ts_ns: ts,
        pid: SYNTH_PID,
        tid,
        cpu: tid - SYNTH_MAIN_TID,
        _pad: 0,
    }
}

/// The trace header of synthetic traces.
pub fn synth_header() -> TraceHeader {
    TraceHeader {
        format_version: trace_format::FORMAT_VERSION,
        clock: "synthetic".to_owned(),
        target: trace_format::TargetInfo {
            path: "synthetic-engine".to_owned(),
            pid: SYNTH_PID,
            ..Default::default()
        },
        event_kinds: event_kind_table(),
        cpus: 8,
        ..TraceHeader::default()
    }
}

/// The model of a synthetic run, built in memory (no file); with `upto`, of its first
/// `upto` events only.
pub fn model(spec: &SynthSpec, upto: Option<usize>) -> crate::TraceModel {
    let mut m = crate::TraceModel::new(&synth_header());
    let mut n = 0;
    generate(spec, |rec| {
        if upto.is_some_and(|u| n >= u) {
            return;
        }
        n += 1;
        let kind = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
        let ev = EventKind::from_u32(kind)
            .and_then(|k| trace_format::decode_record(k, rec))
            .expect("synthetic records decode");
        m.apply(&ev);
    });
    m
}

/// Writes the run's events in timestamp order to `push`.
pub fn generate(spec: &SynthSpec, mut push: impl FnMut(&[u8])) {
    use trace_format::record_bytes;
    let mut t = 1_000_000u64;
    let main = SYNTH_MAIN_TID;
    let mut op = OpEvent::zeroed();
    for tok in 0..spec.tokens {
        let (n_tokens, pos) = if tok == 0 { (4, 0) } else { (1, 3 + tok) };
        let d = |exit, ts| DecodeEvent {
            header: header(EventKind::Decode, exit, ts, main),
            n_tokens,
            pos,
            ret: 0,
            _pad: 0,
        };
        push(record_bytes(&d(false, t)));
        t += 100;
        let g = |exit, ts| GraphEvent {
            header: header(EventKind::GraphCompute, exit, ts, main),
            graph_addr: 0xABC,
            graph_id: u64::from(tok) + 1,
            n_nodes: spec.nodes,
            backend_id: 0,
            backend_kind: 0,
            n_tokens,
            pos,
            ret: 0,
        };
        push(record_bytes(&g(false, t)));
        t += 100;
        for i in 0..spec.nodes {
            let addr = SYNTH_NODE_BASE + 224 * u64::from(i);
            let layer = i32::try_from(i / 4).unwrap_or(0);
            op.node_addr = addr;
            op.op = if i % 2 == 0 {
                OpType::MulMat as u32
            } else {
                OpType::Add as u32
            };
            op.nth = spec.threads;
            op.index = i;
            op.layer = layer;
            op.detail = OP_DETAIL_NAME | OP_DETAIL_STRUCTURE;
            op.name = [0; 64];
            let name = format!("node{}-{layer}", i % 4);
            op.name[..name.len()].copy_from_slice(name.as_bytes());
            op.structure.dtype = 0;
            op.structure.ne = [64, i64::from(n_tokens), 1, 1];
            op.structure.src = [if i == 0 { 0 } else { addr - 224 }, SYNTH_WEIGHT, 0, 0];
            for th in 0..spec.threads {
                op.header = header(
                    EventKind::OpCompute,
                    false,
                    t + u64::from(th) * 50,
                    main + th,
                );
                op.ith = th;
                push(record_bytes(&op));
            }
            for th in 0..spec.threads {
                let end = t + spec.op_ns - u64::from(th) * 1000;
                let mut exit = OpExitEvent::zeroed();
                exit.header = header(EventKind::OpComputeExit, true, end, main + th);
                push(record_bytes(&exit));
            }
            t += spec.op_ns + 200;
        }
        push(record_bytes(&g(true, t)));
        t += 100;
        push(record_bytes(&d(true, t)));
        t += 100;
        let p = |exit, ts| PhaseEvent {
            header: header(EventKind::PhaseSample, exit, ts, main),
            arg: 32,
            ret: 7,
        };
        push(record_bytes(&p(false, t)));
        t += 500;
        push(record_bytes(&p(true, t)));
        t += 1000;
    }
}

/// Thread id of the accel backend's driver in [`split_model`] traces.
pub const SYNTH_ACCEL_TID: u32 = 2001;
/// Operator time of a product in [`split_model`] traces, ns.
pub const SPLIT_MATMUL_NS: u64 = 10_000;
/// Time of one copy in [`split_model`] traces, ns.
pub const SPLIT_COPY_NS: u64 = 2_000;
/// Time the CPU waits at the sync in [`split_model`] traces, ns.
pub const SPLIT_SYNC_NS: u64 = 13_000;

/// The model of a run whose every decode call is split like a layer split: a CPU split
/// (`ffn_up-0`), an accel split on the accel driver thread (`to_accel.ffn_up-0`
/// copy, `ffn_up-1`, same shape as `ffn_up-0`), and a CPU split that starts while the
/// accel split still runs (`sync.ffn_up-1`, [`SPLIT_SYNC_NS`] long, then
/// `to_cpu.ffn_up-1`). One thread per backend.
pub fn split_model(calls: u32) -> crate::TraceModel {
    use trace_format::record_bytes;
    let mut events: Vec<(u64, Vec<u8>)> = Vec::new();
    let main = SYNTH_MAIN_TID;
    let mut t = 1_000_000u64;
    let mut graph_id = 0u64;
    for call in 0..calls {
        let pos = 3 + call;
        let d = |exit, ts| DecodeEvent {
            header: header(EventKind::Decode, exit, ts, main),
            n_tokens: 1,
            pos,
            ret: 0,
            _pad: 0,
        };
        events.push((t, record_bytes(&d(false, t)).to_vec()));
        let mut graph = |events: &mut Vec<(u64, Vec<u8>)>, tid, kind, n_nodes, start, end| {
            graph_id += 1;
            for (exit, ts) in [(false, start), (true, end)] {
                let g = GraphEvent {
                    header: header(EventKind::GraphCompute, exit, ts, tid),
                    graph_addr: 0xABC,
                    graph_id,
                    n_nodes,
                    backend_id: u32::from(kind != 0),
                    backend_kind: kind,
                    n_tokens: 1,
                    pos,
                    ret: 0,
                };
                events.push((ts, record_bytes(&g).to_vec()));
            }
        };
        let op = |events: &mut Vec<(u64, Vec<u8>)>,
                  tid,
                  kind,
                  index,
                  ty: OpType,
                  name: &str,
                  start,
                  end| {
            let mut e = OpEvent::zeroed();
            e.header = header(EventKind::OpCompute, false, start, tid);
            e.node_addr = SYNTH_NODE_BASE + 224 * u64::from(index);
            e.op = ty as u32;
            e.nth = 1;
            e.index = index;
            e.layer = if name.ends_with("-1") { 1 } else { 0 };
            e.backend_kind = kind;
            e.detail = OP_DETAIL_NAME | OP_DETAIL_STRUCTURE;
            e.name[..name.len()].copy_from_slice(name.as_bytes());
            e.structure.ne = [64, 1, 1, 1];
            events.push((start, record_bytes(&e).to_vec()));
            let mut x = OpExitEvent::zeroed();
            x.header = header(EventKind::OpComputeExit, true, end, tid);
            events.push((end, record_bytes(&x).to_vec()));
        };
        let accel = SYNTH_ACCEL_TID;
        // CPU split 1.
        let a0 = t + 100;
        op(
            &mut events,
            main,
            0,
            0,
            OpType::MulMat,
            "ffn_up-0",
            a0 + 10,
            a0 + 10 + SPLIT_MATMUL_NS,
        );
        let a1 = a0 + 20 + SPLIT_MATMUL_NS;
        graph(&mut events, main, 0, 1, a0, a1);
        // The accel split, submitted at a1, runs on the driver from b0.
        let b0 = a1 + 500;
        op(
            &mut events,
            accel,
            3,
            1,
            OpType::BackendCopy,
            "to_accel.ffn_up-0",
            b0 + 10,
            b0 + 10 + SPLIT_COPY_NS,
        );
        let m0 = b0 + 20 + SPLIT_COPY_NS;
        op(
            &mut events,
            accel,
            3,
            2,
            OpType::MulMat,
            "ffn_up-1",
            m0,
            m0 + SPLIT_MATMUL_NS,
        );
        let b1 = m0 + SPLIT_MATMUL_NS + 10;
        graph(&mut events, accel, 3, 2, b0, b1);
        // CPU split 2 begins at once with the sync, which returns after the accel.
        let c0 = a1 + 100;
        let s0 = c0 + 10;
        op(
            &mut events,
            main,
            0,
            3,
            OpType::BackendSync,
            "sync.ffn_up-1",
            s0,
            s0 + SPLIT_SYNC_NS,
        );
        assert!(s0 + SPLIT_SYNC_NS > b1, "the sync outlasts the accel split");
        let k0 = s0 + SPLIT_SYNC_NS + 10;
        op(
            &mut events,
            main,
            0,
            4,
            OpType::BackendCopy,
            "to_cpu.ffn_up-1",
            k0,
            k0 + SPLIT_COPY_NS,
        );
        let c1 = k0 + SPLIT_COPY_NS + 10;
        graph(&mut events, main, 0, 2, c0, c1);
        events.push((c1 + 10, record_bytes(&d(true, c1 + 10)).to_vec()));
        t = c1 + 1000;
    }
    events.sort_by_key(|(ts, _)| *ts);
    let mut m = crate::TraceModel::new(&synth_header());
    for (_, rec) in &events {
        let kind = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
        let ev = EventKind::from_u32(kind)
            .and_then(|k| trace_format::decode_record(k, rec))
            .expect("synthetic records decode");
        m.apply(&ev);
    }
    m.finish(None);
    m
}

/// Writes a synthetic trace file; returns the number of events.
///
/// # Errors
/// Writer errors.
pub fn write_trace(path: &Path, spec: &SynthSpec) -> Result<u64, TraceError> {
    let mut w = TraceWriter::create(path, &synth_header())?;
    w.set_chunk_bytes(SYNTH_CHUNK_BYTES);
    let mut err = None;
    generate(spec, |rec| {
        if err.is_none()
            && let Err(e) = w.push_raw(rec)
        {
            err = Some(e);
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    let n = w.records();
    w.finish(&TraceFooter {
        events_produced: n,
        events_written: n,
        end_reason: "synthetic".to_owned(),
        ..TraceFooter::default()
    })?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_count_matches_generate() {
        let spec = SynthSpec::sized(3, 5, 3);
        let mut n = 0;
        generate(&spec, |_| n += 1);
        assert_eq!(n, spec.event_count());
    }
}
