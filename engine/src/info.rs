//! `engine info`: what a GGUF file holds — architecture, hyper-parameters, tensor types,
//! size, tokenizer, special tokens, chat template — and whether this engine can run it.
//!
//! Everything but the last point is read from the header alone, so it works on files the
//! engine cannot run (unknown architecture, tensor types or pre-tokenizer): it is what a
//! user runs first to see why. The verdict is an actual load without repacking (cheap:
//! the weights stay in the memory map), so its error is exactly the one `engine run`
//! would print.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use engine_gguf::{Array, GgufFile, Value};
use engine_tokenizer::{Tokenizer, keys};
use serde::Serialize;

use crate::chat::template::TEMPLATE_KEY;
use crate::error::{EngineError, error_chain};
use crate::model::weights::Repack;
use crate::model::{Model, vocab};

/// Arrays up to this length are shown in full (JSON) or in part (text); longer ones as a
/// type and a length.
const MAX_SHOWN_ARRAY: usize = 64;
/// Elements of an array shown in the text output.
const TEXT_ARRAY_ITEMS: usize = 8;
/// Characters of a string value shown in the text output.
const TEXT_STRING_CHARS: usize = 96;

/// Metadata keys shown in their own section rather than under "other metadata".
const SHOWN_ELSEWHERE: &[&str] = &[
    "general.architecture",
    "general.file_type",
    "general.quantization_version",
    "general.alignment",
    "general.name",
    TEMPLATE_KEY,
];

/// What a GGUF file holds.
#[derive(Clone, Debug, Serialize)]
pub struct ModelInfo {
    /// The file.
    pub path: String,
    /// File size in bytes.
    pub file_bytes: u64,
    /// GGUF format version.
    pub gguf_version: u32,
    /// Number of metadata keys.
    pub n_metadata: usize,
    /// Number of tensors.
    pub n_tensors: usize,
    /// `general.name`.
    pub name: Option<String>,
    /// `general.architecture`.
    pub architecture: Option<String>,
    /// `general.file_type` with llama.cpp's name for it.
    pub file_type: Option<FileType>,
    /// Weights (sum of all tensors' elements).
    pub n_params: u64,
    /// Bits per weight over all tensors.
    pub bits_per_weight: f64,
    /// `general.*` keys other than the ones above.
    pub general: BTreeMap<String, serde_json::Value>,
    /// `{architecture}.*` keys, without the prefix.
    pub hyper_parameters: BTreeMap<String, serde_json::Value>,
    /// Tensor types by total size, largest first.
    pub tensor_types: Vec<TensorTypeInfo>,
    /// The tokenizer.
    pub tokenizer: TokenizerInfo,
    /// The chat template, if the file has one.
    pub chat_template: Option<ChatTemplateInfo>,
    /// Keys in no other section (long arrays summarised).
    pub other_metadata: BTreeMap<String, serde_json::Value>,
    /// Whether this engine can run the file.
    pub engine: Support,
}

/// `general.file_type`.
#[derive(Clone, Debug, Serialize)]
pub struct FileType {
    /// The stored number.
    pub id: u32,
    /// llama.cpp's `LLAMA_FTYPE_*` name without the prefix (`MOSTLY_Q4_1`).
    pub name: Option<&'static str>,
}

/// The tensors of one type.
#[derive(Clone, Debug, Serialize)]
pub struct TensorTypeInfo {
    /// ggml's type name (`q4_1`).
    #[serde(rename = "type")]
    pub ty: &'static str,
    /// Tensors of this type.
    pub n_tensors: usize,
    /// Their elements.
    pub n_params: u64,
    /// Their data in bytes.
    pub bytes: u64,
}

/// One special token.
#[derive(Clone, Debug, Serialize)]
pub struct SpecialToken {
    /// Token id.
    pub id: u32,
    /// Its text (`None` if the id is outside the vocabulary).
    pub text: Option<String>,
}

/// The tokenizer as the metadata describes it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TokenizerInfo {
    /// `tokenizer.ggml.model` (`llama`, `gpt2`).
    pub model: Option<String>,
    /// `tokenizer.ggml.pre`.
    pub pre: Option<String>,
    /// Tokens in the vocabulary.
    pub n_tokens: usize,
    /// BPE merges.
    pub n_merges: usize,
    /// `add_bos_token`, `add_eos_token`, `add_space_prefix` as stored.
    pub flags: BTreeMap<String, bool>,
    /// Special tokens by role (`bos`, `eos`, `eot`, `eom`, `unknown`, `padding`, ...).
    pub special: BTreeMap<String, SpecialToken>,
    /// Tokens that end generation, as the tokenizer derives them (`None` when the
    /// tokenizer cannot be built; see `error`).
    pub end_of_generation: Option<Vec<SpecialToken>>,
    /// Why the tokenizer cannot be built from this metadata.
    pub error: Option<String>,
}

/// The chat template.
#[derive(Clone, Debug, Serialize)]
pub struct ChatTemplateInfo {
    /// Its length in bytes.
    pub bytes: usize,
    /// Its first line.
    pub first_line: String,
    /// Number of lines.
    pub n_lines: usize,
}

/// Whether this engine runs the file.
#[derive(Clone, Debug, Serialize)]
pub struct Support {
    /// It loads.
    pub runnable: bool,
    /// Why it does not.
    pub error: Option<String>,
}

impl ModelInfo {
    /// Inspects the file at `path`.
    ///
    /// # Errors
    ///
    /// [`EngineError::Gguf`] when the file cannot be read or its header is malformed —
    /// the only case in which nothing can be shown.
    pub fn inspect(path: &Path) -> Result<ModelInfo, EngineError> {
        let gguf = |source| EngineError::Gguf {
            path: path.to_owned(),
            source,
        };
        let file = GgufFile::open(path).map_err(gguf)?;
        let meta = file.metadata();
        let text = |k: &str| match meta.get(k) {
            Some(Value::Str(s)) => Some(s.clone()),
            _ => None,
        };
        let architecture = text("general.architecture");
        let arch_prefix = architecture.as_ref().map(|a| format!("{a}."));

        let mut general = BTreeMap::new();
        let mut hyper_parameters = BTreeMap::new();
        let mut other_metadata = BTreeMap::new();
        for (key, value) in meta.iter() {
            if SHOWN_ELSEWHERE.contains(&key) || key.starts_with("tokenizer.ggml.") {
                continue;
            }
            if let Some(rest) = arch_prefix.as_deref().and_then(|p| key.strip_prefix(p)) {
                hyper_parameters.insert(rest.to_owned(), json_value(value));
            } else if key.starts_with("general.") {
                general.insert(key.to_owned(), json_value(value));
            } else {
                other_metadata.insert(key.to_owned(), json_value(value));
            }
        }

        let mut by_type: BTreeMap<u32, TensorTypeInfo> = BTreeMap::new();
        for t in file.tensors() {
            let e = by_type
                .entry(t.ggml_type as u32)
                .or_insert_with(|| TensorTypeInfo {
                    ty: t.ggml_type.name(),
                    n_tensors: 0,
                    n_params: 0,
                    bytes: 0,
                });
            e.n_tensors += 1;
            e.n_params += t.n_elements();
            e.bytes += t.n_bytes;
        }
        let mut tensor_types: Vec<_> = by_type.into_values().collect();
        tensor_types.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.ty.cmp(b.ty)));
        let n_params: u64 = tensor_types.iter().map(|t| t.n_params).sum();
        let data_bytes: u64 = tensor_types.iter().map(|t| t.bytes).sum();

        let file_type = match meta.get("general.file_type").and_then(Value::as_integer) {
            Some(id) => u32::try_from(id).ok().map(|id| FileType {
                id,
                name: file_type_name(id),
            }),
            None => None,
        };
        let chat_template = text(TEMPLATE_KEY).map(|t| ChatTemplateInfo {
            bytes: t.len(),
            first_line: t.lines().next().unwrap_or("").to_owned(),
            n_lines: t.lines().count(),
        });

        let engine = match Model::load_with(path, Repack::Off) {
            Ok(_) => Support {
                runnable: true,
                error: None,
            },
            Err(e) => Support {
                runnable: false,
                error: Some(error_chain(&e)),
            },
        };
        Ok(ModelInfo {
            path: path.display().to_string(),
            file_bytes: file.bytes().len() as u64,
            gguf_version: file.version(),
            n_metadata: meta.len(),
            n_tensors: file.tensors().len(),
            name: text("general.name"),
            architecture,
            file_type,
            n_params,
            bits_per_weight: if n_params > 0 {
                data_bytes as f64 * 8.0 / n_params as f64
            } else {
                0.0
            },
            general,
            hyper_parameters,
            tensor_types,
            tokenizer: tokenizer_info(&file),
            chat_template,
            other_metadata,
            engine,
        })
    }

    /// Writes the report as aligned text.
    pub fn write_text(&self, w: &mut impl Write) -> io::Result<()> {
        let or_none = |s: &Option<String>| s.clone().unwrap_or_else(|| "(none)".into());
        writeln!(w, "file           {}", self.path)?;
        writeln!(
            w,
            "               {} ({} bytes), GGUF v{}, {} metadata keys, {} tensors",
            human_bytes(self.file_bytes),
            self.file_bytes,
            self.gguf_version,
            self.n_metadata,
            self.n_tensors
        )?;
        writeln!(w, "name           {}", or_none(&self.name))?;
        writeln!(w, "architecture   {}", or_none(&self.architecture))?;
        if let Some(ft) = &self.file_type {
            writeln!(
                w,
                "file type      {} ({})",
                ft.name.unwrap_or("unknown"),
                ft.id
            )?;
        }
        writeln!(
            w,
            "parameters     {} ({:.2} bits per weight)",
            human_count(self.n_params),
            self.bits_per_weight
        )?;
        match &self.engine.error {
            None => writeln!(w, "engine         runs this model")?,
            Some(e) => writeln!(w, "engine         cannot run this model: {e}")?,
        }

        section(w, "general", &self.general)?;
        let arch = self.architecture.as_deref().unwrap_or("?");
        section(
            w,
            &format!("hyper-parameters ({arch}.*)"),
            &self.hyper_parameters,
        )?;

        writeln!(w, "\ntensor types")?;
        for t in &self.tensor_types {
            writeln!(
                w,
                "  {:<8} {:>5} tensors {:>12} params {:>11}",
                t.ty,
                t.n_tensors,
                human_count(t.n_params),
                human_bytes(t.bytes)
            )?;
        }

        let tk = &self.tokenizer;
        writeln!(w, "\ntokenizer")?;
        writeln!(
            w,
            "  model            {} (pre-tokenizer {})",
            or_none(&tk.model),
            or_none(&tk.pre)
        )?;
        writeln!(
            w,
            "  vocabulary       {} tokens, {} merges",
            tk.n_tokens, tk.n_merges
        )?;
        for (flag, on) in &tk.flags {
            writeln!(w, "  {flag:<16} {on}")?;
        }
        for (role, t) in &tk.special {
            writeln!(w, "  {:<16} {}", role.to_uppercase(), token_text(t))?;
        }
        match (&tk.end_of_generation, &tk.error) {
            (Some(eog), _) => {
                let list: Vec<String> = eog.iter().map(token_text).collect();
                writeln!(w, "  end of turn      {}", list.join(", "))?;
            }
            (None, Some(e)) => writeln!(w, "  unusable: {e}")?,
            (None, None) => {}
        }

        writeln!(w, "\nchat template")?;
        match &self.chat_template {
            Some(t) => writeln!(
                w,
                "  {} bytes, {} lines; first line: {}",
                t.bytes,
                t.n_lines,
                shorten(&t.first_line)
            )?,
            None => writeln!(w, "  none (chat falls back to ChatML, as llama.cpp does)")?,
        }
        section(w, "other metadata", &self.other_metadata)
    }
}

/// Writes a titled list of `key value` lines (nothing if empty).
fn section(
    w: &mut impl Write,
    title: &str,
    entries: &BTreeMap<String, serde_json::Value>,
) -> io::Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    writeln!(w, "\n{title}")?;
    let width = entries.keys().map(String::len).max().unwrap_or(0);
    for (k, v) in entries {
        writeln!(w, "  {k:<width$}  {}", text_value(v))?;
    }
    Ok(())
}

/// The tokenizer metadata of `file`, and the end-of-generation set if a tokenizer can be
/// built from it.
fn tokenizer_info(file: &GgufFile) -> TokenizerInfo {
    let meta = file.metadata();
    let tokens = meta
        .get(keys::TOKENS)
        .and_then(|v| match v {
            Value::Array(a) => a.as_strs(),
            _ => None,
        })
        .unwrap_or(&[]);
    let token = |id: u32| SpecialToken {
        id,
        text: tokens.get(id as usize).cloned(),
    };
    let mut info = TokenizerInfo {
        model: meta.opt_str(keys::MODEL).ok().flatten().map(str::to_owned),
        pre: meta.opt_str(keys::PRE).ok().flatten().map(str::to_owned),
        n_tokens: tokens.len(),
        n_merges: match meta.get(keys::MERGES) {
            Some(Value::Array(a)) => a.len(),
            _ => 0,
        },
        ..TokenizerInfo::default()
    };
    for (flag, key) in [
        ("add_bos_token", keys::ADD_BOS),
        ("add_eos_token", keys::ADD_EOS),
        ("add_space_prefix", keys::ADD_SPACE_PREFIX),
    ] {
        if let Ok(Some(on)) = meta.opt_bool(key) {
            info.flags.insert(flag.to_owned(), on);
        }
    }
    for (key, value) in meta.iter() {
        let Some(role) = key
            .strip_prefix("tokenizer.ggml.")
            .and_then(|k| k.strip_suffix("_token_id"))
        else {
            continue;
        };
        if let Some(id) = value.as_integer().and_then(|v| u32::try_from(v).ok()) {
            info.special.insert(role.to_owned(), token(id));
        }
    }
    match vocab::vocab_from_gguf(file)
        .map_err(|e| error_chain(&e))
        .and_then(|v| Tokenizer::new(v).map_err(|e| error_chain(&e)))
    {
        Ok(tk) => {
            let eog = (0..tk.n_vocab() as u32)
                .filter(|&id| tk.is_eog(id))
                .map(token)
                .collect();
            info.end_of_generation = Some(eog);
        }
        Err(e) => info.error = Some(e),
    }
    info
}

/// A metadata value as JSON; arrays longer than [`MAX_SHOWN_ARRAY`] as a summary.
fn json_value(v: &Value) -> serde_json::Value {
    use serde_json::json;
    match v {
        Value::U8(x) => json!(x),
        Value::I8(x) => json!(x),
        Value::U16(x) => json!(x),
        Value::I16(x) => json!(x),
        Value::U32(x) => json!(x),
        Value::I32(x) => json!(x),
        Value::U64(x) => json!(x),
        Value::I64(x) => json!(x),
        Value::F32(x) => json_f32(*x),
        Value::F64(x) => json!(x),
        Value::Bool(x) => json!(x),
        Value::Str(s) => json!(s),
        Value::Array(a) => json_array(a),
    }
}

fn json_array(a: &Array) -> serde_json::Value {
    use serde_json::json;
    if a.len() > MAX_SHOWN_ARRAY {
        return json!({ "array": a.type_description(), "len": a.len() });
    }
    match a {
        Array::U8(v) => json!(v),
        Array::I8(v) => json!(v),
        Array::U16(v) => json!(v),
        Array::I16(v) => json!(v),
        Array::U32(v) => json!(v),
        Array::I32(v) => json!(v),
        Array::U64(v) => json!(v),
        Array::I64(v) => json!(v),
        Array::F32(v) => serde_json::Value::Array(v.iter().map(|&x| json_f32(x)).collect()),
        Array::F64(v) => json!(v),
        Array::Bool(v) => json!(v),
        Array::Str(v) => json!(v),
        Array::Array(v) => serde_json::Value::Array(v.iter().map(json_array).collect()),
    }
}

/// An f32 as the shortest decimal that reads back as it (1e-5, not the f64 widening
/// 9.999999747378752e-6); non-finite values as null, as JSON has no such numbers.
fn json_f32(x: f32) -> serde_json::Value {
    x.to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(serde_json::Value::Null, serde_json::Value::Number)
}

/// A JSON value from [`json_value`] as one short line.
fn text_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => shorten(s),
        serde_json::Value::Array(items) => {
            let shown: Vec<String> = items
                .iter()
                .take(TEXT_ARRAY_ITEMS)
                .map(text_value)
                .collect();
            let more = if items.len() > TEXT_ARRAY_ITEMS {
                format!(", … ({} in all)", items.len())
            } else {
                String::new()
            };
            format!("[{}{more}]", shown.join(", "))
        }
        serde_json::Value::Object(o) if o.contains_key("array") => format!(
            "{} of {}",
            o.get("array").and_then(|a| a.as_str()).unwrap_or("array"),
            o.get("len").map(ToString::to_string).unwrap_or_default()
        ),
        other => other.to_string(),
    }
}

/// `s` on one line, cut to [`TEXT_STRING_CHARS`] characters.
fn shorten(s: &str) -> String {
    let one_line = s
        .replace('\n', "\\n")
        .replace('\r', "\\r")
        .replace('\t', "\\t");
    if one_line.chars().count() > TEXT_STRING_CHARS {
        let cut: String = one_line.chars().take(TEXT_STRING_CHARS).collect();
        format!("{cut}…")
    } else {
        one_line
    }
}

fn token_text(t: &SpecialToken) -> String {
    match &t.text {
        Some(text) => format!("{} {}", t.id, shorten(text)),
        None => format!("{} (outside the vocabulary)", t.id),
    }
}

/// `1.23 GiB`-style size.
fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", UNITS[unit])
    }
}

/// `134.52 M`-style count.
fn human_count(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.2} K", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2} M", n as f64 / 1e6),
        _ => format!("{:.2} B", n as f64 / 1e9),
    }
}

/// llama.cpp's `LLAMA_FTYPE_*` names (include/llama.h), without the prefix.
fn file_type_name(id: u32) -> Option<&'static str> {
    Some(match id {
        0 => "ALL_F32",
        1 => "MOSTLY_F16",
        2 => "MOSTLY_Q4_0",
        3 => "MOSTLY_Q4_1",
        7 => "MOSTLY_Q8_0",
        8 => "MOSTLY_Q5_0",
        9 => "MOSTLY_Q5_1",
        10 => "MOSTLY_Q2_K",
        11 => "MOSTLY_Q3_K_S",
        12 => "MOSTLY_Q3_K_M",
        13 => "MOSTLY_Q3_K_L",
        14 => "MOSTLY_Q4_K_S",
        15 => "MOSTLY_Q4_K_M",
        16 => "MOSTLY_Q5_K_S",
        17 => "MOSTLY_Q5_K_M",
        18 => "MOSTLY_Q6_K",
        19 => "MOSTLY_IQ2_XXS",
        20 => "MOSTLY_IQ2_XS",
        21 => "MOSTLY_Q2_K_S",
        22 => "MOSTLY_IQ3_XS",
        23 => "MOSTLY_IQ3_XXS",
        24 => "MOSTLY_IQ1_S",
        25 => "MOSTLY_IQ4_NL",
        26 => "MOSTLY_IQ3_S",
        27 => "MOSTLY_IQ3_M",
        28 => "MOSTLY_IQ2_S",
        29 => "MOSTLY_IQ2_M",
        30 => "MOSTLY_IQ4_XS",
        31 => "MOSTLY_IQ1_M",
        32 => "MOSTLY_BF16",
        36 => "MOSTLY_TQ1_0",
        37 => "MOSTLY_TQ2_0",
        38 => "MOSTLY_MXFP4_MOE",
        1024 => "GUESSED",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_counts_read_like_llama_cpp_logs() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(98_362_432), "93.81 MiB");
        assert_eq!(human_count(134_515_008), "134.52 M");
        assert_eq!(human_count(999), "999");
        assert_eq!(
            json_f32(1e-5).as_f64(),
            Some(1e-5_f64),
            "not the f64 widening of 1e-5f32"
        );
        assert_eq!(json_f32(f32::NAN), serde_json::Value::Null);
    }

    #[test]
    fn long_arrays_are_summarised() {
        let short = json_value(&Value::Array(Array::U32(vec![1, 2, 3])));
        assert_eq!(short, serde_json::json!([1, 2, 3]));
        let long = json_value(&Value::Array(Array::Str(vec!["x".into(); 1000])));
        assert_eq!(long["len"], 1000);
        assert_eq!(text_value(&long), "array of string of 1000");
        let many = json_value(&Value::Array(Array::I32((0..20).collect())));
        assert_eq!(text_value(&many), "[0, 1, 2, 3, 4, 5, 6, 7, … (20 in all)]");
    }

    #[test]
    fn strings_are_shown_on_one_line() {
        assert_eq!(shorten("a\nb"), "a\\nb");
        assert_eq!(
            shorten(&"x".repeat(200)).chars().count(),
            TEXT_STRING_CHARS + 1
        );
    }
}
