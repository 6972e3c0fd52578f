//! CPU kernels of the inference engine, numerically compatible with ggml's CPU backend:
//! ggml's Q8_0/Q4_0 blocks (and Q4_1, Q5_0, Q5_1, Q8_1, BF16 in `legacy`), the activation conversions, dot products and the tiled matrix
//! product, each with an AVX2/FMA/F16C implementation and a portable one that rounds the
//! same way, chosen at run time ([`Backend::detect`]).

mod backend;
pub mod dot;
mod error;
pub mod f16;
pub mod k_quants;
mod legacy;
pub mod matmul;
pub mod packed;
pub mod quant;
pub mod vec;

pub use backend::Backend;
pub use dot::{
    convert_activations, has_kernels, vec_dot, vec_dot_type, vec_dot_with, weight_types,
};
pub use error::KernelError;
pub use matmul::{ROW_BLOCK, matmul, matmul_with, split_rows};
