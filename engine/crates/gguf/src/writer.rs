//! Streaming GGUF v3 writer: declare metadata and tensors, write the header, then each
//! tensor's data in declaration order, so no more than one tensor is ever in memory.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;

use crate::GgmlType;
use crate::error::GgufError;
use crate::limits::{
    ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION, MAX_ALIGNMENT, MAX_ARRAY_DEPTH,
    MAX_ARRAY_LEN, MAX_KV_PAIRS, MAX_STRING_LEN, MAX_TENSORS,
};
use crate::metadata::Metadata;
use crate::tensor::{TensorInfo, validate_shape};
use crate::value::{Array, Value};

/// Zero bytes used for padding (alignment never exceeds this many bytes of padding
/// in one write; longer padding is written in several pieces).
const PADDING: [u8; 4096] = [0; 4096];

/// Writes a GGUF v3 file that llama.cpp and gguf-py load.
///
/// Usage: [`add_kv`](Self::add_kv) and [`add_tensor`](Self::add_tensor) in any order,
/// then [`write_header`](Self::write_header), then
/// [`write_tensor_data`](Self::write_tensor_data) (or
/// [`write_tensor_data_from`](Self::write_tensor_data_from)) once per tensor in
/// declaration order, then [`finish`](Self::finish). Wrap files in a [`BufWriter`].
#[derive(Debug)]
pub struct GgufWriter {
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    names: HashSet<String>,
    alignment: u64,
    header_written: bool,
    next_tensor: usize,
    position: u64,
}

impl Default for GgufWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl GgufWriter {
    /// A writer with no metadata and no tensors.
    pub fn new() -> Self {
        Self {
            metadata: Metadata::new(),
            tensors: Vec::new(),
            names: HashSet::new(),
            alignment: DEFAULT_ALIGNMENT,
            header_written: false,
            next_tensor: 0,
            position: 0,
        }
    }

    /// Adds a metadata pair. `general.alignment` must be a `u32` power of two and sets
    /// the tensor data alignment. Keys must be unique; values must respect the limits
    /// in [`crate::limits`] so that the reader accepts the file.
    pub fn add_kv(
        &mut self,
        key: impl Into<String>,
        value: impl Into<Value>,
    ) -> Result<(), GgufError> {
        self.check_not_started()?;
        let key = key.into();
        let value = value.into();
        if self.metadata.len() as u64 >= MAX_KV_PAIRS {
            return Err(GgufError::ValueTooLarge {
                key,
                limit: "more than MAX_KV_PAIRS metadata pairs",
            });
        }
        if key.len() as u64 > MAX_STRING_LEN {
            return Err(GgufError::ValueTooLarge {
                key,
                limit: "key longer than MAX_STRING_LEN",
            });
        }
        check_value(&key, &value)?;
        if key == ALIGNMENT_KEY {
            let Value::U32(a) = value else {
                return Err(GgufError::KeyType {
                    key,
                    expected: "u32",
                    found: value.type_description(),
                });
            };
            let a = u64::from(a);
            if a == 0 || !a.is_power_of_two() || a > MAX_ALIGNMENT {
                return Err(GgufError::BadAlignment {
                    alignment: a,
                    max: MAX_ALIGNMENT,
                });
            }
            self.alignment = a;
        }
        self.metadata.insert(key, value)
    }

    /// Declares a tensor with dimensions `dims` (innermost first) and type `ggml_type`.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        ggml_type: GgmlType,
    ) -> Result<(), GgufError> {
        self.check_not_started()?;
        let name = name.into();
        if self.tensors.len() as u64 >= MAX_TENSORS {
            return Err(GgufError::TooMany {
                what: "tensors",
                count: MAX_TENSORS + 1,
                max: MAX_TENSORS,
                offset: 0,
            });
        }
        let n_bytes = validate_shape(&name, dims, ggml_type)?;
        if !self.names.insert(name.clone()) {
            return Err(GgufError::DuplicateTensor { name, offset: 0 });
        }
        self.tensors.push(TensorInfo {
            name,
            dims: dims.to_vec(),
            ggml_type,
            offset: 0,
            n_bytes,
        });
        Ok(())
    }

    /// The metadata added so far.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The tensors declared so far; their `offset`s are absolute file offsets once the
    /// header has been written and 0 before.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor data alignment.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Computes the tensor offsets and writes the header and the padding before the
    /// data section.
    pub fn write_header(&mut self, w: &mut impl Write) -> Result<(), GgufError> {
        self.check_not_started()?;
        let mut relative = Vec::with_capacity(self.tensors.len());
        let mut data_len: u64 = 0;
        for t in &self.tensors {
            relative.push(data_len);
            data_len = data_len
                .checked_add(t.n_bytes)
                .and_then(|end| end.checked_next_multiple_of(self.alignment))
                .ok_or_else(|| GgufError::ShapeOverflow {
                    name: t.name.clone(),
                    dims: t.dims.clone(),
                })?;
        }

        let mut buf = Vec::new();
        buf.extend_from_slice(&GGUF_MAGIC);
        buf.extend_from_slice(&GGUF_VERSION.to_le_bytes());
        buf.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        buf.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in self.metadata.iter() {
            encode_str(&mut buf, key);
            buf.extend_from_slice(&value.value_type().id().to_le_bytes());
            encode_value(&mut buf, value);
        }
        for (t, &rel) in self.tensors.iter().zip(&relative) {
            encode_str(&mut buf, &t.name);
            buf.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                buf.extend_from_slice(&d.to_le_bytes());
            }
            buf.extend_from_slice(&t.ggml_type.id().to_le_bytes());
            buf.extend_from_slice(&rel.to_le_bytes());
        }
        let data_offset = (buf.len() as u64).next_multiple_of(self.alignment);
        for (t, rel) in self.tensors.iter_mut().zip(relative) {
            t.offset = data_offset + rel;
        }
        w.write_all(&buf)
            .map_err(|source| GgufError::Write { source })?;
        self.position = buf.len() as u64;
        self.pad(w)?;
        self.header_written = true;
        Ok(())
    }

    /// Writes the data of the next tensor, which must be `name` and exactly its size.
    pub fn write_tensor_data(
        &mut self,
        w: &mut impl Write,
        name: &str,
        bytes: &[u8],
    ) -> Result<(), GgufError> {
        let expected = self.next_tensor_info(name)?.n_bytes;
        if bytes.len() as u64 != expected {
            return Err(GgufError::TensorSizeMismatch {
                name: name.to_owned(),
                expected,
                got: bytes.len() as u64,
            });
        }
        w.write_all(bytes)
            .map_err(|source| GgufError::Write { source })?;
        self.tensor_done(w, expected)
    }

    /// Writes the data of the next tensor, which must be `name`, by copying exactly its
    /// size from `source` (so a large tensor can be streamed).
    pub fn write_tensor_data_from(
        &mut self,
        w: &mut impl Write,
        name: &str,
        source: &mut impl Read,
    ) -> Result<(), GgufError> {
        let expected = self.next_tensor_info(name)?.n_bytes;
        let mut limited = source.take(expected);
        let copied = io::copy(&mut limited, w).map_err(|source| GgufError::Write { source })?;
        if copied != expected {
            return Err(GgufError::TensorSizeMismatch {
                name: name.to_owned(),
                expected,
                got: copied,
            });
        }
        self.tensor_done(w, expected)
    }

    /// Checks that every tensor's data was written and flushes `w`.
    pub fn finish(self, w: &mut impl Write) -> Result<(), GgufError> {
        if !self.header_written {
            return Err(GgufError::WriterState {
                problem: "finish called before write_header",
            });
        }
        if self.next_tensor != self.tensors.len() {
            return Err(GgufError::TensorsNotWritten {
                written: self.next_tensor,
                declared: self.tensors.len(),
            });
        }
        w.flush().map_err(|source| GgufError::Write { source })
    }

    /// Writes the whole file to `w`; `data[i]` is the data of the i-th declared tensor.
    pub fn write_to(mut self, w: &mut impl Write, data: &[&[u8]]) -> Result<(), GgufError> {
        if data.len() > self.tensors.len() {
            return Err(GgufError::WriterState {
                problem: "more tensor data given than tensors declared",
            });
        }
        self.write_header(w)?;
        let names: Vec<String> = self.tensors.iter().map(|t| t.name.clone()).collect();
        for (name, bytes) in names.iter().zip(data) {
            self.write_tensor_data(w, name, bytes)?;
        }
        self.finish(w)
    }

    /// Writes the whole file to a new file at `path` (see [`write_to`](Self::write_to)).
    pub fn write_to_path(self, path: impl AsRef<Path>, data: &[&[u8]]) -> Result<(), GgufError> {
        let path = path.as_ref();
        let file = File::create(path).map_err(|source| GgufError::Io {
            path: path.to_owned(),
            source,
        })?;
        self.write_to(&mut BufWriter::new(file), data)
    }

    fn check_not_started(&self) -> Result<(), GgufError> {
        if self.header_written {
            return Err(GgufError::WriterState {
                problem: "the header has already been written",
            });
        }
        Ok(())
    }

    fn next_tensor_info(&self, name: &str) -> Result<&TensorInfo, GgufError> {
        if !self.header_written {
            return Err(GgufError::WriterState {
                problem: "tensor data written before write_header",
            });
        }
        let Some(next) = self.tensors.get(self.next_tensor) else {
            return Err(GgufError::WriterState {
                problem: "tensor data written after every tensor was written",
            });
        };
        if next.name != name {
            return Err(GgufError::TensorOutOfOrder {
                got: name.to_owned(),
                expected: next.name.clone(),
            });
        }
        Ok(next)
    }

    fn tensor_done(&mut self, w: &mut impl Write, n_bytes: u64) -> Result<(), GgufError> {
        self.position += n_bytes;
        self.next_tensor += 1;
        self.pad(w)
    }

    /// Writes zeros up to the next multiple of the alignment.
    fn pad(&mut self, w: &mut impl Write) -> Result<(), GgufError> {
        let mut missing = self.position.next_multiple_of(self.alignment) - self.position;
        while missing > 0 {
            let n = missing.min(PADDING.len() as u64);
            w.write_all(&PADDING[..n as usize])
                .map_err(|source| GgufError::Write { source })?;
            missing -= n;
            self.position += n;
        }
        Ok(())
    }
}

/// Checks a value against the limits the reader enforces.
fn check_value(key: &str, value: &Value) -> Result<(), GgufError> {
    let too_large = |limit| {
        Err(GgufError::ValueTooLarge {
            key: key.to_owned(),
            limit,
        })
    };
    match value {
        Value::Str(s) if s.len() as u64 > MAX_STRING_LEN => {
            too_large("string longer than MAX_STRING_LEN")
        }
        Value::Array(a) if a.depth() > MAX_ARRAY_DEPTH => {
            too_large("arrays nested deeper than MAX_ARRAY_DEPTH")
        }
        Value::Array(a) => check_array(key, a),
        _ => Ok(()),
    }
}

fn check_array(key: &str, array: &Array) -> Result<(), GgufError> {
    let too_large = |limit| {
        Err(GgufError::ValueTooLarge {
            key: key.to_owned(),
            limit,
        })
    };
    if array.len() as u64 > MAX_ARRAY_LEN {
        return too_large("array longer than MAX_ARRAY_LEN");
    }
    match array {
        Array::Str(v) if v.iter().any(|s| s.len() as u64 > MAX_STRING_LEN) => {
            too_large("string longer than MAX_STRING_LEN")
        }
        Array::Array(v) => v.iter().try_for_each(|a| check_array(key, a)),
        _ => Ok(()),
    }
}

fn encode_str(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
    buf.extend_from_slice(s.as_bytes());
}

fn encode_value(buf: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U8(v) => buf.push(*v),
        Value::I8(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::U16(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::I16(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::U32(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::I32(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::F32(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::Bool(v) => buf.push(u8::from(*v)),
        Value::Str(v) => encode_str(buf, v),
        Value::Array(v) => encode_array(buf, v),
        Value::U64(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::F64(v) => buf.extend_from_slice(&v.to_le_bytes()),
    }
}

fn encode_array(buf: &mut Vec<u8>, array: &Array) {
    buf.extend_from_slice(&array.elem_type().id().to_le_bytes());
    buf.extend_from_slice(&(array.len() as u64).to_le_bytes());
    macro_rules! le {
        ($v:expr) => {
            for x in $v {
                buf.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match array {
        Array::U8(v) => buf.extend_from_slice(v),
        Array::I8(v) => le!(v),
        Array::U16(v) => le!(v),
        Array::I16(v) => le!(v),
        Array::U32(v) => le!(v),
        Array::I32(v) => le!(v),
        Array::F32(v) => le!(v),
        Array::Bool(v) => buf.extend(v.iter().map(|&b| u8::from(b))),
        Array::Str(v) => v.iter().for_each(|s| encode_str(buf, s)),
        Array::Array(v) => v.iter().for_each(|a| encode_array(buf, a)),
        Array::U64(v) => le!(v),
        Array::I64(v) => le!(v),
        Array::F64(v) => le!(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_matches_spec_by_hand() {
        // One u32 pair and one 2-element f32 tensor, laid out by hand from the spec.
        let mut w = GgufWriter::new();
        w.add_kv("a", 7u32).expect("valid pair");
        w.add_tensor("t", &[2], GgmlType::F32)
            .expect("valid tensor");
        let mut out = Vec::new();
        w.write_to(&mut out, &[&[1, 2, 3, 4, 5, 6, 7, 8]])
            .expect("writes");

        let mut expected = Vec::new();
        expected.extend_from_slice(b"GGUF");
        expected.extend_from_slice(&3u32.to_le_bytes());
        expected.extend_from_slice(&1u64.to_le_bytes()); // tensors
        expected.extend_from_slice(&1u64.to_le_bytes()); // pairs
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.push(b'a');
        expected.extend_from_slice(&4u32.to_le_bytes()); // UINT32
        expected.extend_from_slice(&7u32.to_le_bytes());
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.push(b't');
        expected.extend_from_slice(&1u32.to_le_bytes()); // n_dims
        expected.extend_from_slice(&2u64.to_le_bytes());
        expected.extend_from_slice(&0u32.to_le_bytes()); // F32
        expected.extend_from_slice(&0u64.to_le_bytes()); // offset
        // 24 fixed header + 17 pair (8 + 1 + 4 + 4) + 33 tensor info (8 + 1 + 4 + 8 + 4 + 8).
        assert_eq!(expected.len(), 74);
        expected.extend_from_slice(&[0; 22]); // pad to 96
        expected.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        expected.extend_from_slice(&[0; 24]); // pad to 128
        assert_eq!(out, expected);
    }

    #[test]
    fn misuse_is_reported() {
        let mut w = GgufWriter::new();
        w.add_tensor("a", &[4], GgmlType::F32).expect("valid");
        w.add_tensor("b", &[4], GgmlType::F32).expect("valid");
        let mut out = Vec::new();
        assert!(matches!(
            w.write_tensor_data(&mut out, "a", &[0; 16]),
            Err(GgufError::WriterState { .. })
        ));
        w.write_header(&mut out).expect("header");
        assert!(matches!(
            w.add_kv("k", 1u8),
            Err(GgufError::WriterState { .. })
        ));
        assert!(matches!(
            w.write_tensor_data(&mut out, "b", &[0; 16]),
            Err(GgufError::TensorOutOfOrder { .. })
        ));
        assert!(matches!(
            w.write_tensor_data(&mut out, "a", &[0; 15]),
            Err(GgufError::TensorSizeMismatch {
                expected: 16,
                got: 15,
                ..
            })
        ));
        w.write_tensor_data(&mut out, "a", &[0; 16])
            .expect("right size");
        assert!(matches!(
            w.finish(&mut out),
            Err(GgufError::TensorsNotWritten {
                written: 1,
                declared: 2
            })
        ));
    }

    #[test]
    fn rejects_bad_declarations() {
        let mut w = GgufWriter::new();
        assert!(matches!(
            w.add_kv(ALIGNMENT_KEY, 24u32),
            Err(GgufError::BadAlignment { alignment: 24, .. })
        ));
        assert!(matches!(
            w.add_kv(ALIGNMENT_KEY, 64u64),
            Err(GgufError::KeyType { .. })
        ));
        w.add_tensor("x", &[32], GgmlType::Q8_0).expect("valid");
        assert!(matches!(
            w.add_tensor("x", &[32], GgmlType::Q8_0),
            Err(GgufError::DuplicateTensor { .. })
        ));
        assert!(matches!(
            w.add_tensor("y", &[16], GgmlType::Q8_0),
            Err(GgufError::PartialBlock { .. })
        ));
        let deep = (0..MAX_ARRAY_DEPTH).fold(Array::U8(vec![]), |a, _| Array::Array(vec![a]));
        assert!(matches!(
            w.add_kv("deep", deep),
            Err(GgufError::ValueTooLarge { .. })
        ));
        w.add_kv("k", 1u8).expect("valid");
        assert!(matches!(
            w.add_kv("k", 2u8),
            Err(GgufError::DuplicateKey { .. })
        ));
    }

    #[test]
    fn streams_data_from_a_reader() {
        let mut w = GgufWriter::new();
        w.add_tensor("a", &[3], GgmlType::I8).expect("valid");
        let mut out = Vec::new();
        w.write_header(&mut out).expect("header");
        let mut source: &[u8] = &[9, 8, 7, 6, 5];
        w.write_tensor_data_from(&mut out, "a", &mut source)
            .expect("copies 3 bytes");
        assert_eq!(source, &[6, 5], "only the tensor's bytes are consumed");
        let offset = w.tensors()[0].offset as usize;
        assert_eq!(&out[offset..offset + 3], &[9, 8, 7]);
        assert_eq!(out.len() % 32, 0);
        w.finish(&mut out).expect("complete");
    }
}
