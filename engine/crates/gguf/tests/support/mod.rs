//! Test support: a byte-level GGUF builder written straight from the spec, independent of
//! the crate's writer, that can also produce invalid files.

#![allow(dead_code, reason = "each test binary uses a different subset")]

/// Builds GGUF bytes field by field.
#[derive(Default)]
pub struct Raw {
    pub buf: Vec<u8>,
}

impl Raw {
    /// Magic, version and the two counts.
    pub fn header(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        let mut r = Raw::default();
        r.bytes(b"GGUF").u32(version).u64(n_tensors).u64(n_kv);
        r
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }

    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.bytes(&[v])
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    /// A GGUF string: u64 length then bytes.
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }

    /// A key and a u32 value.
    pub fn kv_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.str(key).u32(4).u32(v)
    }

    /// A key and a string value.
    pub fn kv_str(&mut self, key: &str, v: &str) -> &mut Self {
        self.str(key).u32(8).str(v)
    }

    /// A tensor info.
    pub fn tensor(&mut self, name: &str, dims: &[u64], type_id: u32, offset: u64) -> &mut Self {
        self.str(name).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(type_id).u64(offset)
    }

    /// Zero padding up to a multiple of `align`.
    pub fn pad(&mut self, align: usize) -> &mut Self {
        while !self.buf.len().is_multiple_of(align) {
            self.buf.push(0);
        }
        self
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }
}

/// A small valid file: one u32 pair, one string pair and one f32 tensor of 4 elements.
/// Returns the bytes and the offsets of interesting fields.
pub struct Small {
    pub bytes: Vec<u8>,
    /// Offset of the u32 key's length field.
    pub first_key: usize,
    /// Offset of the string value's length field.
    pub str_value: usize,
    /// Offset of the tensor info.
    pub tensor_info: usize,
    /// Offset of the tensor's type id.
    pub tensor_type: usize,
    /// Offset of the tensor's relative data offset.
    pub tensor_offset: usize,
    /// Offset of the tensor's first dimension.
    pub tensor_dim0: usize,
    /// Offset of the data section.
    pub data: usize,
}

pub fn small() -> Small {
    let mut r = Raw::header(3, 1, 2);
    let first_key = r.len();
    r.kv_u32("general.n", 7);
    r.str("general.name").u32(8);
    let str_value = r.len();
    r.str("tiny");
    let tensor_info = r.len();
    r.str("w").u32(1);
    let tensor_dim0 = r.len();
    r.u64(4);
    let tensor_type = r.len();
    r.u32(0);
    let tensor_offset = r.len();
    r.u64(0);
    r.pad(32);
    let data = r.len();
    for x in [1.0f32, 2.0, 3.0, 4.0] {
        r.bytes(&x.to_le_bytes());
    }
    r.pad(32);
    Small {
        bytes: r.buf,
        first_key,
        str_value,
        tensor_info,
        tensor_type,
        tensor_offset,
        tensor_dim0,
        data,
    }
}

/// Overwrites 8 bytes at `at` with `v`.
pub fn put_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Overwrites 4 bytes at `at` with `v`.
pub fn put_u32(bytes: &mut [u8], at: usize, v: u32) {
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
