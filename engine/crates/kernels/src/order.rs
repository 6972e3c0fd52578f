//! The accumulation orders every backend reproduces: ggml's AVX2 code sums in 8 `f32` lanes
//! and reduces them in a fixed order; the portable code and the NEON code (two 4-lane
//! vectors, `lo` = lanes 0..4, `hi` = lanes 4..8) take the same steps, so all backends
//! round alike. This module is the bottom layer of the crate: it imports nothing.

/// Lanes of one AVX2 `f32` vector.
pub(crate) const LANES: usize = 8;

/// ggml's `hsum_float_8` / tinyBLAS `hsum`: `(lo + hi)`, then `movehl` add, then `movehdup`.
#[inline]
pub(crate) fn hsum8(v: [f32; LANES]) -> f32 {
    let r = [v[4] + v[0], v[5] + v[1], v[6] + v[2], v[7] + v[3]];
    let s0 = r[0] + r[2];
    let s1 = r[1] + r[3];
    s0 + s1
}

/// ggml's `GGML_F32x8_REDUCE` of four accumulators (pairwise adds, then two `hadd`s).
#[inline]
pub(crate) fn reduce4(acc: [[f32; LANES]; 4]) -> f32 {
    let [mut a0, mut a1, a2, a3] = acc;
    for l in 0..LANES {
        a0[l] += a2[l];
        a1[l] += a3[l];
    }
    for (x, y) in a0.iter_mut().zip(a1) {
        *x += y;
    }
    let acc = [a0];
    let t0 = [
        acc[0][0] + acc[0][4],
        acc[0][1] + acc[0][5],
        acc[0][2] + acc[0][6],
        acc[0][3] + acc[0][7],
    ];
    (t0[0] + t0[1]) + (t0[2] + t0[3])
}

/// Elements of K a tinyBLAS-order float product covers before its sums are written out:
/// all of them. llama.cpp 0.3.36's tinyBLAS (`gemm_bloc` in llamafile/sgemm.cpp) keeps one
/// 8-lane accumulator per output over the whole of K and writes its `hsum` once; blocking
/// K (2048 before issue 25, for cache reuse at K = 8192) added the block sums separately
/// and put llama3.2-1b f16's logits 4.3e-4 off at 4 tokens.
pub(crate) const K_BLOCK: usize = usize::MAX;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hsum_and_reduce_orders_add_everything() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        assert_eq!(hsum8(v), 36.0);
        assert_eq!(reduce4([v, v, v, v]), 144.0);
        // hsum8 pairs lane 0 with 4 first: (1e8 + -1e8) survives, (1 + 1) does not get lost.
        let w = [1e8, 1.0, 0.0, 0.0, -1e8, 1.0, 0.0, 0.0];
        assert_eq!(hsum8(w), 2.0);
    }
}
