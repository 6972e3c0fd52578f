//! The model on synthetic traces whose numbers are known by construction
//! (`analyzer::synthetic`): node spans, aggregates, tokens, the DAG.

use analyzer::{
    IterSelector, TraceModel, dag,
    model::TokenPhase,
    synthetic::{SYNTH_NODE_BASE, SYNTH_WEIGHT, SynthSpec, generate, synth_header},
};
use trace_format::decode_record;

fn model(spec: &SynthSpec) -> TraceModel {
    let mut m = TraceModel::new(&synth_header());
    generate(spec, |rec| {
        let kind = common::event::EventKind::from_u32(u32::from_le_bytes([
            rec[0], rec[1], rec[2], rec[3],
        ]))
        .expect("known kind");
        m.apply(&decode_record(kind, rec).expect("record decodes"));
    });
    m.finish(None);
    m
}

#[test]
fn node_spans_follow_algorithm_1() {
    let spec = SynthSpec::sized(3, 6, 3);
    let m = model(&spec);
    assert_eq!(m.tokens().len(), 3);
    assert_eq!(m.tokens()[0].phase, TokenPhase::Prefill);
    assert_eq!(m.tokens()[1].phase, TokenPhase::Decode);
    assert_eq!(m.graphs().len(), 3);
    assert_eq!(m.node_spans().len(), 3 * 6);
    // Thread k enters 50k ns after thread 0 and leaves 1000k ns before op_ns:
    // span = op_ns, busy = Σ (op_ns − 1000k − 50k).
    let op = spec.op_ns;
    let busy: u64 = (0..3).map(|k| op - 1000 * k - 50 * k).sum();
    for s in m.node_spans() {
        assert_eq!(s.dur_ns(), op);
        assert_eq!(s.busy_ns, busy);
        assert_eq!(s.n_threads, 3);
    }
    // Aggregates: half the nodes are MUL_MAT, half ADD.
    let mm = &m.op_type_aggregates()[common::engine_abi::OpType::MulMat as usize];
    assert_eq!(mm.count, 9);
    assert_eq!(mm.total_ns, 9 * op);
    let idle = 1.0 - busy as f64 / (3 * op) as f64;
    assert!((mm.idle_share() - idle).abs() < 1e-12);
    assert_eq!(m.unpaired().total(), 0);
}

#[test]
fn dag_has_the_chain_and_one_weight_leaf() {
    let spec = SynthSpec::sized(2, 5, 2);
    let m = model(&spec);
    let d = dag::build(&m, IterSelector::FirstDecode).expect("dag");
    assert_eq!(d.computed_nodes(), 5);
    // One shared weight leaf; 4 chain edges + 5 weight edges.
    assert_eq!(d.dag.node_count(), 6);
    assert_eq!(d.dag.edge_count(), 9);
    let leaf = d.dag.node_weights().find(|n| n.is_leaf()).expect("leaf");
    assert_eq!(leaf.addr, SYNTH_WEIGHT);
    for e in d.dag.edge_indices() {
        let (a, b) = d.dag.edge_endpoints(e).expect("edge");
        let (a, b) = (&d.dag[a], &d.dag[b]);
        if !a.is_leaf() {
            assert_eq!(a.addr + 224, b.addr);
            assert!(a.addr >= SYNTH_NODE_BASE);
        }
    }
    assert!(dag::build(&m, IterSelector::Decode(5)).is_err());
    let p = dag::build(&m, IterSelector::Prefill(0)).expect("prefill dag");
    assert_eq!(p.phase, TokenPhase::Prefill);
}
