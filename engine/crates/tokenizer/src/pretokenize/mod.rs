//! Byte-level BPE pre-tokenizers: split text into words before merging.
//!
//! A port of llama.cpp's `unicode_regex_split`. Each pre-tokenizer family
//! ([`PreTokenizer`], [`families`]) is llama.cpp's list of regexes, applied in
//! order, each one cutting the pieces the previous ones left. For a regex
//! llama.cpp has hand-written code for, the port of that code runs
//! ([`custom`]); every other regex runs through a port of the `std::regex`
//! subset they need ([`std_regex`]) on the same text llama.cpp gives
//! `std::regex`: when the regex uses `\p{..}` categories, the text with every
//! non-ASCII code point collapsed to one placeholder byte per category and
//! the regex rewritten to match those bytes; otherwise the code points with
//! non-ASCII whitespace replaced by `\v`. Names map to families in [`names`].

mod custom;
mod families;
mod names;
mod std_regex;

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::unicode::{Flags, byte_encode};
use custom::Custom;
use std_regex::{Regex, RegexError, Units};

pub use families::PreTokenizer;
pub use names::supported_pre_tokenizers;
pub(crate) use names::{PreTokenizerConfig, unsupported_reason};

impl PreTokenizer {
    /// Split `text` into words and byte-encode each word with GPT-2's
    /// byte → unicode mapping (llama.cpp `unicode_regex_split`). Words may be
    /// empty where llama.cpp's are (an empty regex match).
    pub fn split(self, text: &str) -> Vec<String> {
        if text.is_empty() {
            return Vec::new();
        }
        let text = Text::new(text);
        let mut offsets = vec![text.cpts.len()];
        for regex in self.regexes() {
            offsets = text.apply(regex, &offsets);
        }
        let mut words = Vec::with_capacity(offsets.len());
        let mut start = 0;
        for len in offsets {
            let word: String = text.cpts[start..start + len].iter().collect();
            words.push(byte_encode(&word));
            start += len;
        }
        words
    }
}

/// The text being split, with the unit sequences `std::regex` sees.
struct Text {
    cpts: Vec<char>,
    flags: Vec<Flags>,
    /// Built on first use.
    collapsed: OnceLock<Vec<u32>>,
    wide: OnceLock<Vec<u32>>,
}

/// Placeholder of a non-ASCII whitespace code point: `\v`, which `\s` matches.
const WHITESPACE_PLACEHOLDER: u32 = 0x0B;

impl Text {
    fn new(text: &str) -> Self {
        let cpts: Vec<char> = text.chars().collect();
        let flags = cpts.iter().map(|&c| Flags::of(c)).collect();
        Text {
            cpts,
            flags,
            collapsed: OnceLock::new(),
            wide: OnceLock::new(),
        }
    }

    /// Apply one regex of a family to every current fragment.
    fn apply(&self, regex: &'static str, offsets: &[usize]) -> Vec<usize> {
        // llama.cpp falls back to std::regex when the custom code returns
        // nothing, which only happens for an empty text (handled by `split`).
        if let Some(custom) = Custom::for_regex(regex) {
            return custom.split(&self.cpts, &self.flags, offsets);
        }
        let compiled = compiled(regex);
        let units = if compiled.collapsed {
            self.collapsed.get_or_init(|| self.collapse())
        } else {
            self.wide.get_or_init(|| self.widen())
        };
        compiled.regex.split(units, offsets)
    }

    /// llama.cpp's `text_collapsed`: ASCII stays, non-ASCII whitespace
    /// becomes `\v`, other code points their category's placeholder byte.
    fn collapse(&self) -> Vec<u32> {
        self.cpts
            .iter()
            .zip(&self.flags)
            .map(|(&c, f)| {
                if c.is_ascii() {
                    u32::from(c)
                } else if f.whitespace {
                    WHITESPACE_PLACEHOLDER
                } else {
                    Category::of(*f).map_or(OTHER_PLACEHOLDER, Category::placeholder)
                }
            })
            .collect()
    }

    /// llama.cpp's `wtext`: code points, non-ASCII whitespace as `\v`.
    fn widen(&self) -> Vec<u32> {
        self.cpts
            .iter()
            .zip(&self.flags)
            .map(|(&c, f)| {
                if !c.is_ascii() && f.whitespace {
                    WHITESPACE_PLACEHOLDER
                } else {
                    u32::from(c)
                }
            })
            .collect()
    }
}

/// Placeholder of code points in no collapsed category (separators,
/// controls, unassigned).
const OTHER_PLACEHOLDER: u32 = 0xD0;

/// The `\p{..}` categories llama.cpp collapses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Category {
    Number,
    Letter,
    Punctuation,
    Mark,
    Symbol,
}

impl Category {
    fn of(f: Flags) -> Option<Self> {
        if f.number {
            Some(Category::Number)
        } else if f.letter {
            Some(Category::Letter)
        } else if f.punctuation {
            Some(Category::Punctuation)
        } else if f.accent_mark {
            Some(Category::Mark)
        } else if f.symbol {
            Some(Category::Symbol)
        } else {
            None
        }
    }

    /// The `\p{..}` spellings llama.cpp recognizes (`k_ucat_enum`); the
    /// letter subcategories all collapse to letters.
    fn from_property(property: &str) -> Option<Self> {
        Some(match property {
            "\\p{N}" => Category::Number,
            "\\p{L}" | "\\p{Lu}" | "\\p{Ll}" | "\\p{Lt}" | "\\p{Lm}" | "\\p{Lo}" => {
                Category::Letter
            }
            "\\p{P}" => Category::Punctuation,
            "\\p{M}" => Category::Mark,
            "\\p{S}" => Category::Symbol,
            _ => return None,
        })
    }

    /// The byte non-ASCII code points of the category collapse to (`k_ucat_cpt`).
    fn placeholder(self) -> u32 {
        match self {
            Category::Number => 0xD1,
            Category::Letter => 0xD2,
            Category::Punctuation => 0xD3,
            Category::Mark => 0xD4,
            Category::Symbol => 0xD5,
        }
    }

    /// The ASCII members, as bracket-expression text (`k_ucat_map`).
    fn ascii_members(self) -> &'static str {
        match self {
            Category::Number => "0-9",
            Category::Letter => "A-Za-z",
            Category::Punctuation => "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}",
            Category::Mark => "",
            Category::Symbol => "\\$\\+<->^`\\|~",
        }
    }
}

/// Whether llama.cpp runs `regex` on the collapsed text.
fn uses_categories(regex: &str) -> bool {
    [
        "\\p{N}", "\\p{L}", "\\p{P}", "\\p{M}", "\\p{S}", "\\p{Lu}", "\\p{Ll}", "\\p{Lt}",
        "\\p{Lm}", "\\p{Lo}",
    ]
    .iter()
    .any(|p| regex.contains(p))
}

/// llama.cpp's `regex_expr_collapsed`: each `\p{..}` becomes its placeholder
/// byte plus ASCII members, wrapped in brackets unless already inside some.
/// Ported with its quirks (a `[` or `]` after a backslash never opens or
/// closes brackets, even when the backslash is itself escaped).
fn collapse_regex(regex: &str) -> Vec<u32> {
    let b = regex.as_bytes();
    let mut out: Vec<u32> = Vec::with_capacity(b.len() * 2);
    let mut inside = false;
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'[' && (i == 0 || b[i - 1] != b'\\') {
            out.push(u32::from(b'['));
            inside = true;
            i += 1;
            continue;
        }
        if inside && b[i] == b']' && b[i - 1] != b'\\' {
            out.push(u32::from(b']'));
            inside = false;
            i += 1;
            continue;
        }
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1] == b'p' && b[i + 2] == b'{' {
            let close = regex[i + 3..].find('}').map(|at| at + i + 3);
            if let Some(close) = close.filter(|&c| c <= i + 10)
                && let Some(category) = Category::from_property(&regex[i..=close])
            {
                if !inside {
                    out.push(u32::from(b'['));
                }
                out.push(category.placeholder());
                out.extend(category.ascii_members().bytes().map(u32::from));
                if !inside {
                    out.push(u32::from(b']'));
                }
                i = close + 1;
                continue;
            }
        }
        out.push(u32::from(b[i]));
        i += 1;
    }
    out
}

/// A regex ready for the text llama.cpp would run it on.
#[derive(Debug)]
struct Compiled {
    regex: Regex,
    /// Run on the collapsed text (else on the widened code points).
    collapsed: bool,
}

/// Compile `regex` as llama.cpp hands it to `std::regex`.
fn compile(regex: &str) -> Result<Compiled, RegexError> {
    if uses_categories(regex) {
        // llama.cpp refuses non-ASCII text next to categories; none of its
        // lists has any, and `collapse_regex` works on bytes.
        debug_assert!(regex.is_ascii(), "{regex:?}");
        Ok(Compiled {
            regex: Regex::new(&collapse_regex(regex), Units::Bytes)?,
            collapsed: true,
        })
    } else {
        let units: Vec<u32> = regex.chars().map(u32::from).collect();
        Ok(Compiled {
            regex: Regex::new(&units, Units::Wide)?,
            collapsed: false,
        })
    }
}

/// Every family regex that runs through [`std_regex`], compiled once.
fn compiled(regex: &'static str) -> &'static Compiled {
    static ALL: OnceLock<HashMap<&'static str, Compiled>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        PreTokenizer::ALL
            .iter()
            .flat_map(|p| p.regexes())
            .filter(|r| Custom::for_regex(r).is_none())
            .map(|&r| {
                // The lists are constants; `every_family_regex_compiles` checks them.
                let compiled = compile(r)
                    .unwrap_or_else(|e| panic!("pre-tokenizer regex {r:?} does not compile: {e}"));
                (r, compiled)
            })
            .collect()
    });
    &all[regex]
}

#[cfg(test)]
mod tests;
