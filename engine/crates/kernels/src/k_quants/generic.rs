//! Portable K-quant dot products with `Q8_K` activations, rounding exactly like ggml's AVX2
//! `ggml_vec_dot_q*_K_q8_K` (see [`crate::k_quants`]): the same integer lane sums
//! ([`lane_sums`]) and the same float operations in the same order.

use super::block::{KWeight, read};
use super::scales::QK_K;
use super::{q2_k, q3_k, q4_k, q5_k, q6_k, q8_k};
use crate::order::{LANES, hsum8};

/// The eight integer lanes of one super-block: lane `l` sums `term(e)` over the elements
/// `e` with `(e % 32) / 4 == l`, as `maddubs`/`madd` leave them (exact: no term or lane
/// sum of a valid block overflows `i32`).
#[inline]
pub(crate) fn lane_sums(term: impl Fn(usize) -> i32) -> [i32; LANES] {
    let mut lanes = [0i32; LANES];
    for e in 0..QK_K {
        let l = (e % 32) / 4;
        lanes[l] = lanes[l].wrapping_add(term(e));
    }
    lanes
}

/// `ggml_vec_dot_q2_K_q8_K` (AVX2) over `nb` blocks: per block, the mins against the
/// activation group sums into the 8 lanes (`fma(−d_x·dmin, Σ m·bsum, acc)`), then the
/// scaled quant products (`fma(d_x·d, lane sums, acc)`); [`hsum8`] at the end.
pub(crate) fn dot_q2_k(nb: usize, w: &[u8], x: &[u8]) -> f32 {
    let mut acc = [0f32; LANES];
    for (wb, xb) in w
        .chunks_exact(q2_k::BLOCK_BYTES)
        .zip(x.chunks_exact(q8_k::BLOCK_BYTES))
        .take(nb)
    {
        let b: q2_k::BlockQ2K = bytemuck::pod_read_unaligned(wb);
        let y = read::<q8_k::BlockQ8K>(xb);
        let d = y.d * b.d.to_f32();
        let dmin = -y.d * b.dmin.to_f32();
        for (l, a) in acc.iter_mut().enumerate() {
            let m = |g: usize| i32::from(b.scales[g] >> 4) * i32::from(y.bsums[g]);
            *a = dmin.mul_add((m(2 * l) + m(2 * l + 1)) as f32, *a);
        }
        let sumi = lane_sums(|e| {
            i32::from(b.scales[e / 16] & 0xf) * i32::from(b.quant(e)) * i32::from(y.qs[e])
        });
        for (a, s) in acc.iter_mut().zip(sumi) {
            *a = d.mul_add(s as f32, *a);
        }
    }
    hsum8(acc)
}

/// `ggml_vec_dot_q3_K_q8_K` (AVX2) over `nb` blocks: `fma(d_x·d, lane sums of
/// sc·q·q_x, acc)` per block, then [`hsum8`].
pub(crate) fn dot_q3_k(nb: usize, w: &[u8], x: &[u8]) -> f32 {
    let mut acc = [0f32; LANES];
    for (wb, xb) in w
        .chunks_exact(q3_k::BLOCK_BYTES)
        .zip(x.chunks_exact(q8_k::BLOCK_BYTES))
        .take(nb)
    {
        let b: q3_k::BlockQ3K = bytemuck::pod_read_unaligned(wb);
        let y = read::<q8_k::BlockQ8K>(xb);
        let d = y.d * b.d.to_f32();
        let sumi = lane_sums(|e| {
            i32::from(q3_k::group_scale(&b.scales, e / 16))
                * i32::from(b.signed_quant(e))
                * i32::from(y.qs[e])
        });
        for (a, s) in acc.iter_mut().zip(sumi) {
            *a = d.mul_add(s as f32, *a);
        }
    }
    hsum8(acc)
}

/// `ggml_vec_dot_q4_K_q8_K` (AVX2) over `nb` blocks: `fma(d_x·d, lane sums of sc·q·q_x,
/// acc)` into 8 lanes, and the mins into 4 lanes (`fma(−d_x·dmin, m·Σx pairs, acc_m)`);
/// the result is `hsum8(acc)` plus the 4 min lanes summed as `(m0 + m2) + (m1 + m3)`.
pub(crate) fn dot_q4_k(nb: usize, w: &[u8], x: &[u8]) -> f32 {
    let mut acc = [0f32; LANES];
    let mut acc_m = [0f32; 4];
    for (wb, xb) in w
        .chunks_exact(q4_k::BLOCK_BYTES)
        .zip(x.chunks_exact(q8_k::BLOCK_BYTES))
        .take(nb)
    {
        let b: q4_k::BlockQ4K = bytemuck::pod_read_unaligned(wb);
        let y = read::<q8_k::BlockQ8K>(xb);
        let d = y.d * b.d.to_f32();
        let dmin = -y.d * b.dmin.to_f32();
        let (sc, m) = q4_k::scales_and_mins(&b);
        // Σ x of each 32-value sub-block, as `hadd_epi16` of the 16-value sums.
        let q8s: [i32; 8] =
            std::array::from_fn(|u| i32::from(y.bsums[2 * u].wrapping_add(y.bsums[2 * u + 1])));
        for (t, a) in acc_m.iter_mut().enumerate() {
            let prod = m[2 * t] * q8s[2 * t] + m[2 * t + 1] * q8s[2 * t + 1];
            *a = dmin.mul_add(prod as f32, *a);
        }
        let sumi = lane_sums(|e| sc[e / 32] * i32::from(b.quant(e)) * i32::from(y.qs[e]));
        for (a, s) in acc.iter_mut().zip(sumi) {
            *a = d.mul_add(s as f32, *a);
        }
    }
    hsum8(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]))
}

/// `ggml_vec_dot_q5_K_q8_K` (AVX2) over `nb` blocks: `fma(d_x·d, lane sums of sc·q·q_x,
/// acc)` into 8 lanes; the mins as one scalar, `summs = fma(−d_x·dmin, Σ m·Σx, summs)`
/// (ggml's `summs += dmin * isum`, contracted to an FMA by the compiler); the result is
/// `hsum8(acc) + summs`.
pub(crate) fn dot_q5_k(nb: usize, w: &[u8], x: &[u8]) -> f32 {
    let mut acc = [0f32; LANES];
    let mut summs = 0f32;
    for (wb, xb) in w
        .chunks_exact(q5_k::BLOCK_BYTES)
        .zip(x.chunks_exact(q8_k::BLOCK_BYTES))
        .take(nb)
    {
        let b: q5_k::BlockQ5K = bytemuck::pod_read_unaligned(wb);
        let y = read::<q8_k::BlockQ8K>(xb);
        let d = y.d * b.d.to_f32();
        let dmin = -y.d * b.dmin.to_f32();
        let mut sc = [0i32; 8];
        let mut isum = 0i32;
        for (j, s) in sc.iter_mut().enumerate() {
            let (scale, m) = super::scales::scale_min_k4(j, &b.scales);
            *s = i32::from(scale);
            let q8s = y.bsums[2 * j].wrapping_add(y.bsums[2 * j + 1]);
            isum += i32::from(m) * i32::from(q8s);
        }
        summs = dmin.mul_add(isum as f32, summs);
        let sumi = lane_sums(|e| sc[e / 32] * i32::from(b.quant(e)) * i32::from(y.qs[e]));
        for (a, s) in acc.iter_mut().zip(sumi) {
            *a = d.mul_add(s as f32, *a);
        }
    }
    hsum8(acc) + summs
}

/// `ggml_vec_dot_q6_K_q8_K` (AVX2) over `nb` blocks: lane sums of `sc·q·q_x` with the
/// unsigned quants, minus `32·(sc·bsum)` of the lane's group pair, scaled by `fma(d_x·d,
/// …, acc)`; then [`hsum8`].
pub(crate) fn dot_q6_k(nb: usize, w: &[u8], x: &[u8]) -> f32 {
    let mut acc = [0f32; LANES];
    for (wb, xb) in w
        .chunks_exact(q6_k::BLOCK_BYTES)
        .zip(x.chunks_exact(q8_k::BLOCK_BYTES))
        .take(nb)
    {
        let b: q6_k::BlockQ6K = bytemuck::pod_read_unaligned(wb);
        let y = read::<q8_k::BlockQ8K>(xb);
        let d = y.d * b.d.to_f32();
        let sumi =
            lane_sums(|e| i32::from(b.scales[e / 16]) * i32::from(b.quant(e)) * i32::from(y.qs[e]));
        for (l, (a, s)) in acc.iter_mut().zip(sumi).enumerate() {
            let offset = |g: usize| i32::from(y.bsums[g]) * i32::from(b.scales[g]);
            let lane = s.wrapping_sub((offset(2 * l) + offset(2 * l + 1)) << 5);
            *a = d.mul_add(lane as f32, *a);
        }
    }
    hsum8(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_group_elements_by_four_within_32() {
        let lanes = lane_sums(|e| if e == 5 || e == 37 || e == 255 { 1 } else { 0 });
        assert_eq!(lanes, [0, 2, 0, 0, 0, 0, 0, 1]);
    }
}
