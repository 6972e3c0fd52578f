//! Phase level: one tiny program per `engine_phase_*` symbol (the symbol fixes the event
//! kind; aya 0.14 has no uprobe cookies), all sharing one body.
//!
//! Targets:
//! - `void engine_phase_embed(ctx *, const i32 *tokens, u32 n_tokens, f32 *out)`
//! - `void engine_phase_copy_logits(f32 *dst, const f32 *src, u32 n)`
//! - `void engine_phase_softmax(const f32 *logits, f32 *probs, u32 n_vocab, f32 temp)`
//! - `i32 engine_phase_sample(sampler *, const f32 *probs, u32 n_vocab)`
//! - `engine_phase_kv_{compress,swap_out,swap_in,decompress}(swap *, u32 layer, u32 chunk,
//!   u32 bytes)`: the KV budget's steps, with the bytes each moves
//! - llama.cpp: `llama_token llama_sampler_sample(smpl, ctx, int32_t idx)` (the sample
//!   phase, without a size).

use aya_ebpf::{
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use common::{
    control::LEVEL_PHASE,
    event::{EVENT_FLAG_EXIT, EventKind, PhaseEvent},
};

use crate::emit::{emit, enabled_for_target, header};

/// A phase entry whose size argument is argument `size_arg` (`None`: no size, 0).
/// Inlined: the verifier refuses a context read in a BPF-to-BPF callee.
#[inline(always)]
fn phase_enter(ctx: &ProbeContext, kind: EventKind, size_arg: Option<usize>) {
    if enabled_for_target(LEVEL_PHASE).is_none() {
        return;
    }
    let ev = PhaseEvent {
        header: header(kind, 0),
        arg: size_arg.and_then(|i| ctx.arg::<u32>(i)).unwrap_or(0),
        ret: 0,
    };
    emit(ctx, &ev);
}

#[inline(always)]
fn phase_exit(ctx: &RetProbeContext, kind: EventKind) {
    if enabled_for_target(LEVEL_PHASE).is_none() {
        return;
    }
    let ev = PhaseEvent {
        header: header(kind, EVENT_FLAG_EXIT),
        arg: 0,
        ret: ctx.ret::<i32>(),
    };
    emit(ctx, &ev);
}

/// `engine_phase_embed` entry.
#[uprobe]
pub fn engine_phase_embed(ctx: ProbeContext) -> u32 {
    phase_enter(&ctx, EventKind::PhaseEmbed, Some(2));
    0
}

/// `engine_phase_embed` return.
#[uretprobe]
pub fn engine_phase_embed_ret(ctx: RetProbeContext) -> u32 {
    phase_exit(&ctx, EventKind::PhaseEmbed);
    0
}

/// `engine_phase_copy_logits` entry.
#[uprobe]
pub fn engine_phase_copy_logits(ctx: ProbeContext) -> u32 {
    phase_enter(&ctx, EventKind::PhaseCopyLogits, Some(2));
    0
}

/// `engine_phase_copy_logits` return.
#[uretprobe]
pub fn engine_phase_copy_logits_ret(ctx: RetProbeContext) -> u32 {
    phase_exit(&ctx, EventKind::PhaseCopyLogits);
    0
}

/// `engine_phase_softmax` entry.
#[uprobe]
pub fn engine_phase_softmax(ctx: ProbeContext) -> u32 {
    phase_enter(&ctx, EventKind::PhaseSoftmax, Some(2));
    0
}

/// `engine_phase_softmax` return.
#[uretprobe]
pub fn engine_phase_softmax_ret(ctx: RetProbeContext) -> u32 {
    phase_exit(&ctx, EventKind::PhaseSoftmax);
    0
}

/// `engine_phase_sample` entry.
#[uprobe]
pub fn engine_phase_sample(ctx: ProbeContext) -> u32 {
    phase_enter(&ctx, EventKind::PhaseSample, Some(2));
    0
}

/// `engine_phase_sample` return.
#[uretprobe]
pub fn engine_phase_sample_ret(ctx: RetProbeContext) -> u32 {
    phase_exit(&ctx, EventKind::PhaseSample);
    0
}

/// `engine_phase_kv_compress` entry (`arg` = bytes).
#[uprobe]
pub fn engine_phase_kv_compress(ctx: ProbeContext) -> u32 {
    phase_enter(&ctx, EventKind::PhaseKvCompress, Some(3));
    0
}

/// `engine_phase_kv_compress` return.
#[uretprobe]
pub fn engine_phase_kv_compress_ret(ctx: RetProbeContext) -> u32 {
    phase_exit(&ctx, EventKind::PhaseKvCompress);
    0
}

/// `engine_phase_kv_swap_out` entry (`arg` = bytes).
#[uprobe]
pub fn engine_phase_kv_swap_out(ctx: ProbeContext) -> u32 {
    phase_enter(&ctx, EventKind::PhaseKvSwapOut, Some(3));
    0
}

/// `engine_phase_kv_swap_out` return.
#[uretprobe]
pub fn engine_phase_kv_swap_out_ret(ctx: RetProbeContext) -> u32 {
    phase_exit(&ctx, EventKind::PhaseKvSwapOut);
    0
}

/// `engine_phase_kv_swap_in` entry (`arg` = bytes).
#[uprobe]
pub fn engine_phase_kv_swap_in(ctx: ProbeContext) -> u32 {
    phase_enter(&ctx, EventKind::PhaseKvSwapIn, Some(3));
    0
}

/// `engine_phase_kv_swap_in` return.
#[uretprobe]
pub fn engine_phase_kv_swap_in_ret(ctx: RetProbeContext) -> u32 {
    phase_exit(&ctx, EventKind::PhaseKvSwapIn);
    0
}

/// `engine_phase_kv_decompress` entry (`arg` = bytes).
#[uprobe]
pub fn engine_phase_kv_decompress(ctx: ProbeContext) -> u32 {
    phase_enter(&ctx, EventKind::PhaseKvDecompress, Some(3));
    0
}

/// `engine_phase_kv_decompress` return.
#[uretprobe]
pub fn engine_phase_kv_decompress_ret(ctx: RetProbeContext) -> u32 {
    phase_exit(&ctx, EventKind::PhaseKvDecompress);
    0
}

/// llama.cpp's `llama_sampler_sample` entry (the sample phase).
#[uprobe]
pub fn llama_sampler_sample(ctx: ProbeContext) -> u32 {
    phase_enter(&ctx, EventKind::PhaseSample, None);
    0
}

/// llama.cpp's `llama_sampler_sample` return: the sampled token.
#[uretprobe]
pub fn llama_sampler_sample_ret(ctx: RetProbeContext) -> u32 {
    phase_exit(&ctx, EventKind::PhaseSample);
    0
}
