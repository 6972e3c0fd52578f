//! The tokenizer against llama.cpp (the oracle, `scripts/oracle/llama_oracle.py`):
//!
//! - every supported `tokenizer.ggml.pre` name, on a vocabulary-only GGUF file holding the
//!   probe vocabulary ([`pre_tokenizer_probe_vocab`]: each word any pre-tokenizer family
//!   makes of the test strings is one token, so equal ids mean equal splits), gives
//!   llama.cpp's token ids (with `add_special`), and so does `kimi-k2` without merges;
//! - SmolLM2-135M-Instruct (`tokenizer.ggml.pre = smollm`, the real-model fixture) gives
//!   llama.cpp's token ids in every tokenizer mode, in the library and through
//!   `engine tokenize`.
//!
//! The test strings are [`ORACLE_STRINGS`] and seeded random concatenations of pieces that
//! tell the regexes apart (letters of each case and script, combining marks, digits of
//! several kinds, every kind of whitespace, contractions, punctuation and symbols).
//!
//! Without the oracle venv these tests print a loud banner and pass, unless
//! `PROFINFER_REQUIRE_ORACLE=1`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use engine::Model;
use engine::presets::write_vocab_only;
use engine_tokenizer::synth::pre_tokenizer_probe_vocab;
use engine_tokenizer::{ORACLE_STRINGS, Tokenizer, supported_pre_tokenizers};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

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

/// Pieces of the random test strings.
const PIECES: &[&str] = &[
    "a",
    "Z",
    "x",
    "ab",
    "Cd",
    "EF",
    "é",
    "ß",
    "Σ",
    "ǅ",
    "Ǆ",
    "\u{301}",
    "你",
    "好",
    "ア",
    "한",
    "ก",
    "1",
    "0",
    "99",
    "٣",
    "²",
    "Ⅻ",
    " ",
    "  ",
    "\t",
    "\n",
    "\r",
    "\u{a0}",
    "\u{3000}",
    "\u{85}",
    "\u{2028}",
    "\u{200b}",
    "'",
    "'s",
    "'LL",
    ".",
    ",",
    "!",
    "?",
    "…",
    "。",
    "，",
    "(",
    "|",
    ")",
    "[",
    "]",
    "{",
    "\\",
    "$",
    "€",
    "+",
    "<",
    "^",
    "`",
    "~",
    "_",
    "-",
    "/",
    "🦀",
    "IMG",
    "<sentinel:3>",
];

/// Random test strings (fixed seed).
const RANDOM_STRINGS: usize = 300;

/// [`ORACLE_STRINGS`] and [`RANDOM_STRINGS`] seeded random concatenations of [`PIECES`].
fn test_strings() -> &'static [String] {
    static STRINGS: OnceLock<Vec<String>> = OnceLock::new();
    STRINGS.get_or_init(|| {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let random = (0..RANDOM_STRINGS).map(|_| {
            let len = rng.random_range(1..=24);
            (0..len)
                .map(|_| PIECES[rng.random_range(0..PIECES.len())])
                .collect::<String>()
        });
        ORACLE_STRINGS
            .iter()
            .map(|s| (*s).to_owned())
            .chain(random)
            .collect()
    })
}

/// [`test_strings`] as the oracle's `--texts-json` file.
fn texts_file() -> PathBuf {
    let path = scratch("tokenizer-oracle").join("test-strings.json");
    std::fs::write(&path, serde_json::to_string(test_strings()).expect("JSON"))
        .expect("write the test strings");
    path
}

/// llama.cpp's ids for every test string in one mode.
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
    assert_eq!(lists.len(), test_strings().len());
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
    test_strings()
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
    let texts_list: Vec<&str> = test_strings().iter().map(String::as_str).collect();
    let probe = pre_tokenizer_probe_vocab(&texts_list);
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
