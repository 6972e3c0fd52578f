//! A conversation with a model. Every turn renders the whole conversation through the
//! chat template and tokenizes it; the tokens it shares with what the KV cache already
//! holds are kept and only the rest is prefilled, as llama.cpp's chat examples do (they
//! diff the rendered text; comparing tokens also survives a reply whose tokens are not
//! the canonical tokenization of its text, and a template that rewrites earlier turns).

use super::ChatError;
use super::template::{ChatTemplate, Message, Role};
use crate::context::Context;
use crate::generate::{GenerateParams, Generation, generate};
use crate::sampler::Sampler;
use crate::utf8_stream::Utf8Stream;

/// Why a reply ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced an end-of-generation token (EOS, EOT, `<|im_end|>`, ...).
    EndOfTurn,
    /// The reply reached the caller's token limit.
    MaxTokens,
    /// The context filled up.
    ContextFull,
}

impl StopReason {
    /// Name in JSON output (`end_of_turn`, `max_tokens`, `context_full`).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndOfTurn => "end_of_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::ContextFull => "context_full",
        }
    }
}

/// One answered turn.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The reply's text (without the end-of-generation token), as streamed.
    pub text: String,
    /// The conversation as rendered for this turn.
    pub prompt: String,
    /// Tokens of `prompt`.
    pub prompt_tokens: Vec<u32>,
    /// Leading tokens of `prompt_tokens` whose K/V were already cached.
    pub n_reused: usize,
    /// The generation: its `prompt_tokens` are the ones prefilled this turn.
    pub generation: Generation,
    /// Why the reply ended.
    pub stop: StopReason,
}

/// A conversation: its messages, and the tokens whose K/V the context holds.
pub struct ChatSession {
    ctx: Context,
    template: ChatTemplate,
    system: Option<String>,
    messages: Vec<Message>,
    /// Tokens in the KV cache, in order: always `ctx.n_past()` long.
    cached: Vec<u32>,
}

impl std::fmt::Debug for ChatSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatSession")
            .field("messages", &self.messages.len())
            .field("cached", &self.cached.len())
            .finish()
    }
}

impl ChatSession {
    /// A new conversation on `ctx` (whose cache is cleared), opened by the `system`
    /// message if one is given.
    pub fn new(mut ctx: Context, template: ChatTemplate, system: Option<String>) -> ChatSession {
        ctx.clear();
        let mut session = ChatSession {
            ctx,
            template,
            system,
            messages: Vec::new(),
            cached: Vec::new(),
        };
        session.reset();
        session
    }

    /// Forgets the conversation except the system message. The KV cache keeps its
    /// tokens: the next turn reuses whatever prefix it shares with them.
    pub fn reset(&mut self) {
        self.messages.clear();
        if let Some(system) = &self.system {
            self.messages
                .push(Message::new(Role::System, system.clone()));
        }
    }

    /// The messages so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The template.
    pub fn template(&self) -> &ChatTemplate {
        &self.template
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Tokens whose K/V are cached.
    pub fn n_cached(&self) -> usize {
        self.cached.len()
    }

    /// Adds the user's message and generates the assistant's reply, at most `max_tokens`
    /// tokens (`None`: until the end of the turn or of the context), streaming its text
    /// in valid UTF-8 chunks to `on_text`.
    ///
    /// On error the conversation is as before the call.
    ///
    /// # Errors
    ///
    /// [`ChatError::TemplateRender`], [`ChatError::EmptyPrompt`],
    /// [`ChatError::ContextFull`] when the rendered conversation alone fills the context,
    /// or [`ChatError::Engine`].
    pub fn turn(
        &mut self,
        user: &str,
        sampler: &mut Sampler,
        max_tokens: Option<usize>,
        on_text: impl FnMut(&str),
    ) -> Result<Reply, ChatError> {
        self.messages.push(Message::new(Role::User, user));
        match self.reply(sampler, max_tokens, on_text) {
            Ok(reply) => {
                self.messages
                    .push(Message::new(Role::Assistant, reply.text.clone()));
                Ok(reply)
            }
            Err(e) => {
                self.messages.pop();
                // Whatever a failed decode left behind is not in `cached`.
                self.ctx.truncate(self.cached.len());
                Err(e)
            }
        }
    }

    /// Tokens of a rendered conversation. A BOS (EOS) text the template wrote itself is
    /// dropped when the tokenizer adds that token anyway, so it is not doubled — what
    /// llama.cpp's `common_chat_template_direct_apply` does.
    pub fn tokenize(&self, rendered: &str) -> Vec<u32> {
        let tokenizer = &self.ctx.model().tokenizer;
        let mut text = rendered;
        let (bos, eos) = (self.template.bos_token(), self.template.eos_token());
        if tokenizer.add_bos() && !bos.is_empty() {
            text = text.strip_prefix(bos).unwrap_or(text);
        }
        if tokenizer.add_eos() && !eos.is_empty() {
            text = text.strip_suffix(eos).unwrap_or(text);
        }
        tokenizer.tokenize(text, true, true)
    }

    fn reply(
        &mut self,
        sampler: &mut Sampler,
        max_tokens: Option<usize>,
        mut on_text: impl FnMut(&str),
    ) -> Result<Reply, ChatError> {
        let prompt = self.template.render(&self.messages, true)?;
        let tokens = self.tokenize(&prompt);
        if tokens.is_empty() {
            return Err(ChatError::EmptyPrompt);
        }
        let n_ctx = self.ctx.n_ctx();
        if tokens.len() > n_ctx {
            return Err(ChatError::ContextFull {
                n_tokens: tokens.len(),
                n_ctx,
                n_ctx_train: self.ctx.model().config.n_ctx_train,
            });
        }
        // Keep the cached prefix, but decode at least the last prompt token again: its
        // logits pick the first reply token.
        let n_reused = common_prefix(&self.cached, &tokens).min(tokens.len() - 1);
        self.cached.truncate(n_reused);
        self.ctx.truncate(n_reused);
        let suffix: Vec<i32> = tokens[n_reused..].iter().map(|&t| t as i32).collect();

        // After the prompt every generated token but the last takes a position.
        let room = n_ctx - tokens.len() + 1;
        let n_predict = max_tokens.map_or(room, |m| m.min(room));
        let model = self.ctx.model().clone();
        let tokenizer = &model.tokenizer;
        let mut stream = Utf8Stream::new();
        let mut text = String::new();
        let mut emit = |chunk: String| {
            if !chunk.is_empty() {
                on_text(&chunk);
                text.push_str(&chunk);
            }
        };
        let params = GenerateParams {
            n_predict,
            ignore_eos: false,
        };
        let generation = generate(&mut self.ctx, &suffix, &params, sampler, |tok| {
            if !tokenizer.is_eog(tok as u32) {
                emit(stream.push(tokenizer.token_to_piece(tok as u32, false)));
            }
        })?;
        emit(stream.finish());

        self.cached.extend(&tokens[n_reused..]);
        let generated = &generation.generated_tokens;
        let decoded = generated.len().saturating_sub(1);
        self.cached
            .extend(generated[..decoded].iter().map(|&t| t as u32));
        debug_assert_eq!(self.cached.len(), self.ctx.n_past());

        let stop = match generated.last() {
            Some(&t) if tokenizer.is_eog(t as u32) => StopReason::EndOfTurn,
            _ if n_predict < max_tokens.unwrap_or(usize::MAX) => StopReason::ContextFull,
            _ => StopReason::MaxTokens,
        };
        Ok(Reply {
            text,
            prompt,
            prompt_tokens: tokens,
            n_reused,
            generation,
            stop,
        })
    }
}

/// Length of the longest common prefix of `a` and `b`.
fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_prefix_stops_at_the_first_difference() {
        assert_eq!(common_prefix(&[1, 2, 3], &[1, 2, 4, 5]), 2);
        assert_eq!(common_prefix(&[], &[1]), 0);
        assert_eq!(common_prefix(&[1, 2], &[1, 2, 3]), 2);
        assert_eq!(common_prefix(&[1, 2, 3], &[1, 2]), 2);
    }
}
