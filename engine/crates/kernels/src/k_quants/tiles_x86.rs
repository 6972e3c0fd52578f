//! [`super::tiles`]' AVX2 kernel for the K-quants other than `Q6_K` (which has its own,
//! `q6_k_tiles`): unpacked weight rows times `Q8_K` activation rows, exact integer sums per
//! super-block, then the float steps of the portable `dot_unpacked`.

use std::arch::x86_64::*;

use super::q8_k;
use super::unpacked::Unpacked;
use super::x86::{hsum4_epi32, load256, q8k_d};

/// [`super::tiles`]' AVX2 kernel: 4 unpacked weight rows (`w[r·nb..(r+1)·nb]`) times
/// activation rows `rows_i`, two at a time, into `y[i·y_stride + n0 + r]` for `r < rows`.
/// Per output and super-block it rounds exactly like the portable `dot_unpacked`.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` holds `4·nb` blocks; activation rows `rows_i` (each `nb`
/// `Q8_K` blocks at `x + i·x_stride`) are readable; the caller owns the outputs.
#[target_feature(enable = "avx2,fma,f16c")]
#[expect(clippy::too_many_arguments, reason = "internal kernel")]
pub(crate) unsafe fn tiles_rows(
    min: bool,
    w: &[Unpacked],
    nb: usize,
    x: *const u8,
    x_stride: usize,
    rows_i: std::ops::Range<usize>,
    n0: usize,
    rows: usize,
    y: *mut f32,
    y_stride: usize,
) {
    assert!(w.len() >= 4 * nb);
    let mut i = rows_i.start;
    while i < rows_i.end {
        let pair = rows_i.end - i >= 2;
        // SAFETY: rows i and i + 1 (or i twice) are readable activation rows of nb blocks;
        // w has 4·nb blocks (asserted); outputs are the caller's.
        unsafe {
            let xs = [
                x.add(i * x_stride),
                x.add((i + usize::from(pair)) * x_stride),
            ];
            let mut acc_y = [_mm_setzero_ps(); 2];
            for b in 0..nb {
                let xb = [
                    xs[0].add(b * q8_k::BLOCK_BYTES),
                    xs[1].add(b * q8_k::BLOCK_BYTES),
                ];
                let u = [&w[b], &w[nb + b], &w[2 * nb + b], &w[3 * nb + b]];
                let mut acc = [[_mm256_setzero_si256(); 2]; 4];
                for c in 0..8 {
                    let qx = [
                        load256(xb[0].add(q8_k::QS + 32 * c)),
                        load256(xb[1].add(q8_k::QS + 32 * c)),
                    ];
                    for (r, ur) in u.iter().enumerate() {
                        let q = _mm256_load_si256(ur.q.as_ptr().add(32 * c).cast());
                        let sc = _mm256_load_si256(ur.sc.as_ptr().add(16 * c).cast());
                        for j in 0..2 {
                            acc[r][j] = _mm256_add_epi32(
                                acc[r][j],
                                _mm256_madd_epi16(sc, _mm256_maddubs_epi16(q, qx[j])),
                            );
                        }
                    }
                }
                let d = _mm_setr_ps(u[0].d, u[1].d, u[2].d, u[3].d);
                let dmin = _mm_setr_ps(u[0].dmin, u[1].dmin, u[2].dmin, u[3].dmin);
                for j in 0..2 {
                    let bsums = load256(xb[j].add(q8_k::BSUMS));
                    let s1 = hsum4_epi32([acc[0][j], acc[1][j], acc[2][j], acc[3][j]]);
                    let s2 = hsum4_epi32(std::array::from_fn(|r| {
                        _mm256_madd_epi16(bsums, load256(u[r].c.as_ptr().cast()))
                    }));
                    let res = if min {
                        _mm_fnmadd_ps(
                            dmin,
                            _mm_cvtepi32_ps(s2),
                            _mm_mul_ps(d, _mm_cvtepi32_ps(s1)),
                        )
                    } else {
                        _mm_mul_ps(d, _mm_cvtepi32_ps(_mm_sub_epi32(s1, s2)))
                    };
                    acc_y[j] = _mm_fmadd_ps(res, _mm_set1_ps(q8k_d(xb[j])), acc_y[j]);
                }
            }
            for (j, v) in acc_y.iter().enumerate().take(1 + usize::from(pair)) {
                let mut out = [0f32; 4];
                _mm_storeu_ps(out.as_mut_ptr(), *v);
                for (r, &o) in out.iter().enumerate().take(rows) {
                    *y.add((i + j) * y_stride + n0 + r) = o;
                }
            }
        }
        i += 1 + usize::from(pair);
    }
}
