//! Operator time grouped by op type, node name or layer: the table behind
//! `profinfer report` (top operators) and `profinfer diff` (what changed).
//!
//! Every node span (one node of one graph computation, first thread's entry to last
//! thread's exit) belongs to exactly one group, so the groups' totals add up to the
//! trace's operator time whichever grouping is chosen.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::model::{OpAggregate, TokenPhase, TraceModel};
use crate::stats::percentile;

/// What operator time is grouped by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// ggml op type (`MUL_MAT`, `RMS_NORM`, ...).
    #[default]
    OpType,
    /// Node name (`ffn_up-3`, `result_output`, ...).
    Node,
    /// Layer (`layer 3`; nodes outside the layers are `other`).
    Layer,
}

impl GroupBy {
    /// Name as the command line spells it (`type`, `node`, `layer`).
    pub fn name(self) -> &'static str {
        match self {
            GroupBy::OpType => "type",
            GroupBy::Node => "node",
            GroupBy::Layer => "layer",
        }
    }
}

impl std::str::FromStr for GroupBy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "type" | "op" => Ok(GroupBy::OpType),
            "node" | "name" => Ok(GroupBy::Node),
            "layer" => Ok(GroupBy::Layer),
            _ => Err(format!("unknown grouping `{s}` (type, node or layer)")),
        }
    }
}

/// One group's operator time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpGroup {
    /// The group's key (op type, node name, or `layer N` / `other`).
    pub key: String,
    /// Node executions.
    pub count: u64,
    /// Sum of node durations, ms.
    pub total_ms: f64,
    /// Share of all operator time (0..1).
    pub share: f64,
    /// Mean node duration, µs.
    pub mean_us: f64,
    /// Median node duration, µs.
    pub p50_us: f64,
    /// 99th-percentile node duration, µs.
    pub p99_us: f64,
    /// Time per decode call it ran in, ms: mean over those calls.
    pub per_token_ms: f64,
    /// Standard deviation of the time per decode call, ms (0 with fewer than two calls).
    pub per_token_sd_ms: f64,
    /// Decode calls (prefill chunks and decode steps) it ran in.
    pub tokens: usize,
    /// Share of the threads' time inside its nodes spent waiting for the slowest thread.
    pub idle_share: f64,
    /// Counter sums by counter name (only counters some node of the group had).
    pub counters: BTreeMap<String, u64>,
}

/// Groups every node span of `model` by `by`, largest total first (ties by key).
pub fn group(model: &TraceModel, by: GroupBy) -> Vec<OpGroup> {
    group_in(model, by, None)
}

/// [`group`] over the node spans of decode calls of one phase only (`None`: all spans,
/// including graphs outside any decode call).
pub fn group_in(model: &TraceModel, by: GroupBy, phase: Option<TokenPhase>) -> Vec<OpGroup> {
    struct Acc {
        agg: OpAggregate,
        durations: Vec<u64>,
        per_token: BTreeMap<u32, u64>,
    }
    let graphs = model.graphs();
    let nodes = model.nodes();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut accs: Vec<(String, Acc)> = Vec::new();
    let mut op_total_ns = 0u64;
    let tokens = model.tokens();
    for span in model.node_spans() {
        let token = graphs.get(span.graph as usize).and_then(|g| g.token);
        if let Some(phase) = phase
            && token.and_then(|t| tokens.get(t as usize)).map(|t| t.phase) != Some(phase)
        {
            continue;
        }
        let node = &nodes[span.node as usize];
        let key = match by {
            GroupBy::OpType => node.op_name(),
            GroupBy::Node => node.name.clone(),
            GroupBy::Layer if node.layer >= 0 => format!("layer {}", node.layer),
            GroupBy::Layer => "other".to_owned(),
        };
        let at = *index.entry(key.clone()).or_insert_with(|| {
            accs.push((
                key,
                Acc {
                    agg: OpAggregate::default(),
                    durations: Vec::new(),
                    per_token: BTreeMap::new(),
                },
            ));
            accs.len() - 1
        });
        let acc = &mut accs[at].1;
        acc.agg.add(span);
        acc.durations.push(span.dur_ns());
        if let Some(token) = token {
            *acc.per_token.entry(token).or_default() += span.dur_ns();
        }
        op_total_ns += span.dur_ns();
    }
    let names = model.counter_names();
    let mut groups: Vec<OpGroup> = accs
        .into_iter()
        .map(|(key, mut acc)| {
            acc.durations.sort_unstable();
            let us: Vec<f64> = acc.durations.iter().map(|&d| d as f64 / 1e3).collect();
            let per_token: Vec<f64> = acc.per_token.values().map(|&d| d as f64 / 1e6).collect();
            let (mean, sd) = mean_sd(&per_token);
            OpGroup {
                key,
                count: acc.agg.count,
                total_ms: acc.agg.total_ns as f64 / 1e6,
                share: if op_total_ns == 0 {
                    0.0
                } else {
                    acc.agg.total_ns as f64 / op_total_ns as f64
                },
                mean_us: acc.agg.mean_ns() / 1e3,
                p50_us: percentile(&us, 50.0).unwrap_or(0.0),
                p99_us: percentile(&us, 99.0).unwrap_or(0.0),
                per_token_ms: mean,
                per_token_sd_ms: sd,
                tokens: per_token.len(),
                idle_share: acc.agg.idle_share(),
                counters: names
                    .iter()
                    .zip(acc.agg.pmc.iter().zip(&acc.agg.pmc_nodes))
                    .filter(|(_, (_, n))| **n > 0)
                    .map(|(name, (&v, _))| (name.clone(), v))
                    .collect(),
            }
        })
        .collect();
    groups.sort_by(|a, b| {
        b.total_ms
            .total_cmp(&a.total_ms)
            .then_with(|| a.key.cmp(&b.key))
    });
    groups
}

/// Mean and sample standard deviation (0 for fewer than two values).
fn mean_sd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic;

    #[test]
    fn groupings_partition_the_operator_time() {
        let model = synthetic::model(&synthetic::SynthSpec::sized(5, 12, 2), None);
        let total = |g: &[OpGroup]| g.iter().map(|r| r.total_ms).sum::<f64>();
        let count = |g: &[OpGroup]| g.iter().map(|r| r.count).sum::<u64>();
        let by_type = group(&model, GroupBy::OpType);
        assert!(!by_type.is_empty());
        for by in [GroupBy::Node, GroupBy::Layer] {
            let g = group(&model, by);
            assert!((total(&g) - total(&by_type)).abs() < 1e-9, "{by:?}");
            assert_eq!(count(&g), count(&by_type), "{by:?}");
        }
        let shares: f64 = by_type.iter().map(|r| r.share).sum();
        assert!((shares - 1.0).abs() < 1e-9);
        assert!(by_type.windows(2).all(|w| w[0].total_ms >= w[1].total_ms));
        for r in &by_type {
            assert!(r.p50_us <= r.p99_us, "{r:?}");
        }
    }

    #[test]
    fn phases_split_the_operator_time() {
        let model = synthetic::model(&synthetic::SynthSpec::sized(5, 12, 2), None);
        let count = |p| {
            group_in(&model, GroupBy::OpType, p)
                .iter()
                .map(|r| r.count)
                .sum::<u64>()
        };
        let all = count(None);
        let (prefill, decode) = (
            count(Some(TokenPhase::Prefill)),
            count(Some(TokenPhase::Decode)),
        );
        assert_eq!((prefill, decode), (12, 4 * 12));
        assert_eq!(prefill + decode, all);
    }

    #[test]
    fn mean_and_sd_of_hand_values() {
        assert_eq!(mean_sd(&[]), (0.0, 0.0));
        assert_eq!(mean_sd(&[3.0]), (3.0, 0.0));
        let (m, sd) = mean_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(m, 5.0);
        assert!((sd - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn group_names_parse() {
        for by in [GroupBy::OpType, GroupBy::Node, GroupBy::Layer] {
            assert_eq!(by.name().parse::<GroupBy>(), Ok(by));
        }
        assert!("thread".parse::<GroupBy>().is_err());
    }
}
