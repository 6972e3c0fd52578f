//! The operands of one strided matrix product, shared by every matrix-product entry point
//! ([`crate::matmul`], [`crate::packed`], [`crate::k_quants::tiles`]) and their kernels.
//! Imports only the base and dot-product layers, so the other matrix-product modules may
//! import it.

use common::engine_abi::DType;

use crate::dot::vec_dot_type;
use crate::error::KernelError;
use crate::shape::check_matrix;

/// One strided matrix product `Y = X · Wᵀ`: the operands and their layout. The weight
/// rows to compute (`n_range`, what threads split) are passed next to it.
///
/// Output `(i, n)` is `y[i * y_stride + n] = dot(w row n, x row i)`.
///
/// # Safety
/// The functions that take it are `unsafe`: `y` must be valid for writes at every output
/// index they compute, and no other thread may read or write those indices during the
/// call. Buffer lengths of `w` and `x` are checked by the public entry points; the output
/// is not.
#[derive(Clone, Copy, Debug)]
pub struct MatMulArgs<'a> {
    /// Type of the weights.
    pub wtype: DType,
    /// Weight rows of `k` elements of `wtype`, row `n` starting at byte `n * w_stride`
    /// (for [`crate::packed`], the weights as [`crate::packed::pack`] laid them out).
    pub w: &'a [u8],
    /// Bytes from one weight row to the next; it may exceed the row size, e.g. for
    /// KV-cache views (not read by [`crate::packed`], whose layout places every row).
    pub w_stride: usize,
    /// Elements per row of weights and activations (the shared dimension).
    pub k: usize,
    /// `m` activation rows already converted with [`crate::convert_activations`] to
    /// [`vec_dot_type`]`(wtype)`, row `i` at byte `i * x_stride`.
    pub x: &'a [u8],
    /// Bytes from one activation row to the next.
    pub x_stride: usize,
    /// Number of activation rows (output rows).
    pub m: usize,
    /// The outputs: output `(i, n)` at `y[i * y_stride + n]`.
    pub y: *mut f32,
    /// Floats from one output row to the next.
    pub y_stride: usize,
}

impl MatMulArgs<'_> {
    /// Checks that `x` holds `m` rows of `k` elements of `vec_dot_type(wtype)` at
    /// `x_stride`.
    pub(crate) fn check_activations(&self) -> Result<(), KernelError> {
        let vdt = vec_dot_type(self.wtype);
        check_matrix(
            "matmul activations",
            vdt,
            self.k,
            self.x,
            self.x_stride,
            self.m,
        )?;
        Ok(())
    }
}
