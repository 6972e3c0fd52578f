//! The probe plan for unmodified llama.cpp: probes on the ggml CPU backend and libllama
//! of the detected build ([`GgmlBuild`]), its struct layout and op numbering written into
//! the probes' maps first. The records are the engine's, so everything after the probes
//! is shared (`tracer-ebpf/src/probes/llama_cpp.rs` says how spans are made).

use std::path::{Path, PathBuf};

use aya::{
    Ebpf,
    maps::{Array, HashMap},
};
use common::{
    OpType,
    control::{DETAIL_EXACT_SPANS, LEVEL_GRAPH, LEVEL_OP, LEVEL_PHASE, LEVEL_TOKEN},
    event::EventKind,
    ggml_abi::{GgmlLayout, MAX_GGML_OPS},
    ggml_backends::{GGML_BACKEND_GUIDS, guid_key},
    op_catalog::{OP_UNKNOWN_BASE, op_id},
};
use trace_format::{ProbeInfo, RecordingSettings};

use super::build::{EXTRA_FORWARD, FUSED_FORWARD, GgmlBuild, LLAMA_PROCESS};
use super::layout_check::LayoutCheck;
use crate::{
    load::{self, LoadError, UprobeScope, UprobeSite},
    probe_points::ProbePoint,
    targets::plan::{AttachRequest, Attached, ProbePlan, RecordCheck},
};

/// The program reading an expert-indexed product's routing, tail-called from the
/// dispatch program through slot 0 of the program array `GGML_ROUTE`.
pub const EXPERT_ROUTE: &str = "ggml_expert_route";

/// `GGML_SEQS` slots of the token programs that count a batch's sequences (tail-called
/// from `llama_decode` / `llama_process`).
const SEQS_DECODE_SLOT: u32 = 0;
/// See [`SEQS_DECODE_SLOT`].
const SEQS_PROCESS_SLOT: u32 = 1;

/// The trace header's line for [`EXPERT_ROUTE`] (tail-called, attached nowhere).
pub fn expert_route_info(op: u32) -> ProbeInfo {
    ProbeInfo {
        id: EventKind::ExpertRoute as u32,
        attach: "tail call".into(),
        point: format!("{EXTRA_FORWARD} (MUL_MAT_ID = op {op})"),
        level: "op".into(),
        offset: 0,
        first_insn: String::new(),
        cost_class: "none on other nodes".into(),
    }
}

/// The plan for a llama.cpp process.
#[derive(Clone, Debug)]
pub struct LlamaCppPlan {
    exe: PathBuf,
    build: GgmlBuild,
}

impl LlamaCppPlan {
    /// The plan for the program `exe` running `build`.
    pub fn new(exe: &Path, build: GgmlBuild) -> LlamaCppPlan {
        LlamaCppPlan {
            exe: exe.to_path_buf(),
            build,
        }
    }

    /// The detected build.
    pub fn build(&self) -> &GgmlBuild {
        &self.build
    }

    /// Every probe of `levels` (and operator details `op_detail`): (site, probe point,
    /// event kind, level name).
    pub fn sites(
        &self,
        levels: u32,
        op_detail: u32,
    ) -> Vec<(UprobeSite, ProbePoint, EventKind, &'static str)> {
        let b = &self.build;
        let mut out = Vec::new();
        // A uprobe at the point's attach offset and, with `exit`, a uretprobe.
        let mut add =
            |file: &Path, point: &ProbePoint, enter, exit: Option<&'static str>, kind, level| {
                let progs = [(Some(enter), point.attach_offset), (exit, 0)];
                for (prog, offset) in progs {
                    let Some(prog) = prog else { continue };
                    out.push((
                        UprobeSite {
                            prog,
                            file: file.to_path_buf(),
                            symbol: point.symbol.clone(),
                            offset,
                            counted: None,
                        },
                        point.clone(),
                        kind,
                        level,
                    ));
                }
            };
        if levels & LEVEL_TOKEN != 0
            && let Some(lib) = &b.llama_lib
        {
            for point in &b.decode_points {
                let (enter, exit) = if point.symbol == LLAMA_PROCESS {
                    ("llama_process", "llama_process_ret")
                } else {
                    ("llama_decode", "llama_decode_ret")
                };
                add(lib, point, enter, Some(exit), EventKind::Decode, "token");
            }
        }
        if levels & LEVEL_PHASE != 0
            && let Some((lib, point)) = &b.sample_point
        {
            add(
                lib,
                point,
                "llama_sampler_sample",
                Some("llama_sampler_sample_ret"),
                EventKind::PhaseSample,
                "phase",
            );
        }
        // The graph's probes also number graphs and close every thread's last span at
        // the graph's end: the operator level needs them too.
        if levels & (LEVEL_GRAPH | LEVEL_OP) != 0 {
            add(
                &b.cpu_lib,
                &b.graph_point,
                "ggml_graph_compute",
                Some("ggml_graph_compute_ret"),
                EventKind::GraphCompute,
                "graph",
            );
            // What the CPU does for other backends: splits, waits, copies, Vulkan
            // submissions and fence waits (a few calls per graph).
            for bp in &b.backend_points {
                let kind = if bp.probe.enter == "ggml_backend_compute" {
                    EventKind::GraphCompute
                } else {
                    EventKind::BackendSpan
                };
                add(
                    &bp.file,
                    &bp.point,
                    bp.probe.enter,
                    Some(bp.probe.exit),
                    kind,
                    "graph",
                );
            }
        }
        if levels & LEVEL_OP != 0 && b.op_level_missing.is_none() {
            // One uprobe per node and thread where its dispatch starts and, for exact
            // spans, one where the thread then waits; no uretprobe
            // (`tracer-ebpf/src/probes/llama_cpp.rs`).
            for point in &b.start_points {
                let enter = if point.symbol == FUSED_FORWARD {
                    "ggml_fused_forward"
                } else {
                    "ggml_extra_forward"
                };
                add(&b.cpu_lib, point, enter, None, EventKind::OpSpan, "op");
            }
            if let Some(point) = b
                .barrier_point
                .as_ref()
                .filter(|_| op_detail & DETAIL_EXACT_SPANS != 0)
            {
                add(
                    &b.cpu_lib,
                    point,
                    "ggml_barrier",
                    None,
                    EventKind::OpSpan,
                    "op",
                );
            }
            // Under a Vulkan backend: a uprobe per node the CPU records for the GPU, and
            // the GPU timestamps ggml-vulkan reads back (`GGML_VK_PERF_LOGGER`).
            for bp in &b.gpu_node_points {
                let (exit, kind) = if bp.probe.exit.is_empty() {
                    (None, EventKind::OpSpan)
                } else {
                    (Some(bp.probe.exit), EventKind::GpuTimestamps)
                };
                add(&bp.file, &bp.point, bp.probe.enter, exit, kind, "op");
            }
        }
        out
    }

    /// The build's op number of the expert-indexed product (`MUL_MAT_ID`), whose
    /// dispatch tail-calls [`EXPERT_ROUTE`] (from `GGML_ROUTE`) when the op level is on.
    pub fn expert_product_op(&self) -> Option<u32> {
        self.build
            .op_names
            .iter()
            .position(|n| op_id(n) == Some(OpType::MulMatId as u32))
            .map(|i| i as u32)
    }

    /// The op map: the build's op number → profinfer's op id, by name.
    pub fn op_map(&self) -> Vec<u32> {
        (0..MAX_GGML_OPS)
            .map(|i| {
                self.build
                    .op_names
                    .get(i as usize)
                    .and_then(|n| op_id(n))
                    .unwrap_or(OP_UNKNOWN_BASE | i)
            })
            .collect()
    }

    fn write_maps(&self, ebpf: &mut Ebpf) -> Result<(), LoadError> {
        let map_err = |name| {
            move |source| LoadError::MapWrite {
                name,
                source: Box::new(source),
            }
        };
        let mut layout: Array<_, GgmlLayout> = Array::try_from(ebpf.map_mut("GGML_LAYOUT").ok_or(
            LoadError::ProgramMissing {
                program: "GGML_LAYOUT",
            },
        )?)
        .map_err(map_err("GGML_LAYOUT"))?;
        layout
            .set(0, self.build.layout, 0)
            .map_err(map_err("GGML_LAYOUT"))?;
        let mut ops: Array<_, u32> =
            Array::try_from(ebpf.map_mut("GGML_OPS").ok_or(LoadError::ProgramMissing {
                program: "GGML_OPS",
            })?)
            .map_err(map_err("GGML_OPS"))?;
        for (i, id) in self.op_map().into_iter().enumerate() {
            ops.set(i as u32, id, 0).map_err(map_err("GGML_OPS"))?;
        }
        let mut guids: HashMap<_, [u64; 2], u32> = HashMap::try_from(
            ebpf.map_mut("GGML_BACKEND_GUIDS")
                .ok_or(LoadError::ProgramMissing {
                    program: "GGML_BACKEND_GUIDS",
                })?,
        )
        .map_err(map_err("GGML_BACKEND_GUIDS"))?;
        for row in &GGML_BACKEND_GUIDS {
            guids
                .insert(guid_key(&row.guid), row.kind as u32, 0)
                .map_err(map_err("GGML_BACKEND_GUIDS"))?;
        }
        Ok(())
    }
}

impl ProbePlan for LlamaCppPlan {
    fn sample_classifier(&self) -> crate::samples::SampleClassifier {
        super::sample_ops::classify
    }

    fn binary(&self) -> &Path {
        &self.exe
    }

    fn build_id(&self) -> Option<String> {
        self.build.cpu_build_id.clone()
    }

    fn attach(&self, ebpf: &mut Ebpf, request: AttachRequest) -> Result<Attached, LoadError> {
        let AttachRequest {
            levels,
            op_detail,
            pid,
        } = request;
        self.write_maps(ebpf)?;
        let mut scope = UprobeScope::OneProcess(pid);
        let mut table = Vec::new();
        let mut op_sites = Vec::new();
        let mut other_sites = Vec::new();
        for (site, point, kind, level) in self.sites(levels, op_detail) {
            table.push(load::probe_info(kind, level, &site, &point));
            if level == "op" {
                op_sites.push(site);
            } else {
                other_sites.push(site);
            }
        }
        // The token probes tail-call the programs that also count a batch's sequences;
        // a kernel that refuses them (no `bpf_loop` before Linux 5.17) costs the counts
        // only, said once.
        let seqs = [
            (SEQS_DECODE_SLOT, "llama_decode_seqs"),
            (SEQS_PROCESS_SLOT, "llama_process_seqs"),
        ]
        .into_iter()
        .try_for_each(|(slot, prog)| load::set_tail_call(ebpf, "GGML_SEQS", slot, prog));
        if let Err(e) = seqs {
            eprintln!(
                "profinfer: note: recording decode calls without their sequences (they need bpf_loop, Linux 5.17): {}",
                crate::error_chain(&e)
            );
        }
        // The token and graph probes stay attached for the whole recording (their links
        // live in the programs).
        load::attach_sites(ebpf, other_sites, &mut scope)?;
        let op_probes = if op_sites.is_empty() {
            None
        } else {
            // Expert routing comes with the operators (read with their structure). A
            // program the kernel refuses costs the routes only, said once.
            if let Some(op) = self.expert_product_op() {
                match load::set_tail_call(ebpf, "GGML_ROUTE", 0, EXPERT_ROUTE) {
                    Ok(()) => table.push(expert_route_info(op)),
                    Err(e) => eprintln!(
                        "profinfer: note: recording without expert routes: {}",
                        crate::error_chain(&e)
                    ),
                }
            }
            Some(load::attach_sites(ebpf, op_sites, &mut scope)?)
        };
        table.extend(load::attach_tracepoints(ebpf, levels)?);
        Ok((table, op_probes))
    }

    fn levels(&self, wanted: u32) -> (u32, Option<String>) {
        match &self.build.op_level_missing {
            Some(why) if wanted & LEVEL_OP != 0 => (
                wanted & !LEVEL_OP,
                Some(format!(
                    "recording without operators: {why}; this build allows the token, phase and graph levels (node counts per graph), sched events and per-thread counters"
                )),
            ),
            _ => (wanted, None),
        }
    }

    fn record_check(&self) -> Option<Box<dyn RecordCheck>> {
        Some(Box::new(LayoutCheck::new(self.build.op_names.len() as u32)))
    }

    fn settings(&self, _probes: &[ProbeInfo], settings: &mut RecordingSettings) {
        settings.target = Some("llama.cpp".into());
        settings.ggml = Some(self.build.describe());
        if let Some(why) = &self.build.op_level_missing {
            settings.op_level = Some(format!("unavailable: {why}"));
        }
    }

    fn reads_leaves(&self) -> bool {
        false
    }
}
