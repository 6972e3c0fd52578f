//! The tokenizer: text ↔ token ids with llama.cpp's semantics.

use std::collections::{BTreeSet, HashMap};

use crate::bpe::{self, BpeVocab, MergeRanks};
use crate::error::TokenizerError;
use crate::pretokenize::{
    PreTokenizer, PreTokenizerConfig, supported_pre_tokenizers, unsupported_reason,
};
use crate::special::{Fragment, partition};
use crate::spm::{self, SpmVocab};
use crate::unicode::char_to_byte;
use crate::vocab::{TokenType, Vocab};

/// Largest vocabulary accepted (token ids must fit comfortably in `u32`/`i32`).
pub const MAX_VOCAB_TOKENS: usize = 1 << 24;

/// SentencePiece's whitespace stand-in, U+2581 `▁`.
const SPM_SPACE: &str = "\u{2581}";

/// Token attribute bits (llama.cpp `llama_token_attr`).
mod attr {
    pub const UNKNOWN: u32 = 1 << 0;
    pub const UNUSED: u32 = 1 << 1;
    pub const NORMAL: u32 = 1 << 2;
    pub const CONTROL: u32 = 1 << 3;
    pub const USER_DEFINED: u32 = 1 << 4;
    pub const BYTE: u32 = 1 << 5;
}

/// Token texts llama.cpp treats as end-of-turn when no EOT id is given.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];

/// Token texts llama.cpp always treats as end-of-generation.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// Fill-in-the-middle token texts llama.cpp forces to control type; the
/// bool says whether the first match is also end-of-generation.
const FIM_TEXTS: &[(&[&str], bool)] = &[
    (
        &[
            "<|fim_prefix|>",
            "<fim-prefix>",
            "<fim_prefix>",
            "<｜fim▁begin｜>",
            "<PRE>",
            "▁<PRE>",
            "<|code_prefix|>",
            "<|prefix|>",
        ],
        false,
    ),
    (
        &[
            "<|fim_suffix|>",
            "<fim-suffix>",
            "<fim_suffix>",
            "<｜fim▁hole｜>",
            "<SUF>",
            "▁<SUF>",
            "<|code_suffix|>",
            "<|suffix|>",
        ],
        false,
    ),
    (
        &[
            "<|fim_middle|>",
            "<fim-middle>",
            "<fim_middle>",
            "<｜fim▁end｜>",
            "<MID>",
            "▁<MID>",
            "<|code_middle|>",
            "<|middle|>",
        ],
        false,
    ),
    (
        &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"],
        true,
    ),
    (
        &[
            "<|fim_repo|>",
            "<|repo_name|>",
            "<fim-repo>",
            "<REPO>",
            "<reponame>",
        ],
        true,
    ),
    (&["<|file_sep|>"], true),
];

/// Which tokenization algorithm a vocabulary uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// `"llama"`: SentencePiece-style score-driven merging with byte fallback.
    Spm,
    /// `"gpt2"`: byte-level BPE with the given pre-tokenizer.
    Bpe {
        /// The pre-tokenizer.
        pre: PreTokenizer,
    },
}

#[derive(Debug, Clone)]
struct TokenData {
    text: String,
    attr: u32,
}

/// A ready-to-use tokenizer built from a [`Vocab`].
#[derive(Debug, Clone)]
pub struct Tokenizer {
    model: Model,
    tokens: Vec<TokenData>,
    scores: Vec<f32>,
    token_to_id: HashMap<String, u32>,
    ranks: MergeRanks,
    byte_tokens: [u32; 256],
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Option<u32>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    ignore_merges: bool,
    clean_spaces: bool,
    eog: BTreeSet<u32>,
    /// Control, user-defined and unknown tokens, longest text first.
    specials: Vec<u32>,
    /// `token_to_piece(id, special = true)` for every id.
    pieces: Vec<Box<[u8]>>,
}

impl Tokenizer {
    /// Build a tokenizer, applying llama.cpp's defaults for absent fields.
    ///
    /// Differences from llama.cpp's loader: an out-of-range special-token id
    /// is an error (llama.cpp warns and keeps its default), SPM vocabularies
    /// must have all 256 byte tokens, and merge lines without a space are
    /// rejected.
    pub fn new(vocab: Vocab) -> Result<Tokenizer, TokenizerError> {
        let Vocab {
            model,
            pre,
            tokens,
            scores,
            token_types,
            merges,
            bos_token_id,
            eos_token_id,
            eot_token_id,
            unknown_token_id: _,
            padding_token_id: _,
            add_bos_token,
            add_eos_token,
            add_space_prefix,
        } = vocab;
        let n = tokens.len();
        check_array_lengths(n, scores.as_deref(), token_types.as_deref())?;
        let defaults = ModelDefaults::of(model, pre.as_deref())?;
        let (mut table, token_to_id) = token_table(tokens, token_types.as_deref())?;
        let scores = scores.unwrap_or_else(|| vec![0.0; n]);

        // Special ids: GGUF value if present (must be in range), else default.
        let pick = |field, given: Option<u32>, default: Option<u32>| match given {
            Some(id) if (id as usize) < n => Ok(Some(id)),
            Some(id) => Err(TokenizerError::TokenIdOutOfRange {
                field,
                id,
                n_tokens: n,
            }),
            None => Ok(default.filter(|&id| (id as usize) < n)),
        };
        let bos = pick("bos_token_id", bos_token_id, defaults.bos)?;
        let eos = pick("eos_token_id", eos_token_id, defaults.eos)?;
        let mut eot = pick("eot_token_id", eot_token_id, None)?;
        let add_bos = add_bos_token.unwrap_or(defaults.add_bos);
        let add_eos = add_eos_token.unwrap_or(false);
        if add_bos && bos.is_none() {
            return Err(TokenizerError::MissingSpecialToken {
                flag: "add_bos_token",
                token: "BOS",
            });
        }
        if add_eos && eos.is_none() {
            return Err(TokenizerError::MissingSpecialToken {
                flag: "add_eos_token",
                token: "EOS",
            });
        }

        // Byte fallback (SPM) and merges (BPE).
        let (byte_tokens, ranks) = match defaults.model {
            Model::Spm => (spm_byte_tokens(&token_to_id)?, MergeRanks::default()),
            Model::Bpe { .. } => match merges {
                Some(merges) => ([0; 256], MergeRanks::parse(&merges)?),
                // Kimi K2 vocabularies come without merges: every word is
                // split into characters (llama.cpp does the same).
                None if defaults.merges_optional => ([0; 256], MergeRanks::default()),
                None => return Err(TokenizerError::MissingMerges),
            },
        };
        let eog = end_of_generation(&mut table, eos, &mut eot);
        let specials = specials_longest_first(&table);
        let mut tokenizer = Tokenizer {
            model: defaults.model,
            tokens: table,
            scores,
            token_to_id,
            ranks,
            byte_tokens,
            bos,
            eos,
            eot,
            add_bos,
            add_eos,
            add_space_prefix: add_space_prefix.unwrap_or(defaults.add_space_prefix),
            ignore_merges: defaults.ignore_merges,
            clean_spaces: defaults.clean_spaces,
            eog,
            specials,
            pieces: Vec::new(),
        };
        tokenizer.pieces = (0..tokenizer.tokens.len())
            .map(|i| tokenizer.render_piece(i).into_boxed_slice())
            .collect();
        Ok(tokenizer)
    }

    /// The algorithm in use.
    pub fn model(&self) -> Model {
        self.model
    }

    /// Number of tokens.
    pub fn n_vocab(&self) -> usize {
        self.tokens.len()
    }

    /// Number of distinct BPE merges (0 for SPM).
    pub fn n_merges(&self) -> usize {
        self.ranks.len()
    }

    /// Beginning-of-sequence token.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// End-of-sequence token.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// End-of-turn token (given or detected from its text).
    pub fn eot(&self) -> Option<u32> {
        self.eot
    }

    /// Whether `tokenize(.., add_special = true, ..)` prepends BOS.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether `tokenize(.., add_special = true, ..)` appends EOS.
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }

    /// Whether generation stops at `id` (EOS, EOT, EOM and llama.cpp's
    /// end-of-generation texts such as `<|im_end|>`).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.contains(&id)
    }

    /// Whether `id` is a control token (rendered empty by default).
    pub fn is_control(&self, id: u32) -> bool {
        self.attr(id) & attr::CONTROL != 0
    }

    /// Stored text of a token.
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(|t| t.text.as_str())
    }

    /// Id of the token with exactly this stored text.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.token_to_id.get(text).copied()
    }

    fn attr(&self, id: u32) -> u32 {
        self.tokens.get(id as usize).map_or(0, |t| t.attr)
    }

    /// Tokenize `text` like llama.cpp's `llama_tokenize`.
    ///
    /// `add_special` adds BOS/EOS as the vocabulary's `add_bos_token`/
    /// `add_eos_token` say; `parse_special` turns control-token texts such
    /// as `<|im_start|>` into their ids (user-defined tokens are always
    /// split out).
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let specials: Vec<(u32, &str)> = self
            .specials
            .iter()
            .filter(|&&id| parse_special || self.attr(id) & (attr::CONTROL | attr::UNKNOWN) == 0)
            .map(|&id| (id, self.tokens[id as usize].text.as_str()))
            .collect();
        let fragments = partition(text, &specials);
        let mut out = Vec::new();
        match self.model {
            Model::Spm => self.tokenize_spm(&fragments, add_special, &mut out),
            Model::Bpe { pre } => self.tokenize_bpe(pre, &fragments, add_special, &mut out),
        }
        out
    }

    fn tokenize_spm(&self, fragments: &[Fragment<'_>], add_special: bool, out: &mut Vec<u32>) {
        let vocab = SpmVocab {
            token_to_id: &self.token_to_id,
            scores: &self.scores,
            byte_tokens: &self.byte_tokens,
        };
        let bos = self.bos.filter(|_| add_special && self.add_bos);
        out.extend(bos);
        // A space is prefixed to text at the start and after special tokens.
        let mut prev_special = true;
        for fragment in fragments {
            match *fragment {
                Fragment::Text(text) => {
                    let mut escaped = String::with_capacity(text.len() * 3 + 3);
                    if self.add_space_prefix && prev_special {
                        escaped.push_str(SPM_SPACE);
                    }
                    escaped.push_str(&text.replace(' ', SPM_SPACE));
                    spm::tokenize(&escaped, &vocab, out);
                    prev_special = false;
                }
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
            }
        }
        out.extend(self.eos.filter(|_| add_special && self.add_eos));
    }

    fn tokenize_bpe(
        &self,
        pre: PreTokenizer,
        fragments: &[Fragment<'_>],
        add_special: bool,
        out: &mut Vec<u32>,
    ) {
        let vocab = BpeVocab {
            token_to_id: &self.token_to_id,
            ranks: &self.ranks,
            ignore_merges: self.ignore_merges,
        };
        out.extend(self.bos.filter(|_| add_special && self.add_bos));
        for fragment in fragments {
            match *fragment {
                Fragment::Text(text) => {
                    for word in pre.split(text) {
                        bpe::tokenize_word(&word, &vocab, out);
                    }
                }
                Fragment::Token(id) => out.push(id),
            }
        }
        out.extend(self.eos.filter(|_| add_special && self.add_eos));
    }

    /// The bytes a token stands for (llama.cpp `llama_token_to_piece`).
    ///
    /// Byte tokens give their byte, so a multi-byte character split over
    /// several tokens streams correctly when the pieces are concatenated.
    /// Control and unknown tokens are empty unless `special` is true.
    /// Out-of-range ids are empty.
    pub fn token_to_piece(&self, id: u32, special: bool) -> &[u8] {
        if !special && self.attr(id) & (attr::UNKNOWN | attr::CONTROL) != 0 {
            return &[];
        }
        self.pieces.get(id as usize).map_or(&[], |p| p)
    }

    /// Piece of token `index` as if `special` were true.
    fn render_piece(&self, index: usize) -> Vec<u8> {
        let token = &self.tokens[index];
        let text = token.text.as_str();
        if token.attr & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED) != 0 {
            return text.as_bytes().to_vec();
        }
        if token.attr & attr::NORMAL != 0 {
            return match self.model {
                Model::Spm => text.replace(SPM_SPACE, " ").into_bytes(),
                Model::Bpe { .. } => decode_byte_level(text),
            };
        }
        if token.attr & attr::BYTE != 0 {
            return parse_byte_token(text).map(|b| vec![b]).unwrap_or_default();
        }
        Vec::new()
    }

    /// Concatenate the pieces of `ids` (control tokens render empty) and
    /// decode the bytes as UTF-8, replacing invalid sequences.
    ///
    /// No llama.cpp clean-up is applied, so for SPM vocabularies the space
    /// prefix added by [`tokenize`](Self::tokenize) shows up as a leading space.
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&id| self.token_to_piece(id, false))
            .copied()
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// llama.cpp's `llama_detokenize`: drops one leading space when the
    /// vocabulary adds a space prefix, optionally removes the BOS/EOS that
    /// `add_special` added, and applies `clean_up_tokenization_spaces` where
    /// the vocabulary asks for it.
    pub fn detokenize(&self, ids: &[u32], remove_special: bool, unparse_special: bool) -> String {
        let mut ids = ids;
        let mut remove_space = self.add_space_prefix;
        if remove_special && self.add_bos && ids.first().is_some_and(|&id| Some(id) == self.bos) {
            remove_space = false;
            ids = &ids[1..];
        }
        if remove_special && self.add_eos && ids.last().is_some_and(|&id| Some(id) == self.eos) {
            ids = &ids[..ids.len() - 1];
        }
        let mut text: Vec<u8> = Vec::new();
        for &id in ids {
            let mut piece = self.token_to_piece(id, unparse_special);
            if remove_space && piece.first() == Some(&b' ') {
                piece = &piece[1..];
            }
            remove_space = false;
            text.extend_from_slice(piece);
        }
        if self.clean_spaces {
            text = clean_up_spaces(&text);
        }
        String::from_utf8_lossy(&text).into_owned()
    }
}

/// Checks the vocabulary's size and that the per-token arrays have one entry per token.
fn check_array_lengths(
    n: usize,
    scores: Option<&[f32]>,
    token_types: Option<&[i32]>,
) -> Result<(), TokenizerError> {
    if n == 0 {
        return Err(TokenizerError::EmptyVocab);
    }
    if n > MAX_VOCAB_TOKENS {
        return Err(TokenizerError::TooManyTokens {
            count: n,
            limit: MAX_VOCAB_TOKENS,
        });
    }
    let arrays = [
        ("scores", scores.map(<[f32]>::len)),
        ("token_types", token_types.map(<[i32]>::len)),
    ];
    for (array, len) in arrays {
        if let Some(len) = len.filter(|&len| len != n) {
            return Err(TokenizerError::InconsistentArrays {
                array,
                len,
                n_tokens: n,
            });
        }
    }
    Ok(())
}

/// The model type of a vocabulary and the defaults llama.cpp sets for it (for BPE, those
/// of its pre-tokenizer).
struct ModelDefaults {
    model: Model,
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
    clean_spaces: bool,
    ignore_merges: bool,
    add_space_prefix: bool,
    merges_optional: bool,
}

impl ModelDefaults {
    /// The defaults of `tokenizer.ggml.model` = `model` with pre-tokenizer `pre`.
    fn of(model: String, pre: Option<&str>) -> Result<ModelDefaults, TokenizerError> {
        match model.as_str() {
            "llama" => Ok(ModelDefaults {
                model: Model::Spm,
                bos: Some(1),
                eos: Some(2),
                add_bos: true,
                clean_spaces: false,
                ignore_merges: false,
                add_space_prefix: true,
                merges_optional: false,
            }),
            "gpt2" => {
                let config = PreTokenizerConfig::from_name(pre)
                    .ok_or_else(|| unsupported_pre_tokenizer(pre.unwrap_or("")))?;
                Ok(ModelDefaults {
                    model: Model::Bpe { pre: config.pre },
                    bos: config.default_bos,
                    eos: Some(11),
                    add_bos: config.add_bos,
                    clean_spaces: config.clean_spaces,
                    ignore_merges: config.ignore_merges,
                    add_space_prefix: false,
                    merges_optional: config.merges_optional,
                })
            }
            _ => Err(TokenizerError::UnknownModel { model }),
        }
    }
}

/// The token table (texts, an empty one named `[EMPTY_<id>]` as llama.cpp does, and
/// attributes from the token types) and the id of each text, which must be unique.
fn token_table(
    tokens: Vec<String>,
    token_types: Option<&[i32]>,
) -> Result<(Vec<TokenData>, HashMap<String, u32>), TokenizerError> {
    let n = tokens.len();
    let mut token_to_id = HashMap::with_capacity(n);
    let mut table = Vec::with_capacity(n);
    for (i, mut text) in tokens.into_iter().enumerate() {
        let id = u32::try_from(i).map_err(|_| TokenizerError::TooManyTokens {
            count: n,
            limit: MAX_VOCAB_TOKENS,
        })?;
        if text.is_empty() {
            text = format!("[EMPTY_{i}]");
        }
        if let Some(&first) = token_to_id.get(&text) {
            return Err(TokenizerError::DuplicateToken {
                text,
                first,
                second: id,
            });
        }
        token_to_id.insert(text.clone(), id);
        let attr = match token_types.map(|t| TokenType::from_i32(t[i])) {
            None | Some(Some(TokenType::Normal)) => attr::NORMAL,
            Some(Some(TokenType::Unknown)) => attr::UNKNOWN,
            Some(Some(TokenType::Control)) => attr::CONTROL,
            Some(Some(TokenType::UserDefined)) => attr::USER_DEFINED,
            Some(Some(TokenType::Unused)) => attr::UNUSED,
            Some(Some(TokenType::Byte)) => attr::BYTE,
            Some(Some(TokenType::Undefined) | None) => 0,
        };
        table.push(TokenData { text, attr });
    }
    Ok((table, token_to_id))
}

/// The SPM byte-fallback token of every byte: `<0xXX>`, or for ASCII the byte's own text.
fn spm_byte_tokens(token_to_id: &HashMap<String, u32>) -> Result<[u32; 256], TokenizerError> {
    let mut byte_tokens = [0u32; 256];
    for b in 0..=255u8 {
        let hex = format!("<0x{b:02X}>");
        let plain = char::from(b).to_string();
        let id = token_to_id
            .get(&hex)
            .or_else(|| b.is_ascii().then(|| token_to_id.get(&plain)).flatten())
            .ok_or(TokenizerError::MissingByteToken { byte: b })?;
        byte_tokens[usize::from(b)] = *id;
    }
    Ok(byte_tokens)
}

/// llama.cpp's text-based detection of EOT/EOM/FIM tokens (lowest id wins; `eot` is set
/// if the vocabulary gave none) and of end-of-generation tokens, which it forces to
/// control type (and control tokens named `unused` to unused); returns the
/// end-of-generation ids.
fn end_of_generation(
    table: &mut [TokenData],
    eos: Option<u32>,
    eot: &mut Option<u32>,
) -> BTreeSet<u32> {
    let mut eog = BTreeSet::new();
    let mut eom = None;
    let mut fim: [Option<u32>; FIM_TEXTS.len()] = [None; FIM_TEXTS.len()];
    for (id, token) in (0u32..).zip(table.iter_mut()) {
        let text = token.text.as_str();
        let mut force_control = false;
        if eot.is_none() && EOT_TEXTS.contains(&text) {
            *eot = Some(id);
            force_control = true;
        }
        if eom.is_none() && text == "<|eom_id|>" {
            eom = Some(id);
            force_control = true;
        }
        for (slot, (texts, _)) in fim.iter_mut().zip(FIM_TEXTS) {
            if slot.is_none() && texts.contains(&text) {
                *slot = Some(id);
                force_control = true;
            }
        }
        if force_control {
            token.attr |= attr::CONTROL;
        }
    }
    for (slot, (_, is_eog)) in fim.iter().zip(FIM_TEXTS) {
        if let (Some(id), true) = (slot, is_eog) {
            eog.insert(*id);
        }
    }
    for (id, token) in (0u32..).zip(table.iter_mut()) {
        if token.attr & attr::CONTROL != 0 && token.text.contains("unused") {
            token.attr |= attr::UNUSED;
        }
        if EOG_TEXTS.contains(&token.text.as_str()) {
            eog.insert(id);
            token.attr |= attr::CONTROL;
        }
    }
    eog.extend(eos);
    eog.extend(*eot);
    eog.extend(eom);
    eog
}

/// Control, user-defined and unknown tokens, longest text first.
fn specials_longest_first(table: &[TokenData]) -> Vec<u32> {
    let mut specials: Vec<u32> = (0u32..)
        .zip(table)
        .filter(|(_, t)| t.attr & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0)
        .map(|(id, _)| id)
        .collect();
    specials.sort_by_key(|&id| std::cmp::Reverse(table[id as usize].text.len()));
    specials
}

/// The error for a `tokenizer.ggml.pre` this crate does not implement.
fn unsupported_pre_tokenizer(name: &str) -> TokenizerError {
    TokenizerError::UnsupportedPreTokenizer {
        pre: name.to_owned(),
        reason: unsupported_reason(name),
        supported: {
            let mut names: Vec<&str> = supported_pre_tokenizers().collect();
            names.sort_unstable();
            names.join(", ")
        },
    }
}

/// Undo GPT-2's byte encoding; characters outside the mapping are rendered
/// the way llama.cpp does (`[UNK_BYTE_0x..<text>]`).
fn decode_byte_level(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
    out
}

/// `<0xXX>` → the byte.
fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// llama.cpp's three clean-up passes over detokenized bytes.
fn clean_up_spaces(input: &[u8]) -> Vec<u8> {
    // Pass 1: " ?", " !", " .", " ," lose the space.
    let mut a: Vec<u8> = Vec::with_capacity(input.len());
    for (i, &x) in input.iter().enumerate() {
        if i > 0 && input[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            a.pop();
        }
        a.push(x);
    }
    // Pass 2: a lone apostrophe between spaces loses both spaces. llama.cpp
    // blanks the skipped space in place, which later checks then see.
    let mut b: Vec<u8> = Vec::with_capacity(a.len());
    let mut i = 0;
    while i < a.len() {
        let x = a[i];
        if i > 0 && x == b'\'' && i + 1 < a.len() && a[i - 1] == b' ' && a[i + 1] == b' ' {
            b.pop();
            b.push(x);
            a[i + 1] = 0;
            i += 2;
            continue;
        }
        b.push(x);
        i += 1;
    }
    // Pass 3: " 's", " 'm", " 're", " 've" lose the space.
    let mut c: Vec<u8> = Vec::with_capacity(b.len());
    for (i, &x) in b.iter().enumerate() {
        if i > 0 && b[i - 1] == b' ' && x == b'\'' && i + 1 < b.len() {
            let x1 = b[i + 1];
            let x2 = b.get(i + 2).copied();
            let drop = matches!(x1, b's' | b'm')
                || (i + 2 < b.len() && matches!((x1, x2), (b'r', Some(b'e')) | (b'v', Some(b'e'))));
            if drop {
                c.pop();
            }
        }
        c.push(x);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_tokens_parse() {
        assert_eq!(parse_byte_token("<0x0A>"), Some(b'\n'));
        assert_eq!(parse_byte_token("<0xff>"), Some(0xFF));
        assert_eq!(parse_byte_token("<0x1>"), None);
        assert_eq!(parse_byte_token("0x41"), None);
    }

    #[test]
    fn clean_up_matches_llama_cpp_rules() {
        assert_eq!(clean_up_spaces(b"Hello , world !"), b"Hello, world!");
        assert_eq!(clean_up_spaces(b"a ' b"), b"a'b");
        // The second apostrophe sees the blanked space, not a real one.
        assert_eq!(clean_up_spaces(b"x ' ' y"), b"x'' y");
        assert_eq!(clean_up_spaces(b"it 's we 're I 'll"), b"it's we're I 'll");
        assert_eq!(clean_up_spaces(b""), b"");
    }
}
