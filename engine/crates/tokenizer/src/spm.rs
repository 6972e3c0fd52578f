//! SentencePiece-style tokenization (llama.cpp `llm_tokenizer_spm_session`).
//!
//! The text (whitespace already escaped to `▁`) is split into UTF-8
//! characters; adjacent symbols are merged greedily, always taking the pair
//! whose concatenation is the vocabulary token with the highest score
//! (leftmost on ties). Symbols that are not tokens fall back to byte tokens.

use std::collections::HashMap;

use crate::symbols::Score;

/// What the SPM algorithm needs from the vocabulary.
pub(crate) struct SpmVocab<'a> {
    /// Token text → id.
    pub token_to_id: &'a HashMap<String, u32>,
    /// Score by id.
    pub scores: &'a [f32],
    /// Byte-fallback token for each byte value.
    pub byte_tokens: &'a [u32; 256],
}

/// Tokenize already-escaped `text`, appending ids to `out`.
pub(crate) fn tokenize(text: &str, vocab: &SpmVocab<'_>, out: &mut Vec<u32>) {
    // Higher score of the merged piece first.
    let pieces = crate::symbols::merge(text, |_, _, merged| {
        vocab
            .token_to_id
            .get(merged)
            .map(|&id| Score(vocab.scores.get(id as usize).copied().unwrap_or(0.0)))
    });
    for (start, len) in pieces {
        let piece = &text[start..start + len];
        match vocab.token_to_id.get(piece) {
            Some(&id) => out.push(id),
            // Merged symbols are always tokens, so this is a single
            // character missing from the vocabulary: emit its bytes.
            None => out.extend(piece.bytes().map(|b| vocab.byte_tokens[usize::from(b)])),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab_of(pieces: &[(&str, f32)]) -> (HashMap<String, u32>, Vec<f32>, [u32; 256]) {
        let mut map = HashMap::new();
        let mut scores = Vec::new();
        let mut bytes = [0u32; 256];
        for b in 0..=255u8 {
            let id = u32::from(b);
            map.insert(format!("<0x{b:02X}>"), id);
            scores.push(0.0);
            bytes[usize::from(b)] = id;
        }
        for (text, score) in pieces {
            let id = u32::try_from(scores.len()).expect("small test vocab");
            map.insert((*text).to_string(), id);
            scores.push(*score);
        }
        (map, scores, bytes)
    }

    fn run(pieces: &[(&str, f32)], text: &str) -> Vec<String> {
        let (map, scores, bytes) = vocab_of(pieces);
        let vocab = SpmVocab {
            token_to_id: &map,
            scores: &scores,
            byte_tokens: &bytes,
        };
        let mut out = Vec::new();
        tokenize(text, &vocab, &mut out);
        let by_id: HashMap<u32, String> = map.into_iter().map(|(k, v)| (v, k)).collect();
        out.iter().map(|id| by_id[id].clone()).collect()
    }

    #[test]
    fn highest_score_pair_merges_first() {
        // "abc": candidates "ab" (-1) and "bc" (-0.5): "bc" wins, then "a"
        // + "bc" = "abc" is not a token, so the result is a | bc.
        let pieces = [
            ("a", -5.0),
            ("b", -5.0),
            ("c", -5.0),
            ("ab", -1.0),
            ("bc", -0.5),
        ];
        assert_eq!(run(&pieces, "abc"), ["a", "bc"]);
        // Raising "ab" above "bc" flips the segmentation.
        let pieces = [
            ("a", -5.0),
            ("b", -5.0),
            ("c", -5.0),
            ("ab", -0.1),
            ("bc", -0.5),
        ];
        assert_eq!(run(&pieces, "abc"), ["ab", "c"]);
    }

    #[test]
    fn merged_pieces_keep_merging() {
        let pieces = [("a", -5.0), ("b", -5.0), ("ab", -1.0), ("abab", -2.0)];
        assert_eq!(run(&pieces, "ababa"), ["abab", "a"]);
    }

    #[test]
    fn equal_scores_merge_leftmost_first() {
        // "aaa": both "aa" pairs score the same; the left one wins.
        let pieces = [("a", -5.0), ("aa", -1.0)];
        assert_eq!(run(&pieces, "aaa"), ["aa", "a"]);
    }

    #[test]
    fn unknown_characters_fall_back_to_bytes() {
        let pieces = [("a", -1.0)];
        assert_eq!(run(&pieces, "aé"), ["a", "<0xC3>", "<0xA9>"]);
    }
}
