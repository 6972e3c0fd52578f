//! Byte-level BPE merging (llama.cpp `llm_tokenizer_bpe_session`).
//!
//! Each pre-tokenized word is split into characters; adjacent symbols are
//! merged by merge rank (lowest first, leftmost on ties) until no ranked pair
//! remains. Symbols that are not tokens are emitted byte by byte where a
//! single-byte token exists (llama.cpp drops the rest).

use std::cmp::Reverse;
use std::collections::HashMap;

use crate::error::TokenizerError;

/// Merge ranks keyed by the merge line `"left right"`.
#[derive(Debug, Clone, Default)]
pub(crate) struct MergeRanks {
    ranks: HashMap<String, u32>,
}

impl MergeRanks {
    /// Parse merge lines; rank = index, the first of duplicate lines wins.
    ///
    /// A line is split at its first space after the first byte, as llama.cpp does.
    pub fn parse(merges: &[String]) -> Result<Self, TokenizerError> {
        let mut ranks = HashMap::with_capacity(merges.len());
        for (rank, line) in merges.iter().enumerate() {
            // Byte offset 1, like C++ `find(' ', 1)`: the first byte may be a space.
            let valid = line.as_bytes().iter().skip(1).any(|&b| b == b' ');
            if !valid {
                return Err(TokenizerError::BadMerge {
                    rank,
                    line: line.clone(),
                });
            }
            let rank_u32 = u32::try_from(rank).map_err(|_| TokenizerError::BadMerge {
                rank,
                line: line.clone(),
            })?;
            ranks.entry(line.clone()).or_insert(rank_u32);
        }
        Ok(MergeRanks { ranks })
    }

    /// Rank of merging `left` and `right`, using `key` as scratch space.
    fn rank(&self, left: &str, right: &str, key: &mut String) -> Option<u32> {
        key.clear();
        key.push_str(left);
        key.push(' ');
        key.push_str(right);
        self.ranks.get(key.as_str()).copied()
    }

    /// Number of distinct merges.
    pub fn len(&self) -> usize {
        self.ranks.len()
    }
}

/// What the BPE algorithm needs from the vocabulary.
pub(crate) struct BpeVocab<'a> {
    /// Token text → id.
    pub token_to_id: &'a HashMap<String, u32>,
    /// Merge ranks.
    pub ranks: &'a MergeRanks,
    /// Emit a word that is itself a token without merging.
    pub ignore_merges: bool,
}

/// Merge one (byte-encoded) word, appending ids to `out`.
pub(crate) fn tokenize_word(word: &str, vocab: &BpeVocab<'_>, out: &mut Vec<u32>) {
    if word.is_empty() {
        return;
    }
    if vocab.ignore_merges
        && let Some(&id) = vocab.token_to_id.get(word)
    {
        out.push(id);
        return;
    }

    let mut key = String::new();
    // Lower merge rank first.
    let pieces = crate::symbols::merge(word, |l, r, _| {
        vocab.ranks.rank(l, r, &mut key).map(Reverse)
    });
    for (start, len) in pieces {
        let piece = &word[start..start + len];
        match vocab.token_to_id.get(piece) {
            Some(&id) => out.push(id),
            None => {
                // llama.cpp looks up each raw byte as a one-byte string; only
                // ASCII bytes can be such tokens.
                let mut buf = [0u8; 4];
                for b in piece.bytes().filter(u8::is_ascii) {
                    let s = char::from(b).encode_utf8(&mut buf);
                    if let Some(&id) = vocab.token_to_id.get(&*s) {
                        out.push(id);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(tokens: &[&str], merges: &[&str], word: &str, ignore_merges: bool) -> Vec<String> {
        let map: HashMap<String, u32> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| ((*t).to_string(), u32::try_from(i).expect("small")))
            .collect();
        let merges: Vec<String> = merges.iter().map(|m| (*m).to_string()).collect();
        let ranks = MergeRanks::parse(&merges).expect("valid merges");
        let vocab = BpeVocab {
            token_to_id: &map,
            ranks: &ranks,
            ignore_merges,
        };
        let mut out = Vec::new();
        tokenize_word(word, &vocab, &mut out);
        out.iter()
            .map(|&id| tokens[id as usize].to_string())
            .collect()
    }

    const TOKENS: &[&str] = &["a", "b", "c", "d", "ab", "bc", "abc", "cd", "abcd"];

    #[test]
    fn lowest_rank_merges_first() {
        // ranks: bc=0, ab=1, a bc=2: "abc" -> a|bc -> abc
        assert_eq!(run(TOKENS, &["b c", "a b", "a bc"], "abc", false), ["abc"]);
        // ranks: ab=0, bc=1 and no "ab c": -> ab|c
        assert_eq!(run(TOKENS, &["a b", "b c"], "abc", false), ["ab", "c"]);
    }

    #[test]
    fn merges_chain_across_the_word() {
        // abcd: ab(0), cd(1), ab cd(2)
        assert_eq!(
            run(TOKENS, &["a b", "c d", "ab cd"], "abcd", false),
            ["abcd"]
        );
        // Without the final merge two tokens remain.
        assert_eq!(run(TOKENS, &["a b", "c d"], "abcd", false), ["ab", "cd"]);
    }

    #[test]
    fn equal_rank_pairs_merge_leftmost_first() {
        // "aaa" with the single merge "a a": the left pair merges, the right
        // candidate becomes outdated.
        assert_eq!(run(&["a", "aa"], &["a a"], "aaa", false), ["aa", "a"]);
    }

    #[test]
    fn ignore_merges_emits_whole_word_tokens() {
        // No merges at all, but the word is a token.
        assert_eq!(run(TOKENS, &[], "abcd", true), ["abcd"]);
        assert_eq!(run(TOKENS, &[], "abcd", false), ["a", "b", "c", "d"]);
    }

    #[test]
    fn bad_merge_lines_are_rejected() {
        let merges = vec!["ab".to_string()];
        assert!(matches!(
            MergeRanks::parse(&merges),
            Err(TokenizerError::BadMerge { rank: 0, .. })
        ));
        // The split point is searched from the second byte on, so a leading
        // space belongs to the left part.
        let merges = vec![" a b".to_string()];
        assert_eq!(MergeRanks::parse(&merges).map(|r| r.len()), Ok(1));
        // Multi-byte first characters are fine.
        let merges = vec!["\u{120} \u{120}".to_string()];
        assert_eq!(MergeRanks::parse(&merges).map(|r| r.len()), Ok(1));
    }
}
