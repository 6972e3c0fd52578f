//! The merge loop both tokenizers share, as llama.cpp writes it (`llm_symbol` +
//! `llm_bigram_*`): the text starts as a linked list of characters, candidate merges of
//! adjacent symbols wait in a max-heap by priority (ties: leftmost first), and merging
//! two symbols adds the candidates with their new neighbours. SentencePiece ranks a pair
//! by the score of the merged piece, BPE by the rank of the merge.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// One symbol of the linked list; `len == 0` once merged into its left neighbour.
#[derive(Debug, Clone, Copy)]
struct Symbol {
    prev: Option<usize>,
    next: Option<usize>,
    start: usize,
    len: usize,
}

/// A candidate merge of two adjacent symbols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bigram<P> {
    priority: P,
    left: usize,
    right: usize,
    /// Bytes of the merged text when the candidate was made (stale if it changed).
    size: usize,
}

impl<P: Ord> PartialOrd for Bigram<P> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<P: Ord> Ord for Bigram<P> {
    /// Max-heap order: highest priority first, then the leftmost pair.
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority
            .cmp(&other.priority)
            .then_with(|| Reverse(self.left).cmp(&Reverse(other.left)))
    }
}

/// Splits `text` into characters and merges adjacent symbols, highest `priority` first,
/// while `priority(left, right, merged)` accepts the pair (`merged` is the two symbols'
/// text, contiguous in `text`); returns the resulting pieces in order
/// as byte ranges `(start, len)` of `text`.
pub(crate) fn merge<P: Ord>(
    text: &str,
    mut priority: impl FnMut(&str, &str, &str) -> Option<P>,
) -> Vec<(usize, usize)> {
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
        return Vec::new();
    }
    let mut queue = BinaryHeap::new();
    let mut try_add = |queue: &mut BinaryHeap<Bigram<P>>,
                       symbols: &[Symbol],
                       left: Option<usize>,
                       right: Option<usize>| {
        let (Some(left), Some(right)) = (left, right) else {
            return;
        };
        let (l, r) = (symbols[left], symbols[right]);
        let left_text = &text[l.start..l.start + l.len];
        let right_text = &text[r.start..r.start + r.len];
        let merged = &text[l.start..l.start + l.len + r.len];
        if let Some(p) = priority(left_text, right_text, merged) {
            queue.push(Bigram {
                priority: p,
                left,
                right,
                size: l.len + r.len,
            });
        }
    };
    for i in 1..symbols.len() {
        try_add(&mut queue, &symbols, Some(i - 1), Some(i));
    }
    while let Some(bigram) = queue.pop() {
        let (left, right) = (symbols[bigram.left], symbols[bigram.right]);
        // Outdated: one side merged elsewhere, or the pair's text changed (both symbols
        // keep their start, so equal length means equal text).
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
    let mut pieces = Vec::new();
    let mut cursor = Some(0);
    while let Some(i) = cursor {
        pieces.push((symbols[i].start, symbols[i].len));
        cursor = symbols[i].next;
    }
    pieces
}

/// An `f32` priority with a total order (SentencePiece scores).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Score(pub f32);

impl PartialEq for Score {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts<'a>(text: &'a str, pieces: &[(usize, usize)]) -> Vec<&'a str> {
        pieces.iter().map(|&(s, l)| &text[s..s + l]).collect()
    }

    #[test]
    fn highest_priority_merges_first_and_ties_go_left() {
        // "ab" (priority 2) beats "bc" (1); then "abc" needs "ab"+"c" (3).
        let p = |l: &str, r: &str, _: &str| match (l, r) {
            ("a", "b") => Some(2),
            ("b", "c") => Some(1),
            ("ab", "c") => Some(3),
            _ => None,
        };
        assert_eq!(texts("abc", &merge("abc", p)), ["abc"]);
        // Equal priorities: the leftmost pair merges first ("aa" "a", not "a" "aa").
        let same = |l: &str, r: &str, _: &str| (l == "a" && r == "a").then_some(1);
        assert_eq!(texts("aaa", &merge("aaa", same)), ["aa", "a"]);
    }

    #[test]
    fn multibyte_characters_stay_whole() {
        let none = |_: &str, _: &str, _: &str| None::<u32>;
        assert_eq!(texts("é你🦀", &merge("é你🦀", none)), ["é", "你", "🦀"]);
        assert!(merge("", none).is_empty());
    }
}
