//! One K-quant super-block unpacked for the integer products of [`crate::k_quants::tiles`]:
//! what each block type's `unpack` produces (types layer; imports only the block size).

use super::scales::QK_K;

/// One super-block of a weight row, unpacked for the integer products.
#[repr(C, align(32))]
#[derive(Clone, Copy)]
pub(crate) struct Unpacked {
    /// Unsigned quants (`0..2^bits`), element order.
    pub q: [u8; QK_K],
    /// Group scale of each `maddubs` output lane: lane `l` of 32-element chunk `c` covers
    /// elements `32c + 2l, 32c + 2l + 1`, i.e. group `2c + l / 8`.
    pub sc: [i16; QK_K / 2],
    /// Per 16-group coefficient of the activation group sums (`bsums`): the min `m` for
    /// types with mins, `offset · sc` for `Q3_K`/`Q6_K`.
    pub c: [i16; QK_K / 16],
    /// Super-block scale.
    pub d: f32,
    /// Super-block scale of the mins (0 for types without).
    pub dmin: f32,
}

impl Unpacked {
    pub(crate) const ZERO: Unpacked = Unpacked {
        q: [0; QK_K],
        sc: [0; QK_K / 2],
        c: [0; QK_K / 16],
        d: 0.0,
        dmin: 0.0,
    };

    /// Builds a block from unsigned quants, one scale and one coefficient per 16-group.
    pub(crate) fn new(q: [u8; QK_K], group_sc: [i16; 16], c: [i16; 16], d: f32, dmin: f32) -> Self {
        let mut sc = [0i16; QK_K / 2];
        for (l, s) in sc.iter_mut().enumerate() {
            *s = group_sc[l / 8];
        }
        Unpacked { q, sc, c, d, dmin }
    }
}
