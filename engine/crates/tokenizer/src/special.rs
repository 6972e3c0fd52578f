//! Splitting special-token texts out of raw text before tokenization
//! (llama.cpp `tokenizer_st_partition`).

/// A piece of the input: raw text still to tokenize, or a special token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fragment<'a> {
    /// Text to run through the model's tokenizer.
    Text(&'a str),
    /// A special token found verbatim in the text.
    Token(u32),
}

/// Split `text` at every occurrence of each special token.
///
/// `specials` is in priority order (llama.cpp: longest text first); each
/// token splits all text fragments left by the tokens before it, leftmost
/// non-overlapping occurrences first.
pub(crate) fn partition<'a>(text: &'a str, specials: &[(u32, &str)]) -> Vec<Fragment<'a>> {
    let mut fragments = Vec::new();
    if text.is_empty() {
        return fragments;
    }
    fragments.push(Fragment::Text(text));
    for &(id, special) in specials {
        if special.is_empty() {
            continue;
        }
        let mut next = Vec::with_capacity(fragments.len());
        for fragment in fragments {
            let Fragment::Text(mut rest) = fragment else {
                next.push(fragment);
                continue;
            };
            while let Some(at) = rest.find(special) {
                if at > 0 {
                    next.push(Fragment::Text(&rest[..at]));
                }
                next.push(Fragment::Token(id));
                rest = &rest[at + special.len()..];
            }
            if !rest.is_empty() {
                next.push(Fragment::Text(rest));
            }
        }
        fragments = next;
    }
    fragments
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_all_occurrences_in_order() {
        let specials = [(7, "<|im_start|>"), (8, "<|im_end|>")];
        let got = partition("<|im_start|>user\nhi<|im_end|>x<|im_end|>", &specials);
        assert_eq!(
            got,
            [
                Fragment::Token(7),
                Fragment::Text("user\nhi"),
                Fragment::Token(8),
                Fragment::Text("x"),
                Fragment::Token(8),
            ]
        );
    }

    #[test]
    fn longer_specials_take_priority() {
        // "<s>" inside "<s>>" is found only after the longer token claimed its text.
        let specials = [(2, "<s>>"), (1, "<s>")];
        assert_eq!(
            partition("a<s>>b<s>", &specials),
            [
                Fragment::Text("a"),
                Fragment::Token(2),
                Fragment::Text("b"),
                Fragment::Token(1),
            ]
        );
    }

    #[test]
    fn no_specials_keeps_text_and_empty_text_is_empty() {
        assert_eq!(partition("abc", &[]), [Fragment::Text("abc")]);
        assert!(partition("", &[(1, "<s>")]).is_empty());
    }
}
