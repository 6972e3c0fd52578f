//! Operator time grouped by op type, node name or layer: the table behind
//! `profinfer report` (top operators) and `profinfer diff` (what changed).
//!
//! Every node span (one node of one graph computation, first thread's entry to last
//! thread's exit) belongs to exactly one group, so the groups' totals add up to the
//! trace's operator time whichever grouping is chosen.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::model::{GraphSpan, OpAggregate, TokenPhase, TraceModel};
use crate::streaming_stats::{Moments, Quantiles};

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
    /// Whether p50 and p99 are exact (nearest rank); else a sketch's, within
    /// [`crate::streaming_stats::SKETCH_RELATIVE_ERROR`] of the true value.
    pub quantiles_exact: bool,
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
    let mut table = GroupTable::new(by, phase);
    for g in model.graphs() {
        table.add_graph(model, g);
    }
    table.finish(model)
}

/// One group's running totals.
#[derive(Debug, Default)]
struct GroupAcc {
    key: String,
    agg: OpAggregate,
    durations: Quantiles,
    /// The decode call being summed and its time so far.
    open_token: Option<(u32, u64)>,
    per_token: Moments,
}

impl GroupAcc {
    fn flush_token(&mut self) {
        if let Some((_, ns)) = self.open_token.take() {
            self.per_token.add(ns as f64 / 1e6);
        }
    }
}

/// The operator groups of a run, built graph by graph as graphs close (in memory
/// bounded by the number of groups: the p50/p99 of a group with more than
/// [`crate::streaming_stats::EXACT_VALUES`] executions come from a sketch).
#[derive(Debug)]
pub struct GroupTable {
    by: GroupBy,
    phase: Option<TokenPhase>,
    index: HashMap<String, usize>,
    /// The group of each node id (`usize::MAX`: not yet seen).
    node_group: Vec<usize>,
    accs: Vec<GroupAcc>,
    op_total_ns: u64,
}

impl GroupTable {
    /// An empty table grouping by `by`, over decode calls of `phase` (`None`: all).
    pub fn new(by: GroupBy, phase: Option<TokenPhase>) -> GroupTable {
        GroupTable {
            by,
            phase,
            index: HashMap::new(),
            node_group: Vec::new(),
            accs: Vec::new(),
            op_total_ns: 0,
        }
    }

    /// Adds the node spans of closed graph `g` of `model`.
    pub fn add_graph(&mut self, model: &TraceModel, g: &GraphSpan) {
        let token = g.token;
        if let Some(phase) = self.phase
            && token
                .and_then(|t| model.tokens().get(t as usize))
                .map(|t| t.phase)
                != Some(phase)
        {
            return;
        }
        for span in model.graph_node_spans(g) {
            let at = self.group_of(model, span.node);
            let acc = &mut self.accs[at];
            let dur = span.dur_ns();
            acc.agg.add(span);
            acc.durations.add(dur);
            if let Some(token) = token {
                match &mut acc.open_token {
                    Some((t, ns)) if *t == token => *ns += dur,
                    _ => {
                        acc.flush_token();
                        acc.open_token = Some((token, dur));
                    }
                }
            }
            self.op_total_ns += dur;
        }
    }

    /// The group of node id `node`, created on first sight.
    fn group_of(&mut self, model: &TraceModel, node: u32) -> usize {
        let n = node as usize;
        if self.node_group.len() <= n {
            self.node_group.resize(n + 1, usize::MAX);
        }
        if self.node_group[n] != usize::MAX {
            return self.node_group[n];
        }
        let info = &model.nodes()[n];
        let key = match self.by {
            GroupBy::OpType => info.op_name(),
            GroupBy::Node => info.name.clone(),
            GroupBy::Layer if info.layer >= 0 => format!("layer {}", info.layer),
            GroupBy::Layer => "other".to_owned(),
        };
        let accs = &mut self.accs;
        let at = *self.index.entry(key.clone()).or_insert_with(|| {
            accs.push(GroupAcc {
                key,
                ..GroupAcc::default()
            });
            accs.len() - 1
        });
        self.node_group[n] = at;
        at
    }

    /// The groups, largest total first (ties by key).
    pub fn finish(self, model: &TraceModel) -> Vec<OpGroup> {
        let names = model.counter_names();
        let op_total_ns = self.op_total_ns;
        let mut groups: Vec<OpGroup> = self
            .accs
            .into_iter()
            .map(|mut acc| {
                acc.flush_token();
                let us = |p| acc.durations.percentile(p).unwrap_or(0.0) / 1e3;
                OpGroup {
                    count: acc.agg.count,
                    total_ms: acc.agg.total_ns as f64 / 1e6,
                    share: if op_total_ns == 0 {
                        0.0
                    } else {
                        acc.agg.total_ns as f64 / op_total_ns as f64
                    },
                    mean_us: acc.agg.mean_ns() / 1e3,
                    p50_us: us(50.0),
                    p99_us: us(99.0),
                    quantiles_exact: acc.durations.is_exact(),
                    per_token_ms: acc.per_token.mean(),
                    per_token_sd_ms: acc.per_token.sd(),
                    tokens: acc.per_token.count() as usize,
                    idle_share: acc.agg.idle_share(),
                    counters: names
                        .iter()
                        .zip(acc.agg.pmc.iter().zip(&acc.agg.pmc_nodes))
                        .filter(|(_, (_, n))| **n > 0)
                        .map(|(name, (&v, _))| (name.clone(), v))
                        .collect(),
                    key: acc.key,
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
    fn group_names_parse() {
        for by in [GroupBy::OpType, GroupBy::Node, GroupBy::Layer] {
            assert_eq!(by.name().parse::<GroupBy>(), Ok(by));
        }
        assert!("thread".parse::<GroupBy>().is_err());
    }
}
