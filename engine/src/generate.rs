//! The generation loop: chunked prefill of the prompt, then one decode step per token,
//! with the timings users compare engines by (TTFT, TPOT, prefill and decode tokens/s).

use std::time::Instant;

use serde::Serialize;

use crate::context::Context;
use crate::error::EngineError;
use crate::sampler::Sampler;

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenerateParams {
    /// Tokens to generate.
    pub n_predict: usize,
    /// Keep going after an end-of-generation token.
    pub ignore_eos: bool,
}

/// Timings of one generation.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Timings {
    /// Time to first token: prefill plus the first sampling, in ms.
    pub ttft_ms: f64,
    /// Mean time per output token after the first, in ms.
    pub tpot_ms: f64,
    /// Time spent prefilling the prompt, in ms.
    pub prefill_ms: f64,
    /// Time spent in decode steps (decode + sampling), in ms.
    pub decode_ms: f64,
    /// Prompt tokens per second of prefill.
    pub prefill_tokens_per_s: f64,
    /// Generated tokens per second of decode steps.
    pub decode_tokens_per_s: f64,
    /// Prompt tokens.
    pub n_prompt: usize,
    /// Generated tokens.
    pub n_generated: usize,
}

/// A finished generation.
#[derive(Clone, Debug, Serialize)]
pub struct Generation {
    /// Prompt token ids.
    pub prompt_tokens: Vec<i32>,
    /// Generated token ids.
    pub generated_tokens: Vec<i32>,
    /// Timings.
    pub timings: Timings,
}

/// Prefills `tokens` in chunks of at most the context's batch size. Leaves the logits
/// of the last token in the context.
pub fn prefill(ctx: &mut Context, tokens: &[i32]) -> Result<(), EngineError> {
    if tokens.is_empty() {
        return Err(EngineError::EmptyPrompt);
    }
    for chunk in tokens.chunks(ctx.n_batch()) {
        ctx.decode(chunk)?;
    }
    Ok(())
}

/// Generates up to `params.n_predict` tokens after `prompt`, calling `on_token` for each.
pub fn generate(
    ctx: &mut Context,
    prompt: &[i32],
    params: &GenerateParams,
    sampler: &mut Sampler,
    mut on_token: impl FnMut(i32),
) -> Result<Generation, EngineError> {
    ctx.check_fits(prompt.len() + params.n_predict.saturating_sub(1))?;
    let start = Instant::now();
    prefill(ctx, prompt)?;
    let prefill_done = Instant::now();
    let mut generated = Vec::with_capacity(params.n_predict);
    let mut first_token_at = prefill_done;
    if params.n_predict > 0 {
        let tok = sampler.sample(ctx.logits());
        first_token_at = Instant::now();
        generated.push(tok);
        on_token(tok);
        let tokenizer = &ctx.model().tokenizer;
        let mut stop = !params.ignore_eos && tokenizer.is_eog(tok as u32);
        while !stop && generated.len() < params.n_predict {
            let last = *generated.last().expect("at least one token");
            ctx.decode(&[last])?;
            let tok = sampler.sample(ctx.logits());
            generated.push(tok);
            on_token(tok);
            stop = !params.ignore_eos && ctx.model().tokenizer.is_eog(tok as u32);
        }
    }
    let end = Instant::now();
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let prefill_ms = ms(prefill_done - start);
    let decode_ms = ms(end - first_token_at);
    let steps = generated.len().saturating_sub(1);
    let timings = Timings {
        ttft_ms: ms(first_token_at - start),
        tpot_ms: if steps > 0 {
            decode_ms / steps as f64
        } else {
            0.0
        },
        prefill_ms,
        decode_ms,
        prefill_tokens_per_s: per_s(prompt.len(), prefill_ms),
        decode_tokens_per_s: per_s(steps, decode_ms),
        n_prompt: prompt.len(),
        n_generated: generated.len(),
    };
    Ok(Generation {
        prompt_tokens: prompt.to_vec(),
        generated_tokens: generated,
        timings,
    })
}

/// `n` per second over `ms` milliseconds (0 when nothing was timed).
pub fn per_s(n: usize, ms: f64) -> f64 {
    if ms > 0.0 { n as f64 / (ms / 1e3) } else { 0.0 }
}
