//! Synthetic vocabularies for test models.
//!
//! [`synth_vocab`] builds a complete vocabulary of exactly the requested
//! size, laid out like the real model family so llama.cpp loads it the same
//! way. Pieces and merges are learned by a BPE training pass over a small
//! embedded corpus (English prose, code, some other scripts), so ordinary
//! text tokenizes into multi-character tokens. If the corpus cannot yield
//! enough tokens, the rest are filler merges: seeded random concatenations
//! of two learned tokens, which keep the merge list consistent.

mod train;

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::pretokenize::PreTokenizer;
use crate::tokenizer::MAX_VOCAB_TOKENS;
use crate::unicode::{byte_to_char, gpt2_byte_order};
use crate::vocab::{TokenType, Vocab};
use train::{SymbolTable, train};

/// The embedded training corpus.
const CORPUS: &str = include_str!("synth/corpus.txt");

/// Which model family's vocabulary layout to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SynthKind {
    /// LLaMA-2 style SentencePiece: `<unk>`=0, `<s>`=1, `</s>`=2, byte
    /// tokens `<0x00>`..`<0xFF>` at 3..=258, then scored pieces.
    Spm,
    /// Llama 3 style byte-level BPE (`gpt2`, pre `llama-bpe`): 256 byte
    /// characters, learned merges, special tokens at the end.
    Llama3Bpe,
    /// Qwen2 style byte-level BPE (`gpt2`, pre `qwen2`): 256 byte
    /// characters, learned merges, special tokens at the end.
    Qwen2Bpe,
}

/// Why a synthetic vocabulary cannot be generated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SynthError {
    /// The requested size is below the fixed tokens of the layout.
    #[error("{kind:?} vocabularies need at least {minimum} tokens, {requested} requested")]
    TooSmall {
        /// The layout.
        kind: SynthKind,
        /// Requested size.
        requested: usize,
        /// Smallest possible size.
        minimum: usize,
    },
    /// The requested size exceeds [`MAX_VOCAB_TOKENS`].
    #[error("{requested} tokens exceed the limit of {limit}")]
    TooLarge {
        /// Requested size.
        requested: usize,
        /// Largest supported size.
        limit: usize,
    },
    /// The random filler could not find enough new distinct tokens.
    #[error("could only generate {generated} of {requested} tokens")]
    Exhausted {
        /// Tokens generated.
        generated: usize,
        /// Requested size.
        requested: usize,
    },
}

/// Above this size the BPE layouts include their full special-token block
/// (256 for Llama 3, 22 for Qwen2); below it only the essential ones.
const FULL_SPECIALS_FROM: usize = 4096;

/// Filler attempts per missing token before giving up.
const FILL_ATTEMPTS_PER_TOKEN: usize = 64;

/// Llama 3's named special tokens in their id order (offset from the first special).
const LLAMA3_NAMED: &[&str] = &[
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>",
    "<|reserved_special_token_2|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
];

/// Qwen2.5's added tokens in id order; the bool marks control tokens
/// (the others are user-defined).
const QWEN2_SPECIALS: &[(&str, bool)] = &[
    ("<|endoftext|>", true),
    ("<|im_start|>", true),
    ("<|im_end|>", true),
    ("<|object_ref_start|>", true),
    ("<|object_ref_end|>", true),
    ("<|box_start|>", true),
    ("<|box_end|>", true),
    ("<|quad_start|>", true),
    ("<|quad_end|>", true),
    ("<|vision_start|>", true),
    ("<|vision_end|>", true),
    ("<|vision_pad|>", true),
    ("<|image_pad|>", true),
    ("<|video_pad|>", true),
    ("<tool_call>", false),
    ("</tool_call>", false),
    ("<|fim_prefix|>", true),
    ("<|fim_middle|>", true),
    ("<|fim_suffix|>", true),
    ("<|fim_pad|>", true),
    ("<|repo_name|>", true),
    ("<|file_sep|>", true),
];

/// SPM fixed tokens: `<unk>`, `<s>`, `</s>` and 256 byte tokens.
const SPM_FIXED: usize = 3 + 256;

impl SynthKind {
    /// Smallest vocabulary this layout can produce.
    pub const fn min_vocab(self) -> usize {
        match self {
            SynthKind::Spm => SPM_FIXED + 1,
            SynthKind::Llama3Bpe => 256 + LLAMA3_NAMED.len(),
            SynthKind::Qwen2Bpe => 256 + 3,
        }
    }
}

/// Generate a complete vocabulary of exactly `n_vocab` tokens.
///
/// Deterministic for a given `(kind, n_vocab, seed)`; the seed only affects
/// the filler tokens beyond what the corpus yields.
///
/// Special tokens and flags:
/// * `Spm`: unk 0 `<unk>`, bos 1 `<s>`, eos 2 `</s>`; add_bos, no add_eos,
///   add_space_prefix.
/// * `Llama3Bpe`: bos `<|begin_of_text|>`, eos `<|eot_id|>`; add_bos, no
///   add_eos. Specials start at `n_vocab - 256` (or `n_vocab - 11` below
///   4096 tokens) in Llama 3's order.
/// * `Qwen2Bpe`: bos and padding `<|endoftext|>`, eos `<|im_end|>`; no
///   add_bos/add_eos. Specials start at `n_vocab - 22` (or `n_vocab - 3`
///   below 4096 tokens) in Qwen2.5's order.
pub fn synth_vocab(kind: SynthKind, n_vocab: usize, seed: u64) -> Result<Vocab, SynthError> {
    let minimum = kind.min_vocab();
    if n_vocab < minimum {
        return Err(SynthError::TooSmall {
            kind,
            requested: n_vocab,
            minimum,
        });
    }
    if n_vocab > MAX_VOCAB_TOKENS {
        return Err(SynthError::TooLarge {
            requested: n_vocab,
            limit: MAX_VOCAB_TOKENS,
        });
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    match kind {
        SynthKind::Spm => spm_vocab(n_vocab, &mut rng),
        SynthKind::Llama3Bpe | SynthKind::Qwen2Bpe => bpe_vocab(kind, n_vocab, &mut rng),
    }
}

/// Split the corpus into SentencePiece words: spaces become `▁`, each line
/// starts with `▁`, and a word starts at every `▁` run.
fn spm_words(corpus: &str) -> HashMap<String, u64> {
    let mut words = HashMap::new();
    for line in corpus.lines() {
        let escaped = format!("\u{2581}{}", line.replace(' ', "\u{2581}"));
        let mut word = String::new();
        let mut prev_space = false;
        for c in escaped.chars() {
            let is_space = c == '\u{2581}';
            if is_space && !prev_space && !word.is_empty() {
                *words.entry(std::mem::take(&mut word)).or_insert(0) += 1;
            }
            word.push(c);
            prev_space = is_space;
        }
        if !word.is_empty() {
            *words.entry(word).or_insert(0) += 1;
        }
    }
    words
}

/// Sorted `(text, count)` list for deterministic iteration.
fn sorted_counts(words: HashMap<String, u64>) -> Vec<(String, u64)> {
    let mut words: Vec<_> = words.into_iter().collect();
    words.sort_unstable();
    words
}

fn spm_vocab(n_vocab: usize, rng: &mut ChaCha8Rng) -> Result<Vocab, SynthError> {
    let budget = n_vocab - SPM_FIXED;
    let words = sorted_counts(spm_words(CORPUS));

    // Alphabet by frequency; small budgets keep only the most frequent
    // characters (the rest fall back to byte tokens).
    let mut char_counts: HashMap<char, u64> = HashMap::new();
    for (word, count) in &words {
        for c in word.chars() {
            *char_counts.entry(c).or_insert(0) += count;
        }
    }
    let mut alphabet: Vec<(char, u64)> = char_counts.into_iter().collect();
    alphabet.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let n_chars = if budget > alphabet.len() {
        alphabet.len()
    } else {
        (budget / 2).max(1)
    };
    alphabet.truncate(n_chars);

    let mut table = SymbolTable::default();
    for (c, _) in &alphabet {
        table.intern(&c.to_string());
    }
    // Words split at characters outside the alphabet.
    let mut train_words = Vec::new();
    for (word, count) in &words {
        let mut segment = Vec::new();
        for c in word.chars() {
            match table.get(c.encode_utf8(&mut [0u8; 4])) {
                Some(id) => segment.push(id),
                None => {
                    if segment.len() > 1 {
                        train_words.push((std::mem::take(&mut segment), *count));
                    }
                    segment.clear();
                }
            }
        }
        if segment.len() > 1 {
            train_words.push((segment, *count));
        }
    }
    train(train_words, &mut table, budget - n_chars);
    let learned: Vec<String> = table.texts[n_chars..].to_vec();

    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![
        TokenType::Unknown.as_i32(),
        TokenType::Control.as_i32(),
        TokenType::Control.as_i32(),
    ];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(TokenType::Byte.as_i32());
    }
    let mut taken: std::collections::HashSet<String> = tokens.iter().cloned().collect();
    taken.extend(table.texts.iter().cloned());

    // Learned pieces first (merge order), then filler, then characters.
    let mut pieces = learned;
    let pool: Vec<String> = table.texts.clone();
    let fill = budget - n_chars - pieces.len();
    let filler = random_concatenations(&pool, fill, &mut taken, rng);
    let generated = SPM_FIXED + pieces.len() + filler.len() + n_chars;
    if generated != n_vocab {
        return Err(SynthError::Exhausted {
            generated,
            requested: n_vocab,
        });
    }
    pieces.extend(filler.into_iter().map(|(text, _, _)| text));
    pieces.extend(table.texts[..n_chars].iter().cloned());

    let mut scores = vec![0.0f32; SPM_FIXED];
    for (rank, piece) in pieces.into_iter().enumerate() {
        tokens.push(piece);
        types.push(TokenType::Normal.as_i32());
        scores.push(-(rank as f32));
    }

    Ok(Vocab {
        model: "llama".into(),
        pre: None,
        tokens,
        scores: Some(scores),
        token_types: Some(types),
        merges: None,
        bos_token_id: Some(1),
        eos_token_id: Some(2),
        eot_token_id: None,
        unknown_token_id: Some(0),
        padding_token_id: None,
        add_bos_token: Some(true),
        add_eos_token: Some(false),
        add_space_prefix: Some(true),
    })
}

/// Special tokens of a BPE layout: `(text, is_control)` in id order.
fn bpe_specials(kind: SynthKind, n_vocab: usize) -> Vec<(String, bool)> {
    let full = n_vocab >= FULL_SPECIALS_FROM;
    match kind {
        SynthKind::Qwen2Bpe => {
            let n = if full { QWEN2_SPECIALS.len() } else { 3 };
            QWEN2_SPECIALS[..n]
                .iter()
                .map(|&(t, control)| (t.to_string(), control))
                .collect()
        }
        _ => {
            let mut specials: Vec<(String, bool)> = LLAMA3_NAMED
                .iter()
                .map(|t| ((*t).to_string(), true))
                .collect();
            if full {
                // Llama 3 numbers the remaining reserved tokens from 3 on.
                let mut next = 3;
                while specials.len() < 256 {
                    specials.push((format!("<|reserved_special_token_{next}|>"), true));
                    next += 1;
                }
            }
            specials
        }
    }
}

fn bpe_vocab(kind: SynthKind, n_vocab: usize, rng: &mut ChaCha8Rng) -> Result<Vocab, SynthError> {
    let (pre, pre_name) = match kind {
        SynthKind::Qwen2Bpe => (PreTokenizer::Qwen2, "qwen2"),
        _ => (PreTokenizer::Llama3, "llama-bpe"),
    };
    let specials = bpe_specials(kind, n_vocab);
    let budget = n_vocab - 256 - specials.len();

    // Byte characters first, in GPT-2 order.
    let mut table = SymbolTable::default();
    for b in gpt2_byte_order() {
        table.intern(byte_to_char(b).encode_utf8(&mut [0u8; 4]));
    }
    let mut word_counts: HashMap<String, u64> = HashMap::new();
    for word in pre.split(CORPUS) {
        *word_counts.entry(word).or_insert(0) += 1;
    }
    let train_words: Vec<(Vec<u32>, u64)> = sorted_counts(word_counts)
        .into_iter()
        .map(|(word, count)| {
            let ids = word
                .chars()
                .filter_map(|c| table.get(c.encode_utf8(&mut [0u8; 4])))
                .collect();
            (ids, count)
        })
        .collect();
    let learned = train(train_words, &mut table, budget);
    let mut merges: Vec<String> = learned
        .iter()
        .map(|m| {
            format!(
                "{} {}",
                table.texts[m.left as usize], table.texts[m.right as usize]
            )
        })
        .collect();

    let mut taken: std::collections::HashSet<String> = table.texts.iter().cloned().collect();
    taken.extend(specials.iter().map(|(t, _)| t.clone()));
    let mut tokens: Vec<String> = table.texts.clone();
    let fill = 256 + budget - tokens.len();
    let filler = random_concatenations(&table.texts, fill, &mut taken, rng);
    for (text, left, right) in filler {
        merges.push(format!("{left} {right}"));
        tokens.push(text);
    }
    let mut types = vec![TokenType::Normal.as_i32(); tokens.len()];
    let first_special = u32::try_from(tokens.len()).unwrap_or(u32::MAX);
    for (text, control) in &specials {
        tokens.push(text.clone());
        types.push(if *control {
            TokenType::Control.as_i32()
        } else {
            TokenType::UserDefined.as_i32()
        });
    }
    if tokens.len() != n_vocab {
        return Err(SynthError::Exhausted {
            generated: tokens.len(),
            requested: n_vocab,
        });
    }
    let special_id = |text: &str| {
        specials
            .iter()
            .position(|(t, _)| t == text)
            .and_then(|i| u32::try_from(i).ok())
            .map(|i| first_special + i)
    };

    let (bos, eos, pad, add_bos) = match kind {
        SynthKind::Qwen2Bpe => (
            special_id("<|endoftext|>"),
            special_id("<|im_end|>"),
            special_id("<|endoftext|>"),
            false,
        ),
        _ => (
            special_id("<|begin_of_text|>"),
            special_id("<|eot_id|>"),
            None,
            true,
        ),
    };
    Ok(Vocab {
        model: "gpt2".into(),
        pre: Some(pre_name.into()),
        tokens,
        scores: None,
        token_types: Some(types),
        merges: Some(merges),
        bos_token_id: bos,
        eos_token_id: eos,
        eot_token_id: None,
        unknown_token_id: None,
        padding_token_id: pad,
        add_bos_token: Some(add_bos),
        add_eos_token: Some(false),
        add_space_prefix: None,
    })
}

/// A byte-level BPE vocabulary for testing pre-tokenizers against llama.cpp.
///
/// Its merges are learned on the words every pre-tokenizer family
/// ([`PreTokenizer::ALL`]) splits `texts` into, until each word is a single
/// symbol. Merges are then replayed in rank order, as BPE training applied
/// them, so each of those words tokenizes to exactly one token whatever the
/// family: two splits of a text into different words give different token
/// ids, and equal ids from llama.cpp and this crate mean equal splits (for a
/// split no family makes, its words usually come out as several tokens, which
/// differ from the one-token words of the families).
///
/// Byte characters come first in GPT-2 order, then the learned tokens, then
/// Llama 3's named special tokens and `<|im_start|>`, `<|im_end|>` (control
/// tokens; their texts are cut out of the words before learning, so a word
/// containing one is not a single token). BOS is
/// `<|begin_of_text|>`, EOS `<|eot_id|>`; `pre` is left unset and so are
/// `add_bos_token`/`add_eos_token`, so a test picks the pre-tokenizer and
/// sees its defaults.
pub fn pre_tokenizer_probe_vocab(texts: &[&str]) -> Vocab {
    let mut table = SymbolTable::default();
    for b in gpt2_byte_order() {
        table.intern(byte_to_char(b).encode_utf8(&mut [0u8; 4]));
    }
    let mut counts: HashMap<String, u64> = HashMap::new();
    for pre in PreTokenizer::ALL {
        for text in texts {
            for word in pre.split(text) {
                // Special-token texts are cut out so no learned token
                // duplicates one.
                let mut parts = vec![word.as_str()];
                for special in PROBE_SPECIALS {
                    parts = parts.iter().flat_map(|p| p.split(special)).collect();
                }
                for part in parts.into_iter().filter(|p| !p.is_empty()) {
                    *counts.entry(part.to_owned()).or_insert(0) += 1;
                }
            }
        }
    }
    let train_words: Vec<(Vec<u32>, u64)> = sorted_counts(counts)
        .into_iter()
        .map(|(word, count)| {
            let ids = word
                .chars()
                .filter_map(|c| table.get(c.encode_utf8(&mut [0u8; 4])))
                .collect();
            (ids, count)
        })
        .collect();
    let learned = train(train_words, &mut table, usize::MAX);
    let merges: Vec<String> = learned
        .iter()
        .map(|m| {
            format!(
                "{} {}",
                table.texts[m.left as usize], table.texts[m.right as usize]
            )
        })
        .collect();

    let mut tokens = table.texts;
    let mut types = vec![TokenType::Normal.as_i32(); tokens.len()];
    let first_special = tokens.len();
    for special in PROBE_SPECIALS {
        tokens.push((*special).to_string());
        types.push(TokenType::Control.as_i32());
    }
    let id = |text: &str| {
        tokens[first_special..]
            .iter()
            .position(|t| t == text)
            .and_then(|offset| u32::try_from(first_special + offset).ok())
    };
    let (bos, eos) = (id("<|begin_of_text|>"), id("<|eot_id|>"));
    Vocab {
        model: "gpt2".into(),
        pre: None,
        tokens,
        scores: None,
        token_types: Some(types),
        merges: Some(merges),
        bos_token_id: bos,
        eos_token_id: eos,
        eot_token_id: None,
        unknown_token_id: None,
        padding_token_id: None,
        add_bos_token: None,
        add_eos_token: None,
        add_space_prefix: None,
    }
}

/// The control tokens of [`pre_tokenizer_probe_vocab`]: Llama 3's named special tokens,
/// then `<|im_start|>` and `<|im_end|>`.
pub const PROBE_SPECIALS: &[&str] = &{
    let mut all = [""; LLAMA3_NAMED.len() + 2];
    let mut i = 0;
    while i < LLAMA3_NAMED.len() {
        all[i] = LLAMA3_NAMED[i];
        i += 1;
    }
    [all[i], all[i + 1]] = ["<|im_start|>", "<|im_end|>"];
    all
};

/// `count` new distinct texts, each the concatenation of two `pool` entries:
/// `(text, left, right)`. Texts already in `taken` are skipped.
fn random_concatenations(
    pool: &[String],
    count: usize,
    taken: &mut std::collections::HashSet<String>,
    rng: &mut ChaCha8Rng,
) -> Vec<(String, String, String)> {
    let mut out = Vec::with_capacity(count);
    if pool.is_empty() {
        return out;
    }
    let mut attempts = count.saturating_mul(FILL_ATTEMPTS_PER_TOKEN);
    while out.len() < count && attempts > 0 {
        attempts -= 1;
        let left = &pool[rng.random_range(0..pool.len())];
        let right = &pool[rng.random_range(0..pool.len())];
        let text = format!("{left}{right}");
        if taken.insert(text.clone()) {
            out.push((text, left.clone(), right.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spm_words_start_at_space_runs() {
        let words = spm_words("a b\n    c");
        let mut got: Vec<_> = words.into_iter().collect();
        got.sort();
        assert_eq!(
            got,
            [
                ("\u{2581}a".to_string(), 1),
                ("\u{2581}b".to_string(), 1),
                ("\u{2581}\u{2581}\u{2581}\u{2581}\u{2581}c".to_string(), 1),
            ]
        );
    }

    #[test]
    fn too_small_is_an_error() {
        assert!(matches!(
            synth_vocab(SynthKind::Spm, 100, 0),
            Err(SynthError::TooSmall { minimum: 260, .. })
        ));
        assert!(synth_vocab(SynthKind::Llama3Bpe, 200, 0).is_err());
    }

    #[test]
    fn minimum_sizes_work() {
        for kind in [SynthKind::Spm, SynthKind::Llama3Bpe, SynthKind::Qwen2Bpe] {
            let v = synth_vocab(kind, kind.min_vocab(), 1).expect("minimum size");
            assert_eq!(v.tokens.len(), kind.min_vocab());
        }
    }
}
