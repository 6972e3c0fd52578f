//! ProfStat across experts (seed 002 §3.5, Fig 13): for a mixture-of-experts model,
//! which experts every layer activated in every iteration, how often each expert was
//! used, how long ago each activated expert was last used (its reuse distance, in
//! iterations), and the expert products' time and major page faults against that
//! distance — experts not used for a while are the ones the kernel evicted when the model
//! does not fit in memory, so their products wait for storage.
//!
//! An iteration is one graph computation (a prefill chunk or a decode step); a prefill
//! chunk's experts are those any of its tokens used. Distances and the correlation are
//! taken over decode iterations only (one token each, as in Fig 13).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::model::{LayerRoute, NONE_U32, TraceModel};

/// Name of the counter whose sum over a layer's expert products is reported.
pub const MAJOR_FAULTS: &str = "major-faults";

/// The expert view of one trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ExpertStats {
    /// Experts per layer (the largest seen).
    pub n_expert: u32,
    /// Experts used per token.
    pub n_used: u32,
    /// Per layer, in layer order.
    pub layers: Vec<LayerExperts>,
    /// Pearson correlation of a decode iteration's mean reuse distance with its expert
    /// products' time, over every layer and decode iteration with a distance.
    pub time_distance_r: Option<f64>,
    /// The same with the major faults of those products (when the counter was read).
    pub faults_distance_r: Option<f64>,
    /// Whether the `major-faults` counter was recorded.
    pub has_major_faults: bool,
}

/// One layer's experts over the run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerExperts {
    /// Transformer layer.
    pub layer: i32,
    /// Activations per expert over decode iterations (index = expert id).
    pub frequency: Vec<u64>,
    /// Every iteration, in order.
    pub iterations: Vec<ExpertIteration>,
}

/// One layer in one iteration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExpertIteration {
    /// Graph index in the trace.
    pub graph: u32,
    /// The graph's `graph_id` (what the engine's `--self-profile` log names).
    pub graph_id: u64,
    /// Tokens of the batch (1 for a decode step).
    pub n_tokens: u32,
    /// Decode step number (0-based) for decode iterations.
    pub decode_step: Option<u32>,
    /// Expert ids, `n_used` per token.
    pub ids: Vec<i32>,
    /// Routing weights matching `ids` (empty if not recorded).
    pub weights: Vec<f32>,
    /// For each distinct expert of a decode iteration, in `ids` order: decode iterations
    /// since it was last active (`None`: first use since the run started).
    pub reuse_distance: Vec<Option<u32>>,
    /// Mean of the known reuse distances.
    pub mean_distance: Option<f64>,
    /// Time of the layer's expert products (sum of their node spans), ns.
    pub time_ns: u64,
    /// Major page faults during those products (all threads), when recorded.
    pub major_faults: Option<u64>,
}

/// Pearson correlation coefficient, `None` with fewer than 3 points or no spread.
pub fn pearson(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 3 {
        return None;
    }
    let (mx, my) = (
        points.iter().map(|p| p.0).sum::<f64>() / n,
        points.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for &(x, y) in points {
        sxy += (x - mx) * (y - my);
        sxx += (x - mx) * (x - mx);
        syy += (y - my) * (y - my);
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// The distinct experts of `ids`, in order of first appearance.
fn distinct(ids: &[i32]) -> Vec<i32> {
    let mut out: Vec<i32> = Vec::with_capacity(ids.len());
    for &e in ids {
        if !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

/// Computes the expert view, `None` if the trace has no expert routing.
pub fn compute(model: &TraceModel) -> Option<ExpertStats> {
    let routes = model.expert_routes();
    if routes.is_empty() {
        return None;
    }
    let faults_at = model.counter_names().iter().position(|c| c == MAJOR_FAULTS);
    // Node spans by (graph, node address): the expert products' time and faults.
    let nodes = model.nodes();
    let mut span_of: HashMap<(u32, u64), (u64, Option<u64>)> = HashMap::new();
    for s in model.node_spans() {
        let addr = nodes[s.node as usize].addr;
        let faults = faults_at
            .and_then(|i| s.pmc.get(i).copied())
            .filter(|&v| v != crate::model::PMC_MISSING);
        span_of.insert((s.graph, addr), (s.dur_ns(), faults));
    }
    let graphs = model.graphs();
    // Decode step number of each graph.
    let mut decode_step: HashMap<u32, u32> = HashMap::new();
    for g in graphs.iter().filter(|g| g.n_tokens == 1) {
        let n = decode_step.len() as u32;
        decode_step.insert(g.index, n);
    }
    let mut by_layer: BTreeMap<i32, Vec<&LayerRoute>> = BTreeMap::new();
    for r in routes {
        by_layer.entry(r.layer).or_default().push(r);
    }
    let mut stats = ExpertStats {
        has_major_faults: faults_at.is_some(),
        ..ExpertStats::default()
    };
    let (mut time_pts, mut fault_pts) = (Vec::new(), Vec::new());
    for (layer, rs) in by_layer {
        let n_expert = rs.iter().map(|r| r.n_expert).max().unwrap_or(0);
        stats.n_expert = stats.n_expert.max(n_expert);
        stats.n_used = stats
            .n_used
            .max(rs.iter().map(|r| r.n_used).max().unwrap_or(0));
        let mut frequency = vec![0u64; n_expert as usize];
        let mut last_step: HashMap<i32, i64> = HashMap::new();
        let mut iterations = Vec::with_capacity(rs.len());
        for r in rs {
            let g = (r.graph != NONE_U32).then(|| &graphs[r.graph as usize]);
            let step = decode_step.get(&r.graph).copied();
            let (mut time_ns, mut faults) = (0u64, None::<u64>);
            for &addr in &r.nodes {
                if let Some(&(t, f)) = span_of.get(&(r.graph, addr)) {
                    time_ns += t;
                    if let Some(f) = f {
                        faults = Some(faults.unwrap_or(0) + f);
                    }
                }
            }
            let experts = distinct(&r.ids);
            let mut reuse_distance = Vec::new();
            if let Some(step) = step {
                for &e in &experts {
                    reuse_distance.push(last_step.get(&e).map(|&s| (i64::from(step) - s) as u32));
                    if let Some(f) = usize::try_from(e).ok().and_then(|i| frequency.get_mut(i)) {
                        *f += 1;
                    }
                }
            }
            // Prefill chunks count as activity too (an expert the prompt used is warm): at
            // the position of the decode step before the next one.
            let at = step.map_or_else(
                || {
                    graphs[..r.graph.min(graphs.len() as u32) as usize]
                        .iter()
                        .filter(|g| g.n_tokens == 1)
                        .count() as i64
                        - 1
                },
                i64::from,
            );
            for &e in &experts {
                last_step.insert(e, at);
            }
            let known: Vec<f64> = reuse_distance
                .iter()
                .flatten()
                .map(|&d| f64::from(d))
                .collect();
            let mean_distance =
                (!known.is_empty()).then(|| known.iter().sum::<f64>() / known.len() as f64);
            if let (Some(d), Some(_)) = (mean_distance, step) {
                time_pts.push((d, time_ns as f64));
                if let Some(f) = faults {
                    fault_pts.push((d, f as f64));
                }
            }
            iterations.push(ExpertIteration {
                graph: r.graph,
                graph_id: g.map_or(0, |g| g.graph_id),
                n_tokens: r.n_tokens,
                decode_step: step,
                ids: r.ids.clone(),
                weights: r.weights.clone(),
                reuse_distance,
                mean_distance,
                time_ns,
                major_faults: faults,
            });
        }
        stats.layers.push(LayerExperts {
            layer,
            frequency,
            iterations,
        });
    }
    stats.time_distance_r = pearson(&time_pts);
    stats.faults_distance_r = pearson(&fault_pts);
    Some(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pearson_of_a_line_is_one_and_of_noise_is_small() {
        let line: Vec<(f64, f64)> = (0..10)
            .map(|i| (f64::from(i), 2.0 * f64::from(i) + 1.0))
            .collect();
        assert!((pearson(&line).expect("spread") - 1.0).abs() < 1e-12);
        let flat = [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)];
        assert_eq!(pearson(&flat), None);
        let anti = [(1.0, 3.0), (2.0, 2.0), (3.0, 1.0)];
        assert!((pearson(&anti).expect("spread") + 1.0).abs() < 1e-12);
    }

    #[test]
    fn distinct_keeps_first_appearance_order() {
        assert_eq!(distinct(&[4, 0, 4, 2, 0]), vec![4, 0, 2]);
    }
}
