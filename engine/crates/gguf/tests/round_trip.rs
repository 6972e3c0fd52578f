//! Write → read round trips through the public API.

mod support;

use engine_gguf::limits::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT};
use engine_gguf::{Array, GgmlType, GgufFile, GgufWriter, Value};
use support::Raw;

/// One value of every type, plus arrays of every element type, nested and empty arrays.
fn every_value() -> Vec<(String, Value)> {
    let v = vec![
        ("u8", Value::U8(250)),
        ("i8", Value::I8(-100)),
        ("u16", Value::U16(65_000)),
        ("i16", Value::I16(-30_000)),
        ("u32", Value::U32(4_000_000_000)),
        ("i32", Value::I32(-2_000_000_000)),
        ("f32", Value::F32(-1.5e-5)),
        ("bool.t", Value::Bool(true)),
        ("bool.f", Value::Bool(false)),
        ("str", Value::from("héllo ▁wörld <|eot|>")),
        ("str.empty", Value::from("")),
        ("u64", Value::U64(u64::MAX)),
        ("i64", Value::I64(i64::MIN)),
        ("f64", Value::F64(std::f64::consts::PI)),
        ("a.u8", Value::Array(Array::U8(vec![0, 1, 255]))),
        ("a.i8", Value::Array(Array::I8(vec![-128, 127]))),
        ("a.u16", Value::Array(Array::U16(vec![1, 65_535]))),
        ("a.i16", Value::Array(Array::I16(vec![-1, 2]))),
        ("a.u32", Value::Array(Array::U32(vec![u32::MAX]))),
        ("a.i32", Value::Array(Array::I32(vec![1, -2, 3]))),
        (
            "a.f32",
            Value::Array(Array::F32(vec![0.25, -0.0, f32::INFINITY])),
        ),
        ("a.bool", Value::Array(Array::Bool(vec![true, false, true]))),
        (
            "a.str",
            Value::Array(Array::Str(vec!["a".into(), String::new(), "ü".into()])),
        ),
        ("a.u64", Value::Array(Array::U64(vec![0, u64::MAX]))),
        ("a.i64", Value::Array(Array::I64(vec![i64::MAX]))),
        ("a.f64", Value::Array(Array::F64(vec![1e300]))),
        ("a.empty", Value::Array(Array::F32(vec![]))),
        (
            "a.nested",
            Value::Array(Array::Array(vec![
                Array::Str(vec!["x".into()]),
                Array::Array(vec![Array::I32(vec![7])]),
                Array::U8(vec![]),
            ])),
        ),
    ];
    v.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// Deterministic test bytes for a tensor.
fn pattern(len: u64, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

struct Spec {
    name: &'static str,
    dims: &'static [u64],
    ggml_type: GgmlType,
}

const TENSORS: &[Spec] = &[
    Spec {
        name: "token_embd.weight",
        dims: &[64, 3],
        ggml_type: GgmlType::Q8_0,
    },
    Spec {
        name: "blk.0.attn_norm.weight",
        dims: &[5],
        ggml_type: GgmlType::F32,
    },
    Spec {
        name: "blk.0.ffn_up.weight",
        dims: &[256, 2],
        ggml_type: GgmlType::Q6_K,
    },
    Spec {
        name: "odd",
        dims: &[3, 1, 1, 1],
        ggml_type: GgmlType::F16,
    },
    Spec {
        name: "empty",
        dims: &[0, 4],
        ggml_type: GgmlType::F32,
    },
    Spec {
        name: "q4",
        dims: &[32],
        ggml_type: GgmlType::Q4_0,
    },
];

/// Expected size from the block layout, computed independently of the crate.
fn expected_bytes(s: &Spec) -> u64 {
    let n: u64 = s.dims.iter().product();
    n / s.ggml_type.block_len() * s.ggml_type.block_bytes()
}

fn build(alignment: Option<u32>) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut w = GgufWriter::new();
    if let Some(a) = alignment {
        w.add_kv(ALIGNMENT_KEY, a).expect("valid alignment");
    }
    for (k, v) in every_value() {
        w.add_kv(k, v).expect("valid pair");
    }
    let mut data = Vec::new();
    for (i, s) in TENSORS.iter().enumerate() {
        w.add_tensor(s.name, s.dims, s.ggml_type)
            .expect("valid tensor");
        data.push(pattern(expected_bytes(s), i as u8));
    }
    let mut out = Vec::new();
    let slices: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    w.write_to(&mut out, &slices).expect("writes");
    (out, data)
}

fn check(file: &GgufFile, data: &[Vec<u8>], alignment: u64) {
    assert_eq!(file.version(), 3);
    assert_eq!(file.alignment(), alignment);
    assert_eq!(file.data_offset() % alignment, 0);
    let read: Vec<(String, Value)> = file
        .metadata()
        .iter()
        .filter(|(k, _)| *k != ALIGNMENT_KEY)
        .map(|(k, v)| (k.to_owned(), v.clone()))
        .collect();
    assert_eq!(read, every_value(), "same pairs in the same order");
    assert_eq!(file.tensors().len(), TENSORS.len());
    for ((t, s), d) in file.tensors().iter().zip(TENSORS).zip(data) {
        assert_eq!(t.name, s.name);
        assert_eq!(t.dims, s.dims);
        assert_eq!(t.ggml_type, s.ggml_type);
        assert_eq!(t.n_bytes, expected_bytes(s));
        assert_eq!(t.offset % alignment, 0, "{} aligned", t.name);
        assert_eq!(file.tensor_data(t), d.as_slice(), "{} data", t.name);
        assert_eq!(file.tensor(s.name), Some(t));
    }
    assert!(file.tensor("missing").is_none());
    assert!(file.require_tensor("missing").is_err());
}

#[test]
fn every_value_type_and_tensors_round_trip_with_default_alignment() {
    let (bytes, data) = build(None);
    let file = GgufFile::parse(&bytes).expect("own output parses");
    check(&file, &data, DEFAULT_ALIGNMENT);
}

#[test]
fn custom_alignment_round_trips() {
    for a in [1u32, 8, 64, 4096] {
        let (bytes, data) = build(Some(a));
        let file = GgufFile::parse(&bytes).expect("own output parses");
        assert_eq!(file.get_u32(ALIGNMENT_KEY).expect("present"), a);
        check(&file, &data, u64::from(a));
    }
}

#[test]
fn open_memory_maps_a_written_file() {
    let path = std::env::temp_dir().join(format!("engine-gguf-test-{}.bin", std::process::id()));
    let mut w = GgufWriter::new();
    w.add_kv("general.architecture", "llama").expect("valid");
    w.add_tensor("w", &[4], GgmlType::F32).expect("valid");
    let data: Vec<u8> = [1.0f32, -2.0, 3.5, 0.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    w.write_to_path(&path, &[&data]).expect("writes");
    let file = GgufFile::open(&path).expect("opens");
    let _ = std::fs::remove_file(&path);
    assert_eq!(
        file.get_str("general.architecture").expect("string"),
        "llama"
    );
    let t = file.require_tensor("w").expect("present");
    assert_eq!(file.tensor_data(t), data.as_slice());
}

#[test]
fn open_reports_missing_file_with_path() {
    let err = GgufFile::open("/nonexistent/model.gguf").expect_err("no such file");
    assert!(err.to_string().contains("/nonexistent/model.gguf"), "{err}");
}

#[test]
fn writer_output_matches_independent_spec_encoding() {
    let mut w = GgufWriter::new();
    w.add_kv("general.n", 7u32).expect("valid");
    w.add_kv("general.name", "tiny").expect("valid");
    w.add_tensor("w", &[4], GgmlType::F32).expect("valid");
    let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let mut out = Vec::new();
    w.write_to(&mut out, &[&data]).expect("writes");
    assert_eq!(out, support::small().bytes);
}

#[test]
fn version_2_files_are_read() {
    let mut bytes = support::small().bytes;
    support::put_u32(&mut bytes, 4, 2);
    let file = GgufFile::parse(&bytes).expect("v2 is the same layout");
    assert_eq!(file.version(), 2);
    assert_eq!(file.get_u32("general.n").expect("present"), 7);
}

#[test]
fn file_without_tensors_or_padding_is_read() {
    let mut r = Raw::header(3, 0, 1);
    r.kv_str("general.architecture", "llama");
    let file = GgufFile::parse(&r.buf).expect("valid");
    assert!(file.tensors().is_empty());
    assert_eq!(
        file.get_str("general.architecture").expect("present"),
        "llama"
    );
}

#[test]
fn unsupported_type_message_names_tensor_and_type() {
    let mut w = GgufWriter::new();
    w.add_tensor("blk.0.attn_q.weight", &[256], GgmlType::Q6_K)
        .expect("valid");
    let mut out = Vec::new();
    w.write_to(&mut out, &[&[0; 210]]).expect("writes");
    let file = GgufFile::parse(&out).expect("reader accepts every known type");
    let err = file.tensors()[0].unsupported_type();
    assert_eq!(
        err.to_string(),
        "tensor blk.0.attn_q.weight has type q6_K, which this engine does not support"
    );
}
