//! Errors of the kernel entry points that take caller-provided buffers.

use common::engine_abi::DType;

/// A buffer or shape handed to a kernel does not fit the requested operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// The row length is not a whole number of the type's blocks.
    #[error("row of {k} elements is not a whole number of {dtype:?} blocks")]
    RowNotBlockAligned {
        /// Element type of the row.
        dtype: DType,
        /// Number of elements in the row.
        k: usize,
    },
    /// A byte buffer is shorter than the shape requires.
    #[error("{what}: buffer holds {actual} bytes, {required} required")]
    BufferTooSmall {
        /// Which buffer is too small.
        what: &'static str,
        /// Bytes the operation needs.
        required: usize,
        /// Bytes the caller provided.
        actual: usize,
    },
    /// Two slices that must describe the same number of elements do not.
    #[error("{what}: {left} elements against {right}")]
    LengthMismatch {
        /// Which pair of slices disagrees.
        what: &'static str,
        /// Elements on the left-hand side.
        left: usize,
        /// Elements on the right-hand side.
        right: usize,
    },
    /// The kernel does not handle this element type (or this pair of types).
    #[error("unsupported type {dtype:?} for {op}")]
    UnsupportedType {
        /// The offending type.
        dtype: DType,
        /// The operation asked for.
        op: &'static str,
    },
    /// The matrix cannot be packed ([`crate::packed`]): wrong type, or rows not a
    /// multiple of 8 / elements not a multiple of 32.
    #[error("{dtype:?} matrix of {n} rows × {k} elements cannot be packed in groups of 8 rows")]
    NotPackable {
        /// Element type of the matrix.
        dtype: DType,
        /// Elements per row.
        k: usize,
        /// Rows (or the end of the requested row range).
        n: usize,
    },
}
