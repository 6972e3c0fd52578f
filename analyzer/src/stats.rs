//! ProfStat (seed 002 §4.3): tables derived from the model — latency per iteration and
//! the node classes driving its growth with context length (Fig. 9), matrix products'
//! time against complexity with a linear fit (Fig. 10), counter-derived bandwidth and
//! stall ratios per op type (Fig. 11), and per-thread load balance per op (Fig. 6).
//! Which counters feed the derived metrics on which architecture: [`metrics`].

pub mod metrics;

use std::collections::BTreeMap;

use common::engine_abi::OpType;
use serde::Serialize;

use crate::{
    dag::{ProfDag, matmul_complexity},
    model::{OP_TYPE_SLOTS, PMC_MISSING, TokenPhase, TraceModel, op_name},
};

/// Bytes per cache line, to turn cache-miss counts into traffic.
pub const CACHE_LINE_BYTES: u64 = 64;

/// A least-squares line `y = slope·x + intercept`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LinearFit {
    /// Slope.
    pub slope: f64,
    /// Intercept.
    pub intercept: f64,
    /// Coefficient of determination (1 for a perfect fit; 0 if y is constant).
    pub r2: f64,
    /// Number of points.
    pub n: usize,
}

/// Fits a line through `(x, y)` points; `None` with fewer than 2 points or constant x.
pub fn linear_fit(points: &[(f64, f64)]) -> Option<LinearFit> {
    let n = points.len();
    if n < 2 {
        return None;
    }
    let nf = n as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / nf;
    let my = points.iter().map(|p| p.1).sum::<f64>() / nf;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let r2 = if syy == 0.0 {
        0.0
    } else {
        (sxy * sxy) / (sxx * syy)
    };
    Some(LinearFit {
        slope,
        intercept,
        r2,
        n,
    })
}

/// Nearest-rank percentile of sorted values (`p` in 0..=100).
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// One decode call: its latency and where the time went.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IterationRow {
    /// Decode call index.
    pub index: u32,
    /// Prefill or decode.
    pub phase: TokenPhase,
    /// Position of its first token (context length before it).
    pub pos: u32,
    /// Tokens in the batch.
    pub n_tokens: u32,
    /// Its run ([`crate::model::SequenceRun`]; 0 in a trace of one generation).
    pub run: u32,
    /// Start relative to the first event, ms.
    pub start_ms: f64,
    /// Latency (entry to exit), ms.
    pub latency_ms: f64,
    /// Time per node class, ms.
    pub class_ms: BTreeMap<String, f64>,
}

/// How a node class's time grows with context length over the decode steps.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GrowthRow {
    /// Node class (`kq`, `kqv_out`, `ffn_up`...).
    pub class: String,
    /// Mean time per decode step, ms.
    pub mean_ms: f64,
    /// Fit of the class's time (ns) against position.
    pub fit: Option<LinearFit>,
    /// Its slope as a share of the slope of the whole step's latency.
    pub share_of_growth: Option<f64>,
}

/// One matrix product of the DAG iteration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MatMulRow {
    /// Node name.
    pub name: String,
    /// Node class.
    pub class: String,
    /// Layer.
    pub layer: i32,
    /// `K·N·M·H` multiply-adds.
    pub complexity: u64,
    /// Time, ns.
    pub time_ns: u64,
    /// Whether the class is attention's `kq`/`kqv` (broadcast over heads).
    pub attention: bool,
}

/// Per op type: counts, time and counter-derived metrics over the whole run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpTypeRow {
    /// Op type name.
    pub op: String,
    /// Node executions.
    pub count: u64,
    /// Total time, ms.
    pub total_ms: f64,
    /// Mean time per execution, µs.
    pub mean_us: f64,
    /// Share of the summed decode-call time.
    pub share_of_token_time: f64,
    /// Mean idle share of the threads inside the op (load imbalance).
    pub idle_share: f64,
    /// Counter sums, by counter name.
    pub counters: BTreeMap<String, u64>,
    /// Miss counter × 64 B per second of op time, GB/s: `cache-misses` on x86-64, the
    /// lowest-level refill recorded on arm64 ([`ProfStat::miss_counter`]).
    pub miss_bandwidth_gbps: Option<f64>,
    /// `stalled-cycles-backend / cycles` (STALL_BACKEND / CPU_CYCLES on arm64), if both
    /// were read.
    pub stall_ratio: Option<f64>,
    /// `instructions / cycles`, if both were read.
    pub ipc: Option<f64>,
    /// Miss counter per 1000 instructions, if both were read.
    pub mpki: Option<f64>,
}

/// Load balance of one node of the DAG iteration on one thread.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadBalanceRow {
    /// Execution order.
    pub order: u32,
    /// Node name.
    pub name: String,
    /// Op type.
    pub op: String,
    /// Thread id.
    pub tid: u32,
    /// The thread's own time in the node, ns.
    pub busy_ns: u64,
    /// The node's time (first entry to last exit), ns.
    pub span_ns: u64,
    /// `1 - busy / span`: how long the thread waited for the others.
    pub idle_share: f64,
}

/// Every ProfStat table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProfStat {
    /// Per decode call.
    pub iterations: Vec<IterationRow>,
    /// Fit of decode-step latency (ns) against position.
    pub decode_latency_fit: Option<LinearFit>,
    /// Node classes by growth slope, largest first.
    pub growth: Vec<GrowthRow>,
    /// Matrix products of the DAG iteration.
    pub matmul: Vec<MatMulRow>,
    /// Fit of matmul time (ns) against complexity, all products.
    pub matmul_fit_all: Option<LinearFit>,
    /// Fit without attention's `kq`/`kqv` (seed 002 Fig. 10).
    pub matmul_fit_dense: Option<LinearFit>,
    /// Per op type.
    pub op_types: Vec<OpTypeRow>,
    /// The counter behind `miss_bandwidth_gbps` and `mpki` ([`metrics::MISS_COUNTERS`]),
    /// if one was recorded.
    pub miss_counter: Option<String>,
    /// Per node and thread of the DAG iteration.
    pub load_balance: Vec<LoadBalanceRow>,
    /// Across experts, for a mixture-of-experts model (seed 002 Fig 13).
    pub experts: Option<crate::experts::ExpertStats>,
    /// Across backends, for a graph split between the CPU and the accel backend or a KV
    /// budget (seed 002 Fig 7 and 12).
    pub backends: Option<crate::backends::BackendStats>,
}

/// Whether a class is attention's score or value product.
pub fn is_attention_class(class: &str) -> bool {
    matches!(class, "kq" | "kqv" | "kqv_out")
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Computes every table; `dag` is the iteration for the per-node tables.
pub fn compute(model: &TraceModel, dag: Option<&ProfDag>) -> ProfStat {
    let class_ns = class_ns_per_token(model);
    let decode: Vec<_> = model
        .tokens()
        .iter()
        .filter(|t| t.phase == TokenPhase::Decode && t.end_ns.is_some())
        .collect();
    let decode_latency_fit = linear_fit(
        &decode
            .iter()
            .map(|t| (f64::from(t.pos), t.dur_ns() as f64))
            .collect::<Vec<_>>(),
    );
    let (matmul, load_balance) = dag
        .and_then(|d| model.graphs().get(d.graph as usize))
        .map(|graph| graph_rows(model, graph))
        .unwrap_or_default();
    let fit_of = |rows: &mut dyn Iterator<Item = &MatMulRow>| {
        linear_fit(
            &rows
                .map(|r| (r.complexity as f64, r.time_ns as f64))
                .collect::<Vec<_>>(),
        )
    };
    let matmul_fit_all = fit_of(&mut matmul.iter());
    let matmul_fit_dense = fit_of(&mut matmul.iter().filter(|r| !r.attention));
    let (op_types, miss_counter) = op_type_rows(model);
    ProfStat {
        iterations: iteration_rows(model, &class_ns),
        decode_latency_fit,
        growth: growth_rows(model, &class_ns, &decode, decode_latency_fit),
        matmul,
        matmul_fit_all,
        matmul_fit_dense,
        op_types,
        miss_counter,
        load_balance,
        experts: crate::experts::compute(model),
        backends: Some(crate::backends::compute(model)).filter(|b| b.is_interesting()),
    }
}

/// Time per operator class in each decode call (indexed by token).
fn class_ns_per_token(model: &TraceModel) -> Vec<BTreeMap<u32, u64>> {
    let nodes = model.nodes();
    let mut class_ns: Vec<BTreeMap<u32, u64>> = vec![BTreeMap::new(); model.tokens().len()];
    for g in model.graphs() {
        let Some(t) = g.token else { continue };
        for s in model.graph_node_spans(g) {
            *class_ns[t as usize]
                .entry(nodes[s.node as usize].class)
                .or_default() += s.dur_ns();
        }
    }
    class_ns
}

/// One row per finished decode call.
fn iteration_rows(model: &TraceModel, class_ns: &[BTreeMap<u32, u64>]) -> Vec<IterationRow> {
    let first = model.first_ns().unwrap_or(0);
    let classes = model.classes();
    model
        .tokens()
        .iter()
        .filter(|t| t.end_ns.is_some())
        .map(|t| IterationRow {
            index: t.index,
            phase: t.phase,
            pos: t.pos,
            n_tokens: t.n_tokens,
            run: t.run,
            start_ms: ms(t.start_ns.saturating_sub(first)),
            latency_ms: ms(t.dur_ns()),
            class_ms: class_ns[t.index as usize]
                .iter()
                .map(|(&c, &v)| (classes[c as usize].clone(), ms(v)))
                .collect(),
        })
        .collect()
}

/// Per operator class, how its decode time grows with the position (steepest first).
fn growth_rows(
    model: &TraceModel,
    class_ns: &[BTreeMap<u32, u64>],
    decode: &[&crate::model::TokenSpan],
    decode_latency_fit: Option<LinearFit>,
) -> Vec<GrowthRow> {
    let classes = model.classes();
    let mut growth: Vec<GrowthRow> = (0..classes.len() as u32)
        .filter_map(|c| {
            let pts: Vec<(f64, f64)> = decode
                .iter()
                .map(|t| {
                    let v = class_ns[t.index as usize].get(&c).copied().unwrap_or(0);
                    (f64::from(t.pos), v as f64)
                })
                .collect();
            if pts.iter().all(|p| p.1 == 0.0) {
                return None;
            }
            let fit = linear_fit(&pts);
            Some(GrowthRow {
                class: classes[c as usize].clone(),
                mean_ms: pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64 / 1e6,
                share_of_growth: match (fit, decode_latency_fit) {
                    (Some(f), Some(all)) if all.slope != 0.0 => Some(f.slope / all.slope),
                    _ => None,
                },
                fit,
            })
        })
        .collect();
    growth.sort_by(|a, b| {
        let sa = a.fit.map_or(f64::MIN, |f| f.slope);
        let sb = b.fit.map_or(f64::MIN, |f| f.slope);
        sb.total_cmp(&sa).then_with(|| a.class.cmp(&b.class))
    });
    growth
}

/// The matrix products (with their complexity) and the per-thread load balance of one
/// graph's operators.
fn graph_rows(
    model: &TraceModel,
    graph: &crate::model::GraphSpan,
) -> (Vec<MatMulRow>, Vec<LoadBalanceRow>) {
    let nodes = model.nodes();
    let classes = model.classes();
    let mut matmul = Vec::new();
    let mut load_balance = Vec::new();
    let spans = model.graph_node_spans(graph);
    let by_addr: std::collections::HashMap<u64, &crate::model::NodeInfo> = spans
        .iter()
        .map(|s| (nodes[s.node as usize].addr, &nodes[s.node as usize]))
        .collect();
    for s in spans {
        let info = &nodes[s.node as usize];
        if info.op == OpType::MulMat as u32
            && let Some(c) = matmul_complexity(info, by_addr.get(&info.src[1]).copied())
        {
            let class = classes[info.class as usize].clone();
            matmul.push(MatMulRow {
                name: info.name.clone(),
                attention: is_attention_class(&class),
                class,
                layer: info.layer,
                complexity: c,
                time_ns: s.dur_ns(),
            });
        }
        let span_ns = s.dur_ns();
        for sl in model.span_slices(s) {
            let tid = model.threads()[sl.thread as usize].tid;
            load_balance.push(LoadBalanceRow {
                order: info.index,
                name: info.name.clone(),
                op: info.op_name(),
                tid,
                busy_ns: sl.dur_ns(),
                span_ns,
                idle_share: if span_ns == 0 {
                    0.0
                } else {
                    1.0 - sl.dur_ns() as f64 / span_ns as f64
                },
            });
        }
    }
    (matmul, load_balance)
}

/// One row per operator type seen, with its counters and derived metrics, and the name
/// of the counter the miss bandwidth is derived from.
fn op_type_rows(model: &TraceModel) -> (Vec<OpTypeRow>, Option<String>) {
    let token_ns: u64 = model.tokens().iter().map(|t| t.dur_ns()).sum();
    let names = model.counter_names();
    let aggregates = model.op_type_aggregates();
    let picked = metrics::MetricCounters::pick(names, |i| {
        aggregates
            .iter()
            .any(|a| a.pmc_nodes.get(i).copied().unwrap_or(0) > 0 && a.pmc[i] > 0)
    });
    let miss_counter = picked.misses.map(|i| names[i].clone());
    let op_types = aggregates
        .iter()
        .enumerate()
        .filter(|(_, a)| a.count > 0)
        .map(|(slot, a)| {
            let counter = |i: usize| {
                Some(i)
                    .filter(|&i| a.pmc_nodes.get(i).copied().unwrap_or(0) > 0)
                    .and_then(|i| a.pmc.get(i).copied())
                    .filter(|&v| v != PMC_MISSING)
            };
            let derived = metrics::Derived::compute(&picked, counter, a.total_ns);
            OpTypeRow {
                op: if slot == OP_TYPE_SLOTS - 1 {
                    "OTHER".to_owned()
                } else {
                    op_name(slot as u32)
                },
                count: a.count,
                total_ms: ms(a.total_ns),
                mean_us: a.mean_ns() / 1e3,
                share_of_token_time: if token_ns == 0 {
                    0.0
                } else {
                    a.total_ns as f64 / token_ns as f64
                },
                idle_share: a.idle_share(),
                counters: names
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| a.pmc_nodes.get(i).copied().unwrap_or(0) > 0)
                    .map(|(i, n)| (n.clone(), a.pmc[i]))
                    .collect(),
                miss_bandwidth_gbps: derived.miss_bandwidth_gbps,
                stall_ratio: derived.stall_ratio,
                ipc: derived.ipc,
                mpki: derived.mpki,
            }
        })
        .collect();
    (op_types, miss_counter)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic run (2 tokens, 4 nodes, 2 threads) whose operator spans carry the
    /// counter deltas `per_span` (one value per counter of `counters`), as `--pmc`
    /// records them: each `op_span` becomes an `op_span_pmc`.
    fn model_with_counters(counters: &[(&str, &str)], per_span: &[u64]) -> TraceModel {
        use common::event::{EventKind, MAX_PMC, OpSpanPmcEvent};
        use trace_format::{CounterInfo, Event};

        use crate::synthetic::{SynthRecords, SynthSpec, generate, synth_header};

        let mut header = synth_header();
        header.counters = counters
            .iter()
            .map(|(name, source)| CounterInfo {
                name: (*name).to_owned(),
                source: (*source).to_owned(),
                ..CounterInfo::default()
            })
            .collect();
        let mut delta = [0u64; MAX_PMC];
        delta[..per_span.len()].copy_from_slice(per_span);
        let mut m = TraceModel::new(&header);
        let spec = SynthSpec::sized(2, 4, 2).with_records(SynthRecords::Spans);
        generate(&spec, |rec| {
            let kind = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
            let ev = EventKind::from_u32(kind)
                .and_then(|k| trace_format::decode_record(k, rec))
                .expect("synthetic records decode");
            m.apply(&match ev {
                Event::OpSpan(span) => {
                    let mut span = span;
                    span.kind = EventKind::OpSpanPmc as u32;
                    Event::OpSpanPmc(OpSpanPmcEvent {
                        span,
                        pmc_ok: (1 << per_span.len()) - 1,
                        _pad: 0,
                        delta,
                    })
                }
                other => other,
            });
        });
        m.finish(None);
        m
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9 * b.abs().max(1.0))
    }

    #[test]
    fn derived_metrics_from_an_x86_counter_set() {
        let m = model_with_counters(
            &[
                ("cycles", "hardware (PERF_TYPE_HARDWARE 0)"),
                ("instructions", "hardware (PERF_TYPE_HARDWARE 1)"),
                ("cache-misses", "hardware (PERF_TYPE_HARDWARE 3)"),
                ("stalled-cycles-backend", "hardware (PERF_TYPE_HARDWARE 8)"),
                ("task-clock", "software (PERF_TYPE_SOFTWARE 1)"),
            ],
            &[10_000, 25_000, 50, 4_000, 7],
        );
        let s = compute(&m, None);
        assert_eq!(s.miss_counter.as_deref(), Some("cache-misses"));
        assert!(!s.op_types.is_empty());
        for r in &s.op_types {
            assert!(close(r.ipc, 2.5), "{r:?}");
            assert!(close(r.mpki, 2.0), "{r:?}");
            assert!(close(r.stall_ratio, 0.4), "{r:?}");
            let misses = r.counters["cache-misses"] as f64;
            let bw = misses * 64.0 / (r.total_ms * 1e6);
            assert!(close(r.miss_bandwidth_gbps, bw), "{r:?}");
        }
    }

    #[test]
    fn derived_metrics_from_an_arm64_counter_set() {
        // The arm64 default set; LL_CACHE_MISS_RD added by hand and reading 0 (a core
        // without an external last-level cache), so L2D refills are the miss counter.
        let m = model_with_counters(
            &[
                (
                    "cycles",
                    "hardware (armv8_pmuv3 type 8: raw 0x11 CPU_CYCLES)",
                ),
                (
                    "instructions",
                    "hardware (armv8_pmuv3 type 8: raw 0x08 INST_RETIRED)",
                ),
                (
                    "l1d-cache-refill",
                    "hardware (armv8_pmuv3 type 8: raw 0x03 L1D_CACHE_REFILL)",
                ),
                (
                    "l2d-cache-refill",
                    "hardware (armv8_pmuv3 type 8: raw 0x17 L2D_CACHE_REFILL)",
                ),
                (
                    "stalled-cycles-backend",
                    "hardware (armv8_pmuv3 type 8: raw 0x24 STALL_BACKEND)",
                ),
                (
                    "stalled-cycles-frontend",
                    "hardware (armv8_pmuv3 type 8: raw 0x23 STALL_FRONTEND)",
                ),
                (
                    "mem-access",
                    "hardware (armv8_pmuv3 type 8: raw 0x13 MEM_ACCESS)",
                ),
                (
                    "ll-cache-miss-rd",
                    "hardware (armv8_pmuv3 type 8: raw 0x37 LL_CACHE_MISS_RD)",
                ),
            ],
            &[8_000, 4_000, 400, 20, 6_000, 500, 1_500, 0],
        );
        let s = compute(&m, None);
        assert_eq!(s.miss_counter.as_deref(), Some("l2d-cache-refill"));
        assert!(!s.op_types.is_empty());
        for r in &s.op_types {
            assert!(close(r.ipc, 0.5), "{r:?}");
            // 20 L2D refills per 4000 instructions, not the 400 L1D refills.
            assert!(close(r.mpki, 5.0), "{r:?}");
            assert!(close(r.stall_ratio, 0.75), "{r:?}");
            let refills = r.counters["l2d-cache-refill"] as f64;
            let bw = refills * 64.0 / (r.total_ms * 1e6);
            assert!(close(r.miss_bandwidth_gbps, bw), "{r:?}");
        }
        // The qemu guest without -icount: cycles only, so no IPC and no traffic.
        let m = model_with_counters(
            &[(
                "cycles",
                "hardware (armv8_pmuv3 type 8: raw 0x11 CPU_CYCLES)",
            )],
            &[8_000],
        );
        let s = compute(&m, None);
        assert_eq!(s.miss_counter, None);
        assert!(
            s.op_types
                .iter()
                .all(|r| r.ipc.is_none() && r.mpki.is_none())
        );
    }

    #[test]
    fn fit_recovers_an_exact_line() {
        let pts: Vec<(f64, f64)> = (0..10).map(|x| (x as f64, 3.0 * x as f64 + 2.0)).collect();
        let f = linear_fit(&pts).unwrap();
        assert!((f.slope - 3.0).abs() < 1e-12);
        assert!((f.intercept - 2.0).abs() < 1e-12);
        assert!((f.r2 - 1.0).abs() < 1e-12);
    }

    #[test]
    fn fit_hand_computed_noisy_case() {
        // x = 0,1,2; y = 0,2,1: mx 1, my 1, sxx 2, sxy 1, syy 2 → slope 0.5, b 0.5,
        // r² = 1/(2·2) = 0.25.
        let f = linear_fit(&[(0.0, 0.0), (1.0, 2.0), (2.0, 1.0)]).unwrap();
        assert!((f.slope - 0.5).abs() < 1e-12);
        assert!((f.intercept - 0.5).abs() < 1e-12);
        assert!((f.r2 - 0.25).abs() < 1e-12);
        assert!(linear_fit(&[(1.0, 1.0)]).is_none());
        assert!(linear_fit(&[(1.0, 1.0), (1.0, 2.0)]).is_none());
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
    }
}
