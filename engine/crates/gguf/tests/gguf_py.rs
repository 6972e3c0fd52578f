//! Cross-check against llama.cpp's gguf-py: `data/gguf_py_small.gguf` was written by
//! `data/make_gguf_py_small.py`; the expected values below are the literals of that script.

use engine_gguf::{Array, GgmlType, GgufFile, GgufWriter, Value};

fn reference() -> GgufFile {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/gguf_py_small.gguf");
    GgufFile::open(path).expect("reference file parses")
}

#[test]
fn reads_every_value_gguf_py_wrote() {
    let f = reference();
    let m = f.metadata();
    assert_eq!(m.get("general.architecture"), Some(&Value::from("llama")));
    assert_eq!(m.get("t.u8"), Some(&Value::U8(200)));
    assert_eq!(m.get("t.i8"), Some(&Value::I8(-7)));
    assert_eq!(m.get("t.u16"), Some(&Value::U16(60000)));
    assert_eq!(m.get("t.i16"), Some(&Value::I16(-1234)));
    assert_eq!(m.get("t.u32"), Some(&Value::U32(3_000_000_000)));
    assert_eq!(m.get("t.i32"), Some(&Value::I32(-2_000_000_000)));
    assert_eq!(m.get("t.f32"), Some(&Value::F32(0.125)));
    assert_eq!(m.get("t.u64"), Some(&Value::U64((1 << 63) + 5)));
    assert_eq!(m.get("t.i64"), Some(&Value::I64(-(1 << 40))));
    assert_eq!(m.get("t.f64"), Some(&Value::F64(-2.5)));
    assert_eq!(m.get("t.bool"), Some(&Value::Bool(true)));
    assert_eq!(f.get_str("t.str").expect("string"), "héllo ▁world");
    assert_eq!(
        f.get_str_array("t.strs").expect("strings"),
        ["<s>", "▁a", ""]
    );
    assert_eq!(
        f.get_i32_array("t.ints")
            .expect("gguf-py writes int lists as i32"),
        [1, -2, 3]
    );
    assert_eq!(f.get_f32_array("t.floats").expect("floats"), [0.5, -1.0]);
    assert_eq!(
        f.get_array("t.bools").expect("array"),
        &Array::Bool(vec![true, false])
    );
    assert_eq!(
        f.get_array("t.nested").expect("array"),
        &Array::Array(vec![Array::I32(vec![1, 2]), Array::Str(vec!["x".into()])])
    );
    assert_eq!(m.len(), 18);
}

#[test]
fn reads_tensors_gguf_py_wrote() {
    let f = reference();
    let names: Vec<&str> = f.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["f32", "f16", "i32", "q8"]);

    let t = f.require_tensor("f32").expect("present");
    assert_eq!(
        (t.dims.as_slice(), t.ggml_type),
        (&[3u64, 2][..], GgmlType::F32),
        "numpy (2, 3) is ne [3, 2]"
    );
    let expected: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
    assert_eq!(f.tensor_data(t), expected.as_slice());

    let t = f.require_tensor("f16").expect("present");
    assert_eq!(t.ggml_type, GgmlType::F16);
    // IEEE half bit patterns of 1.0, -2.0 and 0.5.
    let expected: Vec<u8> = [0x3c00u16, 0xc000, 0x3800]
        .iter()
        .flat_map(|h| h.to_le_bytes())
        .collect();
    assert_eq!(f.tensor_data(t), expected.as_slice());

    let t = f.require_tensor("i32").expect("present");
    let expected: Vec<u8> = [7i32, -8].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(f.tensor_data(t), expected.as_slice());

    let t = f.require_tensor("q8").expect("present");
    assert_eq!(
        (t.dims.as_slice(), t.ggml_type),
        (&[32u64][..], GgmlType::Q8_0),
        "34 raw bytes = one q8_0 block"
    );
    assert_eq!(f.tensor_data(t), (0..34).collect::<Vec<u8>>().as_slice());
}

#[test]
fn rewriting_reproduces_gguf_py_bytes_exactly() {
    let f = reference();
    let mut w = GgufWriter::new();
    for (k, v) in f.metadata().iter() {
        w.add_kv(k, v.clone()).expect("valid");
    }
    for t in f.tensors() {
        w.add_tensor(t.name.clone(), &t.dims, t.ggml_type)
            .expect("valid");
    }
    let data: Vec<&[u8]> = f.tensors().iter().map(|t| f.tensor_data(t)).collect();
    let mut out = Vec::new();
    w.write_to(&mut out, &data).expect("writes");
    assert_eq!(out, f.bytes());
}
