//! The tensors a model file holds — names, shapes and kinds, in file order — as one
//! table that the loader ([`super::weights`]) checks files against and the model
//! generator (`crate::presets`) writes.

use super::arch::ArchSpec;

/// What a tensor may be stored as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorKind {
    /// A weight matrix: f32, f16 or quantized.
    Matrix,
    /// A norm weight or bias vector: always f32.
    Vector,
    /// A mixture of experts' router (`ffn_gate_inp`): a matrix that files keep in f32
    /// (llama.cpp's quantizer leaves it alone), though any matrix type loads.
    Router,
}

/// One tensor of a model file.
#[derive(Clone, Debug)]
pub struct TensorSpec {
    /// GGUF name (`blk.3.attn_q.weight`).
    pub name: String,
    /// Elements per dimension, innermost first.
    pub dims: Vec<u64>,
    /// Matrix or vector.
    pub kind: TensorKind,
    /// Transformer block, or -1 for the tensors around the blocks.
    pub layer: i32,
    /// Whether the file may leave it out (`output.weight` with tied embeddings).
    pub optional: bool,
}

/// The hyper-parameters that decide the tensors' shapes.
#[derive(Clone, Copy, Debug)]
pub struct TensorShapes {
    /// Hidden size.
    pub n_embd: u64,
    /// Width of Q (`n_head · head_dim`: `n_embd` unless the head size is set apart).
    pub n_embd_q: u64,
    /// Width of K and V (`head_dim · n_head_kv`).
    pub n_embd_kv: u64,
    /// FFN size.
    pub n_ff: u64,
    /// Vocabulary size.
    pub n_vocab: u64,
    /// Transformer blocks.
    pub n_layer: u32,
    /// The mixture of experts replacing the dense FFN, if any.
    pub experts: Option<ExpertShapes>,
}

/// The sizes that decide a mixture-of-experts FFN's tensors.
#[derive(Clone, Copy, Debug)]
pub struct ExpertShapes {
    /// Experts per layer.
    pub n_expert: u64,
    /// FFN size of one expert.
    pub n_ff_exp: u64,
    /// FFN size of the shared expert, 0 without one.
    pub n_ff_shexp: u64,
}

/// Every tensor of `arch` with `shapes`, in the order a generated file stores them.
pub fn tensor_specs(arch: &ArchSpec, s: TensorShapes) -> Vec<TensorSpec> {
    let (e, q, kv, ff, v) = (s.n_embd, s.n_embd_q, s.n_embd_kv, s.n_ff, s.n_vocab);
    let global = |name: &str, dims: Vec<u64>, kind: TensorKind, optional: bool| TensorSpec {
        name: name.to_owned(),
        dims,
        kind,
        layer: -1,
        optional,
    };
    let mut t = vec![global(
        "token_embd.weight",
        vec![e, v],
        TensorKind::Matrix,
        false,
    )];
    for il in 0..s.n_layer {
        let mut add = |suffix: &str, dims: Vec<u64>, kind: TensorKind| {
            t.push(TensorSpec {
                name: format!("blk.{il}.{suffix}"),
                dims,
                kind,
                layer: il as i32,
                optional: false,
            });
        };
        add("attn_norm.weight", vec![e], TensorKind::Vector);
        add("attn_q.weight", vec![e, q], TensorKind::Matrix);
        add("attn_k.weight", vec![e, kv], TensorKind::Matrix);
        add("attn_v.weight", vec![e, kv], TensorKind::Matrix);
        if arch.qkv_bias {
            add("attn_q.bias", vec![q], TensorKind::Vector);
            add("attn_k.bias", vec![kv], TensorKind::Vector);
            add("attn_v.bias", vec![kv], TensorKind::Vector);
        }
        add("attn_output.weight", vec![q, e], TensorKind::Matrix);
        if arch.gemma.is_some() {
            add("post_attention_norm.weight", vec![e], TensorKind::Vector);
        }
        add("ffn_norm.weight", vec![e], TensorKind::Vector);
        match s.experts {
            None => {
                add("ffn_gate.weight", vec![e, ff], TensorKind::Matrix);
                add("ffn_up.weight", vec![e, ff], TensorKind::Matrix);
                add("ffn_down.weight", vec![ff, e], TensorKind::Matrix);
                if arch.gemma.is_some() {
                    add("post_ffw_norm.weight", vec![e], TensorKind::Vector);
                }
            }
            Some(x) => {
                let (n, xff) = (x.n_expert, x.n_ff_exp);
                // The router stays f32: llama.cpp's quantizer never quantizes it.
                add("ffn_gate_inp.weight", vec![e, n], TensorKind::Router);
                add("ffn_gate_exps.weight", vec![e, xff, n], TensorKind::Matrix);
                add("ffn_up_exps.weight", vec![e, xff, n], TensorKind::Matrix);
                add("ffn_down_exps.weight", vec![xff, e, n], TensorKind::Matrix);
                if x.n_ff_shexp > 0 {
                    let sff = x.n_ff_shexp;
                    add("ffn_gate_inp_shexp.weight", vec![e], TensorKind::Vector);
                    add("ffn_gate_shexp.weight", vec![e, sff], TensorKind::Matrix);
                    add("ffn_up_shexp.weight", vec![e, sff], TensorKind::Matrix);
                    add("ffn_down_shexp.weight", vec![sff, e], TensorKind::Matrix);
                }
            }
        }
    }
    t.push(global(
        "output_norm.weight",
        vec![e],
        TensorKind::Vector,
        false,
    ));
    t.push(global(
        "output.weight",
        vec![e, v],
        TensorKind::Matrix,
        true,
    ));
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::arch::lookup;

    #[test]
    fn qwen2_adds_biases_and_output_is_optional() {
        let s = TensorShapes {
            n_embd: 64,
            n_embd_q: 64,
            n_embd_kv: 16,
            n_ff: 128,
            n_vocab: 100,
            n_layer: 2,
            experts: None,
        };
        let llama = tensor_specs(lookup("llama").unwrap(), s);
        let qwen2 = tensor_specs(lookup("qwen2").unwrap(), s);
        assert_eq!(llama.len(), 1 + 2 * 9 + 2);
        assert_eq!(qwen2.len(), llama.len() + 2 * 3);
        let bk = qwen2
            .iter()
            .find(|t| t.name == "blk.1.attn_k.bias")
            .unwrap();
        assert_eq!(
            (bk.dims.clone(), bk.kind, bk.layer),
            (vec![16], TensorKind::Vector, 1)
        );
        let moe = tensor_specs(
            lookup("qwen2moe").unwrap(),
            TensorShapes {
                experts: Some(ExpertShapes {
                    n_expert: 8,
                    n_ff_exp: 32,
                    n_ff_shexp: 96,
                }),
                ..s
            },
        );
        let down = moe
            .iter()
            .find(|t| t.name == "blk.0.ffn_down_exps.weight")
            .unwrap();
        assert_eq!(down.dims, vec![32, 64, 8]);
        assert!(
            moe.iter()
                .any(|t| t.name == "blk.1.ffn_gate_inp_shexp.weight")
        );
        assert!(!moe.iter().any(|t| t.name == "blk.0.ffn_up.weight"));
        let out = llama.last().unwrap();
        assert!(out.name == "output.weight" && out.optional);
        assert!(llama.iter().filter(|t| t.optional).count() == 1);
    }
}
