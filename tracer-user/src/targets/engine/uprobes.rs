//! The engine's probes: one table row per symbol of the engine probe ABI
//! (`common::engine_abi::symbols`), with its programs, level and when it is attached
//! ([`UPROBES`]), and their attachment to the engine's binary (batched or per-node node
//! ends, exact starts, an engine built before `engine_op_done`).

use std::path::Path;

use aya::Ebpf;
use common::{
    control::{
        DETAIL_EXACT_SPANS, DETAIL_PER_NODE_ENDS, LEVEL_GRAPH, LEVEL_OP, LEVEL_PHASE, LEVEL_TOKEN,
    },
    engine_abi::symbols,
    event::EventKind,
};
use trace_format::ProbeInfo;

use super::points::ProbePoints;
use crate::{
    counted_uprobe,
    load::{self, CountedAt, LoadError, OpProbes, UprobeScope, UprobeSite},
    probe_points::ProbePoint,
};

/// The probes on one symbol of the engine probe ABI: a uprobe and, for the levels whose
/// end is the function's return, a uretprobe.
struct UprobeSpec {
    symbol: &'static str,
    enter: &'static str,
    exit: Option<&'static str>,
    level: u32,
    level_name: &'static str,
    kind: EventKind,
    /// When it is attached (if its level is recorded).
    when: When,
}

/// When a [`UprobeSpec`] is attached, besides its level being recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum When {
    /// Always; a binary without the symbol gets a warning.
    Always,
    /// For exact starts (`DETAIL_EXACT_SPANS`), or in an engine without
    /// `engine_op_done` (whose nodes then end at this function's return).
    ExactStarts,
    /// If the engine has it (older builds do not).
    IfPresent,
    /// Node ends one by one (`engine_op_done`): unless the ends come batched.
    PerNodeEnds,
    /// Batched node ends (`engine_op_times` with its reference counter): where the
    /// engine, the kernel and the settings allow ([`batched_ends`]).
    BatchedEnds,
}

/// The engine's probes, in attach order.
const UPROBES: [UprobeSpec; 15] = [
    UprobeSpec {
        symbol: symbols::DECODE,
        enter: "engine_decode",
        exit: Some("engine_decode_ret"),
        level: LEVEL_TOKEN,
        level_name: "token",
        kind: EventKind::Decode,
        when: When::Always,
    },
    UprobeSpec {
        symbol: symbols::GRAPH_COMPUTE,
        enter: "engine_graph_compute",
        exit: Some("engine_graph_compute_ret"),
        level: LEVEL_GRAPH,
        level_name: "graph",
        kind: EventKind::GraphCompute,
        when: When::Always,
    },
    // A node's span ends where the engine's thread finished its share and, by default,
    // starts where the barrier before it released. The ends come batched
    // (`engine_op_times`: one uprobe per table of up to 32 nodes, with a reference
    // counter that makes the engine take the times) or one by one (`engine_op_done`:
    // one uprobe per node and thread, on a 5-byte nop); the batched probe comes first so
    // that the per-node one can stand in when it cannot be attached. With
    // `DETAIL_EXACT_SPANS` a span opens at either backend's entry point. An engine
    // without `engine_op_done` is closed at `engine_op_compute`'s return instead
    // (`attach`). In order of hits per token: detaching (QoS, sampled windows) waits for
    // the kernel's grace period probe by probe, so the busiest go first.
    UprobeSpec {
        symbol: symbols::OP_COMPUTE,
        enter: "engine_op_compute",
        exit: None,
        level: LEVEL_OP,
        level_name: "op",
        kind: EventKind::OpSpan,
        when: When::ExactStarts,
    },
    UprobeSpec {
        symbol: symbols::ACCEL_OP_COMPUTE,
        enter: "engine_accel_op_compute",
        exit: None,
        level: LEVEL_OP,
        level_name: "op",
        kind: EventKind::OpSpan,
        when: When::ExactStarts,
    },
    UprobeSpec {
        symbol: symbols::OP_TIMES,
        enter: "engine_op_times",
        exit: None,
        level: LEVEL_OP,
        level_name: "op",
        kind: EventKind::OpSpan,
        when: When::BatchedEnds,
    },
    UprobeSpec {
        symbol: symbols::OP_DONE,
        enter: "engine_op_done",
        exit: None,
        level: LEVEL_OP,
        level_name: "op",
        kind: EventKind::OpSpan,
        when: When::PerNodeEnds,
    },
    UprobeSpec {
        symbol: symbols::GRAPH_THREAD,
        enter: "engine_graph_thread",
        exit: None,
        level: LEVEL_OP,
        level_name: "op",
        kind: EventKind::GraphThread,
        when: When::IfPresent,
    },
    UprobeSpec {
        symbol: symbols::PHASE_EMBED,
        enter: "engine_phase_embed",
        exit: Some("engine_phase_embed_ret"),
        level: LEVEL_PHASE,
        level_name: "phase",
        kind: EventKind::PhaseEmbed,
        when: When::Always,
    },
    UprobeSpec {
        symbol: symbols::PHASE_COPY_LOGITS,
        enter: "engine_phase_copy_logits",
        exit: Some("engine_phase_copy_logits_ret"),
        level: LEVEL_PHASE,
        level_name: "phase",
        kind: EventKind::PhaseCopyLogits,
        when: When::Always,
    },
    UprobeSpec {
        symbol: symbols::PHASE_SOFTMAX,
        enter: "engine_phase_softmax",
        exit: Some("engine_phase_softmax_ret"),
        level: LEVEL_PHASE,
        level_name: "phase",
        kind: EventKind::PhaseSoftmax,
        when: When::Always,
    },
    UprobeSpec {
        symbol: symbols::PHASE_SAMPLE,
        enter: "engine_phase_sample",
        exit: Some("engine_phase_sample_ret"),
        level: LEVEL_PHASE,
        level_name: "phase",
        kind: EventKind::PhaseSample,
        when: When::Always,
    },
    UprobeSpec {
        symbol: symbols::PHASE_KV_COMPRESS,
        enter: "engine_phase_kv_compress",
        exit: Some("engine_phase_kv_compress_ret"),
        level: LEVEL_PHASE,
        level_name: "phase",
        kind: EventKind::PhaseKvCompress,
        when: When::Always,
    },
    UprobeSpec {
        symbol: symbols::PHASE_KV_SWAP_OUT,
        enter: "engine_phase_kv_swap_out",
        exit: Some("engine_phase_kv_swap_out_ret"),
        level: LEVEL_PHASE,
        level_name: "phase",
        kind: EventKind::PhaseKvSwapOut,
        when: When::Always,
    },
    UprobeSpec {
        symbol: symbols::PHASE_KV_SWAP_IN,
        enter: "engine_phase_kv_swap_in",
        exit: Some("engine_phase_kv_swap_in_ret"),
        level: LEVEL_PHASE,
        level_name: "phase",
        kind: EventKind::PhaseKvSwapIn,
        when: When::Always,
    },
    UprobeSpec {
        symbol: symbols::PHASE_KV_DECOMPRESS,
        enter: "engine_phase_kv_decompress",
        exit: Some("engine_phase_kv_decompress_ret"),
        level: LEVEL_PHASE,
        level_name: "phase",
        kind: EventKind::PhaseKvDecompress,
        when: When::Always,
    },
];

/// Where `engine_op_times` is attached with its reference counter, if the node ends can
/// come batched: the engine has the probe point and its semaphore, and the kernel loads
/// the program (it needs `bpf_loop`, Linux 5.17). Otherwise `None`, with one note when
/// the engine has them but this kernel or file cannot.
fn batched_ends(ebpf: &mut Ebpf, exe: &Path, points: &ProbePoints) -> Option<CountedAt> {
    let point = points.get(symbols::OP_TIMES)?;
    let offsets =
        counted_uprobe::symbol_file_offsets(exe, [symbols::OP_TIMES, symbols::OP_TIMES_SEMAPHORE]);
    let note = |why: &dyn std::fmt::Display| {
        eprintln!(
            "profinfer: note: node ends one probe hit at a time (engine_op_done): batched ends unavailable: {why}"
        );
    };
    let (probe, counter) = match offsets {
        Ok([Some(probe), Some(counter)]) => (probe, counter),
        Ok(_) => return None,
        Err(e) => {
            note(&format_args!("reading {}: {e}", exe.display()));
            return None;
        }
    };
    if let Err(e) = load::ensure_loaded(ebpf, "engine_op_times") {
        note(&format_args!(
            "this kernel does not load its program (it needs bpf_loop, Linux 5.17): {}",
            crate::error_chain(&e)
        ));
        return None;
    }
    Some(CountedAt {
        probe: probe + point.attach_offset,
        counter,
    })
}

/// The sites of `spec` at `point` of `exe` (`has_done`: the engine has `engine_op_done`;
/// `batched`: where `engine_op_times` goes; `exact_spans`: spans open at node starts).
fn spec_sites(
    spec: &UprobeSpec,
    exe: &Path,
    point: &ProbePoint,
    has_done: bool,
    batched: Option<CountedAt>,
    exact_spans: bool,
) -> Vec<UprobeSite> {
    // With exact starts a node's end closes the span its start opened (and reads the
    // counters): a program of its own.
    let enter = if spec.symbol == symbols::OP_DONE && exact_spans {
        "engine_op_done_exact"
    } else {
        spec.enter
    };
    let mut sites = vec![UprobeSite {
        prog: enter,
        file: exe.to_path_buf(),
        symbol: spec.symbol.to_owned(),
        offset: point.attach_offset,
        counted: batched.filter(|_| spec.when == When::BatchedEnds),
    }];
    // An engine built before `engine_op_done`: its nodes end at the entry point's
    // return.
    let exit = match spec.exit {
        Some(exit) => Some(exit),
        None if spec.symbol == symbols::OP_COMPUTE && !has_done => Some("engine_op_compute_ret"),
        None => None,
    };
    if let Some(exit) = exit {
        sites.push(UprobeSite {
            prog: exit,
            file: exe.to_path_buf(),
            symbol: spec.symbol.to_owned(),
            offset: 0,
            counted: None,
        });
    }
    sites
}

/// Attaches the engine's uprobes of the enabled `levels` (operator details `op_detail`)
/// to `exe` (in the processes `scope` says) and the scheduler tracepoints. Returns the
/// probe table for the trace header and the operator probes (to detach and attach again
/// at run time).
pub fn attach(
    ebpf: &mut Ebpf,
    exe: &Path,
    points: &ProbePoints,
    levels: u32,
    op_detail: u32,
    mut scope: UprobeScope,
) -> Result<(Vec<ProbeInfo>, Option<OpProbes>), LoadError> {
    let mut table = Vec::new();
    let mut op_probes: Option<OpProbes> = None;
    let has_done = points.get(symbols::OP_DONE).is_some();
    let exact_spans = op_detail & DETAIL_EXACT_SPANS != 0;
    let mut batched =
        if levels & LEVEL_OP != 0 && !exact_spans && op_detail & DETAIL_PER_NODE_ENDS == 0 {
            batched_ends(ebpf, exe, points)
        } else {
            None
        };
    for spec in &UPROBES {
        let wanted = match spec.when {
            When::Always | When::IfPresent => true,
            When::ExactStarts => exact_spans || !has_done,
            When::PerNodeEnds => batched.is_none(),
            When::BatchedEnds => batched.is_some(),
        };
        if levels & spec.level == 0 || !wanted {
            continue;
        }
        let Some(point) = points.get(spec.symbol) else {
            if spec.when == When::Always || spec.when == When::ExactStarts {
                eprintln!(
                    "profinfer: warning: {} has no symbol {}; that probe is skipped",
                    exe.display(),
                    spec.symbol
                );
            }
            continue;
        };
        let sites = spec_sites(spec, exe, point, has_done, batched, exact_spans);
        let infos: Vec<ProbeInfo> = sites
            .iter()
            .map(|site| load::probe_info(spec.kind, spec.level_name, site, point))
            .collect();
        let probes = match load::attach_sites(ebpf, sites, &mut scope) {
            Ok(probes) => probes,
            Err(e) if spec.when == When::BatchedEnds => {
                // `engine_op_done` (next in `UPROBES`) stands in.
                eprintln!(
                    "profinfer: note: node ends one probe hit at a time (engine_op_done): {}",
                    crate::error_chain(&e)
                );
                batched = None;
                continue;
            }
            Err(e) => return Err(e),
        };
        table.extend(infos);
        if spec.level == LEVEL_OP {
            op_probes = Some(match op_probes.take() {
                Some(mut all) => {
                    all.absorb(probes);
                    all
                }
                None => probes,
            });
        }
    }
    table.extend(load::attach_tracepoints(ebpf, levels)?);
    Ok((table, op_probes))
}
