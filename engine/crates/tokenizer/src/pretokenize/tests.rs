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

// Expected splits below are worked out by hand from llama.cpp's regexes and
// splitters (the oracle tests compare the token ids with llama.cpp itself).

#[test]
fn every_family_regex_compiles() {
    for pre in PreTokenizer::ALL {
        for regex in pre.regexes() {
            if Custom::for_regex(regex).is_none() {
                assert!(
                    compile(regex).is_ok(),
                    "{pre:?}: {regex:?}: {:?}",
                    compile(regex).err()
                );
            }
        }
        // Every family splits a varied text without losing anything.
        let text = "Hello, world! 1234567 don't\n\n  x 你好 🦀 é\u{301}";
        let joined: String = words(*pre, text).concat();
        assert_eq!(joined, text, "{pre:?}");
    }
}

#[test]
fn categories_collapse_like_llama_cpp() {
    let as_text = |units: Vec<u32>| -> String {
        units
            .into_iter()
            .map(|u| char::from_u32(u).unwrap_or('?'))
            .collect()
    };
    // Outside brackets a category becomes a bracket expression, inside it
    // joins the surrounding one.
    assert_eq!(as_text(collapse_regex("\\p{N}+")), "[\u{D1}0-9]+");
    assert_eq!(
        as_text(collapse_regex("[^\\s\\p{L}\\p{M}]")),
        "[^\\s\u{D2}A-Za-z\u{D4}]"
    );
    assert_eq!(
        as_text(collapse_regex("[\\p{P}\\p{S}]")),
        "[\u{D3}!-#%-*,-/:-;?-@\\[-\\]_\\{\\}\u{D5}\\$\\+<->^`\\|~]"
    );
    let text = Text::new("a é1\u{a0}٣!€\u{301}\u{200b}");
    assert_eq!(
        text.collapse(),
        [0x61, 0x20, 0xD2, 0x31, 0x0B, 0xD1, 0x21, 0xD5, 0xD4, 0xD0]
    );
    assert_eq!(text.widen()[4], 0x0B);
    assert_eq!(text.widen()[2], u32::from('é'));
}

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
fn qwen35_keeps_combining_marks_in_words() {
    // "e" + U+0301 COMBINING ACUTE: one word for Qwen3.5, cut for Qwen2.
    assert_eq!(
        words(PreTokenizer::Qwen35, "cafe\u{301} x"),
        ["cafe\u{301}", " x"]
    );
    assert_eq!(
        words(PreTokenizer::Qwen2, "cafe\u{301} x"),
        ["cafe", "\u{301}", " x"]
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
fn starcoder_isolates_every_digit_before_gpt2() {
    assert_eq!(
        words(PreTokenizer::Starcoder, "a 123 it's"),
        ["a", " ", "1", "2", "3", " it", "'s"]
    );
}

#[test]
fn bloom_cuts_at_whitespace_and_sentence_punctuation() {
    assert_eq!(
        words(PreTokenizer::Bloom, "Hello, world! (x|y)"),
        ["Hello", ",", " world", "! (", "x", "|", "y", ")"]
    );
}

#[test]
fn tekken_splits_case_changes() {
    assert_eq!(
        words(PreTokenizer::Tekken, "HelloWorld fooBAR"),
        ["Hello", "World", " foo", "BAR"]
    );
}

#[test]
fn kimi_k2_separates_han_from_other_letters() {
    assert_eq!(
        words(PreTokenizer::KimiK2, "你好world 123456"),
        ["你好", "world", " ", "123", "456"]
    );
}

#[test]
fn deepseek3_cuts_digits_cjk_then_words() {
    assert_eq!(
        words(PreTokenizer::Deepseek3, "Hello, 世界123456!"),
        ["Hello", ",", " ", "世界", "123", "456", "!"]
    );
}

#[test]
fn superbpe_keeps_llama_cpps_empty_pieces() {
    assert_eq!(
        words(PreTokenizer::Superbpe, "x 1234567"),
        ["x ", "1", "", "234", "", "567"]
    );
}

#[test]
fn afmoe_groups_digits_from_the_right() {
    // llama.cpp's splitter leaves the text before a digit run attached to
    // its first group; the later regexes cut it off again.
    assert_eq!(
        words(PreTokenizer::Afmoe, "n=1234567"),
        ["n", "=", "1", "234", "567"]
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
        cfg.map(|c| (c.pre, c.add_bos, c.ignore_merges)),
        Some((PreTokenizer::Llama3, true, true))
    );
    let cfg = PreTokenizerConfig::from_name(Some("smollm"));
    assert_eq!(
        cfg.map(|c| (c.pre, c.clean_spaces)),
        Some((PreTokenizer::Starcoder, false))
    );
    let cfg = PreTokenizerConfig::from_name(Some("chatglm-bpe"));
    assert_eq!(cfg.map(|c| c.default_bos), Some(None));
    assert_eq!(
        PreTokenizerConfig::from_name(None).map(|c| c.pre),
        Some(PreTokenizer::Default)
    );
    assert!(PreTokenizerConfig::from_name(Some("nope")).is_none());
    assert!(PreTokenizerConfig::from_name(Some("gemma4")).is_none());
    assert!(unsupported_reason("gemma4").is_some());
    // Names are unique, and none is both supported and refused.
    let names: Vec<&str> = supported_pre_tokenizers().collect();
    let unique: std::collections::HashSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), names.len());
    assert!(names.iter().all(|n| unsupported_reason(n).is_none()));
    // Every family is reachable from some name.
    for pre in PreTokenizer::ALL {
        assert!(
            names
                .iter()
                .any(|n| PreTokenizerConfig::from_name(Some(n)).is_some_and(|c| c.pre == *pre)),
            "{pre:?}"
        );
    }
}
