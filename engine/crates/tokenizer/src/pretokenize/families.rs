//! The pre-tokenizer families: llama.cpp's regex list for each
//! (`llm_tokenizer_bpe`'s constructor in llama-vocab.cpp), verbatim. Several
//! of llama.cpp's `LLAMA_VOCAB_PRE_TYPE_*` share one list; each family names
//! the types it stands for.

use super::custom::{
    AFMOE_DIGITS, GPT2, KIMI_K2, LLAMA3, NEWLINES, QWEN2, QWEN35, TINY_AYA_DIGITS,
};

/// How a byte-level BPE vocabulary splits text into words before merging:
/// one of llama.cpp's pre-tokenizer regex lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PreTokenizer {
    /// llama.cpp's fallback (`"default"` or no name): punctuation runs, GPT-2,
    /// digit runs, ASCII digit triples.
    Default,
    /// GPT-2 (`GPT2`, `MPT`, `OLMO`, `JAIS`, `TRILLION`, `GRANITE_DOCLING`).
    Gpt2,
    /// Llama 3, digits in groups of up to three (`LLAMA3`, `DBRX`, `SMAUG`,
    /// `CHATGLM4`).
    Llama3,
    /// Llama 3 with single digits (`QWEN2`, `STABLELM2`, `HUNYUAN`,
    /// `SOLAR_OPEN`, `GROK_2`).
    Qwen2,
    /// Qwen2 with combining marks in letter runs (`QWEN35`).
    Qwen35,
    /// Llama 3 with whitespace runs cut into powers of two (`JAIS2`).
    Jais2,
    /// DeepSeek LLM: newlines, letter runs of an explicit alphabet,
    /// punctuation, CJK runs, digit runs (`DEEPSEEK_LLM`).
    DeepseekLlm,
    /// DeepSeek V3 (`DEEPSEEK3_LLM`, `HUNYUAN_DENSE`, `JOYAI_LLM`, `HY_V4`).
    Deepseek3,
    /// DeepSeek V3 with single newlines and single digits (`SPARK2_5`).
    Spark25,
    /// Youtu: Hangul/CJK/punctuation runs, then case-aware words (`YOUTU`).
    Youtu,
    /// DeepSeek Coder (`DEEPSEEK_CODER`).
    DeepseekCoder,
    /// Falcon: punctuation runs, GPT-2, ASCII digit triples (`FALCON`).
    Falcon,
    /// Single digits, then GPT-2 (`STARCODER`, `REFACT`, `COMMAND_R`,
    /// `SMOLLM`, `CODESHELL`, `EXAONE`, `MINERVA`, `MELLUM2`).
    Starcoder,
    /// Runs without whitespace and sentence punctuation (`BLOOM`, `PORO`,
    /// `GPT3_FINNISH`).
    Bloom,
    /// Bloom's rule, then single digits (`VIKING`).
    Viking,
    /// Tekken (Mistral Nemo): case-aware words via lookaheads (`TEKKEN`).
    Tekken,
    /// Chameleon: sentinel and image tokens, whitespace, digits,
    /// punctuation, GPT-2 (`CHAMELEON`).
    Chameleon,
    /// GPT-4o: case-aware words with contractions, digit triples (`GPT4O`,
    /// `MINIMAX_M2`).
    Gpt4o,
    /// GPT-4o with combining marks (`GRANITE_EMB_MULTI`).
    GraniteEmbMulti,
    /// Tiny Aya: digit triples from the right, then GPT-4o's rules
    /// (`TINY_AYA`).
    TinyAya,
    /// Kimi K2 (`KIMI_K2`).
    KimiK2,
    /// SuperBPE: digit runs cut into triples from the right by an empty
    /// lookahead match (`SUPERBPE`).
    Superbpe,
    /// Ling (`BAILINGMOE`).
    Bailingmoe,
    /// Seed-Coder (`SEED_CODER`).
    SeedCoder,
    /// Qwen2 without contractions (`UFAKZEKA`).
    Ufakzeka,
    /// AFMoE: digit triples from the right, CJK/SE-Asian runs, DeepSeek V3's
    /// rule (`AFMOE`).
    Afmoe,
    /// Lines, then Qwen2 (`LAGUNA`).
    Laguna,
    /// EXAONE MoE: letter runs joined across single spaces (`EXAONE_MOE`).
    ExaoneMoe,
    /// MiniCPM 5: digit triples, then Llama 3 with digit runs (`MINICPM5`).
    Minicpm5,
}

impl PreTokenizer {
    /// Every family.
    pub const ALL: &[PreTokenizer] = &[
        PreTokenizer::Default,
        PreTokenizer::Gpt2,
        PreTokenizer::Llama3,
        PreTokenizer::Qwen2,
        PreTokenizer::Qwen35,
        PreTokenizer::Jais2,
        PreTokenizer::DeepseekLlm,
        PreTokenizer::Deepseek3,
        PreTokenizer::Spark25,
        PreTokenizer::Youtu,
        PreTokenizer::DeepseekCoder,
        PreTokenizer::Falcon,
        PreTokenizer::Starcoder,
        PreTokenizer::Bloom,
        PreTokenizer::Viking,
        PreTokenizer::Tekken,
        PreTokenizer::Chameleon,
        PreTokenizer::Gpt4o,
        PreTokenizer::GraniteEmbMulti,
        PreTokenizer::TinyAya,
        PreTokenizer::KimiK2,
        PreTokenizer::Superbpe,
        PreTokenizer::Bailingmoe,
        PreTokenizer::SeedCoder,
        PreTokenizer::Ufakzeka,
        PreTokenizer::Afmoe,
        PreTokenizer::Laguna,
        PreTokenizer::ExaoneMoe,
        PreTokenizer::Minicpm5,
    ];

    /// llama.cpp's regexes, applied in order, each splitting the pieces the
    /// previous ones left.
    pub fn regexes(self) -> &'static [&'static str] {
        match self {
            PreTokenizer::Default => &[
                "[\\p{P}\\$\\+<=>\\^~\\|]+",
                GPT2,
                "\\p{N}+",
                "[0-9][0-9][0-9]",
            ],
            PreTokenizer::Gpt2 => &[GPT2],
            PreTokenizer::Llama3 => &[LLAMA3],
            PreTokenizer::Qwen2 => &[QWEN2],
            PreTokenizer::Qwen35 => &[QWEN35],
            PreTokenizer::Jais2 => &[
                "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
            ],
            PreTokenizer::DeepseekLlm => &[
                "[\r\n]",
                concat!(
                    "\\s?[A-Za-z\u{B5}\u{C0}-\u{D6}\u{D8}-\u{F6}\u{F8}-\u{1BA}\u{1BC}-\u{1BF}\u{1C4}-",
                    "\u{293}\u{295}-\u{2AF}\u{370}-\u{373}\u{376}\u{377}\u{37B}-\u{37D}\u{37F}\u{386}",
                    "\u{388}-\u{38A}\u{38C}\u{38E}-\u{3A1}\u{3A3}-\u{3F5}\u{3F7}-\u{481}\u{48A}-\u{52F}",
                    "\u{531}-\u{556}\u{10A0}-\u{10C5}\u{13A0}-\u{13F5}\u{13F8}-\u{13FD}\u{1C90}-\u{1CBA}",
                    "\u{1CBD}-\u{1CBF}\u{1D00}-\u{1D2B}\u{1D6B}-\u{1D77}\u{1D79}-\u{1D9A}\u{1E00}-",
                    "\u{1F15}\u{1F18}-\u{1F1D}\u{1F20}-\u{1F45}\u{1F48}-\u{1F4D}\u{1F50}-\u{1F57}\u{1F59}",
                    "\u{1F5B}\u{1F5D}\u{1F5F}-\u{1F7D}\u{1F80}-\u{1FB4}\u{1FB6}-\u{1FBC}\u{1FBE}\u{1FC2}-",
                    "\u{1FC4}\u{1FC6}-\u{1FCC}\u{1FD0}-\u{1FD3}\u{1FD6}-\u{1FDB}\u{1FE0}-\u{1FEC}\u{1FF2}",
                    "-\u{1FF4}\u{1FF6}-\u{1FFC}\u{2102}\u{2107}\u{210A}-\u{2113}\u{2115}\u{2119}-\u{211D}",
                    "\u{2124}\u{2126}\u{2128}\u{212A}-\u{212D}\u{212F}-\u{2134}\u{2139}\u{213C}-\u{213F}",
                    "\u{2145}-\u{2149}\u{214E}\u{2183}\u{2184}\u{2C00}-\u{2C7B}\u{2C7E}-\u{2CE4}\u{2CEB}-",
                    "\u{2CEE}\u{2CF2}\u{2CF3}\u{A640}-\u{A66D}\u{A680}-\u{A69B}\u{A722}-\u{A76F}\u{A771}-",
                    "\u{A787}\u{A78B}-\u{A78E}\u{AB70}-\u{ABBF}\u{FB00}-\u{FB06}\u{FB13}-\u{FB17}\u{FF21}",
                    "-\u{FF3A}\u{FF41}-\u{FF5A}\u{10400}-\u{1044F}\u{104B0}-\u{104D3}\u{104D8}-\u{104FB}",
                    "\u{10C80}-\u{10CB2}\u{10CC0}-\u{10CF2}\u{118A0}-\u{118DF}\u{1E900}-\u{1E943}]+",
                ),
                "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
                "\\s+$",
                "[一-龥ࠀ-一가-퟿]+",
                "\\p{N}+",
            ],
            PreTokenizer::Deepseek3 => &[
                "\\p{N}{1,3}",
                "[一-龥぀-ゟ゠-ヿ]+",
                "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
            ],
            PreTokenizer::Spark25 => &[
                "\\p{N}{1,3}",
                "[一-龥぀-ゟ゠-ヿ]+",
                "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
                "\\p{N}",
            ],
            PreTokenizer::Youtu => &[
                "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
                "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
            ],
            PreTokenizer::DeepseekCoder => &[
                "[\r\n]",
                "\\s?\\p{L}+",
                "\\s?\\p{P}+",
                "[一-龥ࠀ-一가-퟿]+",
                "\\p{N}",
            ],
            PreTokenizer::Falcon => &["[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2, "[0-9][0-9][0-9]"],
            PreTokenizer::Starcoder => &["\\p{N}", GPT2],
            PreTokenizer::Bloom => &[" ?[^(\\s|.,!?…。，、।۔،)]+"],
            PreTokenizer::Viking => &[" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"],
            PreTokenizer::Tekken => &[
                "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
            ],
            PreTokenizer::Chameleon => &[
                "<sentinel:[0-9]+>",
                "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                "([\\t\\n]|    |  )",
                "\\p{N}",
                "[\\p{P}!-/:-@\\[-`{-~]",
                GPT2,
            ],
            PreTokenizer::Gpt4o => &[
                "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
            ],
            PreTokenizer::GraniteEmbMulti => &[
                "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
            ],
            PreTokenizer::TinyAya => &[
                TINY_AYA_DIGITS,
                "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
            ],
            PreTokenizer::KimiK2 => &[KIMI_K2],
            PreTokenizer::Superbpe => &["\\p{N}+", "(?=(\\d{3})+(?!\\d))"],
            PreTokenizer::Bailingmoe => &[
                "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
            ],
            PreTokenizer::SeedCoder => &[
                "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
            ],
            PreTokenizer::Ufakzeka => &[
                "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
            ],
            PreTokenizer::Afmoe => &[
                AFMOE_DIGITS,
                "[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+",
                "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
            ],
            PreTokenizer::Laguna => &[NEWLINES, QWEN2],
            PreTokenizer::ExaoneMoe => &[
                "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
            ],
            PreTokenizer::Minicpm5 => &[
                "\\p{N}{1,3}",
                "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
            ],
        }
    }
}
