//! Tokenizer behaviour: hand-checked small vocabularies, agreement with
//! naive reference implementations, round trips, special tokens, errors.

use std::collections::HashMap;

use engine_tokenizer::synth::{SynthKind, synth_vocab};
use engine_tokenizer::{ORACLE_STRINGS, PreTokenizer, Tokenizer, TokenizerError, Vocab};

const SPM_SPACE: char = '\u{2581}';

/// Extra inputs beyond the oracle set.
const EXTRA: &[&str] = &[
    "a",
    "  two leading",
    "trailing two  ",
    "\t\ttabs\t",
    "multi\n\n\nline\r\ntext",
    "a1b22c333d4444",
    "ÀÉÎÕÜ àéîõü ß ñ",
    "日本語のテキストと中文混合",
    "🏳️‍🌈 family: 👨‍👩‍👧‍👦",
    "x = [1, 2, 3]; y = {'k': \"v\"}",
    "We are met on a great battle-field of that war.",
];

fn inputs() -> impl Iterator<Item = &'static str> {
    ORACLE_STRINGS.iter().chain(EXTRA).copied()
}

fn tokenizer(kind: SynthKind, n: usize) -> Tokenizer {
    Tokenizer::new(synth_vocab(kind, n, 11).expect("synthetic vocabulary")).expect("tokenizer")
}

/// A hand-built SPM vocabulary: specials, 256 byte tokens, then `pieces`.
fn spm_vocab(pieces: &[(&str, f32)]) -> Vocab {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
    }
    let mut scores = vec![0.0; tokens.len()];
    for (text, score) in pieces {
        tokens.push((*text).to_string());
        types.push(1);
        scores.push(*score);
    }
    Vocab {
        model: "llama".into(),
        tokens,
        scores: Some(scores),
        token_types: Some(types),
        ..Vocab::default()
    }
}

fn texts(t: &Tokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter()
        .map(|&id| t.token_text(id).expect("valid id").to_string())
        .collect()
}

const HAND_SPM: &[(&str, f32)] = &[
    ("\u{2581}", -1.0),
    ("h", -10.0),
    ("e", -10.0),
    ("l", -10.0),
    ("o", -10.0),
    ("ll", -2.0),
    ("\u{2581}h", -3.0),
    ("he", -4.0),
    ("llo", -5.0),
    ("\u{2581}he", -6.0),
    ("\u{2581}hello", -7.0),
];

#[test]
fn hand_checked_spm_segmentation() {
    let t = Tokenizer::new(spm_vocab(HAND_SPM)).expect("tokenizer");
    // "▁hello": ll(-2), ▁h(-3), then "he" is stale, llo(-5), ▁he(-6), ▁hello(-7).
    assert_eq!(texts(&t, &t.tokenize("hello", false, false)), ["▁hello"]);
    // "▁hell": ll, ▁h, ▁he; "▁hell" is not a token.
    assert_eq!(texts(&t, &t.tokenize("hell", false, false)), ["▁he", "ll"]);
    // No pair of "▁oh!" is a token; "!" is not in the vocabulary -> byte.
    assert_eq!(
        texts(&t, &t.tokenize("oh!", false, false)),
        ["▁", "o", "h", "<0x21>"]
    );
    // Spaces become ▁; BOS with add_special (SPM default add_bos = true).
    assert_eq!(
        texts(&t, &t.tokenize("hello hello", true, false)),
        ["<s>", "▁hello", "▁hello"]
    );
}

#[test]
fn hand_checked_spm_special_parsing() {
    let t = Tokenizer::new(spm_vocab(HAND_SPM)).expect("tokenizer");
    // Parsed specials; text after a special token gets the space prefix.
    assert_eq!(
        texts(&t, &t.tokenize("<s>hello</s>", false, true)),
        ["<s>", "▁hello", "</s>"]
    );
    // Not parsed: the characters are tokenized (as bytes here).
    let ids = t.tokenize("<s>hello</s>", false, false);
    assert!(!ids.contains(&1) && !ids.contains(&2));
    assert_eq!(t.decode(&ids), " <s>hello</s>");
}

#[test]
fn hand_checked_bpe_merges() {
    // 256 byte characters (GPT-2 order is irrelevant here) plus merged tokens.
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_char(b).to_string()).collect();
    for t in ["ll", "he", "hell", "hello", "Ġh"] {
        tokens.push(t.to_string());
    }
    let merges = ["l l", "h e", "he ll", "hell o", "Ġ h"];
    let vocab = Vocab {
        model: "gpt2".into(),
        pre: Some("qwen2".into()),
        tokens,
        merges: Some(merges.iter().map(|m| (*m).to_string()).collect()),
        ..Vocab::default()
    };
    let t = Tokenizer::new(vocab).expect("tokenizer");
    // "hello": ll(0), he(1), hell(2), hello(3).
    // "Ġhello": ll(0), he(1) makes "Ġ h"(4) stale, hell(2), hello(3).
    assert_eq!(
        texts(&t, &t.tokenize("hello hello", false, false)),
        ["hello", "Ġ", "hello"]
    );
    assert_eq!(
        t.decode(&t.tokenize("hello hello", false, false)),
        "hello hello"
    );
}

/// GPT-2 byte → character mapping, written out independently of the crate.
fn byte_char(b: u8) -> char {
    let printable = |b: u8| matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF);
    if printable(b) {
        return char::from(b);
    }
    let rank = (0..b).filter(|&x| !printable(x)).count();
    char::from_u32(256 + u32::try_from(rank).expect("small")).expect("valid char")
}

/// Naive BPE: repeatedly merge the lowest-rank adjacent pair (leftmost on ties).
fn naive_bpe(word: &str, ranks: &HashMap<(String, String), usize>) -> Vec<String> {
    let mut symbols: Vec<String> = word.chars().map(String::from).collect();
    loop {
        let best = (0..symbols.len().saturating_sub(1))
            .filter_map(|i| {
                ranks
                    .get(&(symbols[i].clone(), symbols[i + 1].clone()))
                    .map(|&r| (r, i))
            })
            .min();
        let Some((_, i)) = best else { break };
        let right = symbols.remove(i + 1);
        symbols[i].push_str(&right);
    }
    symbols
}

/// Naive SPM: repeatedly merge the adjacent pair forming the highest-scored
/// token (leftmost on ties); non-token symbols become byte tokens.
fn naive_spm(text: &str, vocab: &Vocab) -> Vec<String> {
    let index: HashMap<&str, usize> = vocab
        .tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    let scores = vocab.scores.as_ref().expect("scores");
    let mut symbols: Vec<String> = text.chars().map(String::from).collect();
    loop {
        let mut best: Option<(f32, usize)> = None;
        for i in 0..symbols.len().saturating_sub(1) {
            let joined = format!("{}{}", symbols[i], symbols[i + 1]);
            if let Some(&id) = index.get(joined.as_str())
                && best.is_none_or(|(s, _)| scores[id] > s)
            {
                best = Some((scores[id], i));
            }
        }
        let Some((_, i)) = best else { break };
        let right = symbols.remove(i + 1);
        symbols[i].push_str(&right);
    }
    let mut out = Vec::new();
    for s in symbols {
        if index.contains_key(s.as_str()) {
            out.push(s);
        } else {
            out.extend(s.bytes().map(|b| format!("<0x{b:02X}>")));
        }
    }
    out
}

#[test]
fn bpe_agrees_with_naive_reference() {
    for (kind, pre) in [
        (SynthKind::Llama3Bpe, PreTokenizer::Llama3),
        (SynthKind::Qwen2Bpe, PreTokenizer::Qwen2),
    ] {
        for n in [300, 3000, 40_000] {
            let vocab = synth_vocab(kind, n, 5).expect("vocab");
            let ranks: HashMap<(String, String), usize> = vocab
                .merges
                .as_ref()
                .expect("merges")
                .iter()
                .enumerate()
                .map(|(r, m)| {
                    let (a, b) = m.split_once(' ').expect("space");
                    ((a.to_string(), b.to_string()), r)
                })
                .collect();
            let t = Tokenizer::new(vocab.clone()).expect("tokenizer");
            for s in inputs() {
                let mut expected = Vec::new();
                for word in pre.split(s) {
                    // llama-bpe emits whole-word tokens directly.
                    if kind == SynthKind::Llama3Bpe && t.token_id(&word).is_some() {
                        expected.push(word);
                    } else {
                        expected.extend(naive_bpe(&word, &ranks));
                    }
                }
                let got = texts(&t, &t.tokenize(s, false, false));
                assert_eq!(got, expected, "{kind:?} n={n} input {s:?}");
            }
        }
    }
}

#[test]
fn spm_agrees_with_naive_reference() {
    for n in [300, 3000, 32_000] {
        let vocab = synth_vocab(SynthKind::Spm, n, 5).expect("vocab");
        let t = Tokenizer::new(vocab.clone()).expect("tokenizer");
        for s in inputs() {
            // No control-token parsing: the whole input is one fragment.
            let expected = if s.is_empty() {
                Vec::new()
            } else {
                let escaped: String = format!(" {s}")
                    .chars()
                    .map(|c| if c == ' ' { SPM_SPACE } else { c })
                    .collect();
                naive_spm(&escaped, &vocab)
            };
            let got = texts(&t, &t.tokenize(s, false, false));
            assert_eq!(got, expected, "n={n} input {s:?}");
        }
    }
}

#[test]
fn bpe_round_trips() {
    for kind in [SynthKind::Llama3Bpe, SynthKind::Qwen2Bpe] {
        for n in [300, 5000] {
            let t = tokenizer(kind, n);
            for s in inputs() {
                let ids = t.tokenize(s, true, false);
                assert_eq!(t.decode(&ids), s, "{kind:?} n={n}");
                let bytes: Vec<u8> = ids
                    .iter()
                    .flat_map(|&id| t.token_to_piece(id, false).to_vec())
                    .collect();
                assert_eq!(bytes, s.as_bytes(), "pieces stream the exact bytes");
            }
        }
    }
}

#[test]
fn spm_round_trips_with_the_space_prefix() {
    for n in [300, 5000] {
        let t = tokenizer(SynthKind::Spm, n);
        for s in inputs().filter(|s| !s.is_empty()) {
            let ids = t.tokenize(s, false, false);
            // decode keeps the prefix space; detokenize strips it like llama.cpp.
            assert_eq!(t.decode(&ids), format!(" {s}"), "n={n}");
            assert_eq!(t.detokenize(&ids, false, false), s, "n={n}");
        }
    }
}

#[test]
fn special_tokens_parse_only_when_asked() {
    let t = tokenizer(SynthKind::Qwen2Bpe, 5000);
    let start = t.token_id("<|im_start|>").expect("im_start");
    let end = t.token_id("<|im_end|>").expect("im_end");
    let chat = "<|im_start|>user\nhi<|im_end|>";
    let ids = t.tokenize(chat, false, true);
    assert_eq!(ids.first(), Some(&start));
    assert_eq!(ids.last(), Some(&end));
    assert_eq!(t.decode(&ids), "user\nhi", "control tokens render empty");
    assert_eq!(t.detokenize(&ids, false, true), chat);
    assert_eq!(t.token_to_piece(end, true), b"<|im_end|>");
    assert!(t.token_to_piece(end, false).is_empty());

    let plain = t.tokenize(chat, false, false);
    assert!(!plain.contains(&start) && !plain.contains(&end));
    assert_eq!(t.decode(&plain), chat);
}

#[test]
fn llama3_adds_bos_and_splits_header_tokens() {
    let t = tokenizer(SynthKind::Llama3Bpe, 5000);
    let bos = t.bos().expect("bos");
    let s = "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>";
    let ids = t.tokenize(s, true, true);
    assert_eq!(ids[0], bos);
    assert_eq!(ids[1], t.token_id("<|start_header_id|>").expect("header"));
    assert_eq!(ids.last().copied(), t.token_id("<|eot_id|>"));
    assert!(t.is_eog(*ids.last().expect("last")));
    // A BOS already in the text is kept in addition to the added one.
    let ids = t.tokenize("<|begin_of_text|>x", true, true);
    assert_eq!(&ids[..2], [bos, bos]);
}

#[test]
fn spm_byte_fallback_for_missing_characters() {
    // The 300-token SPM vocabulary holds only frequent characters.
    let t = tokenizer(SynthKind::Spm, 300);
    let ids = t.tokenize("你", false, false);
    let expected: Vec<u32> = "你".bytes().map(|b| 3 + u32::from(b)).collect();
    assert_eq!(&ids[ids.len() - 3..], expected);
    // Streaming the byte pieces rebuilds the character.
    let bytes: Vec<u8> = ids[ids.len() - 3..]
        .iter()
        .flat_map(|&id| t.token_to_piece(id, false).to_vec())
        .collect();
    assert_eq!(bytes, "你".as_bytes());
}

#[test]
fn vocabulary_errors() {
    let base = synth_vocab(SynthKind::Qwen2Bpe, 300, 0).expect("vocab");
    let err = |v: Vocab| Tokenizer::new(v).expect_err("must fail");

    let mut v = base.clone();
    v.model = "bert".into();
    assert!(matches!(err(v), TokenizerError::UnknownModel { .. }));
    let mut v = base.clone();
    v.pre = Some("nope".into());
    assert!(matches!(
        err(v),
        TokenizerError::UnsupportedPreTokenizer { .. }
    ));
    let mut v = base.clone();
    v.scores = Some(vec![0.0; 3]);
    assert!(matches!(
        err(v),
        TokenizerError::InconsistentArrays {
            array: "scores",
            ..
        }
    ));
    let mut v = base.clone();
    v.eos_token_id = Some(300);
    assert!(matches!(
        err(v),
        TokenizerError::TokenIdOutOfRange { id: 300, .. }
    ));
    let mut v = base.clone();
    v.merges = None;
    assert!(matches!(err(v), TokenizerError::MissingMerges));
    let mut v = base.clone();
    v.merges = Some(vec!["nospace".into()]);
    assert!(matches!(err(v), TokenizerError::BadMerge { rank: 0, .. }));
    let mut v = base.clone();
    v.tokens[5] = v.tokens[4].clone();
    assert!(matches!(
        err(v),
        TokenizerError::DuplicateToken {
            first: 4,
            second: 5,
            ..
        }
    ));

    let mut v = synth_vocab(SynthKind::Spm, 300, 0).expect("vocab");
    v.tokens[3 + 0x80] = "not a byte".into();
    assert!(matches!(
        err(v),
        TokenizerError::MissingByteToken { byte: 0x80 }
    ));
}
