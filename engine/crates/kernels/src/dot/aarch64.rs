//! NEON dot products (AArch64), rounding exactly like the portable code ([`super::generic`])
//! and so like ggml's AVX2 code: ggml's 8 `f32` lanes are two NEON vectors ([`F32x8`]),
//! every lane takes the same fused multiply-adds in the same order, and the reductions
//! are [`crate::order`]'s. The integer lane sums of a 32-element block pair (lane `l` =
//! elements `4l..4l+4`) are exact, so `sdot` (with `dotprod`) and `smull` + pairwise adds
//! (without) give the same lanes.
//!
//! Every function is `unsafe`: callers must have checked that the CPU supports NEON (and
//! `dotprod` where `DOT` is true, [`crate::Backend::NeonDotprod`]) and that the pointers
//! cover the stated rows. All loads are byte loads, so rows may start at any address.

use std::arch::aarch64::*;
use std::arch::asm;

use crate::legacy::block32::{Block32, QK};
use crate::legacy::{q4_1::Q4_1, q5_0::Q5_0, q5_1::Q5_1};

/// ggml's 8 AVX2 `f32` lanes: `lo` holds lanes 0..4, `hi` lanes 4..8.
#[derive(Clone, Copy)]
pub(crate) struct F32x8 {
    lo: float32x4_t,
    hi: float32x4_t,
}

impl F32x8 {
    /// All lanes zero.
    #[inline]
    #[target_feature(enable = "neon")]
    fn zero() -> F32x8 {
        F32x8 {
            lo: vdupq_n_f32(0.0),
            hi: vdupq_n_f32(0.0),
        }
    }

    /// `fma(a, b, self)` lane by lane (one rounding, like `_mm256_fmadd_ps`).
    #[inline]
    #[target_feature(enable = "neon")]
    fn fma(self, a: F32x8, b: F32x8) -> F32x8 {
        F32x8 {
            lo: vfmaq_f32(self.lo, a.lo, b.lo),
            hi: vfmaq_f32(self.hi, a.hi, b.hi),
        }
    }

    /// `fma(d, lanes, self)` with one scalar `d` for every lane.
    #[inline]
    #[target_feature(enable = "neon")]
    fn fma_n(self, d: f32, lanes: F32x8) -> F32x8 {
        F32x8 {
            lo: vfmaq_n_f32(self.lo, lanes.lo, d),
            hi: vfmaq_n_f32(self.hi, lanes.hi, d),
        }
    }

    /// Lane-by-lane sum.
    #[inline]
    #[target_feature(enable = "neon")]
    fn add(self, o: F32x8) -> F32x8 {
        F32x8 {
            lo: vaddq_f32(self.lo, o.lo),
            hi: vaddq_f32(self.hi, o.hi),
        }
    }

    /// Integer lanes converted to `f32` (exact for the lane sums here, all below 2^24).
    #[inline]
    #[target_feature(enable = "neon")]
    pub(crate) fn from_i32(lo: int32x4_t, hi: int32x4_t) -> F32x8 {
        F32x8 {
            lo: vcvtq_f32_s32(lo),
            hi: vcvtq_f32_s32(hi),
        }
    }
}

/// [`crate::order::hsum8`]: `r = lo + hi`, then `(r0 + r2) + (r1 + r3)`.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn hsum8(v: F32x8) -> f32 {
    let r = vaddq_f32(v.hi, v.lo);
    let s = vadd_f32(vget_low_f32(r), vget_high_f32(r));
    vget_lane_f32::<0>(s) + vget_lane_f32::<1>(s)
}

/// [`crate::order::reduce4`]: `(a0 + a2) + (a1 + a3)` lane by lane, `t = lo + hi`, then
/// `(t0 + t1) + (t2 + t3)`.
#[inline]
#[target_feature(enable = "neon")]
fn reduce4(a: [F32x8; 4]) -> f32 {
    let c = a[0].add(a[2]).add(a[1].add(a[3]));
    let t = vaddq_f32(c.lo, c.hi);
    let p = vpaddq_f32(t, t);
    vgetq_lane_f32::<0>(p) + vgetq_lane_f32::<1>(p)
}

/// Loads 4 `f32` at `p` (any alignment).
///
/// # Safety
/// `p` readable for 16 bytes.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn load_f32x4(p: *const u8) -> float32x4_t {
    // SAFETY: 16 readable bytes at p (caller); byte loads need no alignment.
    vreinterpretq_f32_u8(unsafe { vld1q_u8(p) })
}

/// Loads 8 `f32` at `p` as ggml's lanes 0..8.
///
/// # Safety
/// `p` readable for 32 bytes.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn load_f32x8(p: *const u8) -> F32x8 {
    // SAFETY: 32 readable bytes at p (caller).
    unsafe {
        F32x8 {
            lo: load_f32x4(p),
            hi: load_f32x4(p.add(16)),
        }
    }
}

/// Loads 8 halves at `p` (any alignment) widened to `f32` (exact).
///
/// # Safety
/// `p` readable for 16 bytes.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn load_f16x8(p: *const u8) -> F32x8 {
    // SAFETY: 16 readable bytes at p (caller); byte loads need no alignment.
    let h = vreinterpretq_f16_u8(unsafe { vld1q_u8(p) });
    F32x8 {
        lo: vcvt_f32_f16(vget_low_f16(h)),
        hi: vcvt_high_f32_f16(h),
    }
}

/// Loads 8 bfloat16 values at `p` (any alignment) widened to `f32` (exact).
///
/// # Safety
/// `p` readable for 16 bytes.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn load_bf16x8(p: *const u8) -> F32x8 {
    // SAFETY: 16 readable bytes at p (caller); byte loads need no alignment.
    let h = vreinterpretq_u16_u8(unsafe { vld1q_u8(p) });
    F32x8 {
        lo: vreinterpretq_f32_u32(vshll_n_u16::<16>(vget_low_u16(h))),
        hi: vreinterpretq_f32_u32(vshll_high_n_u16::<16>(h)),
    }
}

/// The little-endian half at `p` as `f32`.
///
/// # Safety
/// `p` readable for 2 bytes.
#[inline]
unsafe fn f16_at(p: *const u8) -> f32 {
    // SAFETY: 2 readable bytes at p (caller); read_unaligned needs no alignment.
    half::f16::from_bits(unsafe { p.cast::<u16>().read_unaligned() }).to_f32()
}

/// The little-endian bfloat16 at `p` as `f32`.
///
/// # Safety
/// `p` readable for 2 bytes.
#[inline]
unsafe fn bf16_at(p: *const u8) -> f32 {
    // SAFETY: 2 readable bytes at p (caller); read_unaligned needs no alignment.
    crate::legacy::bf16::to_f32(unsafe { p.cast::<u16>().read_unaligned() })
}

/// `sdot`: lane `i` of `acc` plus the 4 products of bytes `4i..4i+4` of `a` and `b`.
/// (Inline assembly: the `vdotq_s32` intrinsic is not stable yet.)
///
/// # Safety
/// The CPU supports the dotprod extension.
#[inline(always)]
pub(crate) unsafe fn sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: `sdot` only reads and writes the named vector registers; the caller
    // guarantees the CPU has the extension the directive enables for the assembler.
    unsafe {
        asm!(
            ".arch_extension dotprod",
            "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
    acc
}

/// Lane `i` = the 4 products of bytes `4i..4i+4` of `a` and `b`, with `sdot` when `DOT`,
/// else `smull` and two pairwise adds (the same integers).
///
/// # Safety
/// The CPU supports dotprod if `DOT`.
#[inline(always)]
pub(crate) unsafe fn lanes4<const DOT: bool>(a: int8x16_t, b: int8x16_t) -> int32x4_t {
    if DOT {
        // SAFETY: dotprod (caller).
        unsafe { sdot(vdupq_n_s32(0), a, b) }
    } else {
        // SAFETY: NEON is part of every AArch64 target (the intrinsics only ask callers to
        // state it, which an inline(always) helper cannot).
        unsafe {
            let p0 = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
            let p1 = vpaddlq_s16(vmull_high_s8(a, b));
            vpaddq_s32(p0, p1)
        }
    }
}

/// The 8 integer lanes of one 32-element block pair as `f32`.
///
/// # Safety
/// The CPU supports dotprod if `DOT`.
#[inline(always)]
unsafe fn block_lanes<const DOT: bool>(w: [int8x16_t; 2], x: [int8x16_t; 2]) -> F32x8 {
    // SAFETY: dotprod if DOT (caller).
    unsafe { F32x8::from_i32(lanes4::<DOT>(w[0], x[0]), lanes4::<DOT>(w[1], x[1])) }
}

/// Loads 32 signed bytes at `p`.
///
/// # Safety
/// `p` readable for 32 bytes.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn load_i8x32(p: *const u8) -> [int8x16_t; 2] {
    // SAFETY: 32 readable bytes at p (caller).
    unsafe { [vld1q_s8(p.cast()), vld1q_s8(p.add(16).cast())] }
}

/// 16 packed bytes at `p` as 32 nibbles, low nibbles (elements 0..16) first, like ggml's
/// `bytes_from_nibbles_32`.
///
/// # Safety
/// `p` readable for 16 bytes.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn nibbles(p: *const u8) -> [uint8x16_t; 2] {
    // SAFETY: 16 readable bytes at p (caller).
    let q = unsafe { vld1q_u8(p) };
    [vandq_u8(q, vdupq_n_u8(0x0f)), vshrq_n_u8::<4>(q)]
}

/// `0x10` in byte `i` where bit `i` of the little-endian `u32` at `p` is set, else 0
/// (the fifth bits of a Q5 block).
///
/// # Safety
/// `p` readable for 4 bytes.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn fifth_bits(p: *const u8) -> [uint8x16_t; 2] {
    const BIT: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
    // SAFETY: 4 readable bytes at p (caller); read_unaligned needs no alignment.
    let qh = unsafe { p.cast::<u32>().read_unaligned() }.to_le_bytes();
    // SAFETY: BIT is 16 bytes.
    let bit = unsafe { vld1q_u8(BIT.as_ptr()) };
    let spread = |b0: u8, b1: u8| {
        let v = vcombine_u8(vdup_n_u8(b0), vdup_n_u8(b1));
        vandq_u8(vtstq_u8(v, bit), vdupq_n_u8(0x10))
    };
    [spread(qh[0], qh[1]), spread(qh[2], qh[3])]
}

/// A [`Block32`] weight type whose quants NEON code loads into two registers.
pub(crate) trait NeonBlock: Block32 {
    /// [`Block32::quants`] as two 16-byte registers (elements 0..16, 16..32).
    ///
    /// # Safety
    /// NEON available; `p` readable for [`Block32::BYTES`] bytes.
    unsafe fn quants_neon(p: *const u8) -> [int8x16_t; 2];
}

impl NeonBlock for Q4_1 {
    #[inline]
    unsafe fn quants_neon(p: *const u8) -> [int8x16_t; 2] {
        // SAFETY: the nibbles are bytes 4..20 of the block (caller); NEON (caller).
        unsafe { nibbles(p.add(4)).map(|v| vreinterpretq_s8_u8(v)) }
    }
}

impl NeonBlock for Q5_0 {
    #[inline]
    unsafe fn quants_neon(p: *const u8) -> [int8x16_t; 2] {
        // SAFETY: qh is bytes 2..6 and the nibbles 6..22 of the block (caller); NEON.
        unsafe {
            let (q, h) = (nibbles(p.add(6)), fifth_bits(p.add(2)));
            [0, 1].map(|i| vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(q[i], h[i])), vdupq_n_s8(16)))
        }
    }
}

impl NeonBlock for Q5_1 {
    #[inline]
    unsafe fn quants_neon(p: *const u8) -> [int8x16_t; 2] {
        // SAFETY: qh is bytes 4..8 and the nibbles 8..24 of the block (caller); NEON.
        unsafe {
            let (q, h) = (nibbles(p.add(8)), fifth_bits(p.add(4)));
            [0, 1].map(|i| vreinterpretq_s8_u8(vorrq_u8(q[i], h[i])))
        }
    }
}

/// `ggml_vec_dot_f32` (as [`super::generic::dot_f32`]).
///
/// # Safety
/// NEON available; `w` and `x` readable for `4 * k` bytes.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot_f32(k: usize, w: *const u8, x: *const u8) -> f32 {
    let np = k & !31;
    let mut acc = [F32x8::zero(); 4];
    for i in (0..np).step_by(32) {
        for (j, a) in acc.iter_mut().enumerate() {
            let off = 4 * (i + 8 * j);
            // SAFETY: elements i + 8j .. i + 8j + 8 are below np <= k (caller).
            *a = unsafe { a.fma(load_f32x8(w.add(off)), load_f32x8(x.add(off))) };
        }
    }
    let mut sum = reduce4(acc);
    for e in np..k {
        // SAFETY: e < k.
        let (a, b) = unsafe {
            (
                w.add(4 * e).cast::<f32>().read_unaligned(),
                x.add(4 * e).cast::<f32>().read_unaligned(),
            )
        };
        sum += a * b;
    }
    sum
}

/// `ggml_vec_dot_f16` (as [`super::generic::dot_f16`]): the reduced sum and the leftovers
/// in `f64`.
///
/// # Safety
/// NEON available; `w` and `x` readable for `2 * k` bytes.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot_f16(k: usize, w: *const u8, x: *const u8) -> f32 {
    let np = k & !31;
    let mut acc = [F32x8::zero(); 4];
    for i in (0..np).step_by(32) {
        for (j, a) in acc.iter_mut().enumerate() {
            let off = 2 * (i + 8 * j);
            // SAFETY: elements i + 8j .. i + 8j + 8 are below np <= k (caller).
            *a = unsafe { a.fma(load_f16x8(w.add(off)), load_f16x8(x.add(off))) };
        }
    }
    let mut sum = f64::from(reduce4(acc));
    for e in np..k {
        // SAFETY: e < k.
        let (a, b) = unsafe { (f16_at(w.add(2 * e)), f16_at(x.add(2 * e))) };
        sum += f64::from(a * b);
    }
    sum as f32
}

/// `ggml_vec_dot_bf16` (as [`super::generic::dot_bf16`]).
///
/// # Safety
/// NEON available; `w` and `x` readable for `2 * k` bytes.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot_bf16(k: usize, w: *const u8, x: *const u8) -> f32 {
    let np = k & !31;
    let mut c = [F32x8::zero(); 4];
    for i in (0..np).step_by(32) {
        for (j, cj) in c.iter_mut().enumerate() {
            let off = 2 * (i + 8 * j);
            // SAFETY: elements i + 8j .. i + 8j + 8 are below np <= k (caller).
            *cj = unsafe { cj.fma(load_bf16x8(w.add(off)), load_bf16x8(x.add(off))) };
        }
    }
    let v = c[0].add(c[2]).add(c[1].add(c[3]));
    let mut sum = 0f64;
    sum += f64::from(hsum8(v));
    for e in np..k {
        // SAFETY: e < k.
        let (a, b) = unsafe { (bf16_at(w.add(2 * e)), bf16_at(x.add(2 * e))) };
        sum += f64::from(a * b);
    }
    sum as f32
}

/// tinyBLAS's order for one output (as [`super::generic::dot_single_acc`]): one 8-lane
/// accumulator per block of [`crate::order::K_BLOCK`] elements, [`hsum8`] per block, the
/// block sums added in order. `load` reads 8 elements of either row.
///
/// # Safety
/// NEON available; `k % 8 == 0`; `load(w, e)` and `load(x, e)` valid for `e < k` in
/// steps of 8.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn dot_single_acc(
    k: usize,
    w: *const u8,
    x: *const u8,
    elt: usize,
    load: unsafe fn(*const u8) -> F32x8,
) -> f32 {
    let kb = crate::order::K_BLOCK;
    let mut sum = 0f32;
    for k0 in (0..k).step_by(kb) {
        let mut acc = F32x8::zero();
        for i in (k0..k.min(k0 + kb)).step_by(8) {
            // SAFETY: i + 8 <= k (k % 8 == 0, caller).
            acc = unsafe { acc.fma(load(w.add(elt * i)), load(x.add(elt * i))) };
        }
        sum = if k0 == 0 {
            hsum8(acc)
        } else {
            sum + hsum8(acc)
        };
    }
    sum
}

/// [`dot_single_acc`] on `f32` rows.
///
/// # Safety
/// NEON available; `k % 8 == 0`; `w` and `x` readable for `4 * k` bytes.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot_f32_single_acc(k: usize, w: *const u8, x: *const u8) -> f32 {
    // SAFETY: forwarded.
    unsafe { dot_single_acc(k, w, x, 4, load_f32x8) }
}

/// [`dot_single_acc`] on `f16` rows.
///
/// # Safety
/// NEON available; `k % 8 == 0`; `w` and `x` readable for `2 * k` bytes.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot_f16_single_acc(k: usize, w: *const u8, x: *const u8) -> f32 {
    // SAFETY: forwarded.
    unsafe { dot_single_acc(k, w, x, 2, load_f16x8) }
}

/// [`dot_single_acc`] on bfloat16 rows.
///
/// # Safety
/// NEON available; `k % 8 == 0`; `w` and `x` readable for `2 * k` bytes.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot_bf16_single_acc(k: usize, w: *const u8, x: *const u8) -> f32 {
    // SAFETY: forwarded.
    unsafe { dot_single_acc(k, w, x, 2, load_bf16x8) }
}

/// `ggml_vec_dot_q8_0_q8_0` (as [`super::generic::dot_q8_0`]) over `nb` blocks.
///
/// # Safety
/// NEON (and dotprod if `DOT`) available; `w` and `x` readable for `34 * nb` bytes.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot_q8_0<const DOT: bool>(nb: usize, w: *const u8, x: *const u8) -> f32 {
    let mut acc = F32x8::zero();
    for b in 0..nb {
        // SAFETY: block b lies within the 34 * nb readable bytes of each row.
        unsafe {
            let (wb, xb) = (w.add(34 * b), x.add(34 * b));
            let d = f16_at(wb) * f16_at(xb);
            let lanes = block_lanes::<DOT>(load_i8x32(wb.add(2)), load_i8x32(xb.add(2)));
            acc = acc.fma_n(d, lanes);
        }
    }
    hsum8(acc)
}

/// `ggml_vec_dot_q4_0_q8_0` (as [`super::generic::dot_q4_0`]) over `nb` blocks.
///
/// # Safety
/// NEON (and dotprod if `DOT`) available; `w` readable for `18 * nb` bytes, `x` for
/// `34 * nb`.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot_q4_0<const DOT: bool>(nb: usize, w: *const u8, x: *const u8) -> f32 {
    let mut acc = F32x8::zero();
    for b in 0..nb {
        // SAFETY: block b lies within the readable bytes of each row.
        unsafe {
            let (wb, xb) = (w.add(18 * b), x.add(34 * b));
            let d = f16_at(wb) * f16_at(xb);
            let wq = nibbles(wb.add(2)).map(|v| vsubq_s8(vreinterpretq_s8_u8(v), vdupq_n_s8(8)));
            let lanes = block_lanes::<DOT>(wq, load_i8x32(xb.add(2)));
            acc = acc.fma_n(d, lanes);
        }
    }
    hsum8(acc)
}

/// The dot product of `nb` blocks of `B` with activation blocks (as
/// [`super::generic::dot_block32`]).
///
/// # Safety
/// NEON (and dotprod if `DOT`) available; `w` readable for `nb` blocks of `B`, `x` for
/// `nb` activation blocks.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot_block32<B: NeonBlock, const DOT: bool>(
    nb: usize,
    w: *const u8,
    x: *const u8,
) -> f32 {
    let mut acc = F32x8::zero();
    let mut summs = 0f32;
    for b in 0..nb {
        // SAFETY: block b of both rows is readable (caller).
        unsafe {
            let (wb, xb) = (w.add(B::BYTES * b), x.add(B::X_BYTES * b));
            if B::HAS_MIN {
                summs = f16_at(wb.add(2)).mul_add(f16_at(xb.add(2)), summs);
            }
            let d = f16_at(wb) * f16_at(xb);
            let lanes = block_lanes::<DOT>(B::quants_neon(wb), load_i8x32(xb.add(B::X_BYTES - QK)));
            acc = acc.fma_n(d, lanes);
        }
    }
    if B::HAS_MIN {
        hsum8(acc) + summs
    } else {
        hsum8(acc)
    }
}

/// Quantizes 32 activations at `x` to one Q8_0 (`S = false`, 34 bytes) or Q8_1 (`S = true`,
/// 36 bytes) block at `out`, like [`crate::quant`]'s AVX2-semantics quantizers: scale
/// `127 / amax`, ties-to-even rounding (`fcvtns`), and for Q8_1 `s = f16(d · Σ q)`.
///
/// # Safety
/// NEON available; `x` readable for 32 `f32`, `out` writable for the block.
#[target_feature(enable = "neon")]
unsafe fn quantize_block_q8<const S: bool>(x: *const f32, out: *mut u8) {
    // SAFETY: 32 readable floats at x and a writable block at out (caller).
    unsafe {
        let v: [float32x4_t; 8] = std::array::from_fn(|i| load_f32x4(x.add(4 * i).cast()));
        let mut m = vabsq_f32(v[0]);
        for vi in &v[1..] {
            m = vmaxnmq_f32(m, vabsq_f32(*vi));
        }
        // maxnm ignores NaN like f32::max; for the rest max is order-independent.
        let amax = vmaxnmvq_f32(m);
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        let q: [int32x4_t; 8] = v.map(|vi| vcvtnq_s32_f32(vmulq_n_f32(vi, id)));
        let q16: [int16x8_t; 4] =
            std::array::from_fn(|i| vcombine_s16(vqmovn_s32(q[2 * i]), vqmovn_s32(q[2 * i + 1])));
        let q8 = [
            vcombine_s8(vqmovn_s16(q16[0]), vqmovn_s16(q16[1])),
            vcombine_s8(vqmovn_s16(q16[2]), vqmovn_s16(q16[3])),
        ];
        let head = if S { 4 } else { 2 };
        vst1q_s8(out.add(head).cast(), q8[0]);
        vst1q_s8(out.add(head + 16).cast(), q8[1]);
        out.cast::<[u8; 2]>()
            .write_unaligned(half::f16::from_f32(d).to_le_bytes());
        if S {
            let sum = vaddvq_s32(vaddq_s32(
                vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3])),
                vaddq_s32(vaddq_s32(q[4], q[5]), vaddq_s32(q[6], q[7])),
            ));
            out.add(2)
                .cast::<[u8; 2]>()
                .write_unaligned(half::f16::from_f32(d * sum as f32).to_le_bytes());
        }
    }
}

/// Converts a row of `f32` activations (a multiple of 32) to Q8_0 blocks, as
/// `convert_activations` does.
///
/// # Safety
/// NEON available; `dst` holds `src.len() / 32` blocks of 34 bytes.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn quantize_row_q8_0(src: &[f32], dst: &mut [u8]) {
    for (x, out) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(34)) {
        // SAFETY: 32 floats and a 34-byte block.
        unsafe { quantize_block_q8::<false>(x.as_ptr(), out.as_mut_ptr()) };
    }
}

/// Converts a row of `f32` activations (a multiple of 32) to Q8_1 blocks.
///
/// # Safety
/// NEON available; `dst` holds `src.len() / 32` blocks of 36 bytes.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn quantize_row_q8_1(src: &[f32], dst: &mut [u8]) {
    for (x, out) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(36)) {
        // SAFETY: 32 floats and a 36-byte block.
        unsafe { quantize_block_q8::<true>(x.as_ptr(), out.as_mut_ptr()) };
    }
}

/// Converts `src` to little-endian halves in `dst` (round to nearest even, `fcvtn`; the
/// same bits as `half::f16::from_f32`, NaNs included).
///
/// # Safety
/// NEON available; `dst` holds `2 * src.len()` bytes.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn f32_row_to_f16_bytes(src: &[f32], dst: &mut [u8]) {
    let n4 = src.len() & !3;
    for i in (0..n4).step_by(4) {
        // SAFETY: elements i..i + 4 of src, bytes 2i..2i + 8 of dst (caller).
        unsafe {
            let h = vcvt_f16_f32(load_f32x4(src.as_ptr().add(i).cast()));
            vst1_u8(dst.as_mut_ptr().add(2 * i), vreinterpret_u8_f16(h));
        }
    }
    for (x, out) in src[n4..].iter().zip(dst[2 * n4..].chunks_exact_mut(2)) {
        out.copy_from_slice(&half::f16::from_f32(*x).to_le_bytes());
    }
}
