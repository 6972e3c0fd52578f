//! ggml's scale-fitting searches for the K-quant reference quantizers (`nearest_int`,
//! `make_qx_quants`, `make_q3_quants`, `make_qkx2_quants` in `ggml-quants.c`), ported
//! operation for operation: ggml-base is compiled without FMA contraction and without
//! reassociation, so every product and sum here is rounded where C rounds it and the
//! quantized bytes come out identical to llama.cpp's.
//!
//! Only the variants the `_ref` quantizers call are ported (no importance weights).

/// ggml's `GROUP_MAX_EPS`: a group whose largest magnitude is below it quantizes to zero.
pub(crate) const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `nearest_int`: adds 1.5·2²³ so the float addition rounds to an integer (ties to
/// even), then reads the integer out of the mantissa. Exact for `|x| < 2²²`; outside that
/// range it returns what ggml's bit trick returns.
#[inline]
pub(crate) fn nearest_int(x: f32) -> i32 {
    let val = x + 12_582_912.0;
    (val.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// Magnitude and signed value of the first element of largest magnitude (ggml's
/// `if (ax > amax)` scan).
#[inline]
pub(super) fn signed_max(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    (amax, max)
}

/// `make_qx_quants(n, nmax, x, L, rmse_type = 1, qw = NULL)`: symmetric quants in
/// `-nmax..nmax` stored as `l + nmax` in `ls`, weighted by `x²`, trying 19 scales around
/// `-nmax / max`; returns the scale (negative when the largest magnitude is positive).
pub(crate) fn make_qx_quants(nmax: i32, x: &[f32], ls: &mut [i8]) -> f32 {
    let (amax, max) = signed_max(x);
    if amax < GROUP_MAX_EPS {
        ls.fill(0);
        return 0.0;
    }
    let quant = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    // Weighted sums Σ w·x·l and Σ w·l² with w = x², in ggml's evaluation order.
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0f32, 0f32);
        for &v in x {
            let l = quant(iscale, v) as f32;
            let w = v * v;
            sumlx += w * v * l;
            suml2 += w * l * l;
        }
        (sumlx, suml2)
    };
    let store = |iscale: f32, ls: &mut [i8]| {
        for (o, &v) in ls.iter_mut().zip(x) {
            *o = (quant(iscale, v) + nmax) as i8;
        }
    };
    let iscale = -(nmax as f32) / max;
    store(iscale, ls);
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in (-9..=9).filter(|&is| is != 0) {
        let iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            store(iscale, ls);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// `make_q3_quants(n, nmax, x, L, do_rmse = true)`: symmetric quants in `-nmax..nmax`
/// (stored as `l + nmax`) refined coordinate by coordinate for up to 5 rounds to maximise
/// `(Σ w·x·l)² / Σ w·l²` with `w = x²`; returns the least-squares scale.
pub(crate) fn make_q3_quants(nmax: i32, x: &[f32], ls: &mut [i8]) -> f32 {
    let (amax, max) = signed_max(x);
    if amax < GROUP_MAX_EPS {
        ls.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for (o, &v) in ls.iter_mut().zip(x) {
        let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *o = l as i8;
        let w = v * v;
        sumlx += w * v * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut changed = false;
        for (o, &v) in ls.iter_mut().zip(x) {
            let w = v * v;
            let cur = f32::from(*o);
            let mut slx = sumlx - w * v * cur;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * cur * cur;
                let new_l = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != i32::from(*o) {
                    slx += w * v * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *o = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    for o in ls.iter_mut() {
        *o += nmax as i8;
    }
    if suml2 > 0.0 { sumlx / suml2 } else { 0.0 }
}

/// Search parameters of [`make_qkx2_quants`]: candidate inverse scales
/// `(rmin + rdelta·is + nmax) / (max − min)` for `is` in `0..=nstep`, and whether the
/// error is absolute (`use_mad`) or squared.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AffineSearch {
    /// Largest quant.
    pub nmax: i32,
    /// Offset of the first candidate.
    pub rmin: f32,
    /// Step between candidates.
    pub rdelta: f32,
    /// Number of steps.
    pub nstep: i32,
    /// Absolute instead of squared error.
    pub use_mad: bool,
}

/// `make_qkx2_quants`: affine quants `x ≈ scale·l − the_min` with `l` in `0..=nmax`,
/// minimising the `weights`-weighted error over the candidate scales of `p` (each with its
/// least-squares scale and min); writes `ls` and returns `(scale, the_min)` with
/// `the_min >= 0`.
pub(crate) fn make_qkx2_quants(
    p: AffineSearch,
    x: &[f32],
    weights: &[f32],
    ls: &mut [u8],
) -> (f32, f32) {
    let nmax = p.nmax;
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for (&v, &w) in x.iter().zip(weights).skip(1) {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
        sum_w += w;
        sum_x += w * v;
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        ls.fill(0);
        return (0.0, -min);
    }
    let err = |diff: f32| if p.use_mad { diff.abs() } else { diff * diff };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0f32;
    for ((o, &v), &w) in ls.iter_mut().zip(x).zip(weights) {
        let l = nearest_int(iscale * (v - min)).clamp(0, nmax);
        *o = l as u8;
        best_error += w * err(scale * l as f32 + min - v);
    }
    if p.nstep < 1 {
        return (scale, -min);
    }
    let mut laux = [0u8; 32];
    let laux = &mut laux[..x.len()];
    for is in 0..=p.nstep {
        iscale = (p.rmin + p.rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0f32, 0f32, 0f32);
        for ((o, &v), &w) in laux.iter_mut().zip(x).zip(weights) {
            let l = nearest_int(iscale * (v - min)).clamp(0, nmax);
            *o = l as u8;
            let l = l as f32;
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * v;
        }
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0f32;
            for ((&l, &v), &w) in laux.iter().zip(x).zip(weights) {
                cur_error += w * err(this_scale * f32::from(l) + this_min - v);
            }
            if cur_error < best_error {
                ls.copy_from_slice(laux);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// The affine fit shared by `quantize_row_q4_K_ref` and `quantize_row_q5_K_ref`: each of
/// the 8 sub-blocks of 32 values is fitted with [`make_qkx2_quants`] (weights
/// `sqrt(mean x²) + |x|`), the sub-block scales and mins are quantized to 6 bits against
/// the largest of each, and every value is quantized again against the rounded scales.
pub(crate) struct AffineK4 {
    /// Super-block scale of the sub-block scales.
    pub d: half::f16,
    /// Super-block scale of the sub-block mins.
    pub dmin: half::f16,
    /// 6-bit scales and mins packed as [`super::scales::scale_min_k4`] reads them.
    pub scales: [u8; super::scales::K_SCALE_SIZE],
    /// Quants `0..=search.nmax` of the 256 values.
    pub l: [u8; super::scales::QK_K],
}

/// Fits one super-block of 256 values (see [`AffineK4`]).
pub(crate) fn fit_affine_k4(search: AffineSearch, x: &[f32]) -> AffineK4 {
    let mut l = [0u8; super::scales::QK_K];
    let mut scales = [0f32; 8];
    let mut mins = [0f32; 8];
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    for (j, xj) in x.chunks_exact(32).enumerate() {
        let mut sum_x2 = 0f32;
        for &v in xj {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        let mut weights = [0f32; 32];
        for (w, v) in weights.iter_mut().zip(xj) {
            *w = av_x + v.abs();
        }
        (scales[j], mins[j]) = make_qkx2_quants(search, xj, &weights, &mut l[32 * j..32 * j + 32]);
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    // C stores the int in a uint8_t before taking MIN(63, ...).
    let ls: [u8; 8] = std::array::from_fn(|j| (nearest_int(inv_scale * scales[j]) as u8).min(63));
    let lm: [u8; 8] = std::array::from_fn(|j| (nearest_int(inv_min * mins[j]) as u8).min(63));
    let packed = super::scales::pack_scale_min_k4(&ls, &lm);
    let d = half::f16::from_f32(max_scale / 63.0);
    let dmin = half::f16::from_f32(max_min / 63.0);
    let nmax = search.nmax;
    for (j, xj) in x.chunks_exact(32).enumerate() {
        let (sc, m) = super::scales::scale_min_k4(j, &packed);
        let dj = d.to_f32() * f32::from(sc);
        if dj == 0.0 {
            continue;
        }
        let dm = dmin.to_f32() * f32::from(m);
        for (q, &v) in l[32 * j..].iter_mut().zip(xj) {
            *q = nearest_int((v + dm) / dj).clamp(0, nmax) as u8;
        }
    }
    AffineK4 {
        d,
        dmin,
        scales: packed,
        l,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_ties_to_even() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(-0.5), 0);
        assert_eq!(nearest_int(-1.5), -2);
        assert_eq!(nearest_int(-2.49), -2);
        assert_eq!(nearest_int(127.0), 127);
        assert_eq!(nearest_int(-4_194_303.0), -4_194_303);
    }

    #[test]
    fn qx_quants_of_a_ramp() {
        // x = -8..8: the largest magnitude is -8, so iscale = -nmax / -8 > 0 and every
        // value is representable exactly with scale 1 for nmax = 8 (l in -8..=7 -> x = l).
        let x: Vec<f32> = (0..16).map(|i| i as f32 - 8.0).collect();
        let mut ls = [0i8; 16];
        let scale = make_qx_quants(8, &x, &mut ls);
        assert_eq!(scale, 1.0);
        let back: Vec<f32> = ls
            .iter()
            .map(|&l| (i32::from(l) - 8) as f32 * scale)
            .collect();
        assert_eq!(back, x);
    }

    #[test]
    fn q3_quants_fit_exact_levels() {
        // Values on the grid {-4..3}·0.5 are reproduced exactly.
        let x: Vec<f32> = (0..16).map(|i| ((i % 8) as f32 - 4.0) * 0.5).collect();
        let mut ls = [0i8; 16];
        let scale = make_q3_quants(4, &x, &mut ls);
        for (&l, &v) in ls.iter().zip(&x) {
            assert_eq!((i32::from(l) - 4) as f32 * scale, v);
        }
    }

    #[test]
    fn qkx2_quants_fit_an_affine_grid() {
        // x = 0.25·l − 1 for l in 0..=15: the search finds scale 0.25, min 1 exactly.
        let x: Vec<f32> = (0..32).map(|i| 0.25 * (i % 16) as f32 - 1.0).collect();
        let w: Vec<f32> = x.iter().map(|v| v.abs() + 0.5).collect();
        let mut ls = [0u8; 32];
        let p = AffineSearch {
            nmax: 15,
            rmin: -1.0,
            rdelta: 0.1,
            nstep: 20,
            use_mad: false,
        };
        let (scale, min) = make_qkx2_quants(p, &x, &w, &mut ls);
        for (&l, &v) in ls.iter().zip(&x) {
            assert!(
                (scale * f32::from(l) - min - v).abs() < 1e-5,
                "{scale} {min}"
            );
        }
    }

    #[test]
    fn zero_groups_quantize_to_zero() {
        let x = [0f32; 16];
        let mut ls = [5i8; 16];
        assert_eq!(make_qx_quants(32, &x, &mut ls), 0.0);
        assert_eq!(ls, [0; 16]);
        let mut ls = [5i8; 16];
        assert_eq!(make_q3_quants(4, &x, &mut ls), 0.0);
        assert_eq!(ls, [0; 16]);
        let mut lu = [5u8; 16];
        let p = AffineSearch {
            nmax: 3,
            rmin: -0.5,
            rdelta: 0.1,
            nstep: 15,
            use_mad: true,
        };
        assert_eq!(make_qkx2_quants(p, &x, &x, &mut lu), (0.0, -0.0));
        assert_eq!(lu, [0; 16]);
    }
}
