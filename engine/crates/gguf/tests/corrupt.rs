//! Hostile and damaged files: each error class, built by corrupting a valid file or by
//! encoding invalid fields directly. Every case must return an error, never panic.

mod support;

use engine_gguf::limits::{
    MAX_ARRAY_DEPTH, MAX_ARRAY_LEN, MAX_KV_PAIRS, MAX_STRING_LEN, MAX_TENSORS,
};
use engine_gguf::{GgufError, GgufFile};
use support::{Raw, put_u32, put_u64, small};

fn parse_err(bytes: &[u8]) -> GgufError {
    let err = GgufFile::parse(bytes).expect_err("corrupt file must be rejected");
    let msg = err.to_string();
    assert!(
        !msg.is_empty() && !msg.contains('\n'),
        "one-line message: {msg:?}"
    );
    err
}

#[test]
fn the_uncorrupted_file_is_valid() {
    let s = small();
    let file = GgufFile::parse(&s.bytes).expect("valid");
    assert_eq!(file.tensors()[0].offset as usize, s.data);
}

#[test]
fn bad_magic() {
    let mut bytes = small().bytes;
    bytes[..4].copy_from_slice(b"GGML");
    let err = parse_err(&bytes);
    assert!(matches!(err, GgufError::BadMagic { found } if &found == b"GGML"));
}

#[test]
fn unsupported_versions() {
    for version in [0u32, 1, 4, u32::MAX] {
        let mut bytes = small().bytes;
        put_u32(&mut bytes, 4, version);
        assert!(
            matches!(parse_err(&bytes), GgufError::UnsupportedVersion { version: v } if v == version)
        );
    }
    let mut bytes = small().bytes;
    bytes[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert!(matches!(
        parse_err(&bytes),
        GgufError::BigEndian { version: 3 }
    ));
}

#[test]
fn every_truncated_prefix_is_an_error() {
    let s = small();
    // The padding after the last tensor's data is optional, so stop at its end.
    let data_end = s.data + 16;
    GgufFile::parse(&s.bytes[..data_end]).expect("no trailing padding is fine");
    for len in 0..data_end {
        let err = parse_err(&s.bytes[..len]);
        if len < s.tensor_offset + 8 {
            assert!(
                matches!(err, GgufError::Truncated { .. }),
                "prefix {len}: {err}"
            );
        } else {
            assert!(
                matches!(err, GgufError::TensorOutOfBounds { .. }),
                "prefix {len}: {err}"
            );
        }
    }
}

#[test]
fn huge_string_length() {
    let s = small();
    let mut bytes = s.bytes.clone();
    put_u64(&mut bytes, s.first_key, u64::MAX);
    assert!(
        matches!(parse_err(&bytes), GgufError::StringTooLong { offset, len: u64::MAX, .. } if offset == s.first_key as u64)
    );
    // Within the limit but past the end of the file.
    let mut bytes = s.bytes.clone();
    put_u64(&mut bytes, s.str_value, MAX_STRING_LEN);
    assert!(
        matches!(parse_err(&bytes), GgufError::Truncated { needed, .. } if needed == MAX_STRING_LEN)
    );
}

#[test]
fn invalid_utf8_string() {
    let s = small();
    let mut bytes = s.bytes.clone();
    bytes[s.str_value + 8] = 0xff;
    assert!(
        matches!(parse_err(&bytes), GgufError::InvalidUtf8 { offset, .. } if offset == s.str_value as u64 + 8)
    );
}

#[test]
fn huge_array_count() {
    let mut r = Raw::header(3, 0, 1);
    r.str("tokenizer.ggml.tokens").u32(9).u32(8);
    let count_at = r.len();
    r.u64(u64::MAX);
    let err = parse_err(&r.buf);
    assert!(
        matches!(err, GgufError::TooMany { count: u64::MAX, offset, .. } if offset == count_at as u64)
    );
    // Within the limit but far more elements than bytes: rejected without allocating
    // for the claimed count.
    for elem in [0u32, 6, 7, 8, 9, 12] {
        let mut r = Raw::header(3, 0, 1);
        r.str("a").u32(9).u32(elem).u64(MAX_ARRAY_LEN).u64(0);
        assert!(
            matches!(parse_err(&r.buf), GgufError::Truncated { .. }),
            "element type {elem}"
        );
    }
}

#[test]
fn too_many_tensors_or_pairs() {
    let mut bytes = small().bytes;
    put_u64(&mut bytes, 8, MAX_TENSORS + 1);
    assert!(matches!(
        parse_err(&bytes),
        GgufError::TooMany {
            what: "tensors",
            offset: 8,
            ..
        }
    ));
    let mut bytes = small().bytes;
    put_u64(&mut bytes, 16, MAX_KV_PAIRS + 1);
    assert!(matches!(
        parse_err(&bytes),
        GgufError::TooMany {
            what: "metadata pairs",
            offset: 16,
            ..
        }
    ));
    // A count within the limit but larger than the file holds: the bytes after the real
    // tensor info are read as further (bogus) tensor infos until one fails.
    let mut bytes = small().bytes;
    put_u64(&mut bytes, 8, MAX_TENSORS);
    parse_err(&bytes);
}

#[test]
fn nesting_too_deep() {
    let mut r = Raw::header(3, 0, 1);
    r.str("deep").u32(9);
    for _ in 0..MAX_ARRAY_DEPTH {
        r.u32(9).u64(1);
    }
    r.u32(0).u64(0);
    assert!(matches!(parse_err(&r.buf), GgufError::ArrayTooDeep { .. }));
    // One level less is fine.
    let mut r = Raw::header(3, 0, 1);
    r.str("deep").u32(9);
    for _ in 1..MAX_ARRAY_DEPTH {
        r.u32(9).u64(1);
    }
    r.u32(0).u64(0);
    GgufFile::parse(&r.buf).expect("depth at the limit is accepted");
}

#[test]
fn unknown_value_type_and_invalid_bool() {
    let s = small();
    let mut bytes = s.bytes.clone();
    let type_at = s.first_key + 8 + "general.n".len();
    put_u32(&mut bytes, type_at, 13);
    assert!(
        matches!(parse_err(&bytes), GgufError::UnknownValueType { type_id: 13, offset } if offset == type_at as u64)
    );

    let mut r = Raw::header(3, 0, 1);
    r.str("b").u32(7).u8(2);
    assert!(matches!(
        parse_err(&r.buf),
        GgufError::InvalidBool { value: 2, .. }
    ));
}

#[test]
fn duplicate_key_and_tensor() {
    let mut r = Raw::header(3, 0, 2);
    r.kv_u32("k", 1);
    let second = r.len();
    r.kv_u32("k", 2);
    assert!(
        matches!(parse_err(&r.buf), GgufError::DuplicateKey { ref key, offset } if key == "k" && offset == second as u64)
    );

    let mut r = Raw::header(3, 2, 0);
    r.tensor("t", &[1], 0, 0)
        .tensor("t", &[1], 0, 32)
        .pad(32)
        .bytes(&[0; 64]);
    assert!(
        matches!(parse_err(&r.buf), GgufError::DuplicateTensor { ref name, .. } if name == "t")
    );
}

#[test]
fn tensor_offset_past_end_and_overflowing() {
    let s = small();
    let mut bytes = s.bytes.clone();
    put_u64(&mut bytes, s.tensor_offset, 32);
    let err = parse_err(&bytes);
    assert!(
        matches!(err, GgufError::TensorOutOfBounds { ref name, size: 16, .. } if name == "w"),
        "{err}"
    );
    let mut bytes = s.bytes.clone();
    put_u64(&mut bytes, s.tensor_offset, u64::MAX - 31);
    assert!(matches!(
        parse_err(&bytes),
        GgufError::TensorOutOfBounds {
            offset: u64::MAX,
            ..
        }
    ));
}

#[test]
fn misaligned_offset() {
    let s = small();
    let mut bytes = s.bytes.clone();
    put_u64(&mut bytes, s.tensor_offset, 4);
    assert!(matches!(
        parse_err(&bytes),
        GgufError::Misaligned {
            offset: 4,
            alignment: 32,
            ..
        }
    ));
}

#[test]
fn unknown_tensor_type() {
    let s = small();
    for id in [4u32, 31, 40, 1000] {
        let mut bytes = s.bytes.clone();
        put_u32(&mut bytes, s.tensor_type, id);
        let err = parse_err(&bytes);
        assert!(matches!(err, GgufError::UnknownTensorType { type_id, .. } if type_id == id));
        assert!(
            err.to_string().contains(&format!("byte {}", s.tensor_type)),
            "{err}"
        );
    }
}

#[test]
fn overflowing_and_bad_dims() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor("big", &[1 << 32, 1 << 32], 0, 0).pad(32);
    assert!(matches!(parse_err(&r.buf), GgufError::ShapeOverflow { .. }));

    let mut r = Raw::header(3, 1, 0);
    r.tensor("neg", &[u64::MAX], 24, 0).pad(32);
    assert!(
        matches!(parse_err(&r.buf), GgufError::ShapeOverflow { .. }),
        "dims above i64::MAX"
    );

    let mut r = Raw::header(3, 1, 0);
    r.tensor("five", &[1, 1, 1, 1, 1], 0, 0).pad(32);
    assert!(matches!(
        parse_err(&r.buf),
        GgufError::TooManyDims { n_dims: 5, .. }
    ));

    let mut r = Raw::header(3, 1, 0);
    r.str("x").u32(u32::MAX);
    assert!(matches!(parse_err(&r.buf), GgufError::TooManyDims { .. }));

    let s = small();
    let mut bytes = s.bytes.clone();
    put_u32(&mut bytes, s.tensor_type, 8); // q8_0 with ne[0] = 4
    assert!(matches!(
        parse_err(&bytes),
        GgufError::PartialBlock {
            ne0: 4,
            block_len: 32,
            ..
        }
    ));
    put_u64(&mut bytes, s.tensor_dim0, 0);
    GgufFile::parse(&bytes).expect("an empty q8_0 tensor is valid");
}

#[test]
fn tensor_name_too_long() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor(&"n".repeat(64), &[1], 0, 0)
        .pad(32)
        .bytes(&[0; 32]);
    assert!(matches!(
        parse_err(&r.buf),
        GgufError::StringTooLong {
            len: 64,
            max: 63,
            ..
        }
    ));
}

#[test]
fn bad_alignment() {
    for a in [0u32, 3, 48, 1 << 30] {
        let mut r = Raw::header(3, 0, 1);
        r.kv_u32("general.alignment", a);
        assert!(
            matches!(parse_err(&r.buf), GgufError::BadAlignment { alignment, .. } if alignment == u64::from(a))
        );
    }
    let mut r = Raw::header(3, 0, 1);
    r.str("general.alignment").u32(10).u64(32);
    let err = parse_err(&r.buf);
    assert!(
        matches!(err, GgufError::KeyType { ref found, .. } if found == "u64"),
        "llama.cpp requires a u32"
    );
    let mut r = Raw::header(3, 0, 1);
    r.kv_str("general.alignment", "32");
    let err = parse_err(&r.buf);
    assert!(matches!(err, GgufError::KeyType { .. }));
    assert_eq!(
        err.to_string(),
        "metadata key \"general.alignment\" has type string, expected u32"
    );
}

#[test]
fn every_single_byte_corruption_is_handled() {
    // Not a specific error class: flipping any byte of the header to a few values must
    // give a clean result (valid file or error), never a panic.
    let s = small();
    for at in 0..s.data {
        for v in [0x00, 0x01, 0x7f, 0x80, 0xff] {
            let mut bytes = s.bytes.clone();
            bytes[at] = v;
            let _ = GgufFile::parse(&bytes);
        }
    }
}
