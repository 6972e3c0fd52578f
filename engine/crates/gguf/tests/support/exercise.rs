//! The check shared by the fuzz target and the corpus regression test.

use engine_gguf::{GgufFile, GgufWriter};

/// Parses `bytes`. If they are a valid file, touches every tensor's data and queries
/// every metadata value with every getter (none may panic), then writes the file back
/// with [`GgufWriter`] and checks that re-reading gives the same metadata, tensors and
/// tensor data. Returns whether `bytes` parsed.
pub fn exercise(bytes: &[u8]) -> bool {
    let Ok(file) = GgufFile::parse(bytes) else {
        return false;
    };

    let mut checksum = 0u8;
    for t in file.tensors() {
        let data = file.tensor_data(t);
        assert_eq!(data.len() as u64, t.n_bytes);
        checksum = data.iter().fold(checksum, |acc, b| acc ^ b);
    }
    for (key, value) in file.metadata().iter() {
        checksum ^= format!("{key}{value:?}").len() as u8;
        let _ = file.get_u32(key);
        let _ = file.get_u64(key);
        let _ = file.get_i32(key);
        let _ = file.get_i64(key);
        let _ = file.get_f32(key);
        let _ = file.get_str(key);
        let _ = file.get_bool(key);
        let _ = file.get_array(key);
        let _ = file.get_str_array(key);
        let _ = file.get_f32_array(key);
        let _ = file.get_i32_array(key);
        let _ = file.opt_u32(key).map(|v| v.map(|e| e.to_string()));
        if let Ok(a) = file.get_array(key) {
            let _ = (a.len(), a.depth(), a.to_integers(), a.type_description());
        }
    }
    std::hint::black_box(checksum);

    let mut w = GgufWriter::new();
    for (key, value) in file.metadata().iter() {
        w.add_kv(key, value.clone())
            .expect("metadata the reader accepts is writable");
    }
    for t in file.tensors() {
        w.add_tensor(t.name.clone(), &t.dims, t.ggml_type)
            .expect("tensors the reader accepts are writable");
    }
    let data: Vec<&[u8]> = file.tensors().iter().map(|t| file.tensor_data(t)).collect();
    let mut out = Vec::new();
    w.write_to(&mut out, &data)
        .expect("writing to memory succeeds");
    let again = GgufFile::from_vec(out).expect("the writer's output parses");

    // Debug output compares floats by value including NaN (bits are preserved).
    assert_eq!(
        format!("{:?}", again.metadata()),
        format!("{:?}", file.metadata())
    );
    assert_eq!(again.tensors().len(), file.tensors().len());
    for (a, b) in again.tensors().iter().zip(file.tensors()) {
        assert_eq!(
            (&a.name, &a.dims, a.ggml_type, a.n_bytes),
            (&b.name, &b.dims, b.ggml_type, b.n_bytes)
        );
        assert_eq!(
            again.tensor_data(a),
            file.tensor_data(b),
            "data of {}",
            a.name
        );
    }
    true
}
