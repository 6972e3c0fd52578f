//! Parsing a GGUF file: header, metadata and tensor infos, with zero-copy tensor data.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::GgmlType;
use crate::cursor::Cursor;
use crate::error::GgufError;
use crate::limits::{
    ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION, MAX_ALIGNMENT, MAX_ARRAY_DEPTH,
    MAX_ARRAY_LEN, MAX_DIMS, MAX_KV_PAIRS, MAX_STRING_LEN, MAX_TENSOR_NAME_LEN, MAX_TENSORS,
    MIN_READ_VERSION,
};
use crate::metadata::Metadata;
use crate::tensor::{TensorInfo, validate_shape};
use crate::value::{Array, Value, ValueType};

/// Smallest encoding of one metadata pair: key length, value type, a one-byte value.
const MIN_KV_LEN: u64 = 8 + 4 + 1;
/// Smallest encoding of one tensor info: name length, n_dims, type, offset.
const MIN_TENSOR_INFO_LEN: u64 = 8 + 4 + 4 + 8;

/// The bytes of a GGUF file: memory-mapped or owned.
#[derive(Debug)]
enum Storage {
    /// A read-only memory map of the file.
    Mapped(Mmap),
    /// Bytes held in memory.
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        }
    }
}

/// A parsed, validated GGUF file. Tensor data is borrowed from the file's bytes.
///
/// Every tensor's data lies inside the file, is aligned, and has the size its shape and
/// type require; names and keys are unique.
#[derive(Debug)]
pub struct GgufFile {
    storage: Storage,
    version: u32,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: u64,
    data_offset: u64,
}

/// Delegates typed metadata getters to [`Metadata`].
macro_rules! delegate_getters {
    ($( $name:ident -> $ret:ty; )*) => {
        $(
            #[doc = concat!("Same as [`Metadata::", stringify!($name), "`] on this file's metadata.")]
            pub fn $name(&self, key: &str) -> Result<$ret, GgufError> {
                self.metadata.$name(key)
            }
        )*
    };
}

impl GgufFile {
    /// Memory-maps and parses the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        let path = path.as_ref();
        let io_err = |source| GgufError::Io {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(io_err)?;
        let len = file.metadata().map_err(io_err)?.len();
        let storage = if len == 0 {
            Storage::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only and private to this value. Like every
            // memory-mapped reader we rely on the file not being truncated or modified
            // by another process while it is mapped; model files are written once.
            let map = unsafe { Mmap::map(&file) }.map_err(io_err)?;
            Storage::Mapped(map)
        };
        Self::from_storage(storage)
    }

    /// Parses a GGUF file held in memory.
    pub fn from_vec(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        Self::from_storage(Storage::Owned(bytes))
    }

    /// Parses a copy of `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<GgufFile, GgufError> {
        Self::from_vec(bytes.to_vec())
    }

    fn from_storage(storage: Storage) -> Result<GgufFile, GgufError> {
        let header = parse_header(storage.bytes())?;
        Ok(GgufFile {
            storage,
            version: header.version,
            metadata: header.metadata,
            tensor_index: header
                .tensors
                .iter()
                .enumerate()
                .map(|(i, t)| (t.name.clone(), i))
                .collect(),
            tensors: header.tensors,
            alignment: header.alignment,
            data_offset: header.data_offset,
        })
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// All metadata, in file order.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// All tensors, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// The tensor called `name`, or [`GgufError::TensorMissing`].
    pub fn require_tensor(&self, name: &str) -> Result<&TensorInfo, GgufError> {
        self.tensor(name).ok_or_else(|| GgufError::TensorMissing {
            name: name.to_owned(),
        })
    }

    /// The data of `tensor`, borrowed from the file.
    ///
    /// # Panics
    /// If `tensor` does not lie inside this file, which cannot happen for a
    /// [`TensorInfo`] obtained from this file.
    pub fn tensor_data(&self, tensor: &TensorInfo) -> &[u8] {
        let range = usize::try_from(tensor.offset)
            .ok()
            .zip(usize::try_from(tensor.n_bytes).ok())
            .and_then(|(start, len)| Some(start..start.checked_add(len)?));
        range
            .and_then(|r| self.bytes().get(r))
            .unwrap_or_else(|| panic!("tensor {} does not belong to this GGUF file", tensor.name))
    }

    /// The alignment of tensor data (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Absolute offset of the tensor data section.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        self.storage.bytes()
    }

    delegate_getters! {
        get_u32 -> u32;
        get_u64 -> u64;
        get_i32 -> i32;
        get_i64 -> i64;
        get_f32 -> f32;
        get_str -> &str;
        get_bool -> bool;
        get_array -> &Array;
        get_str_array -> &[String];
        get_f32_array -> &[f32];
        get_i32_array -> &[i32];
        opt_u32 -> Option<u32>;
        opt_u64 -> Option<u64>;
        opt_i32 -> Option<i32>;
        opt_i64 -> Option<i64>;
        opt_f32 -> Option<f32>;
        opt_str -> Option<&str>;
        opt_bool -> Option<bool>;
        opt_array -> Option<&Array>;
    }
}

/// The parsed header of a GGUF file, independent of where its bytes live.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufHeader {
    /// The format version (2 or 3).
    pub version: u32,
    /// All metadata, in file order.
    pub metadata: Metadata,
    /// All tensors, in file order, with absolute data offsets.
    pub tensors: Vec<TensorInfo>,
    /// The alignment of tensor data.
    pub alignment: u64,
    /// Absolute offset of the tensor data section.
    pub data_offset: u64,
}

/// Parses and validates the header of the GGUF file `bytes`, checking that every
/// tensor's data lies inside `bytes`.
pub fn parse_header(bytes: &[u8]) -> Result<GgufHeader, GgufError> {
    let mut c = Cursor::new(bytes);
    let magic = c.array::<4>("magic")?;
    if magic != GGUF_MAGIC {
        return Err(GgufError::BadMagic { found: magic });
    }
    let version = c.u32("version")?;
    if !(MIN_READ_VERSION..=GGUF_VERSION).contains(&version) {
        let swapped = version.swap_bytes();
        if (MIN_READ_VERSION..=GGUF_VERSION).contains(&swapped) {
            return Err(GgufError::BigEndian { version: swapped });
        }
        return Err(GgufError::UnsupportedVersion { version });
    }
    let count_offset = c.offset();
    let tensor_count = c.u64("tensor count")?;
    let kv_count = c.u64("metadata pair count")?;
    check_count("tensors", tensor_count, MAX_TENSORS, count_offset)?;
    check_count("metadata pairs", kv_count, MAX_KV_PAIRS, count_offset + 8)?;

    let metadata = read_metadata(&mut c, kv_count)?;
    // llama.cpp requires exactly a u32 here, so this is stricter than `get_u32`.
    let alignment = match metadata.get(ALIGNMENT_KEY) {
        None => DEFAULT_ALIGNMENT,
        Some(&Value::U32(a)) => {
            let a = u64::from(a);
            if a == 0 || !a.is_power_of_two() || a > MAX_ALIGNMENT {
                return Err(GgufError::BadAlignment {
                    alignment: a,
                    max: MAX_ALIGNMENT,
                });
            }
            a
        }
        Some(other) => {
            return Err(GgufError::KeyType {
                key: ALIGNMENT_KEY.to_owned(),
                expected: "u32",
                found: other.type_description(),
            });
        }
    };

    let raw = read_tensor_infos(&mut c, tensor_count)?;
    let file_size = bytes.len() as u64;
    // `c.offset() <= file_size` and `alignment <= MAX_ALIGNMENT`, so this cannot overflow.
    let data_offset = c.offset().next_multiple_of(alignment);
    let tensors = raw
        .into_iter()
        .map(|t| {
            if !t.relative_offset.is_multiple_of(alignment) {
                return Err(GgufError::Misaligned {
                    name: t.name,
                    offset: t.relative_offset,
                    alignment,
                });
            }
            let start = data_offset.checked_add(t.relative_offset);
            let end = start.and_then(|s| s.checked_add(t.n_bytes));
            match (start, end) {
                (Some(offset), Some(end)) if end <= file_size => Ok(TensorInfo {
                    name: t.name,
                    dims: t.dims,
                    ggml_type: t.ggml_type,
                    offset,
                    n_bytes: t.n_bytes,
                }),
                _ => Err(GgufError::TensorOutOfBounds {
                    name: t.name,
                    offset: start.unwrap_or(u64::MAX),
                    size: t.n_bytes,
                    file_size,
                }),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;

    Ok(GgufHeader {
        version,
        metadata,
        tensors,
        alignment,
        data_offset,
    })
}

fn check_count(what: &'static str, count: u64, max: u64, offset: u64) -> Result<(), GgufError> {
    if count > max {
        return Err(GgufError::TooMany {
            what,
            count,
            max,
            offset,
        });
    }
    Ok(())
}

/// Capacity to reserve for `count` items of at least `min_len` bytes each: never more
/// than the remaining bytes could hold.
fn bounded_capacity(c: &Cursor<'_>, count: u64, min_len: u64) -> usize {
    usize::try_from(count.min(c.remaining() / min_len)).unwrap_or(0)
}

fn read_metadata(c: &mut Cursor<'_>, kv_count: u64) -> Result<Metadata, GgufError> {
    let mut metadata = Metadata::with_capacity(bounded_capacity(c, kv_count, MIN_KV_LEN));
    for _ in 0..kv_count {
        let key_offset = c.offset();
        let key = c.string(MAX_STRING_LEN, "metadata key")?;
        let type_offset = c.offset();
        let type_id = c.u32("metadata value type")?;
        let ty = ValueType::from_id(type_id).ok_or(GgufError::UnknownValueType {
            offset: type_offset,
            type_id,
        })?;
        let value = read_value(c, ty, 0)?;
        metadata.insert(key, value).map_err(|e| match e {
            GgufError::DuplicateKey { key, .. } => GgufError::DuplicateKey {
                key,
                offset: key_offset,
            },
            other => other,
        })?;
    }
    Ok(metadata)
}

/// Reads one value of type `ty`; `depth` is the number of arrays it is nested in.
fn read_value(c: &mut Cursor<'_>, ty: ValueType, depth: u32) -> Result<Value, GgufError> {
    Ok(match ty {
        ValueType::U8 => Value::U8(c.u8("u8 value")?),
        ValueType::I8 => Value::I8(i8::from_le_bytes(c.array("i8 value")?)),
        ValueType::U16 => Value::U16(u16::from_le_bytes(c.array("u16 value")?)),
        ValueType::I16 => Value::I16(i16::from_le_bytes(c.array("i16 value")?)),
        ValueType::U32 => Value::U32(c.u32("u32 value")?),
        ValueType::I32 => Value::I32(i32::from_le_bytes(c.array("i32 value")?)),
        ValueType::F32 => Value::F32(f32::from_le_bytes(c.array("f32 value")?)),
        ValueType::Bool => Value::Bool(read_bool(c)?),
        ValueType::Str => Value::Str(c.string(MAX_STRING_LEN, "string value")?.to_owned()),
        ValueType::Array => Value::Array(read_array(c, depth + 1)?),
        ValueType::U64 => Value::U64(c.u64("u64 value")?),
        ValueType::I64 => Value::I64(i64::from_le_bytes(c.array("i64 value")?)),
        ValueType::F64 => Value::F64(f64::from_le_bytes(c.array("f64 value")?)),
    })
}

fn read_bool(c: &mut Cursor<'_>) -> Result<bool, GgufError> {
    let offset = c.offset();
    match c.u8("bool value")? {
        0 => Ok(false),
        1 => Ok(true),
        value => Err(GgufError::InvalidBool { offset, value }),
    }
}

/// Decodes `count` fixed-size little-endian elements after checking they are all there.
fn fixed<const N: usize, T>(
    c: &mut Cursor<'_>,
    count: u64,
    what: &'static str,
    decode: fn([u8; N]) -> T,
) -> Result<Vec<T>, GgufError> {
    // `count <= MAX_ARRAY_LEN` and `N <= 8`, so the product cannot overflow.
    let bytes = c.take(count * N as u64, what)?;
    Ok(bytes
        .chunks_exact(N)
        .map(|chunk| {
            let mut a = [0u8; N];
            a.copy_from_slice(chunk);
            decode(a)
        })
        .collect())
}

/// Reads an array (element type, count, elements); `depth` is 1 for a top-level array.
fn read_array(c: &mut Cursor<'_>, depth: u32) -> Result<Array, GgufError> {
    let offset = c.offset();
    if depth > MAX_ARRAY_DEPTH {
        return Err(GgufError::ArrayTooDeep {
            offset,
            max: MAX_ARRAY_DEPTH,
        });
    }
    let type_id = c.u32("array element type")?;
    let ty = ValueType::from_id(type_id).ok_or(GgufError::UnknownValueType { offset, type_id })?;
    let count_offset = c.offset();
    let count = c.u64("array length")?;
    check_count("array elements", count, MAX_ARRAY_LEN, count_offset)?;
    Ok(match ty {
        ValueType::U8 => Array::U8(fixed(c, count, "u8 array", u8::from_le_bytes)?),
        ValueType::I8 => Array::I8(fixed(c, count, "i8 array", i8::from_le_bytes)?),
        ValueType::U16 => Array::U16(fixed(c, count, "u16 array", u16::from_le_bytes)?),
        ValueType::I16 => Array::I16(fixed(c, count, "i16 array", i16::from_le_bytes)?),
        ValueType::U32 => Array::U32(fixed(c, count, "u32 array", u32::from_le_bytes)?),
        ValueType::I32 => Array::I32(fixed(c, count, "i32 array", i32::from_le_bytes)?),
        ValueType::F32 => Array::F32(fixed(c, count, "f32 array", f32::from_le_bytes)?),
        ValueType::U64 => Array::U64(fixed(c, count, "u64 array", u64::from_le_bytes)?),
        ValueType::I64 => Array::I64(fixed(c, count, "i64 array", i64::from_le_bytes)?),
        ValueType::F64 => Array::F64(fixed(c, count, "f64 array", f64::from_le_bytes)?),
        ValueType::Bool => {
            let mut v = Vec::with_capacity(bounded_capacity(c, count, 1));
            for _ in 0..count {
                v.push(read_bool(c)?);
            }
            Array::Bool(v)
        }
        ValueType::Str => {
            let mut v =
                Vec::with_capacity(bounded_capacity(c, count, ValueType::Str.min_encoded_len()));
            for _ in 0..count {
                v.push(c.string(MAX_STRING_LEN, "string array element")?.to_owned());
            }
            Array::Str(v)
        }
        ValueType::Array => {
            let mut v = Vec::with_capacity(bounded_capacity(
                c,
                count,
                ValueType::Array.min_encoded_len(),
            ));
            for _ in 0..count {
                v.push(read_array(c, depth + 1)?);
            }
            Array::Array(v)
        }
    })
}

/// A tensor info as read, before its data range is known.
struct RawTensorInfo {
    name: String,
    dims: Vec<u64>,
    ggml_type: GgmlType,
    relative_offset: u64,
    n_bytes: u64,
}

fn read_tensor_infos(c: &mut Cursor<'_>, count: u64) -> Result<Vec<RawTensorInfo>, GgufError> {
    let mut infos = Vec::with_capacity(bounded_capacity(c, count, MIN_TENSOR_INFO_LEN));
    let mut seen = HashSet::with_capacity(infos.capacity());
    for _ in 0..count {
        let info_offset = c.offset();
        let name = c.string(MAX_TENSOR_NAME_LEN, "tensor name")?.to_owned();
        let n_dims = c.u32("tensor dimension count")?;
        if n_dims > MAX_DIMS {
            return Err(GgufError::TooManyDims {
                name,
                n_dims,
                max: MAX_DIMS,
            });
        }
        let mut dims = Vec::with_capacity(MAX_DIMS as usize);
        for _ in 0..n_dims {
            dims.push(c.u64("tensor dimension")?);
        }
        let type_offset = c.offset();
        let type_id = c.u32("tensor type")?;
        let Some(ggml_type) = GgmlType::from_id(type_id) else {
            return Err(GgufError::UnknownTensorType {
                name,
                type_id,
                offset: type_offset,
            });
        };
        let relative_offset = c.u64("tensor data offset")?;
        let n_bytes = validate_shape(&name, &dims, ggml_type)?;
        if !seen.insert(name.clone()) {
            return Err(GgufError::DuplicateTensor {
                name,
                offset: info_offset,
            });
        }
        infos.push(RawTensorInfo {
            name,
            dims,
            ggml_type,
            relative_offset,
            n_bytes,
        });
    }
    Ok(infos)
}
