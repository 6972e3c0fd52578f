//! Properties of the synthetic vocabularies: size, consistency, determinism,
//! special tokens, and that they load into a working tokenizer.

use std::collections::HashSet;

use engine_tokenizer::synth::{SynthKind, synth_vocab};
use engine_tokenizer::{TokenType, Tokenizer, Vocab};

const KINDS: [SynthKind; 3] = [SynthKind::Spm, SynthKind::Llama3Bpe, SynthKind::Qwen2Bpe];
const SIZES: [usize; 4] = [300, 1000, 5000, 32000];

fn vocab(kind: SynthKind, n: usize, seed: u64) -> Vocab {
    synth_vocab(kind, n, seed).expect("synthetic vocabulary")
}

fn check_consistent(v: &Vocab, n: usize) {
    assert_eq!(v.tokens.len(), n);
    let unique: HashSet<&str> = v.tokens.iter().map(String::as_str).collect();
    assert_eq!(unique.len(), n, "token texts must be unique");
    assert!(v.tokens.iter().all(|t| !t.is_empty()));
    assert_eq!(v.token_types.as_ref().map(Vec::len), Some(n));
    if let Some(scores) = &v.scores {
        assert_eq!(scores.len(), n);
    }
    if let Some(merges) = &v.merges {
        let merge_set: HashSet<&str> = merges.iter().map(String::as_str).collect();
        assert_eq!(merge_set.len(), merges.len(), "merges must be unique");
        for line in merges {
            let (left, right) = line.split_once(' ').expect("merge has a space");
            assert!(!right.contains(' '), "merge {line:?} has one space");
            assert!(unique.contains(left), "left part of {line:?} is a token");
            assert!(unique.contains(right), "right part of {line:?} is a token");
            let merged = format!("{left}{right}");
            assert!(
                unique.contains(merged.as_str()),
                "result of {line:?} is a token"
            );
        }
    }
}

#[test]
fn every_size_is_exact_and_consistent() {
    for kind in KINDS {
        for n in SIZES {
            check_consistent(&vocab(kind, n, 7), n);
        }
    }
}

#[test]
fn preset_sizes_are_exact_and_consistent() {
    check_consistent(&vocab(SynthKind::Qwen2Bpe, 151_936, 1), 151_936);
    check_consistent(&vocab(SynthKind::Llama3Bpe, 128_256, 1), 128_256);
    check_consistent(&vocab(SynthKind::Spm, 32_000, 1), 32_000);
}

#[test]
fn generation_is_deterministic_per_seed() {
    for kind in KINDS {
        assert_eq!(vocab(kind, 20_000, 3), vocab(kind, 20_000, 3));
    }
    // Large vocabularies need filler tokens, which depend on the seed.
    assert_ne!(
        vocab(SynthKind::Llama3Bpe, 20_000, 3),
        vocab(SynthKind::Llama3Bpe, 20_000, 4)
    );
}

#[test]
fn spm_layout_matches_llama2() {
    let v = vocab(SynthKind::Spm, 1000, 0);
    assert_eq!(&v.tokens[..3], ["<unk>", "<s>", "</s>"]);
    assert_eq!(v.tokens[3], "<0x00>");
    assert_eq!(v.tokens[3 + 0x0A], "<0x0A>");
    assert_eq!(v.tokens[258], "<0xFF>");
    let types = v.token_types.as_ref().expect("types");
    assert_eq!(types[0], TokenType::Unknown.as_i32());
    assert_eq!(types[1], TokenType::Control.as_i32());
    assert!(types[3..259].iter().all(|&t| t == TokenType::Byte.as_i32()));
    assert!(
        types[259..]
            .iter()
            .all(|&t| t == TokenType::Normal.as_i32())
    );
    assert_eq!(
        (v.bos_token_id, v.eos_token_id, v.unknown_token_id),
        (Some(1), Some(2), Some(0))
    );
    // Scores of normal pieces strictly decrease with the id.
    let scores = v.scores.as_ref().expect("scores");
    assert!(scores[259..].windows(2).all(|w| w[0] > w[1]));
}

#[test]
fn bpe_special_tokens_and_flags() {
    let t = Tokenizer::new(vocab(SynthKind::Llama3Bpe, 128_256, 0)).expect("tokenizer");
    assert_eq!(t.token_id("<|begin_of_text|>"), Some(128_000));
    assert_eq!(t.token_id("<|eot_id|>"), Some(128_009));
    assert_eq!(t.token_id("<|reserved_special_token_247|>"), Some(128_255));
    assert_eq!(
        (t.bos(), t.eos(), t.add_bos()),
        (Some(128_000), Some(128_009), true)
    );
    assert!(t.is_eog(128_009) && t.is_eog(128_001) && !t.is_eog(128_000));

    let t = Tokenizer::new(vocab(SynthKind::Qwen2Bpe, 151_936, 0)).expect("tokenizer");
    let endoftext = t.token_id("<|endoftext|>").expect("endoftext");
    let im_end = t.token_id("<|im_end|>").expect("im_end");
    assert_eq!(endoftext, 151_936 - 22);
    assert_eq!(
        (t.bos(), t.eos(), t.add_bos()),
        (Some(endoftext), Some(im_end), false)
    );
    assert!(t.is_eog(im_end) && t.is_eog(endoftext));
    assert!(!t.is_eog(t.token_id("<|im_start|>").expect("im_start")));
}

#[test]
fn small_bpe_vocabularies_keep_the_essential_specials() {
    let t = Tokenizer::new(vocab(SynthKind::Qwen2Bpe, 300, 0)).expect("tokenizer");
    assert_eq!(t.token_id("<|im_end|>"), Some(299));
    let t = Tokenizer::new(vocab(SynthKind::Llama3Bpe, 300, 0)).expect("tokenizer");
    assert_eq!(t.token_id("<|begin_of_text|>"), Some(289));
    assert_eq!(t.eos(), t.token_id("<|eot_id|>"));
}

#[test]
fn ordinary_text_uses_multi_character_tokens() {
    let text = "that this nation shall have a new birth of freedom";
    for kind in KINDS {
        let t = Tokenizer::new(vocab(kind, 5000, 0)).expect("tokenizer");
        let ids = t.tokenize(text, false, false);
        assert!(
            ids.len() * 3 < text.len(),
            "{kind:?}: {} tokens for {} bytes",
            ids.len(),
            text.len()
        );
    }
}
