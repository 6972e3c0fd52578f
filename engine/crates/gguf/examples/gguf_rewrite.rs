//! Reads a GGUF file and writes it again with [`GgufWriter`], streaming one tensor at a
//! time. For a file written by gguf-py or llama.cpp (tensors packed in order) the output
//! is byte-identical, which makes this a cross-check of the writer: `cmp in out`.
//!
//! `cargo run -p engine-gguf --example gguf_rewrite -- in.gguf out.gguf`

use std::fs::File;
use std::io::BufWriter;

use engine_gguf::{GgufFile, GgufWriter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(input), Some(output)) = (args.next(), args.next()) else {
        return Err("usage: gguf_rewrite <in.gguf> <out.gguf>".into());
    };
    let file = GgufFile::open(&input)?;
    let mut w = GgufWriter::new();
    for (key, value) in file.metadata().iter() {
        w.add_kv(key, value.clone())?;
    }
    for t in file.tensors() {
        w.add_tensor(t.name.clone(), &t.dims, t.ggml_type)?;
    }
    let mut out = BufWriter::new(File::create(&output)?);
    w.write_header(&mut out)?;
    for t in file.tensors() {
        w.write_tensor_data(&mut out, &t.name, file.tensor_data(t))?;
    }
    w.finish(&mut out)?;
    Ok(())
}
