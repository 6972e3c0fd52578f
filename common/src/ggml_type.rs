//! ggml's tensor element types (`enum ggml_type`), as GGUF tensor infos store them and
//! the engine's probe ABI numbers them (the engine ABI's `DType` is the engine's subset).

use core::fmt;

/// Declares [`GgmlType`] from one table: variant, ggml type id, ggml's name, elements
/// per block and bytes per block.
macro_rules! ggml_types {
    ($( $(#[$doc:meta])* $variant:ident = $id:literal, $name:literal, $block_len:literal, $block_bytes:literal; )*) => {
        /// A ggml tensor element type. The discriminants are ggml's `ggml_type` ids
        /// (the values stored in GGUF tensor infos); ids that ggml removed from GGUF
        /// (4, 5, 31..=33, 36..=38) and ids newer than this table are unknown.
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[expect(non_camel_case_types, reason = "variants spell ggml's type names (Q4_K, IQ2_XXS)")]
        pub enum GgmlType {
            $( $(#[$doc])* $variant = $id, )*
        }

        impl GgmlType {
            /// Every known type, in id order.
            pub const ALL: &'static [GgmlType] = &[$(GgmlType::$variant),*];

            /// The type with ggml type id `id`, if it is known.
            pub const fn from_id(id: u32) -> Option<GgmlType> {
                match id {
                    $( $id => Some(GgmlType::$variant), )*
                    _ => None,
                }
            }

            /// Name as ggml spells it (`f32`, `q4_0`, `q6_K`, `iq2_xxs`, ...).
            pub const fn name(self) -> &'static str {
                match self {
                    $( GgmlType::$variant => $name, )*
                }
            }

            /// Number of elements in one block (1 for plain types).
            pub const fn block_len(self) -> u64 {
                match self {
                    $( GgmlType::$variant => $block_len, )*
                }
            }

            /// Size in bytes of one block.
            pub const fn block_bytes(self) -> u64 {
                match self {
                    $( GgmlType::$variant => $block_bytes, )*
                }
            }
        }
    };
}

ggml_types! {
    /// 32-bit IEEE float.
    F32 = 0, "f32", 1, 4;
    /// 16-bit IEEE float.
    F16 = 1, "f16", 1, 2;
    /// Blocks of 32 weights: one f16 scale and 16 bytes of 4-bit values.
    Q4_0 = 2, "q4_0", 32, 18;
    /// Blocks of 32 weights: f16 scale and minimum, 16 bytes of 4-bit values.
    Q4_1 = 3, "q4_1", 32, 20;
    /// Blocks of 32 weights: f16 scale, 4 bytes of fifth bits, 16 bytes of nibbles.
    Q5_0 = 6, "q5_0", 32, 22;
    /// Blocks of 32 weights: f16 scale and minimum, 4 bytes of fifth bits, 16 bytes of
    /// nibbles.
    Q5_1 = 7, "q5_1", 32, 24;
    /// Blocks of 32 weights: one f16 scale and 32 signed bytes.
    Q8_0 = 8, "q8_0", 32, 34;
    /// Blocks of 32 weights: f16 scale and scaled sum, 32 signed bytes (the activation
    /// type of Q4_1 and Q5_1 products).
    Q8_1 = 9, "q8_1", 32, 36;
    /// K-quant super-blocks of 256 weights, 2.625 bits per weight.
    Q2_K = 10, "q2_K", 256, 84;
    /// K-quant super-blocks of 256 weights, 3.4375 bits per weight.
    Q3_K = 11, "q3_K", 256, 110;
    /// K-quant super-blocks of 256 weights, 4.5 bits per weight.
    Q4_K = 12, "q4_K", 256, 144;
    /// K-quant super-blocks of 256 weights, 5.5 bits per weight.
    Q5_K = 13, "q5_K", 256, 176;
    /// K-quant super-blocks of 256 weights, 6.5625 bits per weight.
    Q6_K = 14, "q6_K", 256, 210;
    /// f32 scale, 256 signed bytes and 16 i16 block sums (the activation type of K-quant
    /// products).
    Q8_K = 15, "q8_K", 256, 292;
    /// i-quant, 2.0625 bits per weight.
    IQ2_XXS = 16, "iq2_xxs", 256, 66;
    /// i-quant, 2.3125 bits per weight.
    IQ2_XS = 17, "iq2_xs", 256, 74;
    /// i-quant, 3.0625 bits per weight.
    IQ3_XXS = 18, "iq3_xxs", 256, 98;
    /// i-quant, 1.5625 bits per weight.
    IQ1_S = 19, "iq1_s", 256, 50;
    /// Non-linear 4-bit quant with blocks of 32.
    IQ4_NL = 20, "iq4_nl", 32, 18;
    /// i-quant, 3.4375 bits per weight.
    IQ3_S = 21, "iq3_s", 256, 110;
    /// i-quant, 2.5625 bits per weight.
    IQ2_S = 22, "iq2_s", 256, 82;
    /// Non-linear 4-bit quant with super-blocks of 256, 4.25 bits per weight.
    IQ4_XS = 23, "iq4_xs", 256, 136;
    /// 8-bit signed integer.
    I8 = 24, "i8", 1, 1;
    /// 16-bit signed integer.
    I16 = 25, "i16", 1, 2;
    /// 32-bit signed integer (token ids, positions).
    I32 = 26, "i32", 1, 4;
    /// 64-bit signed integer.
    I64 = 27, "i64", 1, 8;
    /// 64-bit IEEE float.
    F64 = 28, "f64", 1, 8;
    /// i-quant, 1.75 bits per weight.
    IQ1_M = 29, "iq1_m", 256, 56;
    /// bfloat16: the upper half of an IEEE f32.
    BF16 = 30, "bf16", 1, 2;
    /// Ternary quant, 1.6875 bits per weight.
    TQ1_0 = 34, "tq1_0", 256, 54;
    /// Ternary quant, 2.0625 bits per weight.
    TQ2_0 = 35, "tq2_0", 256, 66;
    /// Microscaling FP4: one shared exponent byte + 16 bytes of e2m1 values per 32.
    MXFP4 = 39, "mxfp4", 32, 17;
}

impl GgmlType {
    /// The ggml type id.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// Whether the type stores weights in blocks of more than one element.
    pub const fn is_quantized(self) -> bool {
        self.block_len() > 1
    }

    /// Bytes needed for `n_elements` elements, or `None` if `n_elements` is not a
    /// whole number of blocks or the size overflows `u64`.
    pub const fn bytes_for(self, n_elements: u64) -> Option<u64> {
        if !n_elements.is_multiple_of(self.block_len()) {
            return None;
        }
        (n_elements / self.block_len()).checked_mul(self.block_bytes())
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bits per weight as quoted in ggml's sources and quantization docs; an independent
    /// check of the (block_len, block_bytes) table.
    const BITS_PER_WEIGHT: &[(GgmlType, f64)] = &[
        (GgmlType::Q4_0, 4.5),
        (GgmlType::Q4_1, 5.0),
        (GgmlType::Q5_0, 5.5),
        (GgmlType::Q5_1, 6.0),
        (GgmlType::Q8_0, 8.5),
        (GgmlType::Q2_K, 2.625),
        (GgmlType::Q3_K, 3.4375),
        (GgmlType::Q4_K, 4.5),
        (GgmlType::Q5_K, 5.5),
        (GgmlType::Q6_K, 6.5625),
        (GgmlType::IQ2_XXS, 2.0625),
        (GgmlType::IQ2_XS, 2.3125),
        (GgmlType::IQ3_XXS, 3.0625),
        (GgmlType::IQ1_S, 1.5625),
        (GgmlType::IQ4_NL, 4.5),
        (GgmlType::IQ3_S, 3.4375),
        (GgmlType::IQ2_S, 2.5625),
        (GgmlType::IQ4_XS, 4.25),
        (GgmlType::IQ1_M, 1.75),
        (GgmlType::TQ1_0, 1.6875),
        (GgmlType::TQ2_0, 2.0625),
        (GgmlType::MXFP4, 4.25),
    ];

    #[test]
    fn bits_per_weight_match_ggml_documentation() {
        for &(t, bpw) in BITS_PER_WEIGHT {
            let got = (t.block_bytes() * 8) as f64 / t.block_len() as f64;
            assert_eq!(got, bpw, "{t}");
        }
    }

    #[test]
    fn plain_types_have_their_rust_sizes() {
        assert_eq!(GgmlType::F32.block_bytes(), size_of::<f32>() as u64);
        assert_eq!(GgmlType::F64.block_bytes(), size_of::<f64>() as u64);
        assert_eq!(GgmlType::I8.block_bytes(), size_of::<i8>() as u64);
        assert_eq!(GgmlType::I16.block_bytes(), size_of::<i16>() as u64);
        assert_eq!(GgmlType::I32.block_bytes(), size_of::<i32>() as u64);
        assert_eq!(GgmlType::I64.block_bytes(), size_of::<i64>() as u64);
        assert_eq!(GgmlType::F16.block_bytes(), 2);
        assert_eq!(GgmlType::BF16.block_bytes(), 2);
    }

    #[test]
    fn ids_round_trip_and_removed_ids_are_unknown() {
        for &t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
        }
        for id in [4, 5, 31, 32, 33, 36, 37, 38, 40, u32::MAX] {
            assert_eq!(GgmlType::from_id(id), None, "{id}");
        }
    }

    #[test]
    fn bytes_for_rejects_partial_blocks_and_overflow() {
        assert_eq!(GgmlType::Q4_0.bytes_for(64), Some(36));
        assert_eq!(GgmlType::Q4_0.bytes_for(33), None);
        assert_eq!(GgmlType::F32.bytes_for(u64::MAX), None);
        assert_eq!(GgmlType::F32.bytes_for(0), Some(0));
    }
}
