//! Portable dot products that reproduce the AVX2 code's rounding exactly: the same 8-lane
//! partial sums, fused multiply-adds and horizontal-sum order, emulated with scalar code.
//!
//! Rows are ggml bytes at any alignment; lengths are checked by the caller
//! ([`crate::dot`]), so these functions index within bounds by construction.

use crate::f16::read_f16;
use crate::legacy::bf16;
use crate::legacy::block32::Block32;
use crate::legacy::block32::QK;
use crate::order::{K_BLOCK, LANES, hsum8, reduce4};

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
/// [`hsum8`] — per block of [`K_BLOCK`] elements (all of K: one block), the block sums
/// added in order. `k` must be a multiple of 8.
pub(crate) fn dot_single_acc(k: usize, w: impl Fn(usize) -> f32, x: impl Fn(usize) -> f32) -> f32 {
    let mut sum = 0f32;
    for k0 in (0..k).step_by(K_BLOCK) {
        let mut acc = [0f32; LANES];
        for i in (k0..k.min(k0 + K_BLOCK)).step_by(LANES) {
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

/// The dot product of `nb` blocks of `B` with activation blocks, rounded exactly like
/// the AVX2 code.
pub(crate) fn dot_block32<B: Block32>(nb: usize, w: &[u8], x: &[u8]) -> f32 {
    let mut acc = [0f32; LANES];
    let mut summs = 0f32;
    for b in 0..nb {
        let wb = &w[B::BYTES * b..B::BYTES * (b + 1)];
        let xb = &x[B::X_BYTES * b..B::X_BYTES * (b + 1)];
        if B::HAS_MIN {
            summs = read_f16(wb, 2).mul_add(read_f16(xb, 2), summs);
        }
        let d = read_f16(wb, 0) * read_f16(xb, 0);
        let lanes = block_lane_sums(&B::quants(wb), &xb[B::X_BYTES - QK..]);
        for (a, l) in acc.iter_mut().zip(lanes) {
            *a = d.mul_add(l, *a);
        }
    }
    if B::HAS_MIN {
        hsum8(acc) + summs
    } else {
        hsum8(acc)
    }
}

/// `ggml_vec_dot_bf16` rounded like the AVX2 build (see [`crate::legacy::bf16`]).
pub(crate) fn dot_bf16(k: usize, w: &[u8], x: &[u8]) -> f32 {
    let np = k & !31;
    let mut c = [[0f32; LANES]; 4];
    for i in (0..np).step_by(32) {
        for (j, cj) in c.iter_mut().enumerate() {
            for (l, lane) in cj.iter_mut().enumerate() {
                let e = i + j * LANES + l;
                *lane = bf16::read(w, 2 * e).mul_add(bf16::read(x, 2 * e), *lane);
            }
        }
    }
    let mut v = [0f32; LANES];
    for (l, out) in v.iter_mut().enumerate() {
        *out = (c[0][l] + c[2][l]) + (c[1][l] + c[3][l]);
    }
    // ggml adds the vector sum to `ggml_float sumf = 0` (so -0.0 becomes +0.0).
    let mut sum = 0f64;
    sum += f64::from(hsum8(v));
    for e in np..k {
        sum += f64::from(bf16::read(w, 2 * e) * bf16::read(x, 2 * e));
    }
    sum as f32
}

/// tinyBLAS's order for one output ([`dot_single_acc`]) on bfloat16
/// rows stored as bytes.
pub(crate) fn dot_bf16_single_acc(k: usize, w: &[u8], x: &[u8]) -> f32 {
    dot_single_acc(k, |e| bf16::read(w, 2 * e), |e| bf16::read(x, 2 * e))
}

#[cfg(test)]
mod tests {
    use super::*;

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
