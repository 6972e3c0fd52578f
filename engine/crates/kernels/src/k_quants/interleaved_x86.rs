//! [`super::tiles`]' AVX2 product for every K-quant: 8 weight rows unpacked together
//! into an interleaved form, so that one `maddubs` against 4 broadcast activation bytes
//! leaves each row's partial sums in its own 32-bit lane and the 8 outputs of an
//! activation row need no horizontal sums.
//!
//! One loop serves all five types; only the unpacking differs: each type's quants are
//! formed with SIMD into the values of its [`Unpacked`](super::unpacked::Unpacked) form (unsigned; `Q6_K` as
//! `ggml_vec_dot_q6_K_q8_K` forms them), its group scales come from the type's
//! `group_scales`, and an 8 × 8 transpose of 32-bit words interleaves the 8 rows.
//!
//! The integer sums are exact, so the result is the same as the portable
//! `tiles::dot_unpacked` (and llama.cpp's tiled kernel): per output and super-block
//! `s1 = Σ sc·q·q_x` (unsigned quants) and `s2 = Σ c·bsum`, then
//! `res = fma(−dmin, f32(s2), d·f32(s1))` for types with mins (`Q2_K`, `Q4_K`, `Q5_K`) or
//! `res = d·f32(s1 − s2)` for types with an offset (`Q3_K`, `Q6_K`), and
//! `y = fma(res, d_x, y)` super-block after super-block, here computed for 8 rows in the 8
//! lanes of a vector.

use std::arch::x86_64::*;
use std::ops::Range;

use common::engine_abi::DType;

use super::q8_k;
use super::scales::QK_K;
use super::x86::bcast4;
use crate::matmul::args::MatMulArgs;

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
    /// Per pair of 16-groups `h`: lane `r` holds the `bsums` coefficients (the min, or
    /// `offset·sc`) of groups `2h`, `2h + 1` of row `r`.
    c: [[i16; 2 * ROWS]; QK_K / 32],
    /// Super-block scale of each row.
    d: [f32; ROWS],
    /// Super-block scale of each row's mins (0 for types without).
    dmin: [f32; ROWS],
}

impl Block8 {
    const ZERO: Block8 = Block8 {
        q: [0; ROWS * QK_K],
        sc: [[0; 2 * ROWS]; QK_K / 16],
        c: [[0; 2 * ROWS]; QK_K / 32],
        d: [0.0; ROWS],
        dmin: [0.0; ROWS],
    };
}

/// `(v >> shift) & mask` in every byte (`shift` plus the mask's width at most 8, so no bit
/// of a neighbouring byte survives the 16-bit shift).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bits(v: __m256i, shift: i32, mask: i8) -> __m256i {
    _mm256_and_si256(
        _mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)),
        _mm256_set1_epi8(mask),
    )
}

/// The 256 unsigned quants of the `wtype` block at `p` in element order, 32 per vector,
/// the values of the type's [`Unpacked`](super::unpacked::Unpacked) form (`Q3_K`: `q + 4`).
///
/// # Safety
/// AVX2 available; `p` readable for one block of `wtype` (a K-quant weight type).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quants(wtype: DType, p: *const u8) -> [__m256i; 8] {
    let load = |at: usize| {
        // SAFETY: every offset below lies inside the block (caller).
        unsafe { _mm256_loadu_si256(p.add(at).cast()) }
    };
    let mut out = [_mm256_setzero_si256(); 8];
    match wtype {
        // qs (64 bytes at 16): element 128j + 32s + t is bits 2s.. of qs[32j + t].
        DType::Q2_K => {
            for (c, o) in out.iter_mut().enumerate() {
                *o = bits(load(16 + 32 * (c / 4)), 2 * (c % 4) as i32, 3);
            }
        }
        // hmask (32 bytes at 0), qs (64 at 32): as Q2_K plus the high bit, bit 4j + s of
        // hmask[t], as 4.
        DType::Q3_K => {
            let h = load(0);
            for (c, o) in out.iter_mut().enumerate() {
                let low = bits(load(32 + 32 * (c / 4)), 2 * (c % 4) as i32, 3);
                *o = _mm256_or_si256(low, _mm256_slli_epi16::<2>(bits(h, c as i32, 1)));
            }
        }
        // qs (128 bytes at 16): element 64j + 32h + t is nibble h of qs[32j + t].
        DType::Q4_K => {
            for (c, o) in out.iter_mut().enumerate() {
                *o = bits(load(16 + 32 * (c / 2)), 4 * (c % 2) as i32, 0xf);
            }
        }
        // qh (32 bytes at 16), qs (128 at 48): as Q4_K plus bit 2j + h of qh[t] as 16.
        DType::Q5_K => {
            let h = load(16);
            for (c, o) in out.iter_mut().enumerate() {
                let low = bits(load(48 + 32 * (c / 2)), 4 * (c % 2) as i32, 0xf);
                *o = _mm256_or_si256(low, _mm256_slli_epi16::<4>(bits(h, c as i32, 1)));
            }
        }
        // ql (128 bytes at 0), qh (64 at 128), as `ggml_vec_dot_q6_K_q8_K` forms them.
        _ => {
            let m15 = _mm256_set1_epi8(15);
            for j in 0..2 {
                let (lo1, lo2, h) = (load(64 * j), load(64 * j + 32), load(128 + 32 * j));
                let h0 = _mm256_slli_epi16::<4>(_mm256_and_si256(h, _mm256_set1_epi8(3)));
                let h1 = _mm256_slli_epi16::<2>(_mm256_and_si256(h, _mm256_set1_epi8(12)));
                let h2 = _mm256_and_si256(h, _mm256_set1_epi8(48));
                let h3 = _mm256_srli_epi16::<2>(_mm256_and_si256(h, _mm256_set1_epi8(-64)));
                out[4 * j] = _mm256_or_si256(_mm256_and_si256(lo1, m15), h0);
                out[4 * j + 1] = _mm256_or_si256(_mm256_and_si256(lo2, m15), h1);
                out[4 * j + 2] =
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(lo1), m15), h2);
                out[4 * j + 3] =
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(lo2), m15), h3);
            }
        }
    }
    out
}

/// Transposes 8 vectors of 8 `u32`: lane `i` of output `d` is lane `d` of input `i`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn transpose8(v: [__m256i; ROWS]) -> [__m256i; ROWS] {
    let t: [__m256i; 8] = std::array::from_fn(|i| {
        let (a, b) = (v[i & !1], v[i | 1]);
        if i % 2 == 0 {
            _mm256_unpacklo_epi32(a, b)
        } else {
            _mm256_unpackhi_epi32(a, b)
        }
    });
    // u[4h + 2e + f]: from t[4h + e] and t[4h + 2 + e], low (f = 0) or high 64-bit halves.
    let u: [__m256i; 8] = std::array::from_fn(|i| {
        let (h, e, f) = (i / 4, (i / 2) % 2, i % 2);
        let (a, b) = (t[4 * h + e], t[4 * h + 2 + e]);
        if f == 0 {
            _mm256_unpacklo_epi64(a, b)
        } else {
            _mm256_unpackhi_epi64(a, b)
        }
    });
    // u[d % 4] holds lanes d and d + 4 of rows 0..4, u[4 + d % 4] of rows 4..8.
    std::array::from_fn(|d| {
        let (a, b) = (u[d % 4], u[4 + d % 4]);
        if d < 4 {
            _mm256_permute2x128_si256::<0x20>(a, b)
        } else {
            _mm256_permute2x128_si256::<0x31>(a, b)
        }
    })
}

/// Unpacks super-block `b` of the 8 rows `rows[r]` of `wtype` into `dst`.
///
/// # Safety
/// AVX2 available; every `rows[r]` is readable for `b + 1` blocks of `wtype`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn unpack8(wtype: DType, rows: &[*const u8; ROWS], b: usize, dst: &mut Block8) {
    let wb = wtype.block_bytes();
    let mut q = [[_mm256_setzero_si256(); 8]; ROWS];
    for (r, &row) in rows.iter().enumerate() {
        // SAFETY: block b of row r is readable (caller).
        let blk = unsafe { row.add(b * wb) };
        // SAFETY: as above; AVX2 (caller).
        q[r] = unsafe { quants(wtype, blk) };
        // SAFETY: as above.
        let s =
            super::unpacking::group_scales(wtype, unsafe { std::slice::from_raw_parts(blk, wb) });
        dst.d[r] = s.d;
        dst.dmin[r] = s.dmin;
        for g in 0..QK_K / 16 {
            dst.sc[g][2 * r] = s.sc[g];
            dst.sc[g][2 * r + 1] = s.sc[g];
            dst.c[g / 2][2 * r + g % 2] = s.c[g];
        }
    }
    let chunks = (0..8).map(|c| std::array::from_fn(|r| q[r][c]));
    for (c, chunk) in chunks.enumerate() {
        // Vector 8c + d holds dword d of chunk c of every row.
        for (d, v) in transpose8(chunk).into_iter().enumerate() {
            // SAFETY: 32 writable bytes at q[32·(8c + d)], in bounds (8c + d < 64).
            unsafe { _mm256_store_si256(dst.q.as_mut_ptr().add(32 * (8 * c + d)).cast(), v) };
        }
    }
}

/// The 8 unpacked rows `w` against `RN` activation rows (row `j` at `x + j·x_stride`);
/// the first `rows` outputs of row `j` go to `y + j·y_stride`.
///
/// # Safety
/// AVX2/FMA available; the `RN` activation rows hold `w.len()` `Q8_K` blocks; the outputs
/// are writable and the caller's.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile<const MIN: bool, const RN: usize>(
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
                    // Each 16-bit sum: 4 products of at most 63·128, below 2^15.
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
            let dmin = _mm256_load_ps(blk.dmin.as_ptr());
            for j in 0..RN {
                let mut s2 = _mm256_setzero_si256();
                for h in 0..QK_K / 32 {
                    let c = _mm256_load_si256(blk.c[h].as_ptr().cast());
                    let bs = bcast4(xb[j].add(q8_k::BSUMS + 4 * h));
                    s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(c, bs));
                }
                let res = if MIN {
                    _mm256_fnmadd_ps(
                        dmin,
                        _mm256_cvtepi32_ps(s2),
                        _mm256_mul_ps(d, _mm256_cvtepi32_ps(s1[j])),
                    )
                } else {
                    _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(s1[j], s2)))
                };
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

/// K-quant weight rows `n_range` of `wtype` (row `n` at `w + n·w_stride`, `k` elements)
/// times `m` `Q8_K` activation rows (row `i` at `x + i·x_stride`) into
/// `y[i·y_stride + n]`.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` and `x` hold those rows; the caller owns outputs `(i, n)`
/// for `i < m`, `n ∈ n_range`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn matmul(args: &MatMulArgs<'_>, n_range: Range<usize>) {
    let MatMulArgs {
        wtype,
        w,
        w_stride,
        k,
        x,
        x_stride,
        m,
        y,
        y_stride,
    } = *args;
    let (w, x) = (w.as_ptr(), x.as_ptr());
    type Tile = unsafe fn(&[Block8], *const u8, usize, usize, *mut f32, usize);
    let nb = k / QK_K;
    let min = super::unpacking::has_min(wtype);
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
                unsafe { unpack8(wtype, &rp, b, dst) };
            }
            let mut i = i0;
            while i < i1 {
                let rn = (i1 - i).min(TILE_COLS);
                let f: Tile = match (min, rn) {
                    (false, 1) => tile::<false, 1>,
                    (false, 2) => tile::<false, 2>,
                    (false, 3) => tile::<false, 3>,
                    (false, _) => tile::<false, TILE_COLS>,
                    (true, 1) => tile::<true, 1>,
                    (true, 2) => tile::<true, 2>,
                    (true, 3) => tile::<true, 3>,
                    (true, _) => tile::<true, TILE_COLS>,
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
