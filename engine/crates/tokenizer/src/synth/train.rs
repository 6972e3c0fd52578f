//! A small, deterministic BPE trainer.
//!
//! Words are sequences of symbol ids with a corpus count. Each step merges
//! the most frequent adjacent pair (ties: smallest ids) into a new symbol,
//! until the requested number of new symbols exists or no pair is left.

use std::collections::{HashMap, HashSet};

/// One learned merge: `left` + `right` → `result` (ids into the symbol table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Merge {
    /// Left part.
    pub left: u32,
    /// Right part.
    pub right: u32,
    /// The merged symbol (may be an existing symbol with the same text).
    pub result: u32,
}

/// Symbol texts plus a reverse index; training appends to it.
#[derive(Debug, Clone, Default)]
pub(crate) struct SymbolTable {
    /// Text by id.
    pub texts: Vec<String>,
    index: HashMap<String, u32>,
}

impl SymbolTable {
    /// Id of `text`, adding it if new. Returns `(id, was_new)`.
    pub fn intern(&mut self, text: &str) -> (u32, bool) {
        if let Some(&id) = self.index.get(text) {
            return (id, false);
        }
        let id = u32::try_from(self.texts.len()).unwrap_or(u32::MAX);
        self.texts.push(text.to_string());
        self.index.insert(text.to_string(), id);
        (id, true)
    }

    /// Id of `text` if present.
    pub fn get(&self, text: &str) -> Option<u32> {
        self.index.get(text).copied()
    }
}

type Pair = (u32, u32);

/// Learn merges over `words` until `max_new_symbols` new symbols were added
/// to `table` or no adjacent pair remains.
pub(crate) fn train(
    words: Vec<(Vec<u32>, u64)>,
    table: &mut SymbolTable,
    max_new_symbols: usize,
) -> Vec<Merge> {
    let mut words = words;
    let mut counts: HashMap<Pair, u64> = HashMap::new();
    let mut where_: HashMap<Pair, HashSet<usize>> = HashMap::new();
    for (w, (symbols, count)) in words.iter().enumerate() {
        for pair in symbols.windows(2) {
            let pair = (pair[0], pair[1]);
            *counts.entry(pair).or_insert(0) += count;
            where_.entry(pair).or_default().insert(w);
        }
    }

    let mut merges = Vec::new();
    let mut new_symbols = 0;
    while new_symbols < max_new_symbols {
        // Most frequent pair; ties go to the smallest ids (deterministic).
        let Some((&best, _)) = counts
            .iter()
            .filter(|&(_, &c)| c > 0)
            .max_by(|(pa, ca), (pb, cb)| ca.cmp(cb).then_with(|| pb.cmp(pa)))
        else {
            break;
        };
        let text = format!(
            "{}{}",
            table.texts[best.0 as usize], table.texts[best.1 as usize]
        );
        let (result, is_new) = table.intern(&text);
        new_symbols += usize::from(is_new);
        merges.push(Merge {
            left: best.0,
            right: best.1,
            result,
        });

        let mut affected: Vec<usize> = where_
            .remove(&best)
            .map(|s| s.into_iter().collect())
            .unwrap_or_default();
        affected.sort_unstable();
        for w in affected {
            let (symbols, count) = &mut words[w];
            let count = *count;
            for pair in symbols.windows(2) {
                if let Some(c) = counts.get_mut(&(pair[0], pair[1])) {
                    *c -= count;
                }
            }
            let mut merged = Vec::with_capacity(symbols.len());
            let mut i = 0;
            while i < symbols.len() {
                if i + 1 < symbols.len() && (symbols[i], symbols[i + 1]) == best {
                    merged.push(result);
                    i += 2;
                } else {
                    merged.push(symbols[i]);
                    i += 1;
                }
            }
            *symbols = merged;
            for pair in symbols.windows(2) {
                let pair = (pair[0], pair[1]);
                *counts.entry(pair).or_insert(0) += count;
                where_.entry(pair).or_default().insert(w);
            }
        }
        counts.remove(&best);
    }
    merges
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_of(chars: &[&str]) -> SymbolTable {
        let mut t = SymbolTable::default();
        for c in chars {
            t.intern(c);
        }
        t
    }

    #[test]
    fn merges_most_frequent_pair_first() {
        // "abab" x1, "ab" x3: pair (a,b) occurs 5 times, (b,a) once.
        let mut t = table_of(&["a", "b"]);
        let words = vec![(vec![0, 1, 0, 1], 1), (vec![0, 1], 3)];
        let merges = train(words, &mut t, 2);
        assert_eq!(
            merges[0],
            Merge {
                left: 0,
                right: 1,
                result: 2
            }
        );
        assert_eq!(t.texts[2], "ab");
        // Then "ab ab" (count 1) is the only pair left.
        assert_eq!(
            merges[1],
            Merge {
                left: 2,
                right: 2,
                result: 3
            }
        );
        assert_eq!(t.texts[3], "abab");
    }

    #[test]
    fn stops_when_no_pairs_remain() {
        let mut t = table_of(&["a", "b"]);
        let merges = train(vec![(vec![0, 1], 1)], &mut t, 100);
        assert_eq!(merges.len(), 1);
        assert_eq!(t.texts.len(), 3);
    }

    #[test]
    fn overlapping_pairs_merge_left_to_right() {
        // "aaa": (a,a) count 2 -> merged as "aa" + "a".
        let mut t = table_of(&["a"]);
        let merges = train(vec![(vec![0, 0, 0], 1)], &mut t, 1);
        assert_eq!(
            merges,
            [Merge {
                left: 0,
                right: 0,
                result: 1
            }]
        );
    }
}
