//! Prints a GGUF file's version, metadata (arrays abbreviated) and tensors.
//!
//! `cargo run -p engine-gguf --example gguf_dump -- model.gguf`

use engine_gguf::{Array, GgufFile, Value};

fn describe(value: &Value) -> String {
    match value {
        Value::Array(a) => {
            let head = match a {
                Array::Str(v) => format!("{:?}", &v[..v.len().min(4)]),
                Array::F32(v) => format!("{:?}", &v[..v.len().min(4)]),
                Array::I32(v) => format!("{:?}", &v[..v.len().min(4)]),
                other => other.type_description(),
            };
            format!("[{}; {}] {head}", a.type_description(), a.len())
        }
        Value::Str(s) if s.len() > 80 => format!(
            "{:?}... ({} bytes)",
            &s[..s.floor_char_boundary(80)],
            s.len()
        ),
        other => format!("{other:?}"),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: gguf_dump <file.gguf>")?;
    let file = GgufFile::open(&path)?;
    println!(
        "{path}: GGUF v{}, alignment {}, data at byte {}",
        file.version(),
        file.alignment(),
        file.data_offset()
    );
    for (key, value) in file.metadata().iter() {
        println!("  {key} = {}", describe(value));
    }
    for t in file.tensors() {
        println!(
            "  tensor {} {:?} {} at {} ({} bytes)",
            t.name, t.dims, t.ggml_type, t.offset, t.n_bytes
        );
    }
    Ok(())
}
