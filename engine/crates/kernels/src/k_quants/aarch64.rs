//! NEON K-quant dot products with `Q8_K` activations (`Q2_K` … `Q6_K`).
//!
//! The integer lane sums of a super-block (lane `l` = elements `4l..4l+4` of every
//! 32-element chunk, weighted by the group scales, [`super::generic::lane_sums`]) come
//! from `sdot` or `smull` + pairwise adds; they are exact, so any order gives the same
//! integers. The few float operations per super-block then run exactly as in
//! [`super::generic`], in scalar code, so the results are bit-identical to the portable
//! (and the AVX2) path.

use std::arch::aarch64::*;

use super::q8_k;
use super::scales::{K_SCALE_SIZE, scale_min_k4};
use crate::dot::aarch64::lanes4;
use crate::order::{LANES, hsum8};

/// Integer lanes of one super-block: `lo` = lanes 0..4, `hi` = lanes 4..8.
type Lanes = [int32x4_t; 2];

/// Reads the little-endian half at `p` as `f32`.
///
/// # Safety
/// `p` readable for 2 bytes.
#[inline]
unsafe fn f16_at(p: *const u8) -> f32 {
    // SAFETY: 2 readable bytes (caller); read_unaligned needs no alignment.
    half::f16::from_bits(unsafe { p.cast::<u16>().read_unaligned() }).to_f32()
}

/// The `Q8_K` block at `p`: its scale and its 16 group sums.
///
/// # Safety
/// `p` readable for one `Q8_K` block.
#[inline]
unsafe fn q8k_head(p: *const u8) -> (f32, [i16; 16]) {
    // SAFETY: the scale is bytes 0..4 and the sums bytes BSUMS..BSUMS + 32 (caller).
    unsafe {
        let d = p.cast::<f32>().read_unaligned();
        let bsums = p.add(q8_k::BSUMS).cast::<[i16; 16]>().read_unaligned();
        (d, bsums)
    }
}

/// Adds `scale ×` the lanes of one 32-element chunk (`q`: unsigned quants as bytes,
/// `x`: the chunk's activations) to `acc`, with one scale for all 32 elements.
///
/// # Safety
/// dotprod available if `DOT`; `x` readable for 32 bytes.
#[inline(always)]
unsafe fn add_chunk<const DOT: bool>(
    acc: Lanes,
    q: [uint8x16_t; 2],
    x: *const u8,
    sc: [i32; 2],
) -> Lanes {
    // SAFETY: 32 readable bytes at x (caller); dotprod if DOT (caller).
    unsafe {
        let x0 = vld1q_s8(x.cast());
        let x1 = vld1q_s8(x.add(16).cast());
        let l0 = lanes4::<DOT>(vreinterpretq_s8_u8(q[0]), x0);
        let l1 = lanes4::<DOT>(vreinterpretq_s8_u8(q[1]), x1);
        [
            vmlaq_n_s32(acc[0], l0, sc[0]),
            vmlaq_n_s32(acc[1], l1, sc[1]),
        ]
    }
}

/// The lanes as an array.
#[inline]
#[target_feature(enable = "neon")]
fn lanes_array(l: Lanes) -> [i32; LANES] {
    let mut out = [0i32; LANES];
    // SAFETY: out holds 8 i32.
    unsafe {
        vst1q_s32(out.as_mut_ptr(), l[0]);
        vst1q_s32(out.as_mut_ptr().add(4), l[1]);
    }
    out
}

/// The 6-bit scales and mins of a `Q4_K`/`Q5_K` block at `p` (scales at bytes 4..16).
///
/// # Safety
/// `p` readable for 16 bytes.
#[inline]
unsafe fn scales_mins(p: *const u8) -> ([i32; 8], [i32; 8]) {
    // SAFETY: bytes 4..16 (caller).
    let packed = unsafe { p.add(4).cast::<[u8; K_SCALE_SIZE]>().read_unaligned() };
    let (mut sc, mut m) = ([0i32; 8], [0i32; 8]);
    for j in 0..8 {
        let (s, mm) = scale_min_k4(j, &packed);
        sc[j] = i32::from(s);
        m[j] = i32::from(mm);
    }
    (sc, m)
}

/// Integer lanes of the nibble quants of a `Q4_K` (`qh = None`) or `Q5_K` block: chunk
/// `c = 2j + h` is nibble `h` of bytes `32j..32j+32` of `qs`, plus bit `c` of `qh[t]`
/// as the fifth bit.
///
/// # Safety
/// dotprod if `DOT`; `qs` readable for 128 bytes, `qh` for 32, `x` for one `Q8_K` block.
#[inline(always)]
unsafe fn k4_lanes<const DOT: bool>(
    qs: *const u8,
    qh: Option<*const u8>,
    x: *const u8,
    sc: &[i32; 8],
) -> [i32; LANES] {
    // SAFETY: all offsets are inside the stated extents (caller); NEON is part of every
    // AArch64 target.
    unsafe {
        let mut acc = [vdupq_n_s32(0); 2];
        let m4 = vdupq_n_u8(0x0f);
        let high = qh.map(|p| [vld1q_u8(p), vld1q_u8(p.add(16))]);
        for j in 0..4 {
            let raw = [vld1q_u8(qs.add(32 * j)), vld1q_u8(qs.add(32 * j + 16))];
            for h in 0..2 {
                let c = 2 * j + h;
                let mut q = if h == 0 {
                    [vandq_u8(raw[0], m4), vandq_u8(raw[1], m4)]
                } else {
                    [vshrq_n_u8::<4>(raw[0]), vshrq_n_u8::<4>(raw[1])]
                };
                if let Some(hb) = high {
                    let bit = vdupq_n_u8(1 << c);
                    for i in 0..2 {
                        let five = vandq_u8(vtstq_u8(hb[i], bit), vdupq_n_u8(0x10));
                        q[i] = vorrq_u8(q[i], five);
                    }
                }
                acc = add_chunk::<DOT>(acc, q, x.add(q8_k::QS + 32 * c), [sc[c], sc[c]]);
            }
        }
        lanes_array(acc)
    }
}

/// `ggml_vec_dot_q4_K_q8_K` (as [`super::generic::dot_q4_k`]) over `nb` blocks.
///
/// # Safety
/// NEON (and dotprod if `DOT`) available; `w` readable for `nb` `Q4_K` blocks and `x`
/// for `nb` `Q8_K` blocks.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot_q4_k<const DOT: bool>(nb: usize, w: *const u8, x: *const u8) -> f32 {
    let mut acc = [0f32; LANES];
    let mut acc_m = [0f32; 4];
    for b in 0..nb {
        // SAFETY: block b of both rows is readable (caller).
        unsafe {
            let (wb, xb) = (
                w.add(b * super::q4_k::BLOCK_BYTES),
                x.add(b * q8_k::BLOCK_BYTES),
            );
            let (yd, bsums) = q8k_head(xb);
            let d = yd * f16_at(wb);
            let dmin = -yd * f16_at(wb.add(2));
            let (sc, m) = scales_mins(wb);
            let q8s: [i32; 8] =
                std::array::from_fn(|u| i32::from(bsums[2 * u].wrapping_add(bsums[2 * u + 1])));
            for (t, a) in acc_m.iter_mut().enumerate() {
                let prod = m[2 * t] * q8s[2 * t] + m[2 * t + 1] * q8s[2 * t + 1];
                *a = dmin.mul_add(prod as f32, *a);
            }
            let sumi = k4_lanes::<DOT>(wb.add(16), None, xb, &sc);
            for (a, s) in acc.iter_mut().zip(sumi) {
                *a = d.mul_add(s as f32, *a);
            }
        }
    }
    hsum8(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]))
}

/// `ggml_vec_dot_q5_K_q8_K` (as [`super::generic::dot_q5_k`]) over `nb` blocks.
///
/// # Safety
/// NEON (and dotprod if `DOT`) available; `w` readable for `nb` `Q5_K` blocks and `x`
/// for `nb` `Q8_K` blocks.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot_q5_k<const DOT: bool>(nb: usize, w: *const u8, x: *const u8) -> f32 {
    let mut acc = [0f32; LANES];
    let mut summs = 0f32;
    for b in 0..nb {
        // SAFETY: block b of both rows is readable (caller).
        unsafe {
            let (wb, xb) = (
                w.add(b * super::q5_k::BLOCK_BYTES),
                x.add(b * q8_k::BLOCK_BYTES),
            );
            let (yd, bsums) = q8k_head(xb);
            let d = yd * f16_at(wb);
            let dmin = -yd * f16_at(wb.add(2));
            let (sc, m) = scales_mins(wb);
            let mut isum = 0i32;
            for j in 0..8 {
                let q8s = bsums[2 * j].wrapping_add(bsums[2 * j + 1]);
                isum += m[j] * i32::from(q8s);
            }
            summs = dmin.mul_add(isum as f32, summs);
            let sumi = k4_lanes::<DOT>(wb.add(48), Some(wb.add(16)), xb, &sc);
            for (a, s) in acc.iter_mut().zip(sumi) {
                *a = d.mul_add(s as f32, *a);
            }
        }
    }
    hsum8(acc) + summs
}

/// `ggml_vec_dot_q6_K_q8_K` (as [`super::generic::dot_q6_k`]) over `nb` blocks.
///
/// # Safety
/// NEON (and dotprod if `DOT`) available; `w` readable for `nb` `Q6_K` blocks and `x`
/// for `nb` `Q8_K` blocks.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot_q6_k<const DOT: bool>(nb: usize, w: *const u8, x: *const u8) -> f32 {
    let mut acc = [0f32; LANES];
    for b in 0..nb {
        // SAFETY: block b of both rows is readable (caller): ql at 0..128, qh at 128..192,
        // scales at 192..208, d at 208..210.
        unsafe {
            let (wb, xb) = (
                w.add(b * super::q6_k::BLOCK_BYTES),
                x.add(b * q8_k::BLOCK_BYTES),
            );
            let (yd, bsums) = q8k_head(xb);
            let d = yd * f16_at(wb.add(208));
            let scales = wb
                .add(192)
                .cast::<[i8; 16]>()
                .read_unaligned()
                .map(i32::from);
            let mut lanes = [vdupq_n_s32(0); 2];
            let (m4, m3) = (vdupq_n_u8(0x0f), vdupq_n_u8(3));
            for j in 0..2 {
                let qh = [
                    vld1q_u8(wb.add(128 + 32 * j)),
                    vld1q_u8(wb.add(144 + 32 * j)),
                ];
                for s in 0..4 {
                    let ql = wb.add(64 * j + 32 * (s % 2));
                    let ql = [vld1q_u8(ql), vld1q_u8(ql.add(16))];
                    let q = [0, 1].map(|i| {
                        let low = if s < 2 {
                            vandq_u8(ql[i], m4)
                        } else {
                            vshrq_n_u8::<4>(ql[i])
                        };
                        let high = vandq_u8(vshlq_u8(qh[i], vdupq_n_s8(-2 * s as i8)), m3);
                        vorrq_u8(low, vshlq_n_u8::<4>(high))
                    });
                    let c = 4 * j + s;
                    lanes = add_chunk::<DOT>(
                        lanes,
                        q,
                        xb.add(q8_k::QS + 32 * c),
                        [scales[2 * c], scales[2 * c + 1]],
                    );
                }
            }
            let sumi = lanes_array(lanes);
            for (l, (a, s)) in acc.iter_mut().zip(sumi).enumerate() {
                let offset = |g: usize| i32::from(bsums[g]) * scales[g];
                let lane = s.wrapping_sub((offset(2 * l) + offset(2 * l + 1)) << 5);
                *a = d.mul_add(lane as f32, *a);
            }
        }
    }
    hsum8(acc)
}

/// Integer lanes of the 2-bit quants of a `Q2_K` (`HMASK = false`, quants `0..4`) or
/// `Q3_K` block (`HMASK = true`: minus 4 where the `hmask` bit is clear): chunk
/// `c = 4j + s` is bits `2s..2s+2` of bytes `32j..32j+32` of `qs`, one scale per 16
/// elements.
///
/// # Safety
/// dotprod if `DOT`; `qs` readable for 64 bytes, `hmask` for 32 if `HMASK`, `x` for one
/// `Q8_K` block.
#[inline(always)]
unsafe fn two_bit_lanes<const DOT: bool, const HMASK: bool>(
    qs: *const u8,
    hmask: *const u8,
    x: *const u8,
    sc: &[i32; 16],
) -> [i32; LANES] {
    // SAFETY: all offsets are inside the stated extents (caller); NEON is part of every
    // AArch64 target.
    unsafe {
        let mut acc = [vdupq_n_s32(0); 2];
        let m3 = vdupq_n_u8(3);
        let hm = if HMASK {
            [vld1q_u8(hmask), vld1q_u8(hmask.add(16))]
        } else {
            [vdupq_n_u8(0); 2]
        };
        for j in 0..2 {
            let raw = [vld1q_u8(qs.add(32 * j)), vld1q_u8(qs.add(32 * j + 16))];
            for s in 0..4 {
                let c = 4 * j + s;
                let q = [0, 1].map(|i| {
                    let low = vandq_u8(vshlq_u8(raw[i], vdupq_n_s8(-2 * s as i8)), m3);
                    if HMASK {
                        // 4 where the high bit is clear: q - 4 as a wrapping byte.
                        let clear = vceqq_u8(vandq_u8(hm[i], vdupq_n_u8(1 << c)), vdupq_n_u8(0));
                        vsubq_u8(low, vandq_u8(clear, vdupq_n_u8(4)))
                    } else {
                        low
                    }
                });
                acc =
                    add_chunk::<DOT>(acc, q, x.add(q8_k::QS + 32 * c), [sc[2 * c], sc[2 * c + 1]]);
            }
        }
        lanes_array(acc)
    }
}

/// `ggml_vec_dot_q2_K_q8_K` (as [`super::generic::dot_q2_k`]) over `nb` blocks.
///
/// # Safety
/// NEON (and dotprod if `DOT`) available; `w` readable for `nb` `Q2_K` blocks and `x`
/// for `nb` `Q8_K` blocks.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot_q2_k<const DOT: bool>(nb: usize, w: *const u8, x: *const u8) -> f32 {
    let mut acc = [0f32; LANES];
    for b in 0..nb {
        // SAFETY: block b of both rows is readable (caller): scales at 0..16, qs at
        // 16..80, d at 80, dmin at 82.
        unsafe {
            let (wb, xb) = (
                w.add(b * super::q2_k::BLOCK_BYTES),
                x.add(b * q8_k::BLOCK_BYTES),
            );
            let (yd, bsums) = q8k_head(xb);
            let d = yd * f16_at(wb.add(80));
            let dmin = -yd * f16_at(wb.add(82));
            let scales = wb.cast::<[u8; 16]>().read_unaligned();
            for (l, a) in acc.iter_mut().enumerate() {
                let m = |g: usize| i32::from(scales[g] >> 4) * i32::from(bsums[g]);
                *a = dmin.mul_add((m(2 * l) + m(2 * l + 1)) as f32, *a);
            }
            let sc = scales.map(|s| i32::from(s & 0xf));
            let sumi = two_bit_lanes::<DOT, false>(wb.add(16), wb, xb, &sc);
            for (a, s) in acc.iter_mut().zip(sumi) {
                *a = d.mul_add(s as f32, *a);
            }
        }
    }
    hsum8(acc)
}

/// `ggml_vec_dot_q3_K_q8_K` (as [`super::generic::dot_q3_k`]) over `nb` blocks.
///
/// # Safety
/// NEON (and dotprod if `DOT`) available; `w` readable for `nb` `Q3_K` blocks and `x`
/// for `nb` `Q8_K` blocks.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot_q3_k<const DOT: bool>(nb: usize, w: *const u8, x: *const u8) -> f32 {
    let mut acc = [0f32; LANES];
    for b in 0..nb {
        // SAFETY: block b of both rows is readable (caller): hmask at 0..32, qs at 32..96,
        // scales at 96..108, d at 108.
        unsafe {
            let (wb, xb) = (
                w.add(b * super::q3_k::BLOCK_BYTES),
                x.add(b * q8_k::BLOCK_BYTES),
            );
            let (yd, _) = q8k_head(xb);
            let d = yd * f16_at(wb.add(108));
            let packed = wb.add(96).cast::<[u8; K_SCALE_SIZE]>().read_unaligned();
            let sc: [i32; 16] =
                std::array::from_fn(|g| i32::from(super::q3_k::group_scale(&packed, g)));
            let sumi = two_bit_lanes::<DOT, true>(wb.add(32), wb, xb, &sc);
            for (a, s) in acc.iter_mut().zip(sumi) {
                *a = d.mul_add(s as f32, *a);
            }
        }
    }
    hsum8(acc)
}
