//! Code point classification and the GPT-2 byte ↔ unicode mapping.
//!
//! The pre-tokenizers classify code points the way llama.cpp's generated
//! tables do: one flag per Unicode general category group (`\p{L}`,
//! `\p{N}`, ...), plus White_Space. Unassigned code points are "undefined",
//! surrogates and private-use code points count as control.

use std::sync::OnceLock;

use unicode_general_category::{GeneralCategory, get_general_category};

/// Classification of one code point, mirroring llama.cpp's `unicode_cpt_flags`.
///
/// `Flags::default()` (all false) is what llama.cpp returns for positions
/// outside the current fragment; every real code point has at least one flag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Flags {
    /// Unassigned code point (`Cn`).
    pub undefined: bool,
    /// `\p{N}`.
    pub number: bool,
    /// `\p{L}`.
    pub letter: bool,
    /// `\p{Z}`.
    pub separator: bool,
    /// `\p{M}`.
    pub accent_mark: bool,
    /// `\p{P}`.
    pub punctuation: bool,
    /// `\p{S}`.
    pub symbol: bool,
    /// `\p{C}` except unassigned.
    pub control: bool,
    /// Unicode White_Space (what `\s` matches).
    pub whitespace: bool,
}

impl Flags {
    /// Flags of a real code point.
    pub fn of(c: char) -> Self {
        let mut f = Flags {
            whitespace: c.is_whitespace(),
            ..Flags::default()
        };
        use GeneralCategory as G;
        match get_general_category(c) {
            G::UppercaseLetter
            | G::LowercaseLetter
            | G::TitlecaseLetter
            | G::ModifierLetter
            | G::OtherLetter => f.letter = true,
            G::NonspacingMark | G::SpacingMark | G::EnclosingMark => f.accent_mark = true,
            G::DecimalNumber | G::LetterNumber | G::OtherNumber => f.number = true,
            G::ConnectorPunctuation
            | G::DashPunctuation
            | G::OpenPunctuation
            | G::ClosePunctuation
            | G::InitialPunctuation
            | G::FinalPunctuation
            | G::OtherPunctuation => f.punctuation = true,
            G::MathSymbol | G::CurrencySymbol | G::ModifierSymbol | G::OtherSymbol => {
                f.symbol = true;
            }
            G::SpaceSeparator | G::LineSeparator | G::ParagraphSeparator => f.separator = true,
            G::Control | G::Format | G::Surrogate | G::PrivateUse => f.control = true,
            // Unassigned, and any category a future crate version adds.
            _ => f.undefined = true,
        }
        f
    }

    /// True for any in-range position (llama.cpp's `flags.as_uint() != 0`).
    pub fn any(self) -> bool {
        self.undefined
            || self.number
            || self.letter
            || self.separator
            || self.accent_mark
            || self.punctuation
            || self.symbol
            || self.control
            || self.whitespace
    }
}

/// GPT-2's `bytes_to_unicode`: the byte value of each printable stand-in
/// character, in GPT-2 vocabulary order (printable bytes first, then the
/// remaining bytes mapped to U+0100...).
pub(crate) fn gpt2_byte_order() -> [u8; 256] {
    let mut order = [0u8; 256];
    let mut n = 0;
    for b in 0..=255u8 {
        if is_printable_byte(b) {
            order[n] = b;
            n += 1;
        }
    }
    for b in 0..=255u8 {
        if !is_printable_byte(b) {
            order[n] = b;
            n += 1;
        }
    }
    order
}

/// Bytes that GPT-2 maps to themselves: `!`..`~`, `¡`..`¬`, `®`..`ÿ`.
fn is_printable_byte(b: u8) -> bool {
    matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// The byte → stand-in character table.
fn byte_to_char_table() -> &'static [char; 256] {
    static TABLE: OnceLock<[char; 256]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = ['\0'; 256];
        let mut n = 0u32;
        for b in 0..=255u8 {
            table[usize::from(b)] = if is_printable_byte(b) {
                char::from(b)
            } else {
                let c = char::from_u32(256 + n).unwrap_or('\u{FFFD}');
                n += 1;
                c
            };
        }
        table
    })
}

/// GPT-2 stand-in character for a raw byte.
pub(crate) fn byte_to_char(b: u8) -> char {
    byte_to_char_table()[usize::from(b)]
}

/// Inverse of [`byte_to_char`]; `None` for characters outside the mapping.
pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    let cp = u32::from(c);
    if cp < 256 {
        let b = u8::try_from(cp).ok()?;
        return is_printable_byte(b).then_some(b);
    }
    // Non-printable bytes map to U+0100 + their rank among non-printable bytes.
    let rank = cp - 256;
    (0..=255u8)
        .filter(|&b| !is_printable_byte(b))
        .nth(usize::try_from(rank).ok()?)
}

/// Byte-encode UTF-8 text into GPT-2 stand-in characters.
pub(crate) fn byte_encode(text: &str) -> String {
    text.bytes().map(byte_to_char).collect()
}

/// Simple lower-casing used by the contraction rules (`'S` → `'s`).
pub(crate) fn to_lower(c: char) -> char {
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(l), None) => l,
        _ => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_mapping_round_trips_all_bytes() {
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(byte_to_char(b)), Some(b));
        }
    }

    #[test]
    fn byte_mapping_matches_gpt2_known_points() {
        // From GPT-2's encoder: space is 'Ġ' (U+0120), newline 'Ċ' (U+010A),
        // NUL is 'Ā' (U+0100), 'A' maps to itself.
        assert_eq!(byte_to_char(b' '), '\u{120}');
        assert_eq!(byte_to_char(b'\n'), '\u{10A}');
        assert_eq!(byte_to_char(0), '\u{100}');
        assert_eq!(byte_to_char(b'A'), 'A');
        assert_eq!(char_to_byte('x'), Some(b'x'));
        assert_eq!(char_to_byte('€'), None);
    }

    #[test]
    fn gpt2_order_is_a_permutation_starting_with_bang() {
        let order = gpt2_byte_order();
        assert_eq!(order[0], b'!');
        let mut seen = [false; 256];
        for b in order {
            seen[usize::from(b)] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn flags_classify_common_characters() {
        assert!(Flags::of('a').letter);
        assert!(Flags::of('你').letter);
        assert!(Flags::of('7').number);
        assert!(Flags::of('²').number);
        assert!(Flags::of('.').punctuation);
        assert!(Flags::of('$').symbol);
        assert!(Flags::of('🦀').symbol);
        assert!(Flags::of(' ').whitespace);
        assert!(Flags::of('\n').whitespace && Flags::of('\n').control);
        assert!(Flags::of('\u{3000}').whitespace);
        assert!(Flags::of('\u{0301}').accent_mark);
        assert!(Flags::of('\u{E000}').control);
        assert!(Flags::of('\u{0378}').undefined);
        assert!(!Flags::default().any());
    }
}
