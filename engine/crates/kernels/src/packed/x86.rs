//! AVX2 products of packed weight groups (8 rows) with Q8_0 activation rows.
//!
//! Per group block and activation row, each 32-byte chunk of weights yields the integer
//! partial sums of two rows (row `c` in the low 128 bits, row `c + 4` in the high ones);
//! three `hadd`s fold the four chunks into one vector whose lane `r` is row `r`'s exact
//! block sum, which one FMA scales by `d_w · d_x` into the row's accumulator lane.

use std::arch::x86_64::*;

use common::engine_abi::DType;

use super::layout::{Q4_0_GROUP_BLOCK_BYTES, Q8_0_GROUP_BLOCK_BYTES, SCALES_BYTES};
use crate::dot::x86::load_f16_scalar;

/// Activation rows per register tile (2 beat 3 and 4 for both types in an A/B run of
/// `cargo bench -p engine-kernels --bench matmul -- packed/prefill`: fewer spills).
const TILE_COLS: usize = 2;

/// Weights of one group block, unpacked for `maddubs`: per chunk, the `(low, high)`
/// element halves (Q4_0: unsigned nibbles; Q8_0: signed bytes).
type Chunks = [(__m256i, __m256i); 4];

/// Loads the 4 chunks of the group block at `p`.
///
/// # Safety
/// AVX2 available; `p` readable for a whole group block of the type.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load_chunks<const Q4: bool>(p: *const u8) -> Chunks {
    let mut out = [(_mm256_setzero_si256(), _mm256_setzero_si256()); 4];
    for (c, pair) in out.iter_mut().enumerate() {
        // SAFETY: chunk c lies inside the group block (caller).
        *pair = unsafe {
            if Q4 {
                let v = _mm256_loadu_si256(p.add(SCALES_BYTES + 32 * c).cast());
                let mask = _mm256_set1_epi8(0x0f);
                (
                    _mm256_and_si256(v, mask),
                    _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask),
                )
            } else {
                (
                    _mm256_loadu_si256(p.add(SCALES_BYTES + 64 * c).cast()),
                    _mm256_loadu_si256(p.add(SCALES_BYTES + 64 * c + 32).cast()),
                )
            }
        };
    }
    out
}

/// Exact per-row integer sums of one group block against one activation block whose
/// element halves are broadcast in `xlo`/`xhi`: lane `r` holds row `r`'s sum. For Q4_0
/// the nibbles are taken unsigned (`Σ q·x`); the caller subtracts `8 · Σ x`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn block_sums<const Q4: bool>(w: &Chunks, xlo: __m256i, xhi: __m256i) -> __m256i {
    let ones = _mm256_set1_epi16(1);
    let mut s = [_mm256_setzero_si256(); 4];
    if Q4 {
        for (sc, (lo, hi)) in s.iter_mut().zip(w) {
            // Each pair sum is at most 2 · 15 · 128: the i16 add cannot overflow.
            let t = _mm256_add_epi16(
                _mm256_maddubs_epi16(*lo, xlo),
                _mm256_maddubs_epi16(*hi, xhi),
            );
            *sc = _mm256_madd_epi16(t, ones);
        }
    } else {
        // Σ w·x = Σ |x|·(w·sgn x): |x| once per activation block, one sign per chunk half.
        let (alo, ahi) = (_mm256_sign_epi8(xlo, xlo), _mm256_sign_epi8(xhi, xhi));
        for (sc, (lo, hi)) in s.iter_mut().zip(w) {
            let a = _mm256_maddubs_epi16(alo, _mm256_sign_epi8(*lo, xlo));
            let b = _mm256_maddubs_epi16(ahi, _mm256_sign_epi8(*hi, xhi));
            *sc = _mm256_add_epi32(_mm256_madd_epi16(a, ones), _mm256_madd_epi16(b, ones));
        }
    }
    _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]))
}

/// One group (`nb` group blocks at `w`) against `RN` activation rows of `x`.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` readable for `nb` group blocks; `x` covers `RN` rows of
/// `nb` blocks (and, for Q4_0, their `nb` biases each); `y + j * y_stride + 0..8` writable.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile<const Q4: bool, const RN: usize>(
    nb: usize,
    w: *const u8,
    x: &Activations,
    y: *mut f32,
    y_stride: usize,
) {
    let gb = if Q4 {
        Q4_0_GROUP_BLOCK_BYTES
    } else {
        Q8_0_GROUP_BLOCK_BYTES
    };
    let mut acc = [_mm256_setzero_ps(); RN];
    for b in 0..nb {
        // SAFETY: group block b is inside the group (caller).
        let (dw, chunks) = unsafe {
            let p = w.add(b * gb);
            (
                _mm256_cvtph_ps(_mm_loadu_si128(p.cast())),
                load_chunks::<Q4>(p),
            )
        };
        for (j, acc_j) in acc.iter_mut().enumerate() {
            // SAFETY: block b of activation row j (and its bias) is readable (caller).
            let (dx, xlo, xhi, bias) = unsafe {
                let p = x.rows.add(j * x.stride + b * 34);
                (
                    load_f16_scalar(p),
                    _mm256_broadcastsi128_si256(_mm_loadu_si128(p.add(2).cast())),
                    _mm256_broadcastsi128_si256(_mm_loadu_si128(p.add(18).cast())),
                    if Q4 { *x.bias.add(j * nb + b) } else { 0 },
                )
            };
            let mut isum = block_sums::<Q4>(&chunks, xlo, xhi);
            if Q4 {
                isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(bias));
            }
            let sums = _mm256_cvtepi32_ps(isum);
            *acc_j = _mm256_fmadd_ps(sums, _mm256_mul_ps(dw, _mm256_set1_ps(dx)), *acc_j);
        }
    }
    for (j, a) in acc.iter().enumerate() {
        // SAFETY: the 8 outputs of row j are writable (caller).
        unsafe { _mm256_storeu_ps(y.add(j * y_stride), *a) };
    }
}

/// Q8_0 activation rows as the tiles read them.
pub(super) struct Activations {
    /// Row 0 (Q8_0 blocks).
    pub rows: *const u8,
    /// Bytes from one row to the next.
    pub stride: usize,
    /// For Q4_0 weights, `8 · Σ quants` of every block, row-major (`nb` per row): the
    /// offset of Q4_0's nibbles, computed once per product instead of once per group.
    pub bias: *const i32,
}

impl Activations {
    /// The same activations from row `j` on.
    fn skip_rows(&self, j: usize, nb: usize) -> Activations {
        Activations {
            rows: self.rows.wrapping_add(j * self.stride),
            stride: self.stride,
            bias: self.bias.wrapping_add(j * nb),
        }
    }
}

/// One group of packed `wtype` weights against `m` activation rows, in tiles of
/// [`TILE_COLS`] rows.
///
/// # Safety
/// As [`tile`] for every activation row `0..m`; `wtype` is Q4_0 or Q8_0.
pub(super) unsafe fn group_rows(
    wtype: DType,
    nb: usize,
    w: *const u8,
    x: &Activations,
    m: usize,
    y: *mut f32,
    y_stride: usize,
) {
    let q4 = wtype == DType::Q4_0;
    let mut j = 0;
    while j < m {
        let rn = (m - j).min(TILE_COLS);
        let f: unsafe fn(usize, *const u8, &Activations, *mut f32, usize) = match (q4, rn) {
            (true, 1) => tile::<true, 1>,
            (true, _) => tile::<true, TILE_COLS>,
            (false, 1) => tile::<false, 1>,
            (false, _) => tile::<false, TILE_COLS>,
        };
        // SAFETY: rows j..j + rn are in range (caller).
        unsafe { f(nb, w, &x.skip_rows(j, nb), y.add(j * y_stride), y_stride) };
        j += rn;
    }
}
