//! Writes the fuzz seed corpus: a few tiny valid files made with the writer (names
//! starting `valid-`) and corrupted copies (`corrupt-`).
//!
//! `cargo run -p engine-gguf --example fuzz_seeds -- engine/crates/gguf/fuzz/corpus/gguf_parse`

use std::path::PathBuf;

use engine_gguf::{Array, GgmlType, GgufError, GgufWriter, Value};

fn write(w: GgufWriter, data: &[&[u8]]) -> Result<Vec<u8>, GgufError> {
    let mut out = Vec::new();
    w.write_to(&mut out, data)?;
    Ok(out)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: fuzz_seeds <corpus dir>")?,
    );
    std::fs::create_dir_all(&dir)?;
    let mut seeds: Vec<(&str, Vec<u8>)> = Vec::new();

    seeds.push(("valid-empty", write(GgufWriter::new(), &[])?));

    let mut w = GgufWriter::new();
    w.add_kv("general.architecture", "llama")?;
    w.add_kv("llama.block_count", 1u32)?;
    w.add_kv("llama.attention.layer_norm_rms_epsilon", 1e-5f32)?;
    w.add_kv(
        "tokenizer.ggml.tokens",
        Array::Str(vec!["<s>".into(), "▁a".into(), "b".into()]),
    )?;
    w.add_kv("tokenizer.ggml.scores", Array::F32(vec![0.0, -1.0, -2.0]))?;
    w.add_kv("tokenizer.ggml.token_type", Array::I32(vec![3, 1, 1]))?;
    w.add_tensor("token_embd.weight", &[4, 3], GgmlType::F32)?;
    w.add_tensor("blk.0.attn_q.weight", &[32, 2], GgmlType::Q8_0)?;
    let small = write(w, &[&[0x3f; 48], &[0x11; 68]])?;
    seeds.push(("valid-llama-like", small.clone()));

    let mut w = GgufWriter::new();
    w.add_kv("general.alignment", 64u32)?;
    w.add_kv("u8", 1u8)?;
    w.add_kv("i8", -1i8)?;
    w.add_kv("u16", 2u16)?;
    w.add_kv("i16", -2i16)?;
    w.add_kv("i32", -3i32)?;
    w.add_kv("bool", true)?;
    w.add_kv("u64", u64::MAX)?;
    w.add_kv("i64", i64::MIN)?;
    w.add_kv("f64", 0.5f64)?;
    w.add_kv(
        "nested",
        Array::Array(vec![
            Array::Bool(vec![true]),
            Array::Array(vec![Array::U16(vec![7])]),
        ]),
    )?;
    w.add_kv("empty", Value::Array(Array::U64(vec![])))?;
    w.add_tensor("q4", &[32], GgmlType::Q4_0)?;
    w.add_tensor("scalar", &[], GgmlType::I32)?;
    seeds.push((
        "valid-all-types-align64",
        write(w, &[&[0x88; 18], &[1, 0, 0, 0]])?,
    ));

    let mut bad_magic = small.clone();
    bad_magic[0] = b'X';
    seeds.push(("corrupt-bad-magic", bad_magic));
    seeds.push((
        "corrupt-truncated-header",
        small[..small.len() / 3].to_vec(),
    ));
    let mut bad_version = small.clone();
    bad_version[4] = 1;
    seeds.push(("corrupt-version-1", bad_version));
    let mut huge_count = small.clone();
    huge_count[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    seeds.push(("corrupt-huge-tensor-count", huge_count));
    let mut huge_key = small.clone();
    huge_key[24..32].copy_from_slice(&(1u64 << 40).to_le_bytes());
    seeds.push(("corrupt-huge-key-length", huge_key));

    for (name, bytes) in seeds {
        assert!(bytes.len() < 4096, "{name} is {} bytes", bytes.len());
        std::fs::write(dir.join(name), bytes)?;
    }
    Ok(())
}
