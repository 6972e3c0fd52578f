//! What a recording starts with: the control map's first content (what the probes
//! record, for which process) and the trace header (host, clocks, target, probes,
//! counters, settings).

use common::control::{
    CONTROL_FLAG_WAKE_ON_DECODE, CONTROL_FLAG_WAKE_ON_GRAPH, DETAIL_EXACT_SPANS,
    DETAIL_PER_NODE_ENDS, DETAIL_PMC, DETAIL_STRUCTURE, OUTPUT_PERF_BUF, OUTPUT_RING_BUF,
    TracerControl,
};
use trace_format::{ProbeInfo, TargetInfo, TraceHeader, event_kind_table};

use super::clock::clocks;
use super::error::RecordError;
use crate::{
    config::{BufferKind, TracerConfig},
    pmc::PmcSet,
    privileges,
    targets::plan::ProbePlan,
};

/// The control map's content for this recording (before the target runs).
pub fn initial_control(
    cfg: &TracerConfig,
    plan: &dyn ProbePlan,
    pid: u32,
    pmcs: &PmcSet,
    live: bool,
    leaves_wanted: bool,
) -> Result<TracerControl, RecordError> {
    let newtask_field = |field: &'static str| {
        privileges::tracepoint_field_offset("task", "task_newtask", field).ok_or(
            RecordError::TracepointFormat {
                tracepoint: "task:task_newtask",
                field,
            },
        )
    };
    let mut op_detail = 0;
    if cfg.structure {
        op_detail |= DETAIL_STRUCTURE;
    }
    if !pmcs.is_empty() {
        op_detail |= DETAIL_PMC;
    }
    if cfg.exact_spans || !pmcs.is_empty() {
        op_detail |= DETAIL_EXACT_SPANS;
    }
    if cfg.per_node_ends {
        op_detail |= DETAIL_PER_NODE_ENDS;
    }
    Ok(TracerControl {
        target_tgid: pid,
        levels: cfg.levels,
        op_detail: plan.op_detail(op_detail),
        n_pmc: pmcs.len() as u32,
        output: match cfg.buffer {
            BufferKind::Ring { .. } => OUTPUT_RING_BUF,
            BufferKind::Perf { .. } => OUTPUT_PERF_BUF,
        },
        newtask_pid_offset: newtask_field("pid")?,
        newtask_clone_flags_offset: newtask_field("clone_flags")?,
        // Tokens must reach the QoS controller or the live view at once; a plain recording
        // reads them on its next drain and spares the probe the wake-up.
        flags: if cfg.qos.is_some() || live {
            CONTROL_FLAG_WAKE_ON_DECODE
        } else {
            0
        } | if leaves_wanted {
            // Until the first leaves are read (see `LeafResolver::wants_wakeup`).
            CONTROL_FLAG_WAKE_ON_GRAPH
        } else {
            0
        },
        pmc_scaled: pmcs.scaled_mask(),
        ring_wake_bytes: crate::load::ring_sizes(cfg.buffer, &crate::load::online_cpus())
            .into_iter()
            .max()
            .unwrap_or(0)
            / 4,
    })
}

/// The trace header: host, clocks, target, probes, counters, settings.
pub fn trace_header(
    cfg: &TracerConfig,
    plan: &dyn ProbePlan,
    pid: u32,
    args: Vec<String>,
    probes: Vec<ProbeInfo>,
    pmcs: &PmcSet,
) -> TraceHeader {
    let (host, kernel) = uname();
    let (mono, real) = clocks();
    let mut settings = cfg.settings();
    plan.settings(&probes, &mut settings);
    let mut header = TraceHeader {
        format_version: trace_format::FORMAT_VERSION,
        clock: "CLOCK_MONOTONIC (bpf_ktime_get_ns)".into(),
        monotonic_to_wall_offset_ns: real - mono as i64,
        host,
        kernel,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        target: TargetInfo {
            path: plan.binary().display().to_string(),
            build_id: plan.build_id(),
            pid,
            args,
        },
        probes,
        counters: pmcs.infos(),
        counter_notes: pmcs.notes().to_vec(),
        event_kinds: event_kind_table(),
        settings: Default::default(),
        strings: Vec::new(),
    };
    header.set_recording_settings(&settings);
    header
}

/// The host's name and kernel release.
fn uname() -> (String, String) {
    // SAFETY: `utsname` is plain data; `uname` fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::uname(&mut u) };
    let s = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (s(&u.nodename), s(&u.release))
}
