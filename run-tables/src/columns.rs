//! One table being built column by column, and written as one Parquet file.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::types::{Float64Type, Int32Type, Int64Type, UInt32Type, UInt64Type};
use arrow_array::{
    ArrayRef, ArrowPrimitiveType, BooleanArray, PrimitiveArray, RecordBatch, StringArray,
};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::ExportError;

/// A table's columns in order, each with its Arrow field.
#[derive(Default)]
pub struct Columns {
    fields: Vec<Field>,
    arrays: Vec<ArrayRef>,
}

impl Columns {
    fn push(&mut self, name: &str, ty: DataType, nullable: bool, array: ArrayRef) {
        self.fields.push(Field::new(name, ty, nullable));
        self.arrays.push(array);
    }

    /// A string column.
    pub fn str<S: AsRef<str>>(mut self, name: &str, v: impl IntoIterator<Item = S>) -> Self {
        let a: StringArray = v.into_iter().map(|s| Some(s.as_ref().to_owned())).collect();
        self.push(name, DataType::Utf8, false, Arc::new(a));
        self
    }

    /// A string column with nulls.
    pub fn opt_str(mut self, name: &str, v: impl IntoIterator<Item = Option<String>>) -> Self {
        let a: StringArray = v.into_iter().collect();
        self.push(name, DataType::Utf8, true, Arc::new(a));
        self
    }

    /// A column of an Arrow primitive type, `nullable` or not.
    fn primitive<T: ArrowPrimitiveType>(
        mut self,
        name: &str,
        nullable: bool,
        v: impl IntoIterator<Item = Option<T::Native>>,
    ) -> Self {
        let a: PrimitiveArray<T> = v.into_iter().collect();
        self.push(name, T::DATA_TYPE, nullable, Arc::new(a));
        self
    }

    /// An unsigned 64-bit column.
    pub fn u64(self, name: &str, v: impl IntoIterator<Item = u64>) -> Self {
        self.primitive::<UInt64Type>(name, false, v.into_iter().map(Some))
    }

    /// An unsigned 64-bit column with nulls.
    pub fn opt_u64(self, name: &str, v: impl IntoIterator<Item = Option<u64>>) -> Self {
        self.primitive::<UInt64Type>(name, true, v)
    }

    /// An unsigned 32-bit column.
    pub fn u32(self, name: &str, v: impl IntoIterator<Item = u32>) -> Self {
        self.primitive::<UInt32Type>(name, false, v.into_iter().map(Some))
    }

    /// An unsigned 32-bit column with nulls.
    pub fn opt_u32(self, name: &str, v: impl IntoIterator<Item = Option<u32>>) -> Self {
        self.primitive::<UInt32Type>(name, true, v)
    }

    /// A signed 32-bit column.
    pub fn i32(self, name: &str, v: impl IntoIterator<Item = i32>) -> Self {
        self.primitive::<Int32Type>(name, false, v.into_iter().map(Some))
    }

    /// A signed 64-bit column.
    pub fn i64(self, name: &str, v: impl IntoIterator<Item = i64>) -> Self {
        self.primitive::<Int64Type>(name, false, v.into_iter().map(Some))
    }

    /// A 64-bit float column with nulls.
    pub fn opt_f64(self, name: &str, v: impl IntoIterator<Item = Option<f64>>) -> Self {
        self.primitive::<Float64Type>(name, true, v)
    }

    /// A boolean column.
    pub fn bool(mut self, name: &str, v: impl IntoIterator<Item = bool>) -> Self {
        let a: BooleanArray = v.into_iter().map(Some).collect();
        self.push(name, DataType::Boolean, false, Arc::new(a));
        self
    }

    /// Writes the table to `path` as one row group (Snappy), through a temporary file
    /// renamed into place, so a reader never sees half a file.
    pub fn write(self, path: &Path) -> Result<usize, ExportError> {
        let io = |source| ExportError::Io {
            path: path.to_path_buf(),
            source,
        };
        let schema = Arc::new(Schema::new(self.fields));
        let batch = RecordBatch::try_new(schema.clone(), self.arrays).map_err(|e| {
            ExportError::Parquet {
                path: path.to_path_buf(),
                message: e.to_string(),
            }
        })?;
        let rows = batch.num_rows();
        let tmp = path.with_extension("parquet.tmp");
        let file = File::create(&tmp).map_err(io)?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        let parquet = |e: parquet::errors::ParquetError| ExportError::Parquet {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let mut w = ArrowWriter::try_new(file, schema, Some(props)).map_err(parquet)?;
        w.write(&batch).map_err(parquet)?;
        w.close().map_err(parquet)?;
        std::fs::rename(&tmp, path).map_err(io)?;
        Ok(rows)
    }
}
