//! A loaded model: the memory-mapped GGUF file, its hyper-parameters, its weights as leaf
//! nodes and its tokenizer.

pub mod arch;
pub mod build;
pub mod config;
pub mod ffn;
mod nodes;
pub mod tensors;
pub mod vocab;
pub mod weights;

use std::path::Path;

use engine_gguf::GgufFile;
use engine_tokenizer::Tokenizer;

pub use config::ModelConfig;
pub use weights::{Repack, Weights};

use crate::error::EngineError;

/// A model ready to run. The weights point into `file`'s memory map, which lives as long
/// as the model.
pub struct Model {
    /// Hyper-parameters.
    pub config: ModelConfig,
    /// Weights (leaf nodes over the mapped file).
    pub weights: Weights,
    /// Tokenizer from the file's metadata.
    pub tokenizer: Tokenizer,
    /// The mapped file (kept alive for `weights`).
    file: GgufFile,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("config", &self.config)
            .field("weights", &self.weights)
            .finish()
    }
}

impl Model {
    /// Loads the GGUF model at `path`, repacking quantized matrices for the CPU backend.
    pub fn load(path: impl AsRef<Path>) -> Result<Model, EngineError> {
        Model::load_with(path, Repack::On)
    }

    /// Loads the GGUF model at `path` with an explicit [`Repack`] choice.
    pub fn load_with(path: impl AsRef<Path>, repack: Repack) -> Result<Model, EngineError> {
        let path = path.as_ref();
        let gguf = |source| EngineError::Gguf {
            path: path.to_owned(),
            source,
        };
        let file = GgufFile::open(path).map_err(gguf)?;
        let config = ModelConfig::from_gguf(&file, path)?;
        let vocab = vocab::vocab_from_gguf(&file).map_err(gguf)?;
        let tokenizer = Tokenizer::new(vocab)?;
        if tokenizer.n_vocab() != config.n_vocab {
            return Err(EngineError::HyperParameter {
                key: "tokenizer.ggml.tokens".into(),
                why: format!(
                    "{} tokens, but the model has a vocabulary of {}",
                    tokenizer.n_vocab(),
                    config.n_vocab
                ),
            });
        }
        let weights = Weights::load(&file, &config, path, repack)?;
        Ok(Model {
            config,
            weights,
            tokenizer,
            file,
        })
    }

    /// Reads only the tokenizer of the GGUF file at `path` (as llama.cpp's `vocab_only`
    /// load): works on files whose weights the engine cannot run, or that have none.
    pub fn load_tokenizer(path: impl AsRef<Path>) -> Result<Tokenizer, EngineError> {
        let path = path.as_ref();
        let gguf = |source| EngineError::Gguf {
            path: path.to_owned(),
            source,
        };
        let file = GgufFile::open(path).map_err(gguf)?;
        let vocab = vocab::vocab_from_gguf(&file).map_err(gguf)?;
        Ok(Tokenizer::new(vocab)?)
    }

    /// The underlying GGUF file.
    pub fn gguf(&self) -> &GgufFile {
        &self.file
    }
}
