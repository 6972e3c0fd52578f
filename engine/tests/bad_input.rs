//! Bad input gets a clear one-line error, never a panic: corrupt and truncated GGUF
//! files, unknown architectures, missing tensors, unsupported tensor types, prompts
//! longer than the context, hyper-parameters out of range or inconsistent.

mod common;

use std::path::{Path, PathBuf};

use engine_gguf::{GgmlType, GgufFile, GgufWriter, Value};

/// Runs `engine run` on `model` and returns (exit code, stderr).
fn run_engine(model: &Path, extra: &[&str]) -> (i32, String) {
    let mut cmd = common::engine("run");
    cmd.arg("-m")
        .arg(model)
        .args(["-p", "hello world", "-n", "4", "-t", "2"])
        .args(extra);
    let out = cmd.output().expect("run the engine");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts a failure with exit code 2 and a single `error:` line containing `needle`.
fn assert_clear_error(code: i32, stderr: &str, needle: &str) {
    assert_eq!(code, 2, "expected exit code 2, stderr:\n{stderr}");
    assert!(
        !stderr.contains("panicked"),
        "panic instead of an error:\n{stderr}"
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one error line, got:\n{stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(
        lines[0].contains(needle),
        "error does not mention `{needle}`:\n{stderr}"
    );
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bad-input");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir.join(name)
}

/// Copies the GGUF at `src` to `dst`, letting `edit` change the metadata and choose,
/// per tensor, `None` (drop it) or a (type, data) to write.
fn rewrite(
    src: &Path,
    dst: &Path,
    edit_kv: impl Fn(&str, &Value) -> Option<Value>,
    edit_tensor: impl Fn(&str, GgmlType, &[u8]) -> Option<(GgmlType, Vec<u8>)>,
) {
    let f = GgufFile::open(src).expect("valid source model");
    let mut w = GgufWriter::new();
    for (k, v) in f.metadata().iter() {
        if let Some(v) = edit_kv(k, v) {
            w.add_kv(k, v).expect("add kv");
        }
    }
    let mut datas = Vec::new();
    for t in f.tensors() {
        if let Some((ty, data)) = edit_tensor(&t.name, t.ggml_type, f.tensor_data(t)) {
            w.add_tensor(t.name.clone(), &t.dims, ty)
                .expect("add tensor");
            datas.push(data);
        }
    }
    let refs: Vec<&[u8]> = datas.iter().map(Vec::as_slice).collect();
    w.write_to_path(dst, &refs).expect("write rewritten model");
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let (code, err) = run_engine(Path::new("/nonexistent/model.gguf"), &[]);
    assert_clear_error(code, &err, "/nonexistent/model.gguf");
}

#[test]
fn bad_magic_and_version_are_clear_errors() {
    let good = std::fs::read(common::model("tiny-llama", "q8_0")).expect("read model");
    let mut bad = good.clone();
    bad[..4].copy_from_slice(b"GGML");
    let p = scratch("bad-magic.gguf");
    std::fs::write(&p, &bad).expect("write");
    let (code, err) = run_engine(&p, &[]);
    assert_clear_error(code, &err, "magic");

    let mut bad = good;
    bad[4..8].copy_from_slice(&7u32.to_le_bytes());
    let p = scratch("bad-version.gguf");
    std::fs::write(&p, &bad).expect("write");
    let (code, err) = run_engine(&p, &[]);
    assert_clear_error(code, &err, "version");
}

#[test]
fn truncated_files_are_clear_errors_at_every_cut() {
    let good = std::fs::read(common::model("tiny-qwen2", "q4_0")).expect("read model");
    // Cuts inside the header, the metadata, the tensor infos and the tensor data.
    let n = good.len();
    for cut in [3, 10, 24, 200, 5_000, 40_000, n / 2, n - 1] {
        let p = scratch(&format!("truncated-{cut}.gguf"));
        std::fs::write(&p, &good[..cut]).expect("write");
        let (code, err) = run_engine(&p, &[]);
        assert_eq!(code, 2, "cut at {cut}: {err}");
        assert!(!err.contains("panicked"), "cut at {cut}: {err}");
        assert_eq!(
            err.lines().filter(|l| !l.trim().is_empty()).count(),
            1,
            "cut at {cut}: {err}"
        );
    }
}

#[test]
fn an_unknown_architecture_is_named() {
    let src = common::model("tiny-llama", "q8_0");
    let dst = scratch("unknown-arch.gguf");
    rewrite(
        &src,
        &dst,
        |k, v| {
            Some(if k == "general.architecture" {
                Value::from("gptj")
            } else {
                v.clone()
            })
        },
        |_, ty, d| Some((ty, d.to_vec())),
    );
    let (code, err) = run_engine(&dst, &[]);
    assert_clear_error(code, &err, "unknown architecture `gptj`");
}

#[test]
fn a_missing_tensor_is_named() {
    let src = common::model("tiny-llama", "q8_0");
    let dst = scratch("missing-tensor.gguf");
    rewrite(
        &src,
        &dst,
        |_, v| Some(v.clone()),
        |name, ty, d| (name != "blk.1.ffn_up.weight").then(|| (ty, d.to_vec())),
    );
    let (code, err) = run_engine(&dst, &[]);
    assert_clear_error(code, &err, "blk.1.ffn_up.weight");
}

#[test]
fn an_unsupported_tensor_type_is_named() {
    let src = common::model("tiny-llama", "q8_0");
    let dst = scratch("unsupported-type.gguf");
    // IQ4_NL: a real ggml type (32 elements in 18 bytes) this engine does not implement.
    rewrite(
        &src,
        &dst,
        |_, v| Some(v.clone()),
        |name, ty, d| {
            if name == "blk.0.attn_q.weight" {
                Some((GgmlType::IQ4_NL, vec![0u8; d.len() / 34 * 18]))
            } else {
                Some((ty, d.to_vec()))
            }
        },
    );
    let (code, err) = run_engine(&dst, &[]);
    assert_clear_error(code, &err, "iq4_nl");
}

#[test]
fn a_prompt_longer_than_the_context_is_refused() {
    let model = common::model("tiny-llama", "q8_0");
    let mut cmd = common::engine("run");
    cmd.arg("-m")
        .arg(&model)
        .args(["-p", &"word ".repeat(64), "-n", "4", "-c", "16"]);
    let out = cmd.output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_clear_error(
        out.status.code().unwrap_or(-1),
        &err,
        "do not fit the context of 16",
    );
}

#[test]
fn token_ids_outside_the_vocabulary_are_refused() {
    let model = common::model("tiny-llama", "q8_0");
    let out = common::engine("eval")
        .arg("-m")
        .arg(&model)
        .args(["--tokens", "1,99999"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_clear_error(out.status.code().unwrap_or(-1), &err, "token id 99999");
}

/// `tiny-llama3` (a BPE vocabulary) with `tokenizer.ggml.pre` set to `pre`, written to `dst`.
fn llama3_with_pre(dst: &Path, pre: &str) {
    let src = common::model("tiny-llama3", "q8_0");
    rewrite(
        &src,
        dst,
        |k, v| {
            Some(if k == "tokenizer.ggml.pre" {
                Value::from(pre)
            } else {
                v.clone()
            })
        },
        |_, ty, d| Some((ty, d.to_vec())),
    );
}

#[test]
fn an_unknown_pre_tokenizer_is_named_once_with_the_supported_ones() {
    let dst = scratch("unknown-pre.gguf");
    llama3_with_pre(&dst, "no-such-pre");
    let (code, err) = run_engine(&dst, &[]);
    assert_clear_error(code, &err, "unsupported pre-tokenizer \"no-such-pre\"");
    assert_eq!(err.matches("no-such-pre").count(), 1, "named once:\n{err}");
    for supported in ["default", "llama-bpe", "qwen2", "smollm", "tekken"] {
        assert!(
            err.contains(&format!(" {supported},")) || err.contains(&format!(" {supported}\n")),
            "`{supported}` is not listed:\n{err}"
        );
    }
}

#[test]
fn a_known_but_refused_pre_tokenizer_says_why() {
    let dst = scratch("refused-pre.gguf");
    llama3_with_pre(&dst, "gemma4");
    let (code, err) = run_engine(&dst, &[]);
    assert_clear_error(code, &err, "unsupported pre-tokenizer \"gemma4\"");
    assert!(err.contains("U+2581"), "no reason given:\n{err}");
}

#[test]
fn a_bpe_vocabulary_without_merges_is_a_clear_error() {
    let src = common::model("tiny-llama3", "q8_0");
    let dst = scratch("no-merges.gguf");
    rewrite(
        &src,
        &dst,
        |k, v| (k != "tokenizer.ggml.merges").then(|| v.clone()),
        |_, ty, d| Some((ty, d.to_vec())),
    );
    let (code, err) = run_engine(&dst, &[]);
    assert_clear_error(code, &err, "no merges (tokenizer.ggml.merges)");
}

/// `preset`'s q8_0 file with the keys `edits` set to new values (the first of several
/// problems is the one reported: keys are checked in a fixed order).
fn with_keys(preset: &str, file: &str, edits: &[(&str, Value)]) -> PathBuf {
    let src = common::model(preset, "q8_0");
    let dst = scratch(file);
    rewrite(
        &src,
        &dst,
        |k, v| {
            let edit = edits.iter().find(|(key, _)| *key == k);
            Some(edit.map_or_else(|| v.clone(), |(_, new)| new.clone()))
        },
        |_, ty, d| Some((ty, d.to_vec())),
    );
    dst
}

/// A preset, the keys to set in it, and what the error then says.
type BadKeys<'a> = (&'a str, &'a [(&'a str, Value)], &'a str);

#[test]
fn bad_hyper_parameters_are_named_with_what_is_wrong() {
    let cases: [BadKeys; 8] = [
        (
            "tiny-llama",
            &[("llama.block_count", Value::from(0u32))],
            "invalid hyper-parameter llama.block_count: 0 is not in 1..=1024",
        ),
        (
            "tiny-llama",
            &[
                ("llama.attention.head_count_kv", Value::from(3u32)),
                ("llama.rope.dimension_count", Value::from(33u32)),
            ],
            "invalid hyper-parameter llama.attention.head_count: 128 hidden, 4 heads and 3 \
             KV heads do not divide evenly",
        ),
        (
            "tiny-llama",
            &[
                ("llama.rope.dimension_count", Value::from(33u32)),
                ("llama.context_length", Value::from(0u32)),
            ],
            "invalid hyper-parameter llama.context_length: 0 is not in 1..=4294967295",
        ),
        (
            "tiny-llama",
            &[("llama.rope.dimension_count", Value::from(33u32))],
            "invalid hyper-parameter llama.rope.dimension_count: 33 must be even and at most \
             the head size 32",
        ),
        (
            "tiny-gemma2",
            &[
                ("gemma2.attention.value_length", Value::from(64u32)),
                ("gemma2.attention.sliding_window", Value::from(0u32)),
            ],
            "invalid hyper-parameter gemma2.attention.value_length: 64 differs from the key \
             length 128 (not supported)",
        ),
        (
            "tiny-gemma2",
            &[
                ("gemma2.attention.sliding_window", Value::from(0u32)),
                ("gemma2.attn_logit_softcapping", Value::from(-1.0f32)),
            ],
            "invalid hyper-parameter gemma2.attention.sliding_window: 0 would mask every key",
        ),
        (
            "tiny-gemma2",
            &[("gemma2.final_logit_softcapping", Value::from(0.0f32))],
            "invalid hyper-parameter gemma2.final_logit_softcapping: 0 must be positive",
        ),
        (
            "tiny-mixtral",
            &[("llama.expert_used_count", Value::from(9u32))],
            "invalid hyper-parameter llama.expert_used_count: 9 is not in 1..=4",
        ),
    ];
    for (i, (preset, edits, needle)) in cases.iter().enumerate() {
        let dst = with_keys(preset, &format!("hyper-parameter-{i}.gguf"), edits);
        let (code, err) = run_engine(&dst, &[]);
        assert_clear_error(code, &err, needle);
    }
}
