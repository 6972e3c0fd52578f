//! SentencePiece-style tokenization (llama.cpp `llm_tokenizer_spm_session`).
//!
//! The text (whitespace already escaped to `▁`) is split into UTF-8
//! characters; adjacent symbols are merged greedily, always taking the pair
//! whose concatenation is the vocabulary token with the highest score
//! (leftmost on ties). Symbols that are not tokens fall back to byte tokens.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// What the SPM algorithm needs from the vocabulary.
pub(crate) struct SpmVocab<'a> {
    /// Token text → id.
    pub token_to_id: &'a HashMap<String, u32>,
    /// Score by id.
    pub scores: &'a [f32],
    /// Byte-fallback token for each byte value.
    pub byte_tokens: &'a [u32; 256],
}

/// One symbol of the linked list; `len == 0` once merged into its left neighbour.
#[derive(Debug, Clone, Copy)]
struct Symbol {
    prev: Option<usize>,
    next: Option<usize>,
    start: usize,
    len: usize,
}

/// A candidate merge of two adjacent symbols.
#[derive(Debug, Clone, Copy)]
struct Bigram {
    left: usize,
    right: usize,
    score: f32,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Bigram {}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bigram {
    /// Max-heap order: higher score first, then the leftmost pair.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// Tokenize already-escaped `text`, appending ids to `out`.
pub(crate) fn tokenize(text: &str, vocab: &SpmVocab<'_>, out: &mut Vec<u32>) {
    let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
    for (index, (start, c)) in text.char_indices().enumerate() {
        let len = c.len_utf8();
        symbols.push(Symbol {
            prev: index.checked_sub(1),
            next: (start + len < text.len()).then_some(index + 1),
            start,
            len,
        });
    }
    if symbols.is_empty() {
        return;
    }

    let mut queue = BinaryHeap::new();
    let try_add = |queue: &mut BinaryHeap<Bigram>, symbols: &[Symbol], left, right| {
        let (Some(left), Some(right)) = (left, right) else {
            return;
        };
        let l: Symbol = symbols[left];
        let r: Symbol = symbols[right];
        let piece = &text[l.start..l.start + l.len + r.len];
        if let Some(&id) = vocab.token_to_id.get(piece) {
            let score = vocab.scores.get(id as usize).copied().unwrap_or(0.0);
            queue.push(Bigram {
                left,
                right,
                score,
                size: piece.len(),
            });
        }
    };

    for i in 1..symbols.len() {
        try_add(&mut queue, &symbols, Some(i - 1), Some(i));
    }

    while let Some(bigram) = queue.pop() {
        let left = symbols[bigram.left];
        let right = symbols[bigram.right];
        // Skip pairs where one side was already merged elsewhere.
        if left.len == 0 || right.len == 0 || left.len + right.len != bigram.size {
            continue;
        }
        symbols[bigram.left].len += right.len;
        symbols[bigram.right].len = 0;
        symbols[bigram.left].next = right.next;
        if let Some(next) = right.next {
            symbols[next].prev = Some(bigram.left);
        }
        let merged = symbols[bigram.left];
        try_add(&mut queue, &symbols, merged.prev, Some(bigram.left));
        try_add(&mut queue, &symbols, Some(bigram.left), merged.next);
    }

    let mut cursor = Some(0);
    while let Some(i) = cursor {
        let sym = symbols[i];
        let piece = &text[sym.start..sym.start + sym.len];
        match vocab.token_to_id.get(piece) {
            Some(&id) => out.push(id),
            // Merged symbols are always tokens, so this is a single
            // character missing from the vocabulary: emit its bytes.
            None => out.extend(piece.bytes().map(|b| vocab.byte_tokens[usize::from(b)])),
        }
        cursor = sym.next;
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
