//! NEON products of packed groups (layouts in [`super`] and [`super::q4_k`]).
//!
//! Both layouts round per output and block from exact integers (`isum`, and `imin` for
//! `Q4_K`), so the NEON code only computes those integers (`sdot` or `smull` + pairwise
//! adds) and then takes the portable code's float steps in the same order: the results
//! are bit-identical to the portable (and AVX2) path.

use std::arch::aarch64::*;

use super::layout::{PACK_ROWS, Q4_0_GROUP_BLOCK_BYTES, Q8_0_GROUP_BLOCK_BYTES, SCALES_BYTES};
use super::q4_k::{GROUP_BLOCK_BYTES, MINS, QUANTS, SCALES};
use crate::dot::aarch64::lanes4;
use crate::k_quants::{QK_K, q8_k};
use crate::legacy::block32::QK;
use crate::matmul::args::MatMulArgs;

/// The little-endian half at `p` as `f32`.
///
/// # Safety
/// `p` readable for 2 bytes.
#[inline]
unsafe fn f16_at(p: *const u8) -> f32 {
    // SAFETY: 2 readable bytes (caller); read_unaligned needs no alignment.
    half::f16::from_bits(unsafe { p.cast::<u16>().read_unaligned() }).to_f32()
}

/// The 4 activation bytes at `p` in every 32-bit lane.
///
/// # Safety
/// `p` readable for 4 bytes.
#[inline(always)]
unsafe fn broadcast4(p: *const u8) -> int8x16_t {
    // SAFETY: 4 readable bytes (caller); NEON is part of every AArch64 target.
    unsafe { vreinterpretq_s8_s32(vdupq_n_s32(p.cast::<i32>().read_unaligned())) }
}

/// `isum` and `imin` of super-block `gblk` of a packed `Q4_K` group for all 8 rows (as
/// `q4_k::block_sums`), against the `Q8_K` block `xb`.
///
/// # Safety
/// dotprod if `DOT`; `gblk` readable for one group block, `xb` for one `Q8_K` block.
#[inline(always)]
unsafe fn q4_k_block_sums<const DOT: bool>(gblk: *const u8, xb: *const u8) -> ([i32; 8], [i32; 8]) {
    // SAFETY: offsets inside the group block and the Q8_K block (caller); dotprod if DOT.
    unsafe {
        let mut isum = [vdupq_n_s32(0); 2];
        let m4 = vdupq_n_u8(0x0f);
        for p in 0..4 {
            let (mut lo, mut hi) = ([vdupq_n_s32(0); 2], [vdupq_n_s32(0); 2]);
            for v in 0..8 {
                let qv = gblk.add(QUANTS + 256 * p + 32 * v);
                let xlo = broadcast4(xb.add(q8_k::QS + 64 * p + 4 * v));
                let xhi = broadcast4(xb.add(q8_k::QS + 64 * p + 32 + 4 * v));
                for h in 0..2 {
                    let q = vld1q_u8(qv.add(16 * h));
                    let ql = vreinterpretq_s8_u8(vandq_u8(q, m4));
                    let qh = vreinterpretq_s8_u8(vshrq_n_u8::<4>(q));
                    lo[h] = vaddq_s32(lo[h], lanes4::<DOT>(ql, xlo));
                    hi[h] = vaddq_s32(hi[h], lanes4::<DOT>(qh, xhi));
                }
            }
            // The 8 scales of sub-block 2p + h (row r at byte r) widened to rows 0..4, 4..8.
            let sc = |h: usize| {
                let s = vmovl_u8(vld1_u8(gblk.add(SCALES + 16 * p + 8 * h)));
                [
                    vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(s))),
                    vreinterpretq_s32_u32(vmovl_high_u16(s)),
                ]
            };
            let (s0, s1) = (sc(0), sc(1));
            for half in 0..2 {
                isum[half] = vmlaq_s32(isum[half], lo[half], s0[half]);
                isum[half] = vmlaq_s32(isum[half], hi[half], s1[half]);
            }
        }
        let mut out = [0i32; 8];
        vst1q_s32(out.as_mut_ptr(), isum[0]);
        vst1q_s32(out.as_mut_ptr().add(4), isum[1]);
        let bsums = xb.add(q8_k::BSUMS).cast::<[i16; 16]>().read_unaligned();
        let sub = |j: usize| i32::from(bsums[2 * j].wrapping_add(bsums[2 * j + 1]));
        let mut imin = [0i32; 8];
        for (r, im) in imin.iter_mut().enumerate() {
            for p in 0..4 {
                let m = |h: usize| i32::from(*gblk.add(MINS + 16 * p + 2 * r + h));
                *im += m(0) * sub(2 * p) + m(1) * sub(2 * p + 1);
            }
        }
        (out, imin)
    }
}

/// The product of one packed `Q4_K` group (`group.w`: `nb = k / 256` group blocks) with
/// `m` `Q8_K` rows into `y[i·y_stride + r]`, as `q4_k::group_rows_generic`.
///
/// # Safety
/// NEON (and dotprod if `DOT`) available; `w` holds `nb` group blocks, `x` `m` rows of
/// `nb` `Q8_K` blocks at `x_stride`; outputs `(i, r)` for `r < 8` are the caller's.
#[target_feature(enable = "neon")]
pub(super) unsafe fn q4_k_group_rows<const DOT: bool>(group: &MatMulArgs<'_>) {
    let MatMulArgs {
        w,
        k,
        x,
        x_stride,
        m,
        y,
        y_stride,
        ..
    } = *group;
    let (nb, wg, x) = (k / QK_K, w.as_ptr(), x.as_ptr());
    for i in 0..m {
        let mut acc = [0f32; PACK_ROWS];
        let mut acc_m = [0f32; PACK_ROWS];
        for b in 0..nb {
            // SAFETY: group block b and Q8_K block b of row i are readable (caller).
            unsafe {
                let gblk = wg.add(b * GROUP_BLOCK_BYTES);
                let xb = x.add(i * x_stride + b * q8_k::BLOCK_BYTES);
                let dx = xb.cast::<f32>().read_unaligned();
                let (isum, imin) = q4_k_block_sums::<DOT>(gblk, xb);
                for r in 0..PACK_ROWS {
                    let d = f16_at(gblk.add(2 * r));
                    let dmin = f16_at(gblk.add(16 + 2 * r));
                    acc[r] = (isum[r] as f32).mul_add(d * dx, acc[r]);
                    acc_m[r] = (imin[r] as f32).mul_add(dmin * dx, acc_m[r]);
                }
            }
        }
        for r in 0..PACK_ROWS {
            // SAFETY: output (i, r) is the caller's.
            unsafe { *y.add(i * y_stride + r) = acc[r] - acc_m[r] };
        }
    }
}

/// Bytes of one Q4_0 (`Q4 = true`) or Q8_0 group block.
const fn legacy_group_block_bytes<const Q4: bool>() -> usize {
    if Q4 {
        Q4_0_GROUP_BLOCK_BYTES
    } else {
        Q8_0_GROUP_BLOCK_BYTES
    }
}

/// The product of one packed Q4_0 (`Q4 = true`) or Q8_0 group (`group.w`: `nb = k / 32`
/// group blocks of `gb` bytes) with `m` Q8_0 rows, as the portable `group_rows_generic`.
///
/// # Safety
/// NEON (and dotprod if `DOT`) available; `w` holds `nb` group blocks, `x` `m` rows of
/// `nb` Q8_0 blocks at `x_stride`; outputs `(i, r)` for `r < 8` are the caller's.
#[target_feature(enable = "neon")]
pub(super) unsafe fn legacy_group_rows<const Q4: bool, const DOT: bool>(group: &MatMulArgs<'_>) {
    let MatMulArgs {
        w,
        k,
        x,
        x_stride,
        m,
        y,
        y_stride,
        ..
    } = *group;
    let (nb, gb, wg, x) = (
        k / QK,
        legacy_group_block_bytes::<Q4>(),
        w.as_ptr(),
        x.as_ptr(),
    );
    let chunk = (gb - SCALES_BYTES) / 4;
    for i in 0..m {
        let mut acc = [0f32; PACK_ROWS];
        for b in 0..nb {
            // SAFETY: group block b and Q8_0 block b of row i are readable (caller).
            unsafe {
                let gblk = wg.add(b * gb);
                let xb = x.add(i * x_stride + b * 34);
                let dx = f16_at(xb);
                let x0 = vld1q_s8(xb.add(2).cast());
                let x1 = vld1q_s8(xb.add(18).cast());
                for (r, a) in acc.iter_mut().enumerate() {
                    let dw = f16_at(gblk.add(2 * r));
                    let q = gblk.add(SCALES_BYTES + (r % 4) * chunk + if r >= 4 { 16 } else { 0 });
                    let (lo, hi) = if Q4 {
                        let byte = vld1q_u8(q);
                        let bias = vdupq_n_s8(8);
                        (
                            vsubq_s8(vreinterpretq_s8_u8(vandq_u8(byte, vdupq_n_u8(0x0f))), bias),
                            vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(byte)), bias),
                        )
                    } else {
                        (vld1q_s8(q.cast()), vld1q_s8(q.add(32).cast()))
                    };
                    let isum = vaddvq_s32(vaddq_s32(lanes4::<DOT>(lo, x0), lanes4::<DOT>(hi, x1)));
                    *a = (isum as f32).mul_add(dw * dx, *a);
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            // SAFETY: output (i, r) is the caller's.
            unsafe { *y.add(i * y_stride + r) = *a };
        }
    }
}

/// `smmla`: `acc + A · Bᵀ` for the 2×8 signed byte matrices `a` and `b` (rows of 8
/// bytes), as `[a0·b0, a0·b1, a1·b0, a1·b1]`. (Inline assembly: the `vmmlaq_s32`
/// intrinsic is not stable yet.)
///
/// # Safety
/// The CPU supports the i8mm extension.
#[inline(always)]
unsafe fn smmla(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: `smmla` only reads and writes the named vector registers; the caller
    // guarantees the CPU has the extension the directive enables for the assembler.
    unsafe {
        std::arch::asm!(
            ".arch_extension i8mm",
            "smmla {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
    acc
}

/// Rows `c` and `c + 4` of a Q4_0 (`Q4`) or Q8_0 group block's chunk at `q` as four 2×8
/// matrices, one per 8 elements of the block.
///
/// # Safety
/// `q` readable for the chunk (32 or 64 bytes).
#[inline(always)]
unsafe fn pair_quants<const Q4: bool>(q: *const u8) -> [int8x16_t; 4] {
    // SAFETY: offsets inside the chunk (caller); NEON is part of every AArch64 target.
    unsafe {
        if Q4 {
            let bias = vdupq_n_s8(8);
            let rows = [vld1q_u8(q), vld1q_u8(q.add(16))];
            let lo =
                rows.map(|v| vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f))), bias));
            let hi = rows.map(|v| vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(v)), bias));
            [
                vcombine_s8(vget_low_s8(lo[0]), vget_low_s8(lo[1])),
                vcombine_s8(vget_high_s8(lo[0]), vget_high_s8(lo[1])),
                vcombine_s8(vget_low_s8(hi[0]), vget_low_s8(hi[1])),
                vcombine_s8(vget_high_s8(hi[0]), vget_high_s8(hi[1])),
            ]
        } else {
            std::array::from_fn(|s| {
                let off = (s / 2) * 32 + (s % 2) * 8;
                vcombine_s8(vld1_s8(q.add(off).cast()), vld1_s8(q.add(off + 16).cast()))
            })
        }
    }
}

/// [`legacy_group_rows`] with `smmla`: activation rows in pairs, each 2×2 block of
/// outputs (rows `c`, `c + 4` × activations `i`, `i + 1`) from four `smmla`s per block;
/// the same exact `isum`s and float steps, so the same results. An odd last row goes
/// through the `sdot` kernel.
///
/// # Safety
/// NEON, dotprod and i8mm available; otherwise as [`legacy_group_rows`].
#[target_feature(enable = "neon")]
pub(super) unsafe fn legacy_group_rows_i8mm<const Q4: bool>(group: &MatMulArgs<'_>) {
    let MatMulArgs {
        w,
        k,
        x: xs,
        x_stride,
        m,
        y,
        y_stride,
        ..
    } = *group;
    let (nb, gb, wg, x) = (
        k / QK,
        legacy_group_block_bytes::<Q4>(),
        w.as_ptr(),
        xs.as_ptr(),
    );
    let chunk = (gb - SCALES_BYTES) / 4;
    let mut i = 0;
    while i + 2 <= m {
        let mut acc = [[0f32; PACK_ROWS]; 2];
        for b in 0..nb {
            // SAFETY: group block b and Q8_0 block b of rows i, i + 1 are readable
            // (caller); i8mm (caller).
            unsafe {
                let gblk = wg.add(b * gb);
                let xb = [i, i + 1].map(|r| x.add(r * x_stride + b * 34));
                let dx = xb.map(|p| f16_at(p));
                let xs: [int8x16_t; 4] = std::array::from_fn(|s| {
                    vcombine_s8(
                        vld1_s8(xb[0].add(2 + 8 * s).cast()),
                        vld1_s8(xb[1].add(2 + 8 * s).cast()),
                    )
                });
                for c in 0..4 {
                    let ws = pair_quants::<Q4>(gblk.add(SCALES_BYTES + c * chunk));
                    let mut s = vdupq_n_s32(0);
                    for k in 0..4 {
                        s = smmla(s, ws[k], xs[k]);
                    }
                    let mut isum = [0i32; 4];
                    vst1q_s32(isum.as_mut_ptr(), s);
                    // isum = [c·i, c·(i+1), (c+4)·i, (c+4)·(i+1)].
                    for (t, &v) in isum.iter().enumerate() {
                        let (r, j) = (c + 4 * (t / 2), t % 2);
                        let dw = f16_at(gblk.add(2 * r));
                        acc[j][r] = (v as f32).mul_add(dw * dx[j], acc[j][r]);
                    }
                }
            }
        }
        for (j, row) in acc.iter().enumerate() {
            for (r, a) in row.iter().enumerate() {
                // SAFETY: output (i + j, r) is the caller's.
                unsafe { *y.add((i + j) * y_stride + r) = *a };
            }
        }
        i += 2;
    }
    if i < m {
        let last = MatMulArgs {
            x: &xs[i * x_stride..],
            m: 1,
            y: y.wrapping_add(i * y_stride),
            ..*group
        };
        // SAFETY: row i is readable, outputs (i, r) are the caller's; dotprod (caller).
        unsafe { legacy_group_rows::<Q4, true>(&last) };
    }
}

/// [`q4_k_group_rows`] with `smmla`: activation rows in pairs. Two consecutive 32-byte
/// vectors of a sub-block pair hold 8 consecutive quant bytes of every row (4 per 32-bit
/// lane each), so zipping their lanes gives the 2×8 matrices of rows `(0, 1)`, `(2, 3)`,
/// `(4, 5)`, `(6, 7)`; one `smmla` against 8 bytes of two activation rows leaves four
/// partial sums. The per-sub-block sums, `isum` and `imin` are the same exact integers and
/// the float steps the same, so the results are too. An odd last row goes through the
/// `sdot` kernel.
///
/// # Safety
/// NEON, dotprod and i8mm available; otherwise as [`q4_k_group_rows`].
#[target_feature(enable = "neon")]
pub(super) unsafe fn q4_k_group_rows_i8mm(group: &MatMulArgs<'_>) {
    let MatMulArgs {
        w,
        k,
        x: xs,
        x_stride,
        m,
        y,
        y_stride,
        ..
    } = *group;
    let (nb, wg, x) = (k / QK_K, w.as_ptr(), xs.as_ptr());
    let mut i = 0;
    while i + 2 <= m {
        let mut acc = [[0f32; PACK_ROWS]; 2];
        let mut acc_m = [[0f32; PACK_ROWS]; 2];
        for b in 0..nb {
            // SAFETY: group block b and Q8_K block b of rows i, i + 1 are readable
            // (caller); i8mm (caller).
            unsafe {
                let gblk = wg.add(b * GROUP_BLOCK_BYTES);
                let xb = [i, i + 1].map(|r| x.add(r * x_stride + b * q8_k::BLOCK_BYTES));
                // isum[q] for row pair q (rows 2q, 2q + 1): [2q·i, 2q·i1, 2q+1·i, 2q+1·i1].
                let mut isum = [vdupq_n_s32(0); 4];
                let m4 = vdupq_n_u8(0x0f);
                for p in 0..4 {
                    let mut sub = [[vdupq_n_s32(0); 4]; 2];
                    for v in (0..8).step_by(2) {
                        let xs = |off: usize| {
                            vcombine_s8(
                                vld1_s8(xb[0].add(q8_k::QS + off).cast()),
                                vld1_s8(xb[1].add(q8_k::QS + off).cast()),
                            )
                        };
                        let x_lo = xs(64 * p + 4 * v);
                        let x_hi = xs(64 * p + 32 + 4 * v);
                        let qv = gblk.add(QUANTS + 256 * p + 32 * v);
                        for half in 0..2 {
                            let a = vreinterpretq_u32_u8(vld1q_u8(qv.add(16 * half)));
                            let c = vreinterpretq_u32_u8(vld1q_u8(qv.add(32 + 16 * half)));
                            for (z, pair) in
                                [vzip1q_u32(a, c), vzip2q_u32(a, c)].into_iter().enumerate()
                            {
                                let q = vreinterpretq_u8_u32(pair);
                                let ql = vreinterpretq_s8_u8(vandq_u8(q, m4));
                                let qh = vreinterpretq_s8_u8(vshrq_n_u8::<4>(q));
                                let k = 2 * half + z;
                                sub[0][k] = smmla(sub[0][k], ql, x_lo);
                                sub[1][k] = smmla(sub[1][k], qh, x_hi);
                            }
                        }
                    }
                    for (h, sums) in sub.iter().enumerate() {
                        let sc = gblk.add(SCALES + 16 * p + 8 * h);
                        for (k, s) in sums.iter().enumerate() {
                            let (r0, r1) =
                                (i32::from(*sc.add(2 * k)), i32::from(*sc.add(2 * k + 1)));
                            let scale = vcombine_s32(vdup_n_s32(r0), vdup_n_s32(r1));
                            isum[k] = vmlaq_s32(isum[k], *s, scale);
                        }
                    }
                }
                let mut sums = [[0i32; 4]; 4];
                for (k, s) in isum.iter().enumerate() {
                    vst1q_s32(sums[k].as_mut_ptr(), *s);
                }
                for (j, &xj) in xb.iter().enumerate() {
                    let dx = xj.cast::<f32>().read_unaligned();
                    let bsums = xj.add(q8_k::BSUMS).cast::<[i16; 16]>().read_unaligned();
                    let subsum = |s: usize| i32::from(bsums[2 * s].wrapping_add(bsums[2 * s + 1]));
                    for r in 0..PACK_ROWS {
                        let mut imin = 0i32;
                        for p in 0..4 {
                            let mn = |h: usize| i32::from(*gblk.add(MINS + 16 * p + 2 * r + h));
                            imin += mn(0) * subsum(2 * p) + mn(1) * subsum(2 * p + 1);
                        }
                        let is = sums[r / 2][2 * (r % 2) + j];
                        let d = f16_at(gblk.add(2 * r));
                        let dmin = f16_at(gblk.add(16 + 2 * r));
                        acc[j][r] = (is as f32).mul_add(d * dx, acc[j][r]);
                        acc_m[j][r] = (imin as f32).mul_add(dmin * dx, acc_m[j][r]);
                    }
                }
            }
        }
        for j in 0..2 {
            for r in 0..PACK_ROWS {
                // SAFETY: output (i + j, r) is the caller's.
                unsafe { *y.add((i + j) * y_stride + r) = acc[j][r] - acc_m[j][r] };
            }
        }
        i += 2;
    }
    if i < m {
        let last = MatMulArgs {
            x: &xs[i * x_stride..],
            m: 1,
            y: y.wrapping_add(i * y_stride),
            ..*group
        };
        // SAFETY: row i is readable, outputs (i, r) are the caller's; dotprod (caller).
        unsafe { q4_k_group_rows::<true>(&last) };
    }
}
