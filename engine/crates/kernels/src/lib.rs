//! CPU kernels of the inference engine, numerically compatible with ggml's CPU backend:
//! ggml's Q8_0/Q4_0 blocks (and Q4_1, Q5_0, Q5_1, Q8_1, BF16 in `legacy`), the K-quants,
//! the activation conversions, dot products and the tiled matrix product, each with a
//! SIMD implementation (AVX2 on x86-64; NEON, with `dotprod` where the CPU has it, on
//! AArch64) and a portable one that rounds the same way, chosen at run time
//! ([`Backend::detect`]).
//!
//! # Layers
//! Modules import downward only (files of one layer may import lower files of the same
//! layer, never higher ones; a `mod.rs` is the top of its directory):
//! 1. **Base**: `error`, `f16`, `backend`, `order` (the 8-lane accumulation orders every
//!    backend reproduces), `shape` (buffer checks).
//! 2. **Types and blocks**: `legacy/block32.rs` and the 32-element block types in
//!    `legacy/`, the K-quant blocks in `k_quants/` (`scales`, `fit`, `unpacked`,
//!    `block`, `q2_k` … `q8_k`), [`quant`] (row quantization and dequantization of every type).
//! 3. **Dot products, one module per architecture**: [`dot`] (`generic`, `x86`,
//!    `aarch64`, and the dispatch in `dot/mod.rs`), `k_quants/{generic,x86,aarch64}.rs`,
//!    [`vec`].
//! 4. **Matrix products**: `matmul/args.rs` (their operands, [`MatMulArgs`]),
//!    [`packed`] (with `x86`, `q4_k_x86`, `aarch64`), [`k_quants::tiles`] (with
//!    `interleaved_x86`, `tiles_aarch64`), [`matmul`].
//!
//! # Example
//! ```
//! use common::engine_abi::DType;
//! use engine_kernels::{convert_activations, quant, vec_dot, vec_dot_type};
//!
//! let w: Vec<f32> = (0..64).map(|i| i as f32 / 64.0).collect();
//! let x = vec![0.5f32; 64];
//! let mut wq = vec![0u8; DType::Q8_0.row_bytes(64).unwrap()];
//! quant::quantize_row(DType::Q8_0, &w, &mut wq).unwrap();
//! let mut xq = vec![0u8; vec_dot_type(DType::Q8_0).row_bytes(64).unwrap()];
//! convert_activations(vec_dot_type(DType::Q8_0), &x, &mut xq).unwrap();
//! let d = vec_dot(DType::Q8_0, 64, &wq, &xq).unwrap();
//! assert!((d - 15.75).abs() < 0.1);
//! ```

mod backend;
pub mod dot;
mod error;
pub mod f16;
pub mod k_quants;
mod legacy;
pub mod matmul;
mod order;
pub mod packed;
pub mod quant;
mod shape;
pub mod vec;

pub use backend::Backend;
pub use dot::{
    convert_activations, convert_activations_with, has_kernels, vec_dot, vec_dot_type,
    vec_dot_with, weight_types,
};
pub use error::KernelError;
pub use matmul::{MatMulArgs, ROW_BLOCK, matmul, matmul_with, split_rows};
