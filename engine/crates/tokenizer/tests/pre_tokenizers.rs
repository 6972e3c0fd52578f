//! Every supported pre-tokenizer name builds a tokenizer, and the probe
//! vocabulary the llama.cpp comparison uses (`engine/tests/tokenizer_oracle.rs`)
//! turns any difference between two families' splits of the oracle strings
//! into different token ids, so agreeing ids there mean agreeing splits.

use std::collections::BTreeMap;

use engine_tokenizer::synth::pre_tokenizer_probe_vocab;
use engine_tokenizer::{
    Model, ORACLE_STRINGS, PreTokenizer, Tokenizer, TokenizerError, supported_pre_tokenizers,
};

fn probe_tokenizer(pre: &str) -> Tokenizer {
    let mut vocab = pre_tokenizer_probe_vocab(ORACLE_STRINGS);
    vocab.pre = Some(pre.to_owned());
    Tokenizer::new(vocab).unwrap_or_else(|e| panic!("{pre}: {e}"))
}

fn family(t: &Tokenizer) -> PreTokenizer {
    match t.model() {
        Model::Bpe { pre } => pre,
        Model::Spm => panic!("the probe vocabulary is BPE"),
    }
}

#[test]
fn every_name_builds_and_round_trips() {
    for name in supported_pre_tokenizers() {
        let t = probe_tokenizer(name);
        for text in ORACLE_STRINGS {
            let ids = t.tokenize(text, false, false);
            assert_eq!(t.decode(&ids), *text, "{name}: {text:?}");
        }
    }
}

#[test]
fn the_probe_vocabulary_shows_every_split_difference_in_the_ids() {
    // One tokenizer per (family, ignore_merges): the first name of each.
    let mut by_family: BTreeMap<String, Tokenizer> = BTreeMap::new();
    for name in supported_pre_tokenizers() {
        let t = probe_tokenizer(name);
        let probe = t.tokenize("Hello", false, false);
        let key = format!("{:?} {:?}", family(&t), probe);
        by_family.entry(key).or_insert(t);
    }
    let tokenizers: Vec<&Tokenizer> = by_family.values().collect();
    let mut invisible = Vec::new();
    let mut differing = 0;
    for text in ORACLE_STRINGS {
        for (i, a) in tokenizers.iter().enumerate() {
            for b in &tokenizers[i + 1..] {
                let (pa, pb) = (family(a), family(b));
                let words = |p: PreTokenizer| -> Vec<String> {
                    p.split(text).into_iter().filter(|w| !w.is_empty()).collect()
                };
                if words(pa) == words(pb) {
                    continue;
                }
                differing += 1;
                if a.tokenize(text, false, false) == b.tokenize(text, false, false) {
                    invisible.push(format!("{pa:?} vs {pb:?} on {text:?}"));
                }
            }
        }
    }
    assert!(differing > 100, "only {differing} split differences");
    assert!(
        invisible.is_empty(),
        "{} of {differing} split differences give the same ids:\n{}",
        invisible.len(),
        invisible.join("\n")
    );
}

#[test]
fn unsupported_names_are_one_clear_error() {
    let mut vocab = pre_tokenizer_probe_vocab(&["abc"]);
    vocab.pre = Some("foo".into());
    let err = Tokenizer::new(vocab.clone()).expect_err("unknown name");
    assert!(matches!(err, TokenizerError::UnsupportedPreTokenizer { .. }));
    let msg = err.to_string();
    assert!(
        msg.starts_with("unsupported pre-tokenizer \"foo\" (tokenizer.ggml.pre); supported: default, "),
        "{msg}"
    );
    assert!(msg.contains("llama-bpe") && msg.contains("smollm") && !msg.contains('\n'));

    vocab.pre = Some("gemma4".into());
    let msg = Tokenizer::new(vocab).expect_err("refused name").to_string();
    assert!(
        msg.starts_with("unsupported pre-tokenizer \"gemma4\" (tokenizer.ggml.pre): it escapes"),
        "{msg}"
    );
}

#[test]
fn kimi_k2_needs_no_merges_others_do() {
    let mut vocab = pre_tokenizer_probe_vocab(&["abc"]);
    vocab.merges = None;
    vocab.pre = Some("kimi-k2".into());
    let t = Tokenizer::new(vocab.clone()).expect("kimi-k2 without merges");
    // Without merges every character is its own token.
    assert_eq!(t.tokenize("abc", false, false).len(), 3);
    vocab.pre = Some("qwen2".into());
    assert_eq!(
        Tokenizer::new(vocab).expect_err("no merges").to_string(),
        "the BPE vocabulary has no merges (tokenizer.ggml.merges)"
    );
}
