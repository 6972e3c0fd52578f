//! `Q4_K` weights repacked in groups of [`PACK_ROWS`] rows (the idea of llama.cpp's
//! `block_q4_Kx8` and its `gemv/gemm_q4_K_8x8_q8_K`; the byte layout is this crate's own),
//! multiplied with `Q8_K` activation rows.
//!
//! # Layout
//! A matrix of `n` rows (a multiple of 8) and `k` elements per row (a multiple of 256)
//! becomes `n / 8` groups of `k / 256` *group blocks* of [`GROUP_BLOCK_BYTES`] bytes;
//! group block `b` of group `g` starts at byte `(g · k / 256 + b) · GROUP_BLOCK_BYTES` and
//! holds super-block `b` of rows `8g + r`, `r < 8`:
//!
//! | bytes       | content                                                            |
//! |-------------|--------------------------------------------------------------------|
//! | `0..16`     | `d` of row `r` (f16) at half `r`                                   |
//! | `16..32`    | `dmin` of row `r` (f16) at half `r`                                |
//! | `32..96`    | per sub-block pair `p` (16 bytes at `32 + 16p`): the 6-bit scales of sub-block `2p` of rows 0..8, then of sub-block `2p + 1` |
//! | `96..160`   | per pair `p` (16 bytes at `96 + 16p`): the mins of sub-blocks `2p`, `2p + 1` of row `r` at bytes `2r`, `2r + 1` |
//! | `160..1184` | per pair `p` (256 bytes at `160 + 256p`): 8 vectors of 32 bytes; bytes `4r..4r + 4` of vector `v` are bytes `32p + 4v .. 32p + 4v + 4` of row `r`'s `qs` |
//!
//! (ggml's `qs[32p + t]` holds element `64p + t` in its low nibble and `64p + 32 + t` in its
//! high one, so a vector's low nibbles are sub-block `2p`, its high nibbles `2p + 1`.)
//! With 4 bytes of each row in its own 32-bit lane, one `maddubs` against 4 broadcast
//! activation bytes leaves row `r`'s partial sums in lane `r`: the eight outputs of a
//! group need no horizontal sums.
//!
//! # Rounding
//! Per output and super-block two exact integers are formed, `isum = Σ sc·q·q_x` and
//! `imin = Σ m·(Σ q_x of the sub-block)`, and accumulated super-block after super-block as
//! `acc = fma(f32(isum), d·d_x, acc)` and `acc_m = fma(f32(imin), dmin·d_x, acc_m)`
//! (`d·d_x` and `dmin·d_x` rounded to f32); the output is `acc − acc_m`. That is what
//! llama.cpp's AVX2 `ggml_gemv_q4_K_8x8_q8_K` computes. Its `ggml_gemm_q4_K_8x8_q8_K`
//! forms and accumulates the same sums per sub-block pair (64 elements, 4 steps per
//! super-block) instead, which rounds differently; llama.cpp's repacked `MUL_MAT` takes
//! the gemm for the first `m − m % 4` activation rows and the gemv for the rest (and
//! `MUL_MAT_ID` the gemv for every row), so [`super::matmul_packed`] does the same
//! (issue 25: a batch of 8 was off by 1.9e-2 of the largest logit when every row went
//! the gemv way). The portable and AVX2 implementations here perform the same operations
//! and agree bit for bit.

use super::layout::PACK_ROWS;
use crate::k_quants::scales::{QK_K, pack_scale_min_k4, scale_min_k4};
use crate::k_quants::{q4_k, q8_k};
use crate::matmul::args::MatMulArgs;

/// Bytes of one group block (8 rows × 256 elements).
pub const GROUP_BLOCK_BYTES: usize = 32 + 64 + 64 + PACK_ROWS * QK_K / 2;

/// Offsets inside a group block.
pub(super) const SCALES: usize = 32;
pub(super) const MINS: usize = 96;
pub(super) const QUANTS: usize = 160;

/// Packs `nb` super-blocks of rows `8g..8g + 8` (row `r` at `src + r·stride`) into the
/// `nb` group blocks of `dst`.
pub(super) fn pack_group(nb: usize, src: &[u8], stride: usize, dst: &mut [u8]) {
    for (b, out) in dst.chunks_exact_mut(GROUP_BLOCK_BYTES).take(nb).enumerate() {
        for r in 0..PACK_ROWS {
            let blk = &src[r * stride + b * q4_k::BLOCK_BYTES..][..q4_k::BLOCK_BYTES];
            out[2 * r..2 * r + 2].copy_from_slice(&blk[0..2]);
            out[16 + 2 * r..16 + 2 * r + 2].copy_from_slice(&blk[2..4]);
            let scales: &[u8; 12] = blk[4..16].try_into().unwrap_or(&[0; 12]);
            for j in 0..8 {
                let (sc, m) = scale_min_k4(j, scales);
                let p = j / 2;
                out[SCALES + 16 * p + 8 * (j % 2) + r] = sc;
                out[MINS + 16 * p + 2 * r + j % 2] = m;
            }
            let qs = &blk[16..];
            for p in 0..4 {
                for v in 0..8 {
                    let at = QUANTS + 256 * p + 32 * v + 4 * r;
                    out[at..at + 4].copy_from_slice(&qs[32 * p + 4 * v..][..4]);
                }
            }
        }
    }
}

/// Restores row `r` (0..8) of the `nb` group blocks of `group` into plain blocks in `dst`.
pub(super) fn unpack_group_row(nb: usize, group: &[u8], r: usize, dst: &mut [u8]) {
    for (b, blk) in dst.chunks_exact_mut(q4_k::BLOCK_BYTES).take(nb).enumerate() {
        let gblk = &group[b * GROUP_BLOCK_BYTES..][..GROUP_BLOCK_BYTES];
        blk[0..2].copy_from_slice(&gblk[2 * r..2 * r + 2]);
        blk[2..4].copy_from_slice(&gblk[16 + 2 * r..16 + 2 * r + 2]);
        let ls: [u8; 8] = std::array::from_fn(|j| gblk[SCALES + 16 * (j / 2) + 8 * (j % 2) + r]);
        let lm: [u8; 8] = std::array::from_fn(|j| gblk[MINS + 16 * (j / 2) + 2 * r + j % 2]);
        blk[4..16].copy_from_slice(&pack_scale_min_k4(&ls, &lm));
        for p in 0..4 {
            for v in 0..8 {
                let at = QUANTS + 256 * p + 32 * v + 4 * r;
                blk[16 + 32 * p + 4 * v..][..4].copy_from_slice(&gblk[at..at + 4]);
            }
        }
    }
}

/// The two exact integer sums of row `r` of one group block against one `Q8_K` block,
/// per sub-block pair `p`: `(Σ sc·q·q_x, Σ m·Σ q_x per sub-block)`.
fn pair_sums(gblk: &[u8], xb: &[u8], r: usize) -> [(i32, i32); 4] {
    let xq = |e: usize| i32::from(xb[q8_k::QS + e] as i8);
    let bsum = |g: usize| {
        let at = q8_k::BSUMS + 2 * g;
        i16::from_le_bytes([xb[at], xb[at + 1]])
    };
    let mut out = [(0i32, 0i32); 4];
    for (p, out) in out.iter_mut().enumerate() {
        let (mut lo, mut hi) = (0i32, 0i32);
        for v in 0..8 {
            for t in 0..4 {
                let q = gblk[QUANTS + 256 * p + 32 * v + 4 * r + t];
                let e = 64 * p + 4 * v + t;
                lo += i32::from(q & 0xf) * xq(e);
                hi += i32::from(q >> 4) * xq(e + 32);
            }
        }
        let sc = |h: usize| i32::from(gblk[SCALES + 16 * p + 8 * h + r]);
        let m = |h: usize| i32::from(gblk[MINS + 16 * p + 2 * r + h]);
        // ggml adds the two 16-value sums in 16 bits (`hadd_epi16`); they cannot overflow.
        let sub = |j: usize| i32::from(bsum(2 * j).wrapping_add(bsum(2 * j + 1)));
        *out = (
            lo * sc(0) + hi * sc(1),
            m(0) * sub(2 * p) + m(1) * sub(2 * p + 1),
        );
    }
    out
}

/// Portable product of one group (`group.w`: `nb = k / 256` group blocks) with `m`
/// `Q8_K` rows (row `i` at `x[i·x_stride..]`), in the AVX2 order: rows `0..gemm_rows`
/// accumulate per sub-block pair (`gemm`), the rest per super-block (`gemv`).
///
/// # Safety
/// `y + i·y_stride + r` is writable for `i < m`, `r < 8`; `w` and `x` are checked by the
/// caller.
pub(super) unsafe fn group_rows_generic(group: &MatMulArgs<'_>, gemm_rows: usize) {
    let MatMulArgs {
        w: wg,
        k,
        x,
        x_stride,
        m,
        y,
        y_stride,
        ..
    } = *group;
    let nb = k / QK_K;
    for i in 0..m {
        let gemm = i < gemm_rows;
        let xr = &x[i * x_stride..];
        let mut acc = [0f32; PACK_ROWS];
        let mut acc_m = [0f32; PACK_ROWS];
        for b in 0..nb {
            let gblk = &wg[b * GROUP_BLOCK_BYTES..][..GROUP_BLOCK_BYTES];
            let xb = &xr[b * q8_k::BLOCK_BYTES..][..q8_k::BLOCK_BYTES];
            let dx = f32::from_le_bytes([xb[0], xb[1], xb[2], xb[3]]);
            for r in 0..PACK_ROWS {
                let d = crate::f16::read_f16(gblk, 2 * r);
                let dmin = crate::f16::read_f16(gblk, 16 + 2 * r);
                let pairs = pair_sums(gblk, xb, r);
                if gemm {
                    for (isum, imin) in pairs {
                        acc[r] = (isum as f32).mul_add(d * dx, acc[r]);
                        acc_m[r] = (imin as f32).mul_add(dmin * dx, acc_m[r]);
                    }
                } else {
                    let (isum, imin) = pairs
                        .iter()
                        .fold((0, 0), |(s, m), &(ps, pm)| (s + ps, m + pm));
                    acc[r] = (isum as f32).mul_add(d * dx, acc[r]);
                    acc_m[r] = (imin as f32).mul_add(dmin * dx, acc_m[r]);
                }
            }
        }
        for r in 0..PACK_ROWS {
            // SAFETY: output (i, r) is the caller's.
            unsafe { *y.add(i * y_stride + r) = acc[r] - acc_m[r] };
        }
    }
}
