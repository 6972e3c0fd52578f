//! [`super::tiles`]' AVX2 product for `Q6_K` weights: 8 weight rows unpacked together
//! into an interleaved form, so that one `maddubs` against 4 broadcast activation bytes
//! leaves each row's partial sums in its own 32-bit lane and the 8 outputs of an
//! activation row need no horizontal sums.
//!
//! The integer sums are exact, so the result is the same as the portable
//! `tiles::dot_unpacked` (and llama.cpp's tiled kernel): per output and super-block
//! `res = d·f32(s1 − s2)` with `s1 = Σ sc·q·q_x` (unsigned quants) and `s2 = Σ 32·sc·bsum`,
//! then `y = fma(res, d_x, y)` super-block after super-block, here computed for 8 rows
//! in the 8 lanes of a vector.

use std::arch::x86_64::*;
use std::ops::Range;

use super::scales::QK_K;
use super::{q6_k, q8_k};

/// Weight rows unpacked together (one per 32-bit lane).
const ROWS: usize = 8;

/// Activation rows per register tile.
const TILE_COLS: usize = 4;

/// Activation bytes per slice that one unpacking of 8 weight rows meets: about half of
/// the 1 MiB L2 of this machine's cores.
const SLICE_BYTES: usize = 512 * 1024;

/// One super-block of 8 weight rows, interleaved.
#[repr(C, align(32))]
#[derive(Clone, Copy)]
struct Block8 {
    /// Unsigned quants (`0..64`): vector `v` (32 bytes) holds elements `4v..4v + 4` of
    /// row `r` at bytes `4r..4r + 4`.
    q: [u8; ROWS * QK_K],
    /// Per 16-group `g`: lane `r` holds row `r`'s scale twice (two `i16`).
    sc: [[i16; 2 * ROWS]; QK_K / 16],
    /// Per pair of 16-groups `h`: lane `r` holds `32·sc` of groups `2h`, `2h + 1` of row `r`.
    c: [[i16; 2 * ROWS]; QK_K / 32],
    /// Super-block scale of each row.
    d: [f32; ROWS],
}

impl Block8 {
    const ZERO: Block8 = Block8 {
        q: [0; ROWS * QK_K],
        sc: [[0; 2 * ROWS]; QK_K / 16],
        c: [[0; 2 * ROWS]; QK_K / 32],
        d: [0.0; ROWS],
    };
}

/// The 256 unsigned quants of the `Q6_K` block at `p` in element order (as
/// `ggml_vec_dot_q6_K_q8_K` forms them).
///
/// # Safety
/// AVX2 available; `p` readable for one block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quants(p: *const u8) -> [__m256i; 8] {
    let m3 = _mm256_set1_epi8(3);
    let m15 = _mm256_set1_epi8(15);
    let mut out = [_mm256_setzero_si256(); 8];
    for j in 0..2 {
        // SAFETY: ql (128 bytes at 0) and qh (64 bytes at 128) lie in the block (caller).
        let (lo1, lo2, h) = unsafe {
            (
                _mm256_loadu_si256(p.add(64 * j).cast()),
                _mm256_loadu_si256(p.add(64 * j + 32).cast()),
                _mm256_loadu_si256(p.add(128 + 32 * j).cast()),
            )
        };
        let h0 = _mm256_slli_epi16::<4>(_mm256_and_si256(h, m3));
        let h1 = _mm256_slli_epi16::<2>(_mm256_and_si256(h, _mm256_set1_epi8(12)));
        let h2 = _mm256_and_si256(h, _mm256_set1_epi8(48));
        let h3 = _mm256_srli_epi16::<2>(_mm256_and_si256(h, _mm256_set1_epi8(-64)));
        out[4 * j] = _mm256_or_si256(_mm256_and_si256(lo1, m15), h0);
        out[4 * j + 1] = _mm256_or_si256(_mm256_and_si256(lo2, m15), h1);
        out[4 * j + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(lo1), m15), h2);
        out[4 * j + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(lo2), m15), h3);
    }
    out
}

/// Unpacks super-block `b` of the 8 rows `rows[r]` into `dst`.
///
/// # Safety
/// AVX2 available; every `rows[r]` is readable for `b + 1` `Q6_K` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn unpack8(rows: &[*const u8; ROWS], b: usize, dst: &mut Block8) {
    let mut plain = [[0u8; QK_K]; ROWS];
    for (r, &row) in rows.iter().enumerate() {
        // SAFETY: block b of row r is readable (caller).
        let blk = unsafe { row.add(b * q6_k::BLOCK_BYTES) };
        // SAFETY: as above.
        let q = unsafe { quants(blk) };
        for (c, v) in q.iter().enumerate() {
            // SAFETY: 32 writable bytes at plain[r][32c].
            unsafe { _mm256_storeu_si256(plain[r].as_mut_ptr().add(32 * c).cast(), *v) };
        }
        // SAFETY: the scales (16 bytes at 192) and d (2 bytes at 208) lie in the block.
        let (scales, d) = unsafe {
            (
                std::ptr::read_unaligned(blk.add(192).cast::<[i8; 16]>()),
                crate::f16::read_f16(std::slice::from_raw_parts(blk.add(208), 2), 0),
            )
        };
        dst.d[r] = d;
        for (g, &s) in scales.iter().enumerate() {
            dst.sc[g][2 * r] = i16::from(s);
            dst.sc[g][2 * r + 1] = i16::from(s);
            dst.c[g / 2][2 * r + g % 2] = 32 * i16::from(s);
        }
    }
    for v in 0..QK_K / 4 {
        for (r, p) in plain.iter().enumerate() {
            dst.q[32 * v + 4 * r..32 * v + 4 * r + 4].copy_from_slice(&p[4 * v..4 * v + 4]);
        }
    }
}

/// The 4 bytes at `p` broadcast to every 32-bit lane.
///
/// # Safety
/// `p` is readable for 4 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bcast4(p: *const u8) -> __m256i {
    // SAFETY: 4 readable bytes at p (caller).
    _mm256_set1_epi32(unsafe { p.cast::<i32>().read_unaligned() })
}

/// The 8 unpacked rows `w` against `RN` activation rows (row `j` at `x + j·x_stride`);
/// the first `rows` outputs of row `j` go to `y + j·y_stride`.
///
/// # Safety
/// AVX2/FMA available; the `RN` activation rows hold `w.len()` `Q8_K` blocks; the outputs
/// are writable and the caller's.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile<const RN: usize>(
    w: &[Block8],
    x: *const u8,
    x_stride: usize,
    rows: usize,
    y: *mut f32,
    y_stride: usize,
) {
    let mut acc = [_mm256_setzero_ps(); RN];
    for (b, blk) in w.iter().enumerate() {
        // SAFETY: block b of every activation row is readable (caller); the offsets stay
        // inside it.
        unsafe {
            let xb: [*const u8; RN] =
                std::array::from_fn(|j| x.add(j * x_stride + b * q8_k::BLOCK_BYTES));
            let mut s1 = [_mm256_setzero_si256(); RN];
            for g in 0..QK_K / 16 {
                let q = blk.q.as_ptr().add(128 * g);
                let wv: [__m256i; 4] =
                    std::array::from_fn(|v| _mm256_load_si256(q.add(32 * v).cast()));
                let sc = _mm256_load_si256(blk.sc[g].as_ptr().cast());
                for j in 0..RN {
                    let xq = xb[j].add(q8_k::QS + 16 * g);
                    // Each 16-bit sum: 4 products of at most 63·127, below 2^15.
                    let p0 = _mm256_add_epi16(
                        _mm256_maddubs_epi16(wv[0], bcast4(xq)),
                        _mm256_maddubs_epi16(wv[1], bcast4(xq.add(4))),
                    );
                    let p1 = _mm256_add_epi16(
                        _mm256_maddubs_epi16(wv[2], bcast4(xq.add(8))),
                        _mm256_maddubs_epi16(wv[3], bcast4(xq.add(12))),
                    );
                    s1[j] = _mm256_add_epi32(
                        s1[j],
                        _mm256_add_epi32(_mm256_madd_epi16(p0, sc), _mm256_madd_epi16(p1, sc)),
                    );
                }
            }
            let d = _mm256_load_ps(blk.d.as_ptr());
            for j in 0..RN {
                let mut s2 = _mm256_setzero_si256();
                for h in 0..QK_K / 32 {
                    let c = _mm256_load_si256(blk.c[h].as_ptr().cast());
                    let bs = bcast4(xb[j].add(q8_k::BSUMS + 4 * h));
                    s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(c, bs));
                }
                let res = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(s1[j], s2)));
                let dx = _mm256_set1_ps(xb[j].cast::<f32>().read_unaligned());
                acc[j] = _mm256_fmadd_ps(res, dx, acc[j]);
            }
        }
    }
    for (j, a) in acc.iter().enumerate() {
        let mut out = [0f32; ROWS];
        // SAFETY: out holds 8 floats.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), *a) };
        for (r, &o) in out.iter().enumerate().take(rows) {
            // SAFETY: output (j, r < rows) is the caller's.
            unsafe { *y.add(j * y_stride + r) = o };
        }
    }
}

/// `Q6_K` weight rows `n_range` (row `n` at `w + n·w_stride`, `k` elements) times `m`
/// `Q8_K` activation rows (row `i` at `x + i·x_stride`) into `y[i·y_stride + n]`.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` and `x` hold those rows; the caller owns outputs `(i, n)`
/// for `i < m`, `n ∈ n_range`.
#[target_feature(enable = "avx2,fma,f16c")]
#[expect(clippy::too_many_arguments, reason = "internal form of matmul")]
pub(crate) unsafe fn matmul(
    w: *const u8,
    w_stride: usize,
    k: usize,
    x: *const u8,
    x_stride: usize,
    m: usize,
    n_range: Range<usize>,
    y: *mut f32,
    y_stride: usize,
) {
    type Tile = unsafe fn(&[Block8], *const u8, usize, usize, *mut f32, usize);
    let nb = k / QK_K;
    let x_row = nb * q8_k::BLOCK_BYTES;
    let slice = (SLICE_BYTES / x_row.max(1)).clamp(TILE_COLS, m.max(TILE_COLS));
    let mut scratch = vec![Block8::ZERO; nb];
    for i0 in (0..m).step_by(slice) {
        let i1 = (i0 + slice).min(m);
        for n0 in n_range.clone().step_by(ROWS) {
            let rows = (n_range.end - n0).min(ROWS);
            // A short group repeats its last row (results dropped).
            let rp: [*const u8; ROWS] =
                std::array::from_fn(|r| w.wrapping_add((n0 + r.min(rows - 1)) * w_stride));
            for (b, dst) in scratch.iter_mut().enumerate() {
                // SAFETY: rows of n_range hold nb blocks (caller); AVX2 available.
                unsafe { unpack8(&rp, b, dst) };
            }
            let mut i = i0;
            while i < i1 {
                let rn = (i1 - i).min(TILE_COLS);
                let f: Tile = match rn {
                    1 => tile::<1>,
                    2 => tile::<2>,
                    3 => tile::<3>,
                    _ => tile::<TILE_COLS>,
                };
                // SAFETY: activation rows i..i + rn hold nb blocks; outputs (i.., n0 + r)
                // for r < rows are the caller's.
                unsafe {
                    f(
                        &scratch,
                        x.wrapping_add(i * x_stride),
                        x_stride,
                        rows,
                        y.wrapping_add(i * y_stride + n0),
                        y_stride,
                    )
                };
                i += rn;
            }
        }
    }
}
