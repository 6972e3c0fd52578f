//! AVX2 products of packed `Q4_K` groups (8 rows, layout in [`super::q4_k`]) with `Q8_K`
//! activation rows, in tiles of up to [`TILE_COLS`] activation rows that share every
//! unpacked weight vector.
//!
//! Per sub-block pair, each of the 8 weight vectors gives its low nibbles (sub-block `2p`)
//! and high nibbles (`2p + 1`); `maddubs` against 4 broadcast activation bytes leaves row
//! `r`'s pair sums in lane `r`, added in 16 bits (8 vectors · 2 · 15 · 128 < 2^15: exact),
//! then widened by `madd` with the row's scale. The result rounds as the module doc of
//! [`super::q4_k`] says: per super-block (`gemv` order) or per sub-block pair (`gemm`
//! order, the `GEMM` tiles).

use std::arch::x86_64::*;

use super::q4_k::{GROUP_BLOCK_BYTES, MINS, QUANTS, SCALES};
use crate::k_quants::QK_K;
use crate::k_quants::q8_k;
use crate::k_quants::x86::bcast4;
use crate::matmul::args::MatMulArgs;

/// Activation rows per register tile.
pub(super) const TILE_COLS: usize = 4;

/// One group (`nb` group blocks at `w`) against `RN` activation rows (row `j` at
/// `x + j·x_stride`), outputs of row `j` at `y + j·y_stride + 0..8`; with `GEMM` the
/// accumulators take every sub-block pair's sums (llama.cpp's `gemm_q4_K_8x8_q8_K`),
/// else every super-block's (`gemv_q4_K_8x8_q8_K`).
///
/// # Safety
/// AVX2/FMA/F16C available; `w` readable for `nb` group blocks; the `RN` activation rows
/// hold `nb` `Q8_K` blocks each; the outputs are writable and the caller's.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile<const RN: usize, const GEMM: bool>(
    nb: usize,
    w: *const u8,
    x: *const u8,
    x_stride: usize,
    y: *mut f32,
    y_stride: usize,
) {
    let m4 = _mm256_set1_epi8(0x0f);
    // Lane r: the 16-bit pair (scale of row r, same) for the low (first 8 bytes) or high
    // (last 8 bytes) sub-block of the pair.
    let z = -128i8; // pshufb: zero byte
    #[rustfmt::skip]
    let sc_lo_mask = _mm256_setr_epi8(
        0, z, 0, z, 1, z, 1, z, 2, z, 2, z, 3, z, 3, z,
        4, z, 4, z, 5, z, 5, z, 6, z, 6, z, 7, z, 7, z,
    );
    #[rustfmt::skip]
    let sc_hi_mask = _mm256_setr_epi8(
        8, z, 8, z, 9, z, 9, z, 10, z, 10, z, 11, z, 11, z,
        12, z, 12, z, 13, z, 13, z, 14, z, 14, z, 15, z, 15, z,
    );
    let mut acc = [_mm256_setzero_ps(); RN];
    let mut acc_m = [_mm256_setzero_ps(); RN];
    for b in 0..nb {
        // SAFETY: group block b lies in w and block b of every activation row is readable
        // (caller); every offset below stays inside those blocks.
        unsafe {
            let p = w.add(b * GROUP_BLOCK_BYTES);
            let xb: [*const u8; RN] =
                std::array::from_fn(|j| x.add(j * x_stride + b * q8_k::BLOCK_BYTES));
            let d = _mm256_cvtph_ps(_mm_loadu_si128(p.cast()));
            let dmin = _mm256_cvtph_ps(_mm_loadu_si128(p.add(16).cast()));
            let mut isum = [_mm256_setzero_si256(); RN];
            let mut imin = [_mm256_setzero_si256(); RN];
            for pair in 0..4 {
                let q = p.add(QUANTS + 256 * pair);
                let mut lo = [_mm256_setzero_si256(); RN];
                let mut hi = [_mm256_setzero_si256(); RN];
                for v in 0..8 {
                    let raw = _mm256_loadu_si256(q.add(32 * v).cast());
                    let wl = _mm256_and_si256(raw, m4);
                    let wh = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), m4);
                    for j in 0..RN {
                        let xq = xb[j].add(q8_k::QS + 64 * pair + 4 * v);
                        lo[j] = _mm256_add_epi16(lo[j], _mm256_maddubs_epi16(wl, bcast4(xq)));
                        hi[j] =
                            _mm256_add_epi16(hi[j], _mm256_maddubs_epi16(wh, bcast4(xq.add(32))));
                    }
                }
                let scales =
                    _mm256_broadcastsi128_si256(_mm_loadu_si128(p.add(SCALES + 16 * pair).cast()));
                let sc_lo = _mm256_shuffle_epi8(scales, sc_lo_mask);
                let sc_hi = _mm256_shuffle_epi8(scales, sc_hi_mask);
                let mins = _mm256_cvtepu8_epi16(_mm_loadu_si128(p.add(MINS + 16 * pair).cast()));
                for j in 0..RN {
                    let pair_sum = _mm256_add_epi32(
                        _mm256_madd_epi16(lo[j], sc_lo),
                        _mm256_madd_epi16(hi[j], sc_hi),
                    );
                    // The two sub-block sums of Σ q_x (each the 16-bit sum of two bsums).
                    let bs = xb[j].add(q8_k::BSUMS + 8 * pair).cast::<i16>();
                    let s0 = bs.read_unaligned().wrapping_add(bs.add(1).read_unaligned());
                    let s1 = bs
                        .add(2)
                        .read_unaligned()
                        .wrapping_add(bs.add(3).read_unaligned());
                    let sums = i32::from(s0 as u16) | (i32::from(s1 as u16) << 16);
                    let pair_min = _mm256_madd_epi16(mins, _mm256_set1_epi32(sums));
                    if GEMM {
                        let dx = _mm256_set1_ps(xb[j].cast::<f32>().read_unaligned());
                        acc[j] = _mm256_fmadd_ps(
                            _mm256_cvtepi32_ps(pair_sum),
                            _mm256_mul_ps(d, dx),
                            acc[j],
                        );
                        acc_m[j] = _mm256_fmadd_ps(
                            _mm256_cvtepi32_ps(pair_min),
                            _mm256_mul_ps(dmin, dx),
                            acc_m[j],
                        );
                    } else {
                        isum[j] = _mm256_add_epi32(isum[j], pair_sum);
                        imin[j] = _mm256_add_epi32(imin[j], pair_min);
                    }
                }
            }
            if !GEMM {
                for j in 0..RN {
                    let dx = _mm256_set1_ps(xb[j].cast::<f32>().read_unaligned());
                    acc[j] =
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_mul_ps(d, dx), acc[j]);
                    acc_m[j] = _mm256_fmadd_ps(
                        _mm256_cvtepi32_ps(imin[j]),
                        _mm256_mul_ps(dmin, dx),
                        acc_m[j],
                    );
                }
            }
        }
    }
    for j in 0..RN {
        // SAFETY: the 8 outputs of activation row j are writable (caller).
        unsafe { _mm256_storeu_ps(y.add(j * y_stride), _mm256_sub_ps(acc[j], acc_m[j])) };
    }
}

/// One packed `Q4_K` group (`group.w`: `nb = k / 256` group blocks) against `m` `Q8_K`
/// activation rows (row `i` at `x + i·x_stride`) into `y[i·y_stride + 0..8]`: rows
/// `0..gemm_rows` (a multiple of [`TILE_COLS`]) in `gemm` order, the rest in `gemv` order.
///
/// # Safety
/// As [`tile`] for every activation row `0..m`.
pub(super) unsafe fn group_rows(group: &MatMulArgs<'_>, gemm_rows: usize) {
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
    let (nb, w, x) = (k / QK_K, w.as_ptr(), x.as_ptr());
    type Tile = unsafe fn(usize, *const u8, *const u8, usize, *mut f32, usize);
    debug_assert!(gemm_rows.is_multiple_of(TILE_COLS) && gemm_rows <= m);
    let mut i = 0;
    while i < m {
        let gemm = i < gemm_rows;
        let rn = (m - i).min(TILE_COLS);
        let f: Tile = match (rn, gemm) {
            (_, true) => tile::<TILE_COLS, true>,
            (1, false) => tile::<1, false>,
            (2, false) => tile::<2, false>,
            (3, false) => tile::<3, false>,
            _ => tile::<TILE_COLS, false>,
        };
        // SAFETY: rows i..i + rn are in range (caller).
        unsafe {
            f(
                nb,
                w,
                x.wrapping_add(i * x_stride),
                x_stride,
                y.wrapping_add(i * y_stride),
                y_stride,
            )
        };
        i += rn;
    }
}
