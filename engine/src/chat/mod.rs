//! Chatting with a model: its chat template ([`template`]), a conversation that keeps its
//! tokens in the KV cache from turn to turn ([`session`]), and the line-based loop of
//! `engine chat` ([`repl`]).
//!
//! Layered above [`crate::model`] and [`crate::generate`], below the binary.
//!
//! ```no_run
//! use std::sync::Arc;
//! use engine::chat::{ChatSession, ChatTemplate};
//! use engine::sampler::{Sampler, SamplerParams};
//! use engine::{Context, ContextParams, Model};
//!
//! let model = Arc::new(Model::load("model.gguf")?);
//! let template = ChatTemplate::from_model(&model)?;
//! let ctx = Context::new(model, &ContextParams::default())?;
//! let mut chat = ChatSession::new(ctx, template, None);
//! let mut sampler = Sampler::new(SamplerParams::default());
//! let reply = chat.turn("What is the capital of France?", &mut sampler, None, |text| {
//!     print!("{text}")
//! })?;
//! println!("\n({} tokens)", reply.generation.generated_tokens.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod known_templates;
pub mod repl;
pub mod session;
pub mod template;

pub use session::{ChatSession, Reply, StopReason};
pub use template::{ChatTemplate, Message, Role, TemplateOrigin};

use crate::error::EngineError;

/// Everything that can go wrong chatting.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    // === Templates ===
    /// `tokenizer.chat_template` is present but not a string.
    #[error("the model's tokenizer.chat_template is not a string")]
    TemplateNotText,
    /// The template is longer than [`template::MAX_TEMPLATE_BYTES`].
    #[error("the chat template is {len} bytes long, more than the limit of {max}")]
    TemplateTooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The template is not valid Jinja.
    #[error("the chat template does not parse: {message}")]
    TemplateSyntax {
        /// minijinja's description, with the template line.
        message: String,
    },
    /// The template failed while rendering the conversation.
    #[error("the chat template failed to render the conversation: {message}")]
    TemplateRender {
        /// minijinja's description, with the template line.
        message: String,
    },
    /// The template rendered nothing to prefill.
    #[error("the chat template rendered an empty prompt")]
    EmptyPrompt,

    // === Conversations ===
    /// The conversation no longer fits the context.
    #[error(
        "the conversation needs {n_tokens} tokens but the context holds {n_ctx}: /reset starts a new one (or enlarge the context with -c, up to the model's {n_ctx_train})"
    )]
    ContextFull {
        /// Tokens of the rendered conversation.
        n_tokens: usize,
        /// Context size in use.
        n_ctx: usize,
        /// Context length the model was trained with.
        n_ctx_train: usize,
    },
    /// Running the model failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}
