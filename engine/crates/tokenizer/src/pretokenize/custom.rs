//! llama.cpp's hand-written splitters (`unicode_regex_split_custom_*` in
//! unicode.cpp), which it runs instead of `std::regex` when a pre-tokenizer
//! regex is exactly one of the strings below. The ports keep llama.cpp's
//! quirks (they are not always what the regex says), so the words are
//! identical.

use crate::unicode::{Flags, to_lower};

/// GPT-2's regex.
pub(super) const GPT2: &str =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
/// Llama 3's regex with the case-insensitive group spelled out.
pub(super) const LLAMA3: &str = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/// Qwen2's regex: Llama 3's with single digits.
pub(super) const QWEN2: &str = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/// Qwen3.5's regex: Qwen2's with combining marks in letter runs.
pub(super) const QWEN35: &str = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/// Kimi K2's trigger: the splitter implements its whole regex.
pub(super) const KIMI_K2: &str = "\\p{Han}+";
/// AFMoE's digit grouping (a made-up property name llama.cpp keys on).
pub(super) const AFMOE_DIGITS: &str = "\\p{AFMoE_digits}";
/// Tiny Aya's digit grouping, which llama.cpp runs with AFMoE's splitter.
pub(super) const TINY_AYA_DIGITS: &str = "\\d{1,3}(?=(?:\\d{3})*\\b)";
/// Runs of newlines and runs of everything else.
pub(super) const NEWLINES: &str = "[^\\n]+|[\\n]+";

/// A hand-written splitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Custom {
    /// `unicode_regex_split_custom_gpt2`.
    Gpt2,
    /// `_llama3` (`max_digits` 3), `_qwen2` (1) and `_qwen35` (1, `marks`).
    Llama3 {
        /// Longest digit group.
        max_digits: usize,
        /// Combining marks count as letters.
        marks: bool,
    },
    /// `_kimi_k2`.
    KimiK2,
    /// `_afmoe`: digit runs cut into groups of three from the right.
    DigitTriplesFromRight,
    /// `_newlines`.
    Newlines,
}

impl Custom {
    /// The splitter llama.cpp uses for `regex` (`unicode_regex_split_custom`).
    pub fn for_regex(regex: &str) -> Option<Custom> {
        Some(match regex {
            GPT2 => Custom::Gpt2,
            LLAMA3 => Custom::Llama3 {
                max_digits: 3,
                marks: false,
            },
            QWEN2 => Custom::Llama3 {
                max_digits: 1,
                marks: false,
            },
            QWEN35 => Custom::Llama3 {
                max_digits: 1,
                marks: true,
            },
            KIMI_K2 => Custom::KimiK2,
            AFMOE_DIGITS | TINY_AYA_DIGITS => Custom::DigitTriplesFromRight,
            NEWLINES => Custom::Newlines,
            _ => return None,
        })
    }

    /// Split every fragment (lengths `offsets`) of the text; returns the new
    /// fragment lengths.
    pub fn split(self, cpts: &[char], flags: &[Flags], offsets: &[usize]) -> Vec<usize> {
        let mut out = Vec::with_capacity(offsets.len());
        let mut start = 0;
        for &len in offsets {
            let seg = Segment {
                cpts: &cpts[start..start + len],
                flags: &flags[start..start + len],
            };
            match self {
                Custom::Gpt2 => split_gpt2(seg, &mut out),
                Custom::Llama3 { max_digits, marks } => {
                    split_llama3(seg, max_digits, marks, &mut out);
                }
                Custom::KimiK2 => split_kimi_k2(seg, &mut out),
                Custom::DigitTriplesFromRight => split_digit_triples_from_right(seg, &mut out),
                Custom::Newlines => split_newlines(seg, &mut out),
            }
            start += len;
        }
        out
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

    /// `unicode_cpt_is_han` at `pos` (false outside the fragment).
    fn is_han(&self, pos: usize) -> bool {
        self.cpt(pos).is_some_and(is_han)
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

    /// The splitters' last alternatives at `pos`: the piece ending at `end` if there is
    /// one, else the whitespace rules' ([`whitespace_end`]), else the one code point at
    /// `pos` (llama.cpp's "no matches"). Closes that piece and returns its end.
    fn add_rest(
        &mut self,
        seg: Segment<'_>,
        pos: usize,
        end: Option<usize>,
        newline_rule: bool,
    ) -> usize {
        let end = end
            .or_else(|| whitespace_end(seg, pos, newline_rule))
            .unwrap_or(pos + 1);
        self.add(end);
        end
    }
}

/// llama.cpp `unicode_cpt_is_han`: the CJK ideograph blocks.
fn is_han(c: char) -> bool {
    matches!(u32::from(c),
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B820..=0x2CEAF
        | 0x2CEB0..=0x2EBEF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

/// `'s|'t|'re|'ve|'m|'ll|'d` at `pos` (its first unit is `'` there);
/// returns the contraction length.
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

/// Trailing-whitespace rules shared by the splitters. Returns the new
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

/// Digits in groups of at most `max_digits`, from the left (`\p{N}{1,max}`).
fn digit_groups(
    seg: Segment<'_>,
    mut pos: usize,
    max_digits: usize,
    pieces: &mut Pieces<'_>,
) -> usize {
    let mut ini = pos;
    while seg.flags(pos).number {
        pos += 1;
        if pos - ini >= max_digits {
            pieces.add(pos);
            ini = pos;
        }
    }
    pieces.add(pos);
    pos
}

/// `<space>?[^\s\p{L}\p{N}]+[\r\n]*` (with `marks`, `\p{M}` joins the
/// excluded set); `None` if it does not start at `pos`. llama.cpp tests the
/// current position's flags for "in range" before the loop.
fn punctuation_run(seg: Segment<'_>, mut pos: usize, marks: bool) -> Option<usize> {
    let flags = seg.flags(pos);
    let is_space = seg.cpt(pos) == Some(' ');
    let excluded = |f: Flags| f.whitespace || f.letter || f.number || (marks && f.accent_mark);
    let mut f2 = if is_space { seg.flags(pos + 1) } else { flags };
    if excluded(f2) || !flags.any() {
        return None;
    }
    pos += usize::from(is_space);
    while !excluded(f2) && f2.any() {
        pos += 1;
        f2 = seg.flags(pos);
    }
    while matches!(seg.cpt(pos), Some('\r' | '\n')) {
        pos += 1;
    }
    Some(pos)
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
        pos = pieces.add_rest(seg, pos, None, false);
    }
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}|
///  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`, with `marks`
/// reading `[\p{L}\p{M}]` for `\p{L}` (Qwen3.5).
fn split_llama3(seg: Segment<'_>, max_digits: usize, marks: bool, out: &mut Vec<usize>) {
    let mut pieces = Pieces { prev_end: 0, out };
    let is_word = |f: Flags| f.letter || (marks && f.accent_mark);
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
            && (is_word(flags) || is_word(seg.flags(pos + 1)))
        {
            pos += 1;
            while is_word(seg.flags(pos)) {
                pos += 1;
            }
            pieces.add(pos);
            continue;
        }
        // regex: \p{N}{1,max_digits}
        if flags.number {
            pos = digit_groups(seg, pos, max_digits, &mut pieces);
            continue;
        }
        pos = pieces.add_rest(seg, pos, punctuation_run(seg, pos, marks), true);
    }
}

/// Kimi K2: `[\p{Han}]+`, then letter words without Han characters (with an
/// optional leading non-letter and a trailing contraction), `\p{N}{1,3}`,
/// and Llama 3's punctuation and whitespace rules.
fn split_kimi_k2(seg: Segment<'_>, out: &mut Vec<usize>) {
    let mut pieces = Pieces { prev_end: 0, out };
    let letter = |pos: usize| seg.flags(pos).letter && !seg.is_han(pos);
    let mut pos = 0;
    while pos < seg.len() {
        let cpt = seg.cpt(pos);
        let flags = seg.flags(pos);

        // [\p{Han}]+
        if seg.is_han(pos) {
            while seg.is_han(pos) {
                pos += 1;
            }
            pieces.add(pos);
            continue;
        }

        // [^\r\n\p{L}\p{N}]?<letters without Han>+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
        let can_lead = !(matches!(cpt, Some('\r' | '\n')) || flags.letter || flags.number);
        if letter(pos) || (can_lead && letter(pos + 1)) {
            let start = pos;
            let has_leading = can_lead;
            if has_leading {
                pos += 1;
            }
            let mut has_letters = false;
            while letter(pos) {
                has_letters = true;
                pos += 1;
            }
            if has_letters || (!has_leading && letter(pos)) {
                if !has_letters {
                    pos += 1;
                }
                while letter(pos) {
                    pos += 1;
                }
                if let Some(len) = contraction_len(seg, pos, true) {
                    pos += len;
                }
                pieces.add(pos);
                continue;
            }
            pos = start;
        }

        // \p{N}{1,3}
        if flags.number {
            pos = digit_groups(seg, pos, 3, &mut pieces);
            continue;
        }

        // <space>?[^\s\p{L}\p{N}]+[\r\n]* (here the "in range" test is on the
        // flags after the optional space)
        let is_space = cpt == Some(' ');
        let f2 = if is_space { seg.flags(pos + 1) } else { flags };
        let punctuation = if f2.any() {
            punctuation_run(seg, pos, false)
        } else {
            None
        };
        pos = pieces.add_rest(seg, pos, punctuation, true);
    }
}

/// AFMoE: each digit run is cut into groups of three counted from its end
/// (the leading group has one or two digits when the length is not a
/// multiple of three); everything else stays in place.
fn split_digit_triples_from_right(seg: Segment<'_>, out: &mut Vec<usize>) {
    let mut pieces = Pieces { prev_end: 0, out };
    let mut pos = 0;
    while pos < seg.len() {
        if !seg.flags(pos).number {
            pos += 1;
            continue;
        }
        let digit_start = pos;
        while seg.flags(pos).number {
            pos += 1;
        }
        let count = pos - digit_start;
        let mut current = digit_start;
        let remainder = count % 3;
        if remainder > 0 {
            current += remainder;
            pieces.add(current);
        }
        while current < digit_start + count {
            current += 3;
            pieces.add(current);
        }
    }
    if pieces.prev_end < seg.len() {
        pieces.add(seg.len());
    }
}

/// Runs of `\n` and runs of anything else.
fn split_newlines(seg: Segment<'_>, out: &mut Vec<usize>) {
    let mut pos = 0;
    while pos < seg.len() {
        let is_newline = seg.cpts[pos] == '\n';
        let run_start = pos;
        while pos < seg.len() && (seg.cpts[pos] == '\n') == is_newline {
            pos += 1;
        }
        out.push(pos - run_start);
    }
}
