//! ggml's other 32-element block types — Q4_1, Q5_0, Q5_1 weights and the Q8_1
//! activations they meet — and BF16, one small file per type.
//!
//! The three weight types share one shape of dot product with their activation block
//! (ggml-cpu `arch/x86/quants.c`, `ggml_vec_dot_{q4_1_q8_1,q5_0_q8_0,q5_1_q8_1}`): per
//! block, 8 integer lane sums of `q_w * q_x` (`maddubs` + `madd`), multiplied by
//! `d_w * d_x` and accumulated with one FMA into 8 lanes; types with a minimum `m` also
//! accumulate `m * s_x` (Q8_1's `s = d * Σ q`) in a scalar that GCC fuses into an FMA
//! (checked in the oracle's `libggml-cpu.so`: `vfmadd231ss`). The result is
//! `hsum_float_8(acc) (+ summs)`. A type only describes its block ([`Block32`]); the
//! generic, AVX2 and NEON dot products ([`crate::dot`]) and the tiles of [`crate::matmul`]
//! are written once.

pub(crate) mod bf16;
pub(crate) mod block32;
pub(crate) mod q4_1;
pub(crate) mod q5_0;
pub(crate) mod q5_1;
pub(crate) mod q8_1;
