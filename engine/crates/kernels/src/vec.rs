//! Element-wise `f32` helpers for the engine's non-matmul ops, following ggml's scalar
//! formulas (f64 accumulation where ggml uses `ggml_float`). Plain loops the compiler
//! vectorises.
//!
//! `exp` in `silu`, `swiglu` and `softmax` follows ggml's AVX2 + FMA build: its vector loops
//! (8 elements at a time from the start of a row) use ggml's own approximation
//! `ggml_v_expf` ([`expf_vector`], ported lane by lane with the same fused multiply-adds),
//! the leftover elements the C library's `expf`. Using `expf` everywhere differed in the
//! last bit, which over SmolLM2's 30 layers grew to 2.5% of the largest logit (and flipped
//! greedy tokens at near-ties); with the port the logits are bit-identical to llama.cpp's.

/// Elements per vector step of ggml's AVX2 loops.
pub const VECTOR_LANES: usize = 8;

/// One lane of ggml's `ggml_v_expf` (`ggml-cpu/vec.h`, AVX2 + FMA): `2^n * p(b)` with
/// `n = round(x / ln 2)`, `b = x - n ln 2` in two parts, a degree-5 polynomial, and the
/// scaling split in two for `|n| > 126` (overflow to `inf` / underflow to 0 beyond 192).
/// Rounds exactly like the vector code (each `fmadd`/`fnmadd` is one [`f32::mul_add`]).
#[inline(always)]
pub fn expf_vector(x: f32) -> f32 {
    let c = f32::from_bits;
    let r = c(0x4b40_0000); // 0x1.8p23
    let z = x.mul_add(c(0x3fb8_aa3b), r); // 0x1.715476p+0 = 1/ln 2
    let n = z - r;
    // fnmadd(a, b, c) = c - a*b with one rounding.
    let b = (-n).mul_add(c(0x35bf_be8e), (-n).mul_add(c(0x3f31_7200), x));
    let e = z.to_bits() << 23;
    let k = c(e.wrapping_add(1f32.to_bits()));
    let u = b * b;
    let j = c(0x3c07_2010)
        .mul_add(b, c(0x3d2b_9f17))
        .mul_add(u, c(0x3e2a_af33).mul_add(b, c(0x3eff_fedb)))
        .mul_add(u, c(0x3f7f_fff6) * b);
    if n.abs() <= 126.0 {
        return j.mul_add(k, k);
    }
    let g: u32 = if n <= 0.0 { 0x8200_0000 } else { 0 };
    let s1 = c(g.wrapping_add(0x7f00_0000));
    let s2 = c(e.wrapping_sub(g));
    if n.abs() > 192.0 {
        s1 * s1
    } else {
        s2.mul_add(j, s2) * s1
    }
}

/// `ggml_v_silu`: `x / (1 + ggml_v_expf(0 - x))`, the vector steps of ggml's silu.
#[inline(always)]
pub fn silu_vector(x: f32) -> f32 {
    x / (1.0 + expf_vector(0.0 - x))
}

/// silu of element `col` of a row of `n` elements as ggml computes it: [`silu_vector`] in
/// the 8-element steps, [`silu`] (C `expf`) for the last `n % 8`.
#[inline]
pub fn silu_at(x: f32, col: usize, n: usize) -> f32 {
    if col < n & !(VECTOR_LANES - 1) {
        silu_vector(x)
    } else {
        silu(x)
    }
}

/// ggml's RMS-norm factor `1 / sqrt(mean(x²) + eps)` with the sum of squares in `f64`.
pub fn rms_norm_scale(x: &[f32], eps: f32) -> f32 {
    if x.is_empty() {
        return 0.0;
    }
    let sum: f64 = x.iter().map(|v| f64::from(v * v)).sum();
    let mean = (sum / x.len() as f64) as f32;
    1.0 / (mean + eps).sqrt()
}

/// `x / (1 + e^-x)` with the C library's `expf` (ggml's scalar `ggml_silu_f32`).
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// Applies silu to a row, as `ggml_vec_silu_f32` ([`silu_at`]).
pub fn silu_in_place(x: &mut [f32]) {
    let n = x.len();
    for (col, v) in x.iter_mut().enumerate() {
        *v = silu_at(*v, col, n);
    }
}

/// `out[i] = silu(a[i]) * b[i]` over one row (the shortest of the three slices), as
/// `ggml_vec_swiglu_f32` ([`silu_at`]).
pub fn swiglu(a: &[f32], b: &[f32], out: &mut [f32]) {
    let n = out.len().min(a.len()).min(b.len());
    for (col, ((o, &x), &g)) in out.iter_mut().zip(a).zip(b).enumerate() {
        *o = silu_at(x, col, n) * g;
    }
}

/// Softmax of `x * scale` in place, as ggml's `soft_max` (`ggml_vec_soft_max_f32`, AVX2):
/// subtract the maximum, `exp` ([`expf_vector`] in 8-element steps, each step's values
/// summed in `f32` in `hsum_float_8` order and added to an `f64`; C `expf` and `f64` adds
/// for the rest), multiply by `1 / sum`. Masked entries should be `-inf` on input.
pub fn softmax_in_place(x: &mut [f32], scale: f32) {
    let mut max = f32::NEG_INFINITY;
    for v in x.iter_mut() {
        *v *= scale;
        max = max.max(*v);
    }
    let mut sum = 0f64;
    let mut steps = x.chunks_exact_mut(VECTOR_LANES);
    for step in &mut steps {
        let mut lanes = [0f32; VECTOR_LANES];
        for (v, l) in step.iter_mut().zip(&mut lanes) {
            *v = expf_vector(*v - max);
            *l = *v;
        }
        sum += f64::from(crate::order::hsum8(lanes));
    }
    for v in steps.into_remainder() {
        *v = (*v - max).exp();
        sum += f64::from(*v);
    }
    let inv = (1.0 / sum) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

/// `exp(x - max)` in place over the visible (unmasked) prefix of a softmax row, returning
/// the sum as `ggml_vec_soft_max_f32` (AVX2) forms it when the full row continues with
/// masked (`-inf`, so 0 after `exp`) entries up to a multiple of 8 elements — as llama.cpp's
/// padded KV rows do: every 8-element step, the last partial one included, through
/// [`expf_vector`] and summed in `hsum_float_8` order into an `f64`.
pub fn exp_sum_masked_row(row: &mut [f32], max: f32) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if crate::backend::Backend::detect() == crate::backend::Backend::Avx2 {
        // SAFETY: the CPU has AVX2 and FMA (detected).
        return unsafe { exp_sum_masked_row_fma(row, max) };
    }
    exp_sum_masked_row_body(row, max)
}

/// [`exp_sum_masked_row`] compiled with FMA instructions (same results, no `fmaf` calls).
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_sum_masked_row_fma(row: &mut [f32], max: f32) -> f64 {
    exp_sum_masked_row_body(row, max)
}

#[inline(always)]
fn exp_sum_masked_row_body(row: &mut [f32], max: f32) -> f64 {
    let mut sum = 0f64;
    for step in row.chunks_mut(VECTOR_LANES) {
        let mut lanes = [0f32; VECTOR_LANES];
        for (v, l) in step.iter_mut().zip(&mut lanes) {
            *v = expf_vector(*v - max);
            *l = *v;
        }
        sum += f64::from(crate::order::hsum8(lanes));
    }
    sum
}

/// `out[i] = silu(g[i]) * u[i]` for a span of a row-major tensor whose rows have `n`
/// elements and whose first element is at column `col0` of its row: the vector or scalar
/// exp per column as `ggml_vec_swiglu_f32` ([`silu_at`]). Uses FMA instructions when the
/// CPU has them (same results as the portable code, which calls `fmaf`).
pub fn swiglu_span(g: &[f32], u: &[f32], out: &mut [f32], col0: usize, n: usize) {
    #[cfg(target_arch = "x86_64")]
    if crate::backend::Backend::detect() == crate::backend::Backend::Avx2 {
        // SAFETY: the CPU has AVX2 and FMA (detected).
        return unsafe { swiglu_span_fma(g, u, out, col0, n) };
    }
    swiglu_span_body(g, u, out, col0, n);
}

/// [`swiglu_span`] compiled with FMA instructions.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn swiglu_span_fma(g: &[f32], u: &[f32], out: &mut [f32], col0: usize, n: usize) {
    swiglu_span_body(g, u, out, col0, n);
}

#[inline(always)]
fn swiglu_span_body(g: &[f32], u: &[f32], out: &mut [f32], col0: usize, n: usize) {
    for (i, ((o, &g), &u)) in out.iter_mut().zip(g).zip(u).enumerate() {
        *o = silu_at(g, (col0 + i) % n, n) * u;
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
    fn expf_vector_is_close_to_exp_and_handles_the_ends() {
        for i in -2000..2000 {
            let x = i as f32 * 0.0437;
            let (v, want) = (expf_vector(x), f64::from(x).exp());
            assert!(
                ((f64::from(v) - want) / want).abs() < 4e-7,
                "{x}: {v} vs {want}"
            );
        }
        // |n| > 126: the split scaling; beyond 192: overflow / underflow.
        let big = expf_vector(88.0);
        assert!((f64::from(big) / 88f64.exp() - 1.0).abs() < 4e-7);
        assert_eq!(expf_vector(200.0), f32::INFINITY);
        assert_eq!(expf_vector(-200.0), 0.0);
        assert_eq!(expf_vector(0.0), 1.0);
    }

    #[test]
    fn silu_uses_the_vector_exp_except_in_the_tail() {
        // A row of 10: elements 0..8 through ggml_v_silu, 8 and 9 through expf.
        let x: Vec<f32> = (0..10).map(|i| i as f32 * 0.37 - 1.3).collect();
        let mut y = x.clone();
        silu_in_place(&mut y);
        for (i, (&a, &b)) in x.iter().zip(&y).enumerate() {
            let want = if i < 8 { silu_vector(a) } else { silu(a) };
            assert_eq!(b.to_bits(), want.to_bits(), "{i}");
        }
    }

    /// The FMA-compiled paths (x86-64 with AVX2, through
    /// [`Backend::simd_to_compare`](crate::backend::Backend::simd_to_compare): a CPU
    /// without AVX2 skips them loudly, or fails with `PROFINFER_REQUIRE_SIMD=1`) give the
    /// portable code's bits, and the portable code gives [`silu_at`]'s.
    #[test]
    fn swiglu_span_matches_silu_at_on_every_backend_path() {
        // Two rows of 12 (8 vector + 4 tail columns), the span starting mid-row.
        let g: Vec<f32> = (0..20).map(|i| i as f32 * 0.61 - 5.0).collect();
        let u: Vec<f32> = (0..20).map(|i| 1.0 + i as f32 * 0.1).collect();
        let mut portable = vec![0f32; 20];
        swiglu_span_body(&g, &u, &mut portable, 4, 12);
        for i in 0..20 {
            let want = silu_at(g[i], (4 + i) % 12, 12) * u[i];
            assert_eq!(portable[i].to_bits(), want.to_bits(), "{i}");
        }
        let masked: Vec<f32> = g.iter().map(|v| v * 0.5).collect();
        let mut portable_row = masked.clone();
        let portable_sum = exp_sum_masked_row_body(&mut portable_row, 4.0);
        let simd = crate::backend::Backend::simd_to_compare();
        #[cfg(target_arch = "x86_64")]
        if simd.contains(&crate::backend::Backend::Avx2) {
            let mut out = vec![0f32; 20];
            // SAFETY: the CPU has AVX2 and FMA (`simd_to_compare` lists Avx2 only then).
            unsafe { swiglu_span_fma(&g, &u, &mut out, 4, 12) };
            for i in 0..20 {
                assert_eq!(
                    out[i].to_bits(),
                    portable[i].to_bits(),
                    "swiglu, FMA path, {i}"
                );
            }
            let mut row = masked.clone();
            // SAFETY: as above.
            let sum = unsafe { exp_sum_masked_row_fma(&mut row, 4.0) };
            assert_eq!(sum.to_bits(), portable_sum.to_bits(), "exp sum, FMA path");
            assert_eq!(row, portable_row, "exp row, FMA path");
        }
        // The dispatching entry points agree with both, whichever path they take here.
        let mut out = vec![0f32; 20];
        swiglu_span(&g, &u, &mut out, 4, 12);
        assert_eq!(out, portable);
        let mut row = masked;
        assert_eq!(
            exp_sum_masked_row(&mut row, 4.0).to_bits(),
            portable_sum.to_bits()
        );
        assert_eq!(row, portable_row);
        let _ = simd;
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
