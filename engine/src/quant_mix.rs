//! llama.cpp's K-quant *mixes* (`llama-quantize`'s presets `Q4_K_M`, `Q5_K_M`, `Q3_K_M`,
//! `Q2_K`, `Q6_K`, ...): a base type for most weight matrices, with more bits for the
//! tensors that hurt most when quantized coarsely (some `attn_v`/`ffn_down` layers, the
//! output projection). Ported from `llama_tensor_get_type_impl` and
//! `tensor_type_fallback` in llama.cpp's `src/llama-quant.cpp` (the oracle's version),
//! for the dense architectures the engine runs (no experts, not Falcon, not 70B).
//!
//! # Names
//! A mix is named as `llama-quantize` names it (case-insensitive). Some preset names are
//! also ggml type names (`Q2_K`, `Q6_K`): `engine gen-model --dtype` always means the
//! *type* (every matrix in it, like `llama-quantize --pure`), `--ftype` always means the
//! *mix*; `--dtype` also accepts mix names that are not type names (`q4_K_M`).

use common::DType;

/// A `llama-quantize` K-quant preset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types, reason = "llama.cpp's spelling")]
pub enum Mix {
    /// `Q2_K`: Q2_K, with Q3_K/Q4_K `attn_v`, Q3_K `ffn_down` and `attn_output`.
    Q2_K,
    /// `Q2_K_S`.
    Q2_K_S,
    /// `Q3_K_S`: Q3_K everywhere but the output.
    Q3_K_S,
    /// `Q3_K_M`.
    Q3_K_M,
    /// `Q3_K_L`.
    Q3_K_L,
    /// `Q4_K_S`.
    Q4_K_S,
    /// `Q4_K_M`: Q4_K, with Q6_K for half the `attn_v` and `ffn_down` layers.
    Q4_K_M,
    /// `Q5_K_S`.
    Q5_K_S,
    /// `Q5_K_M`.
    Q5_K_M,
    /// `Q6_K`.
    Q6_K,
}

impl Mix {
    /// Every mix.
    pub const ALL: [Mix; 10] = [
        Mix::Q2_K,
        Mix::Q2_K_S,
        Mix::Q3_K_S,
        Mix::Q3_K_M,
        Mix::Q3_K_L,
        Mix::Q4_K_S,
        Mix::Q4_K_M,
        Mix::Q5_K_S,
        Mix::Q5_K_M,
        Mix::Q6_K,
    ];

    /// `llama-quantize`'s name.
    pub const fn name(self) -> &'static str {
        match self {
            Mix::Q2_K => "Q2_K",
            Mix::Q2_K_S => "Q2_K_S",
            Mix::Q3_K_S => "Q3_K_S",
            Mix::Q3_K_M => "Q3_K_M",
            Mix::Q3_K_L => "Q3_K_L",
            Mix::Q4_K_S => "Q4_K_S",
            Mix::Q4_K_M => "Q4_K_M",
            Mix::Q5_K_S => "Q5_K_S",
            Mix::Q5_K_M => "Q5_K_M",
            Mix::Q6_K => "Q6_K",
        }
    }

    /// The mix called `name` (case-insensitive).
    pub fn from_name(name: &str) -> Option<Mix> {
        Mix::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name))
    }

    /// The base type (`llama_ftype_get_default_type`).
    pub const fn base(self) -> DType {
        match self {
            Mix::Q2_K | Mix::Q2_K_S => DType::Q2_K,
            Mix::Q3_K_S | Mix::Q3_K_M | Mix::Q3_K_L => DType::Q3_K,
            Mix::Q4_K_S | Mix::Q4_K_M => DType::Q4_K,
            Mix::Q5_K_S | Mix::Q5_K_M => DType::Q5_K,
            Mix::Q6_K => DType::Q6_K,
        }
    }

    /// `general.file_type` (`enum llama_ftype`).
    pub const fn file_type(self) -> u32 {
        match self {
            Mix::Q2_K => 10,
            Mix::Q3_K_S => 11,
            Mix::Q3_K_M => 12,
            Mix::Q3_K_L => 13,
            Mix::Q4_K_S => 14,
            Mix::Q4_K_M => 15,
            Mix::Q5_K_S => 16,
            Mix::Q5_K_M => 17,
            Mix::Q6_K => 18,
            Mix::Q2_K_S => 21,
        }
    }
}

/// What the mix rules look at in the model.
#[derive(Clone, Copy, Debug)]
pub struct MixModel {
    /// Transformer blocks.
    pub n_layer: u32,
    /// Query heads per KV head (`n_gqa`).
    pub n_gqa: u32,
    /// Whether there is no `output.weight` (token_embd is the output projection).
    pub tied_embeddings: bool,
}

/// llama.cpp's `use_more_bits`: the first and last eighth of the layers and every third
/// one in between.
fn use_more_bits(i_layer: i64, n_layer: i64) -> bool {
    i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2
}

/// The layer of `blk.N.…`.
fn layer_of(name: &str) -> Option<i64> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

/// The type llama.cpp's quantizer gives weight matrix `name` (`ne0` elements per row) of a
/// file quantized with `mix` (not `--pure`, no importance matrix, no overrides). Tensors
/// llama.cpp does not quantize (vectors, norms) are not asked about.
pub fn tensor_type(mix: Mix, model: MixModel, name: &str, ne0: u64) -> DType {
    use Mix as M;
    let n = i64::from(model.n_layer);
    let i = layer_of(name).unwrap_or(0);
    let is_output =
        name == "output.weight" || (model.tied_embeddings && name == "token_embd.weight");
    let mut t = mix.base();
    if is_output {
        t = if !ne0.is_multiple_of(mix.base().block_len() as u64) {
            DType::Q8_0
        } else {
            DType::Q6_K
        };
    } else if name == "token_embd.weight" {
        // the base type
    } else if name.ends_with("attn_v.weight") {
        // i_attention_wv counts attn_v tensors in file order, i.e. the layer index.
        t = match mix {
            M::Q2_K if model.n_gqa >= 4 => DType::Q4_K,
            M::Q2_K => DType::Q3_K,
            M::Q2_K_S if model.n_gqa >= 4 => DType::Q4_K,
            M::Q3_K_M if i < 2 => DType::Q5_K,
            M::Q3_K_M => DType::Q4_K,
            M::Q3_K_L => DType::Q5_K,
            M::Q4_K_M | M::Q5_K_M if use_more_bits(i, n) => DType::Q6_K,
            M::Q4_K_S if i < 4 => DType::Q5_K,
            _ => t,
        };
    } else if name.ends_with("ffn_down.weight") {
        t = match mix {
            M::Q2_K => DType::Q3_K,
            M::Q2_K_S if i < n / 8 => DType::Q4_K,
            M::Q3_K_M if i < n / 16 => DType::Q5_K,
            M::Q3_K_M => DType::Q4_K,
            M::Q3_K_L => DType::Q5_K,
            M::Q4_K_M | M::Q5_K_M if use_more_bits(i, n) => DType::Q6_K,
            M::Q4_K_S if i < n / 8 => DType::Q5_K,
            _ => t,
        };
    } else if name.ends_with("attn_output.weight") {
        t = match mix {
            M::Q2_K => DType::Q3_K,
            M::Q3_K_M => DType::Q4_K,
            M::Q3_K_L => DType::Q5_K,
            _ => t,
        };
    }
    fallback(t, ne0)
}

/// `tensor_type_fallback`: a 32-element type for rows that are not whole super-blocks.
fn fallback(t: DType, ne0: u64) -> DType {
    if ne0.is_multiple_of(t.block_len() as u64) {
        return t;
    }
    let f = match t {
        DType::Q2_K | DType::Q3_K => DType::Q4_0,
        DType::Q4_K => DType::Q5_0,
        DType::Q5_K => DType::Q5_1,
        DType::Q6_K => DType::Q8_0,
        other => other,
    };
    if ne0.is_multiple_of(f.block_len() as u64) {
        f
    } else {
        DType::F16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(mix: Mix, n_layer: u32, suffix: &str) -> Vec<DType> {
        let m = MixModel {
            n_layer,
            n_gqa: 4,
            tied_embeddings: true,
        };
        (0..n_layer)
            .map(|l| tensor_type(mix, m, &format!("blk.{l}.{suffix}"), 2048))
            .collect()
    }

    #[test]
    fn q4_k_m_of_a_16_layer_model() {
        // use_more_bits(i, 16): i < 2, i >= 14, (i - 2) % 3 == 2.
        let q6: Vec<usize> = types(Mix::Q4_K_M, 16, "ffn_down.weight")
            .iter()
            .enumerate()
            .filter(|(_, t)| **t == DType::Q6_K)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(q6, [0, 1, 4, 7, 10, 13, 14, 15]);
        assert_eq!(types(Mix::Q4_K_M, 16, "attn_v.weight")[3], DType::Q4_K);
        assert_eq!(
            types(Mix::Q4_K_M, 16, "attn_q.weight"),
            vec![DType::Q4_K; 16]
        );
    }

    #[test]
    fn output_and_tied_embeddings() {
        let tied = MixModel {
            n_layer: 2,
            n_gqa: 1,
            tied_embeddings: true,
        };
        let untied = MixModel {
            tied_embeddings: false,
            ..tied
        };
        assert_eq!(
            tensor_type(Mix::Q2_K, tied, "token_embd.weight", 256),
            DType::Q6_K
        );
        assert_eq!(
            tensor_type(Mix::Q2_K, untied, "token_embd.weight", 256),
            DType::Q2_K
        );
        assert_eq!(
            tensor_type(Mix::Q2_K, untied, "output.weight", 256),
            DType::Q6_K
        );
        assert_eq!(
            tensor_type(Mix::Q4_K_M, untied, "output.weight", 128),
            DType::Q8_0
        );
        assert_eq!(
            tensor_type(Mix::Q2_K, untied, "blk.0.attn_v.weight", 256),
            DType::Q3_K
        );
        // Rows that are not whole super-blocks fall back to 32-element types.
        assert_eq!(
            tensor_type(Mix::Q4_K_M, untied, "blk.0.attn_q.weight", 128),
            DType::Q5_0
        );
        assert_eq!(
            tensor_type(Mix::Q3_K_S, untied, "blk.0.attn_q.weight", 96),
            DType::Q4_0
        );
    }

    #[test]
    fn names() {
        assert_eq!(Mix::from_name("q4_k_m"), Some(Mix::Q4_K_M));
        assert_eq!(Mix::from_name("Q6_K").map(Mix::base), Some(DType::Q6_K));
        assert_eq!(Mix::from_name("q4_K"), None);
    }
}
