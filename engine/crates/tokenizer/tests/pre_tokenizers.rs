//! Every supported pre-tokenizer name builds a tokenizer that round-trips the
//! oracle strings, and the probe vocabulary the llama.cpp comparison uses
//! (`engine/tests/tokenizer_oracle.rs`) turns each word of every family into
//! one token, so equal ids there mean equal splits.

use std::sync::OnceLock;

use engine_tokenizer::synth::{PROBE_SPECIALS, pre_tokenizer_probe_vocab};
use engine_tokenizer::{
    Model, ORACLE_STRINGS, PreTokenizer, Tokenizer, TokenizerError, Vocab, supported_pre_tokenizers,
};

/// The probe vocabulary of the oracle strings, built once.
fn probe_vocab() -> Vocab {
    static VOCAB: OnceLock<Vocab> = OnceLock::new();
    VOCAB
        .get_or_init(|| pre_tokenizer_probe_vocab(ORACLE_STRINGS))
        .clone()
}

fn probe_tokenizer(pre: &str) -> Tokenizer {
    let mut vocab = probe_vocab();
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
            // Rendered with control-token texts: llama.cpp forces tokens such
            // as "</s>" to control type, and the probe vocabulary learns that
            // word from the oracle strings.
            let bytes: Vec<u8> = ids
                .iter()
                .flat_map(|&id| t.token_to_piece(id, true))
                .copied()
                .collect();
            assert_eq!(String::from_utf8_lossy(&bytes), *text, "{name}: {text:?}");
        }
    }
}

#[test]
fn the_probe_vocabulary_makes_every_word_one_token() {
    let vocab = probe_vocab();
    let id_of = |word: &str| {
        let id = vocab.tokens.iter().position(|t| t == word);
        id.and_then(|id| u32::try_from(id).ok())
    };
    let mut checked = 0;
    for name in supported_pre_tokenizers() {
        let t = probe_tokenizer(name);
        let pre = family(&t);
        for text in ORACLE_STRINGS {
            let words = pre.split(text);
            if words
                .iter()
                .any(|w| PROBE_SPECIALS.iter().any(|s| w.contains(s)))
            {
                continue;
            }
            let expected: Vec<u32> = words
                .iter()
                .filter(|w| !w.is_empty())
                .map(|w| id_of(w).unwrap_or_else(|| panic!("{name}: word {w:?} is no token")))
                .collect();
            assert_eq!(t.tokenize(text, false, false), expected, "{name}: {text:?}");
            checked += 1;
        }
    }
    let all = supported_pre_tokenizers().count() * ORACLE_STRINGS.len();
    assert!(checked > all * 9 / 10, "only {checked} of {all} checked");
}

#[test]
fn unsupported_names_are_one_clear_error() {
    let mut vocab = pre_tokenizer_probe_vocab(&["abc"]);
    vocab.pre = Some("foo".into());
    let err = Tokenizer::new(vocab.clone()).expect_err("unknown name");
    assert!(matches!(
        err,
        TokenizerError::UnsupportedPreTokenizer { .. }
    ));
    let msg = err.to_string();
    assert!(
        msg.starts_with(
            "unsupported pre-tokenizer \"foo\" (tokenizer.ggml.pre); supported: a.x-4.0, afmoe, "
        ),
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
