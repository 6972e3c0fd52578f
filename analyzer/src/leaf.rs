//! Names of ProfDAG leaves (weights, KV cache, graph inputs). The collector records each
//! leaf's own node (name, type, shape) from the target's memory while it runs
//! ([`crate::model::LeafInfo`]); [`leaf_label`] uses that name. Without it (traces of
//! format 1, a target that exited before the collector read it, `--no-structure`) a
//! leaf is known only by its address and the nodes that read it, and its name is guessed
//! from its first consumer's name and source slot with the llama.cpp naming the engine
//! follows (MUL_MAT `src0` of `Qcur-3` is `blk.3.attn_q.weight`, of `kq-3` is
//! `cache_k_l3`). A heuristic (documented in `docs/views.md`): consumers not in
//! [`LEAF_NAMES`] give `src<slot> of <consumer>`.

use crate::model::{LeafInfo, class_of, node_name::parse};

/// How a leaf's name is formed from the consumer's layer `L`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafPattern {
    /// A per-layer weight: `blk.L.<tensor>.weight`.
    BlockWeight(&'static str),
    /// A per-layer bias: `blk.L.<tensor>.bias`.
    BlockBias(&'static str),
    /// A per-layer tensor outside the model file: `<prefix>L` (`cache_k_l3`).
    LayerSuffix(&'static str),
    /// A tensor with a fixed name (`output.weight`, `inp_pos`).
    Fixed(&'static str),
}

/// Consumer class, source slot and the leaf's naming pattern, for the consumers the
/// engine (and llama.cpp) build.
pub const LEAF_NAMES: &[(&str, usize, LeafPattern)] = &[
    ("norm", 0, LeafPattern::Fixed("inp_embd")),
    ("attn_norm", 1, LeafPattern::BlockWeight("attn_norm")),
    ("Qcur", 0, LeafPattern::BlockWeight("attn_q")),
    ("Kcur", 0, LeafPattern::BlockWeight("attn_k")),
    ("Vcur", 0, LeafPattern::BlockWeight("attn_v")),
    ("Qcur_bias", 1, LeafPattern::BlockBias("attn_q")),
    ("Kcur_bias", 1, LeafPattern::BlockBias("attn_k")),
    ("Vcur_bias", 1, LeafPattern::BlockBias("attn_v")),
    ("Qcur_rope", 1, LeafPattern::Fixed("inp_pos")),
    ("Kcur_rope", 1, LeafPattern::Fixed("inp_pos")),
    ("kq", 0, LeafPattern::LayerSuffix("cache_k_l")),
    ("kqv_out", 0, LeafPattern::LayerSuffix("cache_v_l")),
    ("attn_out", 0, LeafPattern::BlockWeight("attn_output")),
    ("attn_out_rows", 1, LeafPattern::Fixed("inp_out_ids")),
    ("inp_sa_rows", 1, LeafPattern::Fixed("inp_out_ids")),
    ("ffn_norm", 1, LeafPattern::BlockWeight("ffn_norm")),
    ("ffn_gate", 0, LeafPattern::BlockWeight("ffn_gate")),
    ("ffn_up", 0, LeafPattern::BlockWeight("ffn_up")),
    ("ffn_out", 0, LeafPattern::BlockWeight("ffn_down")),
    ("result_norm", 1, LeafPattern::Fixed("output_norm.weight")),
    ("result_output", 0, LeafPattern::Fixed("output.weight")),
];

/// The layer in a node name's `-<digits>` suffix.
fn name_layer(name: &str) -> Option<u32> {
    u32::try_from(parse(name).layer?).ok()
}

/// The name of the leaf read as source `slot` by the node `consumer` of layer
/// `consumer_layer` (-1 outside layers): from [`LEAF_NAMES`], else
/// `src<slot> of <consumer>`.
pub fn leaf_name(consumer: &str, consumer_layer: i32, slot: usize) -> String {
    let fallback = || format!("src{slot} of {consumer}");
    let class = class_of(consumer);
    let Some(&(_, _, pattern)) = LEAF_NAMES
        .iter()
        .find(|(c, s, _)| *c == class && *s == slot)
    else {
        return fallback();
    };
    // The layer in the name, else the node's layer field.
    let layer = name_layer(consumer).or_else(|| u32::try_from(consumer_layer).ok());
    match (pattern, layer) {
        (LeafPattern::Fixed(name), _) => name.to_owned(),
        (LeafPattern::BlockWeight(t), Some(l)) => format!("blk.{l}.{t}.weight"),
        (LeafPattern::BlockBias(t), Some(l)) => format!("blk.{l}.{t}.bias"),
        (LeafPattern::LayerSuffix(p), Some(l)) => format!("{p}{l}"),
        (_, None) => fallback(),
    }
}

/// The name of a leaf: the recorded one if the collector read the node (and it has a
/// name), else [`leaf_name`]'s guess from consumer `consumer` (layer `consumer_layer`)
/// reading it as source `slot`.
pub fn leaf_label(
    recorded: Option<&LeafInfo>,
    consumer: &str,
    consumer_layer: i32,
    slot: usize,
) -> String {
    match recorded {
        Some(l) if !l.name.is_empty() => l.name.clone(),
        _ => leaf_name(consumer, consumer_layer, slot),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_names_win_over_the_guess() {
        let mut l = LeafInfo {
            addr: 0x10,
            name: "blk.3.my_q_proj.weight".to_owned(),
            dtype: 8,
            flags: common::engine_abi::NODE_FLAG_WEIGHT,
            layer: 3,
            ne: [128, 64, 1, 1],
            ts_ns: 1,
        };
        assert_eq!(
            leaf_label(Some(&l), "Qcur-3", 3, 0),
            "blk.3.my_q_proj.weight"
        );
        assert_eq!(l.shape().as_deref(), Some("128x64"));
        assert_eq!(l.dtype_name(), "q8_0");
        l.name.clear();
        assert_eq!(leaf_label(Some(&l), "Qcur-3", 3, 0), "blk.3.attn_q.weight");
        assert_eq!(leaf_label(None, "Qcur-3", 3, 0), "blk.3.attn_q.weight");
        // Graph-local leaves have no fixed shape.
        l.flags = common::engine_abi::NODE_FLAG_KV_CACHE;
        assert_eq!(l.shape(), None);
    }

    #[test]
    fn llama_cpp_names_of_weights_and_cache() {
        assert_eq!(leaf_name("Qcur-3", 3, 0), "blk.3.attn_q.weight");
        assert_eq!(leaf_name("kq-3", 3, 0), "cache_k_l3");
        assert_eq!(leaf_name("kqv_out-3", 3, 0), "cache_v_l3");
        assert_eq!(leaf_name("ffn_out-0", 0, 0), "blk.0.ffn_down.weight");
        assert_eq!(leaf_name("Kcur_bias-12", 12, 1), "blk.12.attn_k.bias");
        assert_eq!(leaf_name("attn_norm-1", 1, 1), "blk.1.attn_norm.weight");
        assert_eq!(leaf_name("Qcur_rope-5", 5, 1), "inp_pos");
        assert_eq!(leaf_name("result_output", -1, 0), "output.weight");
        assert_eq!(leaf_name("result_norm", -1, 1), "output_norm.weight");
    }

    #[test]
    fn unknown_consumers_and_slots_fall_back() {
        // Slot 1 of Qcur is the activation, not a weight.
        assert_eq!(leaf_name("Qcur-3", 3, 1), "src1 of Qcur-3");
        assert_eq!(leaf_name("my_op-2", 2, 0), "src0 of my_op-2");
        assert_eq!(leaf_name("", -1, 0), "src0 of ");
        // A per-layer pattern without any layer.
        assert_eq!(leaf_name("Qcur", -1, 0), "src0 of Qcur");
    }

    #[test]
    fn layer_comes_from_the_name_then_the_layer_field() {
        assert_eq!(leaf_name("ffn_up", 7, 0), "blk.7.ffn_up.weight");
        assert_eq!(leaf_name("ffn_up-2", 7, 0), "blk.2.ffn_up.weight");
    }

    #[test]
    fn table_has_one_entry_per_consumer_slot() {
        for (i, a) in LEAF_NAMES.iter().enumerate() {
            for b in &LEAF_NAMES[i + 1..] {
                assert!((a.0, a.1) != (b.0, b.1), "duplicate {a:?}");
            }
        }
    }
}
