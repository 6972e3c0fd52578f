//! Element-wise `f32` helpers for the engine's non-matmul ops, following ggml's scalar
//! formulas (f64 accumulation where ggml uses `ggml_float`). Plain loops the compiler
//! vectorises.
//!
//! Known difference: ggml's AVX2 build evaluates `exp` in `silu`, `swiglu` and `softmax`
//! with its own vector approximation (`ggml_v_expf`); these use the C library's `exp`, so
//! results can differ from ggml's in the last bit or two.

/// ggml's RMS-norm factor `1 / sqrt(mean(x²) + eps)` with the sum of squares in `f64`.
pub fn rms_norm_scale(x: &[f32], eps: f32) -> f32 {
    if x.is_empty() {
        return 0.0;
    }
    let sum: f64 = x.iter().map(|v| f64::from(v * v)).sum();
    let mean = (sum / x.len() as f64) as f32;
    1.0 / (mean + eps).sqrt()
}

/// `x / (1 + e^-x)`.
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// Applies [`silu`] to every element.
pub fn silu_in_place(x: &mut [f32]) {
    for v in x {
        *v = silu(*v);
    }
}

/// `out[i] = silu(a[i]) * b[i]` over the shortest of the three slices.
pub fn swiglu(a: &[f32], b: &[f32], out: &mut [f32]) {
    for ((o, &x), &g) in out.iter_mut().zip(a).zip(b) {
        *o = silu(x) * g;
    }
}

/// Softmax of `x * scale` in place, as ggml's `soft_max`: subtract the maximum, `exp`, sum
/// in `f64`, multiply by `1 / sum`. Masked entries should be `-inf` on input.
pub fn softmax_in_place(x: &mut [f32], scale: f32) {
    let mut max = f32::NEG_INFINITY;
    for v in x.iter_mut() {
        *v *= scale;
        max = max.max(*v);
    }
    let mut sum = 0f64;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += f64::from(*v);
    }
    let inv = (1.0 / sum) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

/// `y[i] += x[i]`.
pub fn add(y: &mut [f32], x: &[f32]) {
    for (a, b) in y.iter_mut().zip(x) {
        *a += b;
    }
}

/// `y[i] *= x[i]`.
pub fn mul(y: &mut [f32], x: &[f32]) {
    for (a, b) in y.iter_mut().zip(x) {
        *a *= b;
    }
}

/// `y[i] *= s`.
pub fn scale(y: &mut [f32], s: f32) {
    for a in y {
        *a *= s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_norm_scale_by_hand() {
        // mean of squares of [3, 4] = 12.5 -> 1/sqrt(12.5)
        let s = rms_norm_scale(&[3.0, 4.0], 0.0);
        assert!((s - 1.0 / 12.5f32.sqrt()).abs() < 1e-7);
        assert_eq!(rms_norm_scale(&[0.0; 4], 1e-6), 1.0 / 1e-6f32.sqrt());
    }

    #[test]
    fn silu_values() {
        assert_eq!(silu(0.0), 0.0);
        assert!((silu(1.0) - 1.0 / (1.0 + (-1.0f32).exp())).abs() < 1e-7);
        assert!(silu(-100.0).abs() < 1e-30);
        let mut out = [0.0; 2];
        swiglu(&[0.0, 1.0], &[5.0, 2.0], &mut out);
        assert_eq!(out[0], 0.0);
        assert!((out[1] - 2.0 * silu(1.0)).abs() < 1e-7);
    }

    #[test]
    fn softmax_sums_to_one_and_masks() {
        let mut x = [1.0, 2.0, f32::NEG_INFINITY, 3.0];
        softmax_in_place(&mut x, 0.5);
        assert_eq!(x[2], 0.0);
        let total: f32 = x.iter().sum();
        assert!((total - 1.0).abs() < 1e-6);
        // ratio of neighbours is e^(0.5)
        assert!((x[1] / x[0] - 0.5f32.exp()).abs() < 1e-6);
    }

    #[test]
    fn elementwise() {
        let mut y = [1.0, 2.0];
        add(&mut y, &[1.0, 1.0]);
        mul(&mut y, &[2.0, 3.0]);
        scale(&mut y, 0.5);
        assert_eq!(y, [2.0, 4.5]);
    }
}
