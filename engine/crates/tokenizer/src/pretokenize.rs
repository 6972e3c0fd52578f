//! Byte-level BPE pre-tokenizers: split text into words before merging.
//!
//! Ports of llama.cpp's `unicode_regex_split` for the regexes it handles with
//! hand-written code (`unicode_regex_split_custom_gpt2`, `_llama3`,
//! `_qwen2`), plus the simple character-class regexes of the "default"
//! pre-tokenizer, which llama.cpp runs through `std::regex` on a text where
//! every non-ASCII code point is collapsed to its category. The ports keep
//! llama.cpp's quirks so the resulting words are identical.

use crate::unicode::{Flags, byte_encode, to_lower};

/// Which split rules a byte-level BPE vocabulary uses (`tokenizer.ggml.pre`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreTokenizer {
    /// llama.cpp's fallback (`"default"` or missing): punctuation runs, then
    /// the GPT-2 regex, then digit runs, then groups of three ASCII digits.
    Default,
    /// The GPT-2 regex alone (`"gpt-2"`, `"phi-2"`, `"mpt"`, `"olmo"`).
    Gpt2,
    /// Llama 3 (`"llama-bpe"`, `"llama3"`, `"llama-v3"`, ...): digits in
    /// groups of one to three.
    Llama3,
    /// Qwen2 (`"qwen2"`, `"deepseek-r1-qwen"`, `"megrez"`, ...): single digits.
    Qwen2,
}

/// Tokenizer flags implied by a pre-tokenizer name, as set by llama.cpp's
/// vocabulary loader before the GGUF flags are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PreTokenizerConfig {
    /// The split rules.
    pub pre: PreTokenizer,
    /// A word that is itself a token is emitted without merging.
    pub ignore_merges: bool,
    /// Default for `add_bos_token` when the GGUF key is absent.
    pub add_bos: bool,
    /// llama.cpp's `clean_up_tokenization_spaces` in detokenize.
    pub clean_spaces: bool,
}

impl PreTokenizerConfig {
    /// Resolve a `tokenizer.ggml.pre` value; `None` for unsupported names.
    pub fn from_name(name: Option<&str>) -> Option<Self> {
        let base = |pre| PreTokenizerConfig {
            pre,
            ignore_merges: false,
            add_bos: false,
            clean_spaces: true,
        };
        let config = match name.unwrap_or("") {
            "" | "default" => base(PreTokenizer::Default),
            "gpt-2" | "phi-2" | "mpt" | "olmo" => base(PreTokenizer::Gpt2),
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" | "jina-v5-nano" => PreTokenizerConfig {
                ignore_merges: true,
                add_bos: true,
                ..base(PreTokenizer::Llama3)
            },
            "dbrx" | "smaug-bpe" => base(PreTokenizer::Llama3),
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" => PreTokenizerConfig {
                clean_spaces: false,
                ..base(PreTokenizer::Qwen2)
            },
            "megrez" | "stablelm2" => base(PreTokenizer::Qwen2),
            // TODO(tokenizer branch): llama.cpp splits `\p{N}` singly before GPT-2 here.
            "smollm" => PreTokenizerConfig {
                clean_spaces: false,
                ..base(PreTokenizer::Gpt2)
            },
            _ => return None,
        };
        Some(config)
    }
}

impl PreTokenizer {
    /// Split `text` into words and byte-encode each word with GPT-2's
    /// byte → unicode mapping (llama.cpp `unicode_regex_split`).
    pub fn split(self, text: &str) -> Vec<String> {
        let cpts: Vec<char> = text.chars().collect();
        let flags: Vec<Flags> = cpts.iter().map(|&c| Flags::of(c)).collect();
        let mut offsets = vec![cpts.len()];
        let passes: &[Pass] = match self {
            PreTokenizer::Default => &[
                Pass::ClassRuns(is_default_punctuation),
                Pass::Gpt2,
                Pass::ClassRuns(is_collapsed_number),
                Pass::AsciiDigitTriples,
            ],
            PreTokenizer::Gpt2 => &[Pass::Gpt2],
            PreTokenizer::Llama3 => &[Pass::Llama3 { max_digits: 3 }],
            PreTokenizer::Qwen2 => &[Pass::Llama3 { max_digits: 1 }],
        };
        for pass in passes {
            offsets = apply_pass(*pass, &cpts, &flags, &offsets);
        }
        let mut words = Vec::with_capacity(offsets.len());
        let mut start = 0;
        for len in offsets {
            let word: String = cpts[start..start + len].iter().collect();
            words.push(byte_encode(&word));
            start += len;
        }
        words
    }
}

/// One regex of a pre-tokenizer's list.
#[derive(Debug, Clone, Copy)]
enum Pass {
    /// `[class]+` through `std::regex`: maximal runs and the gaps between.
    ClassRuns(fn(char, Flags) -> bool),
    /// llama.cpp `unicode_regex_split_custom_gpt2`.
    Gpt2,
    /// llama.cpp `unicode_regex_split_custom_llama3` (`max_digits` 3) and
    /// `_qwen2` (`max_digits` 1).
    Llama3 {
        /// Longest digit group.
        max_digits: usize,
    },
    /// `[0-9][0-9][0-9]` through `std::regex`.
    AsciiDigitTriples,
}

/// Run one pass over every current fragment; returns the new fragment lengths.
fn apply_pass(pass: Pass, cpts: &[char], flags: &[Flags], offsets: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(offsets.len());
    let mut start = 0;
    for &len in offsets {
        let seg = Segment {
            cpts: &cpts[start..start + len],
            flags: &flags[start..start + len],
        };
        match pass {
            Pass::ClassRuns(class) => split_class_runs(seg, class, &mut out),
            Pass::Gpt2 => split_gpt2(seg, &mut out),
            Pass::Llama3 { max_digits } => split_llama3(seg, max_digits, &mut out),
            Pass::AsciiDigitTriples => split_digit_triples(seg, &mut out),
        }
        start += len;
    }
    out
}

/// `[\p{P}\$\+<=>\^~\|]` on llama.cpp's collapsed text: ASCII characters are
/// tested against the collapsed class's explicit ASCII list (which has every
/// ASCII punctuation/symbol character except the backtick), other code
/// points by category.
fn is_default_punctuation(c: char, f: Flags) -> bool {
    if c.is_ascii() {
        c.is_ascii_punctuation() && c != '`'
    } else {
        !f.whitespace && f.punctuation
    }
}

/// `\p{N}` on llama.cpp's collapsed text.
fn is_collapsed_number(c: char, f: Flags) -> bool {
    if c.is_ascii() {
        c.is_ascii_digit()
    } else {
        !f.whitespace && f.number
    }
}

/// One fragment being split: code points and their flags.
#[derive(Clone, Copy)]
struct Segment<'a> {
    cpts: &'a [char],
    flags: &'a [Flags],
}

impl Segment<'_> {
    fn len(&self) -> usize {
        self.cpts.len()
    }

    /// Code point at `pos`, `None` outside the fragment.
    fn cpt(&self, pos: usize) -> Option<char> {
        self.cpts.get(pos).copied()
    }

    /// Flags at `pos`, all false outside the fragment.
    fn flags(&self, pos: usize) -> Flags {
        self.flags.get(pos).copied().unwrap_or_default()
    }
}

/// Emits pieces ending at given positions (llama.cpp's `_add_token`).
struct Pieces<'a> {
    prev_end: usize,
    out: &'a mut Vec<usize>,
}

impl Pieces<'_> {
    /// Close the piece ending at `end`; returns its length (0 is not emitted).
    fn add(&mut self, end: usize) -> usize {
        let len = end - self.prev_end;
        if len > 0 {
            self.out.push(len);
        }
        self.prev_end = end;
        len
    }
}

fn split_class_runs(seg: Segment<'_>, class: fn(char, Flags) -> bool, out: &mut Vec<usize>) {
    let mut pieces = Pieces { prev_end: 0, out };
    let mut pos = 0;
    while pos < seg.len() {
        if class(seg.cpts[pos], seg.flags[pos]) {
            pieces.add(pos);
            while pos < seg.len() && class(seg.cpts[pos], seg.flags[pos]) {
                pos += 1;
            }
            pieces.add(pos);
        } else {
            pos += 1;
        }
    }
    pieces.add(seg.len());
}

fn split_digit_triples(seg: Segment<'_>, out: &mut Vec<usize>) {
    let mut pieces = Pieces { prev_end: 0, out };
    let is_digit = |p: usize| seg.cpt(p).is_some_and(|c| c.is_ascii_digit());
    let mut pos = 0;
    while pos < seg.len() {
        if is_digit(pos) && is_digit(pos + 1) && is_digit(pos + 2) {
            pieces.add(pos);
            pos += 3;
            pieces.add(pos);
        } else {
            pos += 1;
        }
    }
    pieces.add(seg.len());
}

/// `'s|'t|'re|'ve|'m|'ll|'d` at `pos`; returns the contraction length.
fn contraction_len(seg: Segment<'_>, pos: usize, case_insensitive: bool) -> Option<usize> {
    if seg.cpt(pos) != Some('\'') || pos + 1 >= seg.len() {
        return None;
    }
    let fold = |c: Option<char>| match c {
        Some(c) if case_insensitive => Some(to_lower(c)),
        other => other,
    };
    let next = fold(seg.cpt(pos + 1));
    if matches!(next, Some('s' | 't' | 'm' | 'd')) {
        return Some(2);
    }
    if pos + 2 < seg.len() {
        let next_next = fold(seg.cpt(pos + 2));
        if matches!(
            (next, next_next),
            (Some('r'), Some('e')) | (Some('v'), Some('e')) | (Some('l'), Some('l'))
        ) {
            return Some(3);
        }
    }
    None
}

/// Trailing-whitespace rules shared by the custom splitters. Returns the new
/// position, or `None` if `pos` does not start whitespace.
fn whitespace_end(seg: Segment<'_>, pos: usize, newline_rule: bool) -> Option<usize> {
    let mut num_ws = 0;
    let mut last_end_r_or_n = None;
    while seg.flags(pos + num_ws).whitespace {
        if newline_rule && matches!(seg.cpt(pos + num_ws), Some('\r' | '\n')) {
            last_end_r_or_n = Some(pos + num_ws + 1);
        }
        num_ws += 1;
    }
    // regex: \s*[\r\n]+
    if let Some(end) = last_end_r_or_n {
        return Some(end);
    }
    // regex: \s+(?!\S)
    if num_ws > 1 && seg.cpt(pos + num_ws).is_some() {
        return Some(pos + num_ws - 1);
    }
    // regex: \s+
    (num_ws > 0).then_some(pos + num_ws)
}

/// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
fn split_gpt2(seg: Segment<'_>, out: &mut Vec<usize>) {
    let mut pieces = Pieces { prev_end: 0, out };
    let mut pos = 0;
    while pos < seg.len() {
        if let Some(len) = contraction_len(seg, pos, false) {
            pos += pieces.add(pos + len);
            continue;
        }
        let is_space = seg.cpt(pos) == Some(' ');
        let mut f2 = if is_space {
            seg.flags(pos + 1)
        } else {
            seg.flags(pos)
        };
        // regex: <space>?\p{L}+
        if f2.letter {
            pos += usize::from(is_space);
            while f2.letter {
                pos += 1;
                f2 = seg.flags(pos);
            }
            pieces.add(pos);
            continue;
        }
        // regex: <space>?\p{N}+
        if f2.number {
            pos += usize::from(is_space);
            while f2.number {
                pos += 1;
                f2 = seg.flags(pos);
            }
            pieces.add(pos);
            continue;
        }
        // regex: <space>?[^\s\p{L}\p{N}]+
        if !(f2.whitespace || f2.letter || f2.number) && f2.any() {
            pos += usize::from(is_space);
            while !(f2.whitespace || f2.letter || f2.number) && f2.any() {
                pos += 1;
                f2 = seg.flags(pos);
            }
            pieces.add(pos);
            continue;
        }
        if let Some(end) = whitespace_end(seg, pos, false) {
            pos = end;
            pieces.add(pos);
            continue;
        }
        // no matches
        pos += 1;
        pieces.add(pos);
    }
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}|
///  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
fn split_llama3(seg: Segment<'_>, max_digits: usize, out: &mut Vec<usize>) {
    let mut pieces = Pieces { prev_end: 0, out };
    let mut pos = 0;
    while pos < seg.len() {
        let cpt = seg.cpt(pos);
        let flags = seg.flags(pos);
        if let Some(len) = contraction_len(seg, pos, true) {
            pos += pieces.add(pos + len);
            continue;
        }
        // regex: [^\r\n\p{L}\p{N}]?\p{L}+
        if !(matches!(cpt, Some('\r' | '\n')) || flags.number)
            && (flags.letter || seg.flags(pos + 1).letter)
        {
            pos += 1;
            while seg.flags(pos).letter {
                pos += 1;
            }
            pieces.add(pos);
            continue;
        }
        // regex: \p{N}{1,max_digits}
        if flags.number {
            let mut ini = pos;
            while seg.flags(pos).number {
                pos += 1;
                if pos - ini >= max_digits {
                    pieces.add(pos);
                    ini = pos;
                }
            }
            pieces.add(pos);
            continue;
        }
        // regex: <space>?[^\s\p{L}\p{N}]+[\r\n]*
        // (llama.cpp tests the current position's flags for "in range" here)
        let is_space = cpt == Some(' ');
        let mut f2 = if is_space { seg.flags(pos + 1) } else { flags };
        if !(f2.whitespace || f2.letter || f2.number) && flags.any() {
            pos += usize::from(is_space);
            while !(f2.whitespace || f2.letter || f2.number) && f2.any() {
                pos += 1;
                f2 = seg.flags(pos);
            }
            while matches!(seg.cpt(pos), Some('\r' | '\n')) {
                pos += 1;
            }
            pieces.add(pos);
            continue;
        }
        if let Some(end) = whitespace_end(seg, pos, true) {
            pos = end;
            pieces.add(pos);
            continue;
        }
        // no matches
        pos += 1;
        pieces.add(pos);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unicode::char_to_byte;

    /// Split and undo the byte encoding so expectations read naturally.
    fn words(pre: PreTokenizer, text: &str) -> Vec<String> {
        pre.split(text)
            .into_iter()
            .map(|w| {
                let bytes: Vec<u8> = w.chars().filter_map(char_to_byte).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            })
            .collect()
    }

    // Expected splits below are worked out by hand from the regexes in the
    // Hugging Face tokenizer.json files (which llama.cpp's code implements).

    #[test]
    fn llama3_groups_digits_by_three() {
        assert_eq!(
            words(PreTokenizer::Llama3, "1234567 3.14"),
            ["123", "456", "7", " ", "3", ".", "14"]
        );
    }

    #[test]
    fn qwen2_splits_single_digits() {
        assert_eq!(words(PreTokenizer::Qwen2, "2024"), ["2", "0", "2", "4"]);
    }

    #[test]
    fn llama3_words_contractions_and_punctuation() {
        assert_eq!(
            words(PreTokenizer::Llama3, "Hello, world! don't I'LL"),
            ["Hello", ",", " world", "!", " don", "'t", " I", "'LL"]
        );
    }

    #[test]
    fn gpt2_contractions_are_case_sensitive() {
        assert_eq!(words(PreTokenizer::Gpt2, "I'LL"), ["I", "'", "LL"]);
        assert_eq!(words(PreTokenizer::Gpt2, "I'll"), ["I", "'ll"]);
    }

    #[test]
    fn llama3_whitespace_runs_leave_one_space_for_the_next_word() {
        assert_eq!(
            words(PreTokenizer::Llama3, "a   b  \n\n c \t"),
            ["a", "  ", " b", "  \n\n", " c", " \t"]
        );
    }

    #[test]
    fn llama3_punctuation_takes_trailing_newlines() {
        assert_eq!(words(PreTokenizer::Llama3, "x.\n\ny"), ["x", ".\n\n", "y"]);
    }

    #[test]
    fn llama3_non_ascii_letters_and_cjk() {
        assert_eq!(
            words(PreTokenizer::Llama3, "héllo wörld 你好世界 🦀🚀"),
            ["héllo", " wörld", " 你好世界", " 🦀🚀"]
        );
    }

    #[test]
    fn default_splits_punctuation_then_digits() {
        // Pass 1 isolates "!!" and ",", pass 2 (GPT-2) splits words, pass 3
        // isolates the digit run from its leading space, pass 4 cuts "12345"
        // into "123" + "45".
        assert_eq!(
            words(PreTokenizer::Default, "hi!! a,b 12345"),
            ["hi", "!!", " a", ",", "b", " ", "123", "45"]
        );
    }

    #[test]
    fn byte_encoding_maps_space_to_g_dot() {
        assert_eq!(PreTokenizer::Llama3.split(" a"), ["\u{120}a"]);
    }

    #[test]
    fn names_resolve() {
        let cfg = PreTokenizerConfig::from_name(Some("llama-bpe"));
        assert_eq!(
            cfg.map(|c| (c.pre, c.add_bos)),
            Some((PreTokenizer::Llama3, true))
        );
        let cfg = PreTokenizerConfig::from_name(Some("qwen2"));
        assert_eq!(cfg.map(|c| c.pre), Some(PreTokenizer::Qwen2));
        assert_eq!(
            PreTokenizerConfig::from_name(None).map(|c| c.pre),
            Some(PreTokenizer::Default)
        );
        assert!(PreTokenizerConfig::from_name(Some("nope")).is_none());
    }
}
