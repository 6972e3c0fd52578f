//! Sizes of the packed group blocks that every packed kernel shares (imports nothing).

/// Rows per interleaved group.
pub const PACK_ROWS: usize = 8;

/// Bytes of the 8 f16 scales at the start of a Q4_0/Q8_0 group block.
pub(crate) const SCALES_BYTES: usize = 2 * PACK_ROWS;

/// Bytes of one Q4_0 group block (8 rows × 32 elements).
pub(crate) const Q4_0_GROUP_BLOCK_BYTES: usize = SCALES_BYTES + PACK_ROWS * 16;

/// Bytes of one Q8_0 group block (8 rows × 32 elements).
pub(crate) const Q8_0_GROUP_BLOCK_BYTES: usize = SCALES_BYTES + PACK_ROWS * 32;
