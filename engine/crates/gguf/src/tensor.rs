//! Tensor descriptions as declared in a GGUF header.

use crate::GgmlType;
use crate::error::GgufError;
use crate::limits::{MAX_DIMS, MAX_TENSOR_ELEMENTS, MAX_TENSOR_NAME_LEN};

/// One tensor of a GGUF file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Tensor name (e.g. `blk.0.attn_q.weight`).
    pub name: String,
    /// Dimensions `ne`, innermost (contiguous) first, as stored in the file.
    pub dims: Vec<u64>,
    /// Element type.
    pub ggml_type: GgmlType,
    /// Absolute file offset of the tensor's data.
    pub offset: u64,
    /// Size of the tensor's data in bytes.
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Number of elements (product of `dims`; 1 for zero dimensions).
    pub fn n_elements(&self) -> u64 {
        // Validated when the tensor was read or declared, so it cannot overflow.
        self.dims.iter().product()
    }

    /// The error to return when the caller does not support this tensor's type.
    pub fn unsupported_type(&self) -> GgufError {
        GgufError::UnsupportedTensorType {
            name: self.name.clone(),
            ggml_type: self.ggml_type,
        }
    }
}

/// Checks a tensor's name and shape against ggml's rules and returns its size in bytes.
pub(crate) fn validate_shape(
    name: &str,
    dims: &[u64],
    ggml_type: GgmlType,
) -> Result<u64, GgufError> {
    if name.len() as u64 > MAX_TENSOR_NAME_LEN {
        return Err(GgufError::TensorNameTooLong {
            name: name.to_owned(),
            len: name.len() as u64,
            max: MAX_TENSOR_NAME_LEN,
        });
    }
    if dims.len() > MAX_DIMS as usize {
        return Err(GgufError::TooManyDims {
            name: name.to_owned(),
            n_dims: u32::try_from(dims.len()).unwrap_or(u32::MAX),
            max: MAX_DIMS,
        });
    }
    let overflow = || GgufError::ShapeOverflow {
        name: name.to_owned(),
        dims: dims.to_vec(),
    };
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= MAX_TENSOR_ELEMENTS && dims.iter().all(|&d| d <= MAX_TENSOR_ELEMENTS))
        .ok_or_else(overflow)?;
    let ne0 = dims.first().copied().unwrap_or(1);
    if !ne0.is_multiple_of(ggml_type.block_len()) {
        return Err(GgufError::PartialBlock {
            name: name.to_owned(),
            ne0,
            ggml_type,
            block_len: ggml_type.block_len(),
        });
    }
    ggml_type.bytes_for(n_elements).ok_or_else(overflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_block_layout() {
        // 64 x 3 q8_0: 2 blocks per row of 34 bytes, 3 rows.
        assert_eq!(
            validate_shape("w", &[64, 3], GgmlType::Q8_0).expect("valid"),
            2 * 34 * 3
        );
        assert_eq!(
            validate_shape("w", &[5, 7], GgmlType::F32).expect("valid"),
            5 * 7 * 4
        );
        assert_eq!(
            validate_shape("scalar", &[], GgmlType::F32).expect("valid"),
            4
        );
        assert_eq!(
            validate_shape("empty", &[0, 9], GgmlType::F16).expect("valid"),
            0
        );
    }

    #[test]
    fn rejects_bad_shapes() {
        assert!(matches!(
            validate_shape("w", &[33, 2], GgmlType::Q4_0),
            Err(GgufError::PartialBlock { ne0: 33, .. })
        ));
        assert!(matches!(
            validate_shape("w", &[1; 5], GgmlType::F32),
            Err(GgufError::TooManyDims { n_dims: 5, .. })
        ));
        assert!(matches!(
            validate_shape("w", &[1 << 32, 1 << 32], GgmlType::F32),
            Err(GgufError::ShapeOverflow { .. })
        ));
        // Element count fits in i64 but the byte size overflows u64.
        assert!(matches!(
            validate_shape("w", &[1 << 62], GgmlType::F32),
            Err(GgufError::ShapeOverflow { .. })
        ));
        assert!(matches!(
            validate_shape("w", &[1 << 63], GgmlType::I8),
            Err(GgufError::ShapeOverflow { .. })
        ));
        let long = "x".repeat(64);
        assert!(matches!(
            validate_shape(&long, &[1], GgmlType::F32),
            Err(GgufError::TensorNameTooLong { len: 64, .. })
        ));
    }
}
