//! Portable dot products that reproduce the AVX2 code's rounding exactly: the same 8-lane
//! partial sums, fused multiply-adds and horizontal-sum order, emulated with scalar code.
//!
//! Rows are ggml bytes at any alignment; lengths are checked by the caller
//! ([`crate::dot`]), so these functions index within bounds by construction.

use crate::f16::read_f16;
use crate::quant::QK;

/// Lanes of one AVX2 `f32` vector.
pub(crate) const LANES: usize = 8;

/// ggml's `hsum_float_8` / tinyBLAS `hsum`: `(lo + hi)`, then `movehl` add, then `movehdup`.
#[inline]
pub(crate) fn hsum8(v: [f32; LANES]) -> f32 {
    let r = [v[4] + v[0], v[5] + v[1], v[6] + v[2], v[7] + v[3]];
    let s0 = r[0] + r[2];
    let s1 = r[1] + r[3];
    s0 + s1
}

/// ggml's `GGML_F32x8_REDUCE` of four accumulators (pairwise adds, then two `hadd`s).
#[inline]
pub(crate) fn reduce4(acc: [[f32; LANES]; 4]) -> f32 {
    let [mut a0, mut a1, a2, a3] = acc;
    for l in 0..LANES {
        a0[l] += a2[l];
        a1[l] += a3[l];
    }
    for (x, y) in a0.iter_mut().zip(a1) {
        *x += y;
    }
    let acc = [a0];
    let t0 = [
        acc[0][0] + acc[0][4],
        acc[0][1] + acc[0][5],
        acc[0][2] + acc[0][6],
        acc[0][3] + acc[0][7],
    ];
    (t0[0] + t0[1]) + (t0[2] + t0[3])
}

#[inline]
fn read_f32(b: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// `ggml_vec_dot_f32` (AVX2 build): four 8-lane FMA accumulators over 32-element steps,
/// [`reduce4`], then the leftover elements added in `f32`.
pub(crate) fn dot_f32(k: usize, w: &[u8], x: &[u8]) -> f32 {
    let np = k & !31;
    let mut acc = [[0f32; LANES]; 4];
    for i in (0..np).step_by(32) {
        for (j, a) in acc.iter_mut().enumerate() {
            for (l, lane) in a.iter_mut().enumerate() {
                let e = i + j * LANES + l;
                *lane = read_f32(w, 4 * e).mul_add(read_f32(x, 4 * e), *lane);
            }
        }
    }
    let mut sum = reduce4(acc);
    for e in np..k {
        sum += read_f32(w, 4 * e) * read_f32(x, 4 * e);
    }
    sum
}

/// `ggml_vec_dot_f16` (AVX2 + F16C build): like [`dot_f32`] on converted halves, but the
/// reduced sum and the leftovers are accumulated in `f64`.
pub(crate) fn dot_f16(k: usize, w: &[u8], x: &[u8]) -> f32 {
    let np = k & !31;
    let mut acc = [[0f32; LANES]; 4];
    for i in (0..np).step_by(32) {
        for (j, a) in acc.iter_mut().enumerate() {
            for (l, lane) in a.iter_mut().enumerate() {
                let e = i + j * LANES + l;
                *lane = read_f16(w, 2 * e).mul_add(read_f16(x, 2 * e), *lane);
            }
        }
    }
    let mut sum = f64::from(reduce4(acc));
    for e in np..k {
        sum += f64::from(read_f16(w, 2 * e) * read_f16(x, 2 * e));
    }
    sum as f32
}

/// Integer lane sums of one block pair, as `_mm256_madd_epi16(maddubs(|w|, sign(x, w)))`
/// produces them: lane `l` is the sum of the products of elements `4l..4l+4`.
#[inline]
pub(crate) fn block_lane_sums(wq: &[i8; QK], xq: &[u8]) -> [f32; LANES] {
    let mut lanes = [0f32; LANES];
    for (l, lane) in lanes.iter_mut().enumerate() {
        let mut s = 0i32;
        for t in 0..4 {
            let e = 4 * l + t;
            s += i32::from(wq[e]) * i32::from(xq[e] as i8);
        }
        *lane = s as f32;
    }
    lanes
}

/// `ggml_vec_dot_q8_0_q8_0` (AVX2): per block, `acc = fma(dw * dx, lane_sums, acc)`;
/// then [`hsum8`]. `nb` blocks of 34 bytes in each row.
pub(crate) fn dot_q8_0(nb: usize, w: &[u8], x: &[u8]) -> f32 {
    let mut acc = [0f32; LANES];
    for b in 0..nb {
        let wb = &w[34 * b..34 * b + 34];
        let xb = &x[34 * b..34 * b + 34];
        let mut wq = [0i8; QK];
        for (q, &byte) in wq.iter_mut().zip(&wb[2..]) {
            *q = byte as i8;
        }
        let d = read_f16(wb, 0) * read_f16(xb, 0);
        let lanes = block_lane_sums(&wq, &xb[2..]);
        for l in 0..LANES {
            acc[l] = d.mul_add(lanes[l], acc[l]);
        }
    }
    hsum8(acc)
}

/// `ggml_vec_dot_q4_0_q8_0` (AVX2): as [`dot_q8_0`] with weights `nibble - 8`, low nibbles
/// being elements 0..16 and high nibbles 16..32. `nb` blocks (18 bytes in `w`, 34 in `x`).
pub(crate) fn dot_q4_0(nb: usize, w: &[u8], x: &[u8]) -> f32 {
    let mut acc = [0f32; LANES];
    for b in 0..nb {
        let wb = &w[18 * b..18 * b + 18];
        let xb = &x[34 * b..34 * b + 34];
        let mut wq = [0i8; QK];
        for j in 0..QK / 2 {
            wq[j] = (wb[2 + j] & 0x0f) as i8 - 8;
            wq[j + QK / 2] = (wb[2 + j] >> 4) as i8 - 8;
        }
        let d = read_f16(wb, 0) * read_f16(xb, 0);
        let lanes = block_lane_sums(&wq, &xb[2..]);
        for l in 0..LANES {
            acc[l] = d.mul_add(lanes[l], acc[l]);
        }
    }
    hsum8(acc)
}

/// tinyBLAS's `f32`/`f16` product for one output (what llama.cpp runs when there are at
/// least two activation rows): a single 8-lane FMA accumulator over 8-element steps, then
/// [`hsum8`] — per block of [`crate::matmul::K_BLOCK`] elements, the block sums added in
/// order, as the AVX2 tiles block K. `k` must be a multiple of 8.
pub(crate) fn dot_single_acc(k: usize, w: impl Fn(usize) -> f32, x: impl Fn(usize) -> f32) -> f32 {
    let mut sum = 0f32;
    for k0 in (0..k).step_by(crate::matmul::K_BLOCK) {
        let mut acc = [0f32; LANES];
        for i in (k0..k.min(k0 + crate::matmul::K_BLOCK)).step_by(LANES) {
            for (l, lane) in acc.iter_mut().enumerate() {
                *lane = w(i + l).mul_add(x(i + l), *lane);
            }
        }
        sum = if k0 == 0 {
            hsum8(acc)
        } else {
            sum + hsum8(acc)
        };
    }
    sum
}

/// [`dot_single_acc`] on `f32` rows stored as bytes.
pub(crate) fn dot_f32_single_acc(k: usize, w: &[u8], x: &[u8]) -> f32 {
    dot_single_acc(k, |e| read_f32(w, 4 * e), |e| read_f32(x, 4 * e))
}

/// [`dot_single_acc`] on `f16` rows stored as bytes.
pub(crate) fn dot_f16_single_acc(k: usize, w: &[u8], x: &[u8]) -> f32 {
    dot_single_acc(k, |e| read_f16(w, 2 * e), |e| read_f16(x, 2 * e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hsum_and_reduce_orders_add_everything() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        assert_eq!(hsum8(v), 36.0);
        assert_eq!(reduce4([v, v, v, v]), 144.0);
        // hsum8 pairs lane 0 with 4 first: (1e8 + -1e8) survives, (1 + 1) does not get lost.
        let w = [1e8, 1.0, 0.0, 0.0, -1e8, 1.0, 0.0, 0.0];
        assert_eq!(hsum8(w), 2.0);
    }

    #[test]
    fn q8_0_single_block_by_hand() {
        // d = 1 * 0.5; products: w = 1..=32, x = 2 everywhere -> sum = 2 * 528 = 1056.
        let mut w = vec![0u8; 34];
        let mut x = vec![0u8; 34];
        w[0..2].copy_from_slice(&half::f16::from_f32(1.0).to_le_bytes());
        x[0..2].copy_from_slice(&half::f16::from_f32(0.5).to_le_bytes());
        for i in 0..32 {
            w[2 + i] = (i as i8 + 1) as u8;
            x[2 + i] = 2;
        }
        assert_eq!(dot_q8_0(1, &w, &x), 528.0);
    }

    #[test]
    fn q4_0_single_block_by_hand() {
        // all nibbles 0x9 -> weight 1; x = 3 with d = 1 -> 32 * 3 * scale(2) = 192.
        let mut w = vec![0x99u8; 18];
        w[0..2].copy_from_slice(&half::f16::from_f32(2.0).to_le_bytes());
        let mut x = vec![3u8; 34];
        x[0..2].copy_from_slice(&half::f16::from_f32(1.0).to_le_bytes());
        assert_eq!(dot_q4_0(1, &w, &x), 192.0);
    }
}
