//! Expert routing: which experts each layer of a mixture-of-experts model used in each
//! graph, from the probes' [`ExpertRouteEvent`]s. The gate, up and down products of a
//! layer share one ids tensor, so their records are merged by (graph, ids address); a
//! batch of many tokens arrives in several records and is put together by `token0`.

use common::event::{ExpertRouteEvent, ROUTE_FLAG_TRUNCATED, ROUTE_FLAG_WEIGHTS};
use serde::Serialize;

/// The experts one layer used in one graph computation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerRoute {
    /// Graph index ([`crate::TraceModel::graphs`]), or `u32::MAX` if outside a graph.
    pub graph: u32,
    /// Transformer layer, or -1.
    pub layer: i32,
    /// Address of the ids tensor.
    pub ids_addr: u64,
    /// Experts per token (`k`).
    pub n_used: u32,
    /// Experts of the layer.
    pub n_expert: u32,
    /// Tokens in the batch.
    pub n_tokens: u32,
    /// Expert ids, `n_used` per token, token by token (tokens not recorded are missing
    /// at the end: see `truncated`).
    pub ids: Vec<i32>,
    /// Routing weights matching `ids`, empty when the target does not pass them.
    pub weights: Vec<f32>,
    /// Whether the probe recorded only the first tokens of a long batch.
    pub truncated: bool,
    /// Addresses of the expert-indexed product nodes that used these ids.
    pub nodes: Vec<u64>,
    /// Time of the first record (the first product's entry), ns.
    pub ts_ns: u64,
}

impl LayerRoute {
    /// A route from its first record.
    pub(crate) fn from_event(e: &ExpertRouteEvent, graph: u32) -> LayerRoute {
        let mut r = LayerRoute {
            graph,
            layer: e.layer,
            ids_addr: e.ids_addr,
            n_used: e.n_used,
            n_expert: e.n_expert,
            n_tokens: e.n_tokens,
            ids: Vec::new(),
            weights: Vec::new(),
            truncated: false,
            nodes: vec![e.node_addr],
            ts_ns: e.header.ts_ns,
        };
        r.add(e);
        r
    }

    /// Adds a record of the same (graph, ids tensor): more tokens of the batch, or the
    /// same ids seen by another product of the layer (then only the node is noted).
    pub(crate) fn add(&mut self, e: &ExpertRouteEvent) {
        if !self.nodes.contains(&e.node_addr) {
            self.nodes.push(e.node_addr);
        }
        self.truncated |= e.flags & ROUTE_FLAG_TRUNCATED != 0;
        let k = self.n_used.max(1) as usize;
        let at = e.token0 as usize * k;
        let n = (e.n_ids as usize).min(e.ids.len());
        if at != self.ids.len() {
            // Already recorded (a later product of the layer), or a gap: keep the first.
            return;
        }
        self.ids.extend_from_slice(&e.ids[..n]);
        if e.flags & ROUTE_FLAG_WEIGHTS != 0 && self.weights.len() == at {
            self.weights
                .extend(e.weights[..n].iter().map(|&b| f32::from_bits(b)));
        }
    }

    /// The experts token `t` used, if recorded.
    pub fn token_ids(&self, t: usize) -> Option<&[i32]> {
        let k = self.n_used as usize;
        self.ids.get(t * k..(t + 1) * k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::event::MAX_ROUTE_IDS;

    fn record(node: u64, token0: u32, ids: &[i32]) -> ExpertRouteEvent {
        let mut e = ExpertRouteEvent::zeroed();
        e.node_addr = node;
        e.ids_addr = 0x1000;
        e.layer = 3;
        e.n_used = 2;
        e.n_expert = 8;
        e.n_tokens = 3;
        e.token0 = token0;
        e.n_ids = ids.len() as u32;
        e.ids[..ids.len()].copy_from_slice(ids);
        e.flags = ROUTE_FLAG_WEIGHTS;
        for (w, i) in e.weights.iter_mut().zip(0..MAX_ROUTE_IDS) {
            *w = (i as f32 / 10.0).to_bits();
        }
        e
    }

    #[test]
    fn records_of_a_batch_join_and_later_products_only_add_their_node() {
        let mut r = LayerRoute::from_event(&record(1, 0, &[5, 2, 7, 1]), 0);
        r.add(&record(1, 2, &[3, 4]));
        r.add(&record(2, 0, &[5, 2, 7, 1]));
        assert_eq!(r.ids, vec![5, 2, 7, 1, 3, 4]);
        assert_eq!(r.token_ids(1), Some(&[7, 1][..]));
        assert_eq!(r.nodes, vec![1, 2]);
        assert_eq!(r.weights.len(), 6);
        assert!((r.weights[5] - 0.1).abs() < 1e-6);
    }
}
