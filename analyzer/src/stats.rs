//! ProfStat (seed 002 §4.3): tables derived from the model — latency per iteration and
//! the node classes driving its growth with context length (Fig. 9), matrix products'
//! time against complexity with a linear fit (Fig. 10), counter-derived bandwidth and
//! stall ratios per op type (Fig. 11), and per-thread load balance per op (Fig. 6).

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
    /// `cache-misses × 64 B` per second of op time, GB/s (if `cache-misses` was read).
    pub miss_bandwidth_gbps: Option<f64>,
    /// `stalled-cycles-backend / cycles` (if both were read).
    pub stall_ratio: Option<f64>,
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
    let first = model.first_ns().unwrap_or(0);
    let classes = model.classes();
    let nodes = model.nodes();
    // Class time per decode call.
    let mut class_ns: Vec<BTreeMap<u32, u64>> = vec![BTreeMap::new(); model.tokens().len()];
    for g in model.graphs() {
        let Some(t) = g.token else { continue };
        for s in model.graph_node_spans(g) {
            *class_ns[t as usize]
                .entry(nodes[s.node as usize].class)
                .or_default() += s.dur_ns();
        }
    }
    let iterations: Vec<IterationRow> = model
        .tokens()
        .iter()
        .filter(|t| t.end_ns.is_some())
        .map(|t| IterationRow {
            index: t.index,
            phase: t.phase,
            pos: t.pos,
            n_tokens: t.n_tokens,
            start_ms: ms(t.start_ns.saturating_sub(first)),
            latency_ms: ms(t.dur_ns()),
            class_ms: class_ns[t.index as usize]
                .iter()
                .map(|(&c, &v)| (classes[c as usize].clone(), ms(v)))
                .collect(),
        })
        .collect();
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

    let mut matmul = Vec::new();
    let mut load_balance = Vec::new();
    if let Some(d) = dag
        && let Some(graph) = model.graphs().get(d.graph as usize)
    {
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
    }
    let fit_of = |rows: &mut dyn Iterator<Item = &MatMulRow>| {
        linear_fit(
            &rows
                .map(|r| (r.complexity as f64, r.time_ns as f64))
                .collect::<Vec<_>>(),
        )
    };
    let matmul_fit_all = fit_of(&mut matmul.iter());
    let matmul_fit_dense = fit_of(&mut matmul.iter().filter(|r| !r.attention));

    let token_ns: u64 = model.tokens().iter().map(|t| t.dur_ns()).sum();
    let names = model.counter_names();
    let find = |n: &str| names.iter().position(|c| c == n);
    let (misses, cycles, stalls) = (
        find("cache-misses"),
        find("cycles"),
        find("stalled-cycles-backend"),
    );
    let op_types = model
        .op_type_aggregates()
        .iter()
        .enumerate()
        .filter(|(_, a)| a.count > 0)
        .map(|(slot, a)| {
            let counter = |i: Option<usize>| {
                i.filter(|&i| a.pmc_nodes.get(i).copied().unwrap_or(0) > 0)
                    .and_then(|i| a.pmc.get(i).copied())
                    .filter(|&v| v != PMC_MISSING)
            };
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
                miss_bandwidth_gbps: counter(misses)
                    .filter(|_| a.total_ns > 0)
                    .map(|m| (m * CACHE_LINE_BYTES) as f64 / a.total_ns as f64),
                stall_ratio: match (counter(stalls), counter(cycles)) {
                    (Some(s), Some(c)) if c > 0 => Some(s as f64 / c as f64),
                    _ => None,
                },
            }
        })
        .collect();
    ProfStat {
        iterations,
        decode_latency_fit,
        growth,
        matmul,
        matmul_fit_all,
        matmul_fit_dense,
        op_types,
        load_balance,
        experts: crate::experts::compute(model),
        backends: Some(crate::backends::compute(model)).filter(|b| b.is_interesting()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
