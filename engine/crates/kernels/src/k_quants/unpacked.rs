//! One K-quant super-block unpacked for the integer products of [`crate::k_quants::tiles`]:
//! what each block type's `unpack` produces (types layer; imports only the block scales).

use super::scales::{K_SCALE_SIZE, QK_K, scale_min_k4};

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

/// A super-block's scales as the integer products use them: per 16-group the scale and
/// the coefficient of the activation group sum, and the two float scales.
#[derive(Clone, Copy)]
pub(crate) struct GroupScales {
    /// Scale of each 16-group.
    pub sc: [i16; 16],
    /// Per 16-group coefficient of `bsums` (see [`Unpacked::c`]).
    pub c: [i16; 16],
    /// Super-block scale.
    pub d: f32,
    /// Super-block scale of the mins (0 for types without).
    pub dmin: f32,
}

/// The group scales of a `Q4_K`/`Q5_K` block (same header: `d`, `dmin`, packed 6-bit scales
/// and mins): each 32-element sub-block's scale and min given to both of its 16-groups.
pub(crate) fn k4_group_scales(d: f32, dmin: f32, scales: &[u8; K_SCALE_SIZE]) -> GroupScales {
    GroupScales {
        sc: std::array::from_fn(|g| i16::from(scale_min_k4(g / 2, scales).0)),
        c: std::array::from_fn(|g| i16::from(scale_min_k4(g / 2, scales).1)),
        d,
        dmin,
    }
}

impl Unpacked {
    pub(crate) const ZERO: Unpacked = Unpacked {
        q: [0; QK_K],
        sc: [0; QK_K / 2],
        c: [0; QK_K / 16],
        d: 0.0,
        dmin: 0.0,
    };

    /// Builds a block from unsigned quants and its group scales.
    pub(crate) fn new(q: [u8; QK_K], s: GroupScales) -> Self {
        let mut sc = [0i16; QK_K / 2];
        for (l, v) in sc.iter_mut().enumerate() {
            *v = s.sc[l / 8];
        }
        Unpacked {
            q,
            sc,
            c: s.c,
            d: s.d,
            dmin: s.dmin,
        }
    }
}
