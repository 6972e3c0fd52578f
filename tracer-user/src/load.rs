//! Loading the eBPF object and attaching its programs.

use std::path::Path;

use anyhow::Context as _;
use aya::{
    Ebpf, EbpfLoader,
    programs::{
        TracePoint, UProbe,
        uprobe::{UProbeAttachLocation, UProbeScope},
    },
};
use common::{
    control::{LEVEL_GRAPH, LEVEL_OP, LEVEL_PHASE, LEVEL_SCHED, LEVEL_TOKEN, MAX_PMC_THREADS},
    engine_abi::symbols,
    event::{EventKind, MAX_PMC},
};
use trace_format::ProbeInfo;

use crate::{config::BufferKind, probe_points::ProbePoints};

/// One uprobe/uretprobe pair of the engine probe ABI.
struct UprobeSpec {
    symbol: &'static str,
    enter: &'static str,
    exit: &'static str,
    level: u32,
    level_name: &'static str,
    kind: EventKind,
}

const UPROBES: [UprobeSpec; 7] = [
    UprobeSpec {
        symbol: symbols::DECODE,
        enter: "engine_decode",
        exit: "engine_decode_ret",
        level: LEVEL_TOKEN,
        level_name: "token",
        kind: EventKind::Decode,
    },
    UprobeSpec {
        symbol: symbols::GRAPH_COMPUTE,
        enter: "engine_graph_compute",
        exit: "engine_graph_compute_ret",
        level: LEVEL_GRAPH,
        level_name: "graph",
        kind: EventKind::GraphCompute,
    },
    UprobeSpec {
        symbol: symbols::OP_COMPUTE,
        enter: "engine_op_compute",
        exit: "engine_op_compute_ret",
        level: LEVEL_OP,
        level_name: "op",
        kind: EventKind::OpCompute,
    },
    UprobeSpec {
        symbol: symbols::PHASE_EMBED,
        enter: "engine_phase_embed",
        exit: "engine_phase_embed_ret",
        level: LEVEL_PHASE,
        level_name: "phase",
        kind: EventKind::PhaseEmbed,
    },
    UprobeSpec {
        symbol: symbols::PHASE_COPY_LOGITS,
        enter: "engine_phase_copy_logits",
        exit: "engine_phase_copy_logits_ret",
        level: LEVEL_PHASE,
        level_name: "phase",
        kind: EventKind::PhaseCopyLogits,
    },
    UprobeSpec {
        symbol: symbols::PHASE_SOFTMAX,
        enter: "engine_phase_softmax",
        exit: "engine_phase_softmax_ret",
        level: LEVEL_PHASE,
        level_name: "phase",
        kind: EventKind::PhaseSoftmax,
    },
    UprobeSpec {
        symbol: symbols::PHASE_SAMPLE,
        enter: "engine_phase_sample",
        exit: "engine_phase_sample_ret",
        level: LEVEL_PHASE,
        level_name: "phase",
        kind: EventKind::PhaseSample,
    },
];

/// Tracepoints: (program, category, name, event kind). Fork/exit are always attached
/// (they keep the thread set and counters current).
const TRACEPOINTS: [(&str, &str, &str, EventKind, bool); 5] = [
    (
        "sched_switch",
        "sched",
        "sched_switch",
        EventKind::SchedSwitch,
        true,
    ),
    (
        "sched_wakeup",
        "sched",
        "sched_wakeup",
        EventKind::SchedWakeup,
        true,
    ),
    (
        "sched_wakeup_new",
        "sched",
        "sched_wakeup_new",
        EventKind::SchedWakeupNew,
        true,
    ),
    (
        "sched_process_fork",
        "sched",
        "sched_process_fork",
        EventKind::TaskNew,
        false,
    ),
    (
        "sched_process_exit",
        "sched",
        "sched_process_exit",
        EventKind::TaskExit,
        false,
    ),
];

/// Loads the probes with the buffer sizes of `buffer`. The per-thread counter map is
/// created and pinned first (see [`crate::pmc::create_pinned_counter_map`]), reused by
/// the loader, and unpinned again.
pub fn load(buffer: BufferKind) -> anyhow::Result<Ebpf> {
    let pin = std::path::PathBuf::from(crate::pmc::BPFFS)
        .join(format!("profinfer-counters-{}", std::process::id()));
    let _ = std::fs::remove_file(&pin);
    let _counters = crate::pmc::create_pinned_counter_map(MAX_PMC_THREADS * MAX_PMC as u32, &pin)
        .context("creating the per-thread counter map (needs bpffs at /sys/fs/bpf: mount -t bpf bpf /sys/fs/bpf)")?;
    let mut loader = EbpfLoader::new();
    loader.map_pin_path("COUNTERS", pin.as_path());
    let ring = match buffer {
        BufferKind::Ring { bytes } => bytes,
        BufferKind::Perf { .. } => 4096,
    };
    loader.map_max_entries("EVENTS", ring);
    let ebpf = loader.load(crate::EBPF_OBJECT).context(
        "loading the eBPF probes failed (is this kernel built with BPF, uprobes and ring buffers?)",
    );
    let _ = std::fs::remove_file(&pin);
    ebpf
}

/// Attaches the uprobes of the enabled `levels` to `exe` and the scheduler tracepoints.
/// Returns the probe table for the trace header.
pub fn attach(
    ebpf: &mut Ebpf,
    exe: &Path,
    points: &ProbePoints,
    levels: u32,
) -> anyhow::Result<Vec<ProbeInfo>> {
    let mut table = Vec::new();
    for spec in &UPROBES {
        if levels & spec.level == 0 {
            continue;
        }
        let Some(point) = points.get(spec.symbol) else {
            eprintln!(
                "profinfer: warning: {} has no symbol {}; that probe is skipped",
                exe.display(),
                spec.symbol
            );
            continue;
        };
        for (prog, attach_kind, offset) in [
            (spec.enter, "uprobe", point.attach_offset),
            (spec.exit, "uretprobe", 0),
        ] {
            let p: &mut UProbe = ebpf
                .program_mut(prog)
                .with_context(|| format!("program {prog} missing from the eBPF object"))?
                .try_into()?;
            p.load().with_context(|| format!("loading {prog} failed"))?;
            let location = if offset == 0 {
                UProbeAttachLocation::Symbol(spec.symbol)
            } else {
                UProbeAttachLocation::SymbolOffset(spec.symbol, offset)
            };
            p.attach(location, exe, UProbeScope::AllProcesses)
                .with_context(|| {
                    format!(
                        "attaching {attach_kind} to {}:{} failed",
                        exe.display(),
                        spec.symbol
                    )
                })?;
            let (insn, cost) = if attach_kind == "uprobe" {
                (
                    point.attach_insn.clone(),
                    point.attach_cost.name().to_owned(),
                )
            } else {
                (String::new(), "uretprobe".to_owned())
            };
            table.push(ProbeInfo {
                id: spec.kind as u32,
                attach: attach_kind.into(),
                point: spec.symbol.into(),
                level: spec.level_name.into(),
                offset,
                first_insn: insn,
                cost_class: cost,
            });
        }
    }
    for (prog, category, name, kind, is_sched_level) in TRACEPOINTS {
        if is_sched_level && levels & LEVEL_SCHED == 0 {
            continue;
        }
        let p: &mut TracePoint = ebpf
            .program_mut(prog)
            .with_context(|| format!("program {prog} missing from the eBPF object"))?
            .try_into()?;
        p.load().with_context(|| format!("loading {prog} failed"))?;
        p.attach(category, name)
            .with_context(|| format!("attaching tracepoint {category}:{name} failed"))?;
        table.push(ProbeInfo {
            id: kind as u32,
            attach: "tracepoint".into(),
            point: format!("{category}:{name}"),
            level: if is_sched_level {
                "sched"
            } else {
                "thread-set"
            }
            .into(),
            offset: 0,
            first_insn: String::new(),
            cost_class: "n/a".into(),
        });
    }
    Ok(table)
}
