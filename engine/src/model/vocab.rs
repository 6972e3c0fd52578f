//! Maps a GGUF file's `tokenizer.ggml.*` metadata onto the tokenizer's [`Vocab`] (both
//! directions: reading models, and writing generated ones).

use engine_gguf::{GgufError, GgufFile};
use engine_tokenizer::Vocab;

/// Reads the tokenizer metadata of `file`.
pub fn vocab_from_gguf(file: &GgufFile) -> Result<Vocab, GgufError> {
    let k = |s: &str| format!("tokenizer.ggml.{s}");
    Ok(Vocab {
        model: file.get_str(&k("model"))?.to_owned(),
        pre: file.opt_str(&k("pre"))?.map(str::to_owned),
        tokens: file.get_str_array(&k("tokens"))?.to_vec(),
        scores: if file.metadata().contains_key(&k("scores")) {
            Some(file.get_f32_array(&k("scores"))?.to_vec())
        } else {
            None
        },
        token_types: if file.metadata().contains_key(&k("token_type")) {
            Some(file.get_i32_array(&k("token_type"))?.to_vec())
        } else {
            None
        },
        merges: if file.metadata().contains_key(&k("merges")) {
            Some(file.get_str_array(&k("merges"))?.to_vec())
        } else {
            None
        },
        bos_token_id: file.opt_u32(&k("bos_token_id"))?,
        eos_token_id: file.opt_u32(&k("eos_token_id"))?,
        eot_token_id: file.opt_u32(&k("eot_token_id"))?,
        unknown_token_id: file.opt_u32(&k("unknown_token_id"))?,
        padding_token_id: file.opt_u32(&k("padding_token_id"))?,
        add_bos_token: file.opt_bool(&k("add_bos_token"))?,
        add_eos_token: file.opt_bool(&k("add_eos_token"))?,
        add_space_prefix: file.opt_bool(&k("add_space_prefix"))?,
    })
}
