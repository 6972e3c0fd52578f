//! [`super::tiles`]' NEON kernel: unpacked K-quant weight rows times `Q8_K` activation
//! rows. Per output and super-block the exact integers `s1 = Σ sc·q·q_x` (`sdot` or
//! `smull` + pairwise adds, one group scale per 16 elements) and `s2 = Σ c·bsum`, then the
//! float steps of the portable `dot_unpacked` in the same order: bit-identical results.

use std::arch::aarch64::*;

use super::q8_k;
use super::scales::QK_K;
use super::unpacked::Unpacked;
use crate::dot::aarch64::lanes4;
use crate::matmul::args::MatMulArgs;

/// `s1` and `s2` of one unpacked super-block against the `Q8_K` block at `xb`.
///
/// # Safety
/// dotprod if `DOT`; `xb` readable for one `Q8_K` block.
#[inline(always)]
unsafe fn block_sums<const DOT: bool>(u: &Unpacked, xb: *const u8) -> (i32, i32) {
    // SAFETY: u.q holds 256 bytes; xb one Q8_K block (caller); dotprod if DOT (caller).
    unsafe {
        let mut acc = vdupq_n_s32(0);
        for g in 0..QK_K / 16 {
            let q = vreinterpretq_s8_u8(vld1q_u8(u.q.as_ptr().add(16 * g)));
            let x = vld1q_s8(xb.add(q8_k::QS + 16 * g).cast());
            acc = vmlaq_n_s32(acc, lanes4::<DOT>(q, x), i32::from(u.sc[8 * g]));
        }
        let bsums = xb.add(q8_k::BSUMS).cast::<[i16; 16]>().read_unaligned();
        let mut s2 = 0i32;
        for (&c, &b) in u.c.iter().zip(&bsums) {
            s2 += i32::from(c) * i32::from(b);
        }
        (vaddvq_s32(acc), s2)
    }
}

/// Unpacked weight rows `w[r·nb..(r+1)·nb]` for `r < rows` (`nb = k / 256` of `args`)
/// times activation rows `rows_i` of `args` into `y[i·y_stride + n0 + r]`, each output
/// rounded like the portable `dot_unpacked` (`args.w` is not read: `w` holds its rows
/// `n0..n0 + rows`).
///
/// # Safety
/// NEON (and dotprod if `DOT`) available; `w` holds `rows·nb` blocks; activation rows
/// `rows_i` (each `nb` `Q8_K` blocks at `x + i·x_stride`) are readable; the caller owns the
/// outputs.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn tiles_rows<const DOT: bool>(
    min: bool,
    w: &[Unpacked],
    args: &MatMulArgs<'_>,
    rows_i: std::ops::Range<usize>,
    n0: usize,
    rows: usize,
) {
    let MatMulArgs {
        k,
        x,
        x_stride,
        y,
        y_stride,
        ..
    } = *args;
    let (nb, x) = (k / QK_K, x.as_ptr());
    assert!(w.len() >= rows * nb);
    for i in rows_i {
        for r in 0..rows {
            let mut acc = 0f32;
            for (b, u) in w[r * nb..(r + 1) * nb].iter().enumerate() {
                // SAFETY: block b of activation row i is readable (caller).
                let (s1, s2, dx) = unsafe {
                    let xb = x.add(i * x_stride + b * q8_k::BLOCK_BYTES);
                    let (s1, s2) = block_sums::<DOT>(u, xb);
                    (s1, s2, xb.cast::<f32>().read_unaligned())
                };
                let res = if min {
                    (-u.dmin).mul_add(s2 as f32, u.d * s1 as f32)
                } else {
                    u.d * s1.wrapping_sub(s2) as f32
                };
                acc = res.mul_add(dx, acc);
            }
            // SAFETY: the caller owns output (i, n0 + r).
            unsafe { *y.add(i * y_stride + n0 + r) = acc };
        }
    }
}
