//! The tokenizer against llama.cpp (the oracle, `scripts/oracle/llama_oracle.py`):
//!
//! - every supported `tokenizer.ggml.pre` name, on a vocabulary-only GGUF file holding the
//!   probe vocabulary ([`pre_tokenizer_probe_vocab`]: each word any pre-tokenizer family
//!   makes of the oracle strings is one token, so equal ids mean equal splits), gives
//!   llama.cpp's token ids for [`ORACLE_STRINGS`] (with `add_special`), and so does
//!   `kimi-k2` without merges;
//! - SmolLM2-135M-Instruct (`tokenizer.ggml.pre = smollm`, the real-model fixture) gives
//!   llama.cpp's token ids for [`ORACLE_STRINGS`] in every tokenizer mode, in the library
//!   and through `engine tokenize`.
//!
//! Without the oracle venv these tests print a loud banner and pass, unless
//! `PROFINFER_REQUIRE_ORACLE=1`.

mod common;

use std::path::{Path, PathBuf};

use engine::Model;
use engine::presets::write_vocab_only;
use engine_tokenizer::synth::pre_tokenizer_probe_vocab;
use engine_tokenizer::{ORACLE_STRINGS, Tokenizer, supported_pre_tokenizers};

use common::{engine, oracle, oracle_ready, run_json, smollm2, tokens_of};

/// Tokenizer modes: llama.cpp's `add_special` and `parse_special`, and the oracle's flags.
const MODES: &[(bool, bool, &[&str])] = &[
    (true, false, &[]),
    (false, false, &["--no-special"]),
    (true, true, &["--parse-special"]),
];

/// A scratch directory of this test binary.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir
}

/// [`ORACLE_STRINGS`] as the oracle's `--texts-json` file.
fn texts_file() -> PathBuf {
    let path = scratch("tokenizer-oracle").join("oracle-strings.json");
    std::fs::write(&path, serde_json::to_string(ORACLE_STRINGS).expect("JSON"))
        .expect("write the oracle strings");
    path
}

/// llama.cpp's ids for every oracle string in one mode.
fn oracle_ids(model: &Path, texts: &Path, flags: &[&str], vocab_only: bool) -> Vec<Vec<u32>> {
    let mut cmd = oracle("tokenize");
    cmd.arg("--model")
        .arg(model)
        .arg("--texts-json")
        .arg(texts)
        .args(flags);
    if vocab_only {
        cmd.arg("--vocab-only");
    }
    let out = run_json(&mut cmd);
    let lists = out["tokens_list"].as_array().expect("tokens_list");
    assert_eq!(lists.len(), ORACLE_STRINGS.len());
    lists
        .iter()
        .map(|ids| tokens_of(ids, "llama.cpp tokens"))
        .collect()
}

/// The engine's tokenizer of a GGUF file (what `engine tokenize` uses).
fn engine_tokenizer(path: &Path) -> Tokenizer {
    Model::load_tokenizer(path).unwrap_or_else(|e| panic!("{}: {e:?}", path.display()))
}

/// Mismatch lines of one file in one mode.
fn compare(
    label: &str,
    tokenizer: &Tokenizer,
    (add_special, parse_special): (bool, bool),
    theirs: &[Vec<u32>],
) -> Vec<String> {
    ORACLE_STRINGS
        .iter()
        .zip(theirs)
        .filter_map(|(text, theirs)| {
            let ours = tokenizer.tokenize(text, add_special, parse_special);
            (ours != *theirs).then(|| {
                format!(
                    "  [{label} add_special={add_special} parse_special={parse_special}] \
                     {text:?}:\n    ours      {ours:?}\n    llama.cpp {theirs:?}"
                )
            })
        })
        .collect()
}

#[test]
fn every_pre_tokenizer_matches_llama_cpp_on_the_probe_vocabulary() {
    if !oracle_ready() {
        return;
    }
    let dir = scratch("tokenizer-oracle");
    let texts = texts_file();
    let probe = pre_tokenizer_probe_vocab(ORACLE_STRINGS);
    let mut mismatches = Vec::new();
    let mut checked = 0;
    // Every name, plus Kimi K2 without merges (llama.cpp accepts that for it alone).
    let cases = supported_pre_tokenizers()
        .map(|name| (name, true))
        .chain([("kimi-k2", false)]);
    for (name, with_merges) in cases {
        let mut vocab = probe.clone();
        vocab.pre = Some(name.to_owned());
        let mut file = format!("probe-{name}");
        if !with_merges {
            vocab.merges = None;
            file.push_str("-no-merges");
        }
        let path = dir.join(format!("{file}.gguf"));
        write_vocab_only(&vocab, &path).expect("write the probe vocabulary");
        let ours = engine_tokenizer(&path);
        // One mode: with add_special (which shows the BOS/EOS defaults each name sets);
        // the other modes differ in what is around the pre-tokenized text, not in how it
        // is split, and the tiny presets and SmolLM2 test them. Each oracle call is
        // mostly one Python start-up.
        let (add_special, parse_special, flags) = MODES[0];
        let theirs = oracle_ids(&path, &texts, flags, true);
        mismatches.extend(compare(&file, &ours, (add_special, parse_special), &theirs));
        checked += 1;
    }
    assert!(checked > 50, "only {checked} pre-tokenizer names");
    assert!(
        mismatches.is_empty(),
        "{} tokenizations differ from llama.cpp:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn smollm2_tokenization_matches_llama_cpp() {
    if !oracle_ready() {
        return;
    }
    let Some(path) = smollm2() else {
        return;
    };
    let texts = texts_file();
    let ours = engine_tokenizer(&path);
    let mut mismatches = Vec::new();
    for &(add_special, parse_special, flags) in MODES {
        let theirs = oracle_ids(&path, &texts, flags, true);
        mismatches.extend(compare(
            "smollm2",
            &ours,
            (add_special, parse_special),
            &theirs,
        ));
    }
    // `engine tokenize` reads only the vocabulary, so it works on SmolLM2 whatever its
    // weights' type; it gives the library's ids.
    for (text, theirs) in ORACLE_STRINGS
        .iter()
        .zip(&oracle_ids(&path, &texts, &[], true))
        .step_by(7)
    {
        let out = run_json(
            engine("tokenize")
                .arg("-m")
                .arg(&path)
                .args(["-p", text, "--json"]),
        );
        let ours = tokens_of(&out["tokens"], "engine tokens");
        if ours != *theirs {
            mismatches.push(format!(
                "  [engine tokenize] {text:?}:\n    ours      {ours:?}\n    llama.cpp {theirs:?}"
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "SmolLM2: {} tokenizations differ from llama.cpp:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}
