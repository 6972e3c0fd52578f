//! Shared pieces of the K-quant block layouts: the super-block size and the packed 6-bit
//! scales and mins of `Q4_K`/`Q5_K`. Imports nothing.

/// Values per super-block.
pub const QK_K: usize = 256;

/// Bytes of the packed 6-bit scales and mins of `Q4_K`/`Q5_K` (and of `Q3_K`'s scales).
pub const K_SCALE_SIZE: usize = 12;

/// Unpacks the 6-bit scale and min of sub-block `j` (0..8) from `Q4_K`/`Q5_K` `scales`
/// (ggml's `get_scale_min_k4`): sub-blocks 0..4 in the low 6 bits of bytes `j` and
/// `j + 4`, sub-blocks 4..8 in the nibbles of byte `j + 4` with their top two bits in the
/// high bits of bytes `j − 4` and `j`.
#[inline]
pub(crate) fn scale_min_k4(j: usize, q: &[u8; K_SCALE_SIZE]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Packs 6-bit scales and mins of the 8 sub-blocks the way [`scale_min_k4`] reads them
/// (the packing loop of `quantize_row_q4_K_ref`).
pub(crate) fn pack_scale_min_k4(ls: &[u8; 8], lm: &[u8; 8]) -> [u8; K_SCALE_SIZE] {
    let mut s = [0u8; K_SCALE_SIZE];
    for j in 0..8 {
        if j < 4 {
            s[j] = ls[j];
            s[j + 4] = lm[j];
        } else {
            s[j + 4] = (ls[j] & 0xf) | ((lm[j] & 0xf) << 4);
            s[j - 4] |= (ls[j] >> 4) << 6;
            s[j] |= (lm[j] >> 4) << 6;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_min_packing_round_trips() {
        let ls = [0, 1, 17, 63, 32, 5, 48, 63];
        let lm = [63, 2, 33, 0, 15, 16, 62, 1];
        let packed = pack_scale_min_k4(&ls, &lm);
        for j in 0..8 {
            assert_eq!(scale_min_k4(j, &packed), (ls[j], lm[j]), "sub-block {j}");
        }
    }
}
