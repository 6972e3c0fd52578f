//! Buffer checks shared by every layer: whether a byte buffer holds the rows an operation
//! reads. Imports only the error type.

use common::engine_abi::DType;

use crate::error::KernelError;

/// Checks that `bytes` holds at least one row of `k` elements of `dtype`; returns the row size.
pub(crate) fn check_row(
    what: &'static str,
    dtype: DType,
    k: usize,
    bytes: &[u8],
) -> Result<usize, KernelError> {
    let row = dtype
        .row_bytes(k)
        .ok_or(KernelError::RowNotBlockAligned { dtype, k })?;
    if bytes.len() < row {
        return Err(KernelError::BufferTooSmall {
            what,
            required: row,
            actual: bytes.len(),
        });
    }
    Ok(row)
}

/// Checks that `bytes` holds `rows` rows of `k` elements of `dtype`, row `i` at byte
/// `i * stride`, and returns the bytes of one row.
pub(crate) fn check_matrix(
    what: &'static str,
    dtype: DType,
    k: usize,
    bytes: &[u8],
    stride: usize,
    rows: usize,
) -> Result<usize, KernelError> {
    let row = dtype
        .row_bytes(k)
        .ok_or(KernelError::RowNotBlockAligned { dtype, k })?;
    if rows == 0 {
        return Ok(row);
    }
    if rows > 1 && stride < row {
        return Err(KernelError::BufferTooSmall {
            what,
            required: row,
            actual: stride,
        });
    }
    let required = (rows - 1)
        .checked_mul(stride)
        .and_then(|r| r.checked_add(row))
        .ok_or(KernelError::BufferTooSmall {
            what,
            required: usize::MAX,
            actual: bytes.len(),
        })?;
    if bytes.len() < required {
        return Err(KernelError::BufferTooSmall {
            what,
            required,
            actual: bytes.len(),
        });
    }
    Ok(row)
}
