//! Token level.
//!
//! Target: `i32 engine_decode(ctx *, u32 n_tokens, u32 pos, const i32 *tokens)`.

use aya_ebpf::{
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use common::{
    control::{CONTROL_FLAG_WAKE_ON_DECODE, LEVEL_TOKEN},
    event::{DecodeEvent, EVENT_FLAG_EXIT, EventKind},
};

use crate::{
    emit::{ProbeResult, current_tid, emit, emit_waking_if, enabled_for_target, header},
    maps::DECODE_STASH,
};

/// `engine_decode` entry.
#[uprobe]
pub fn engine_decode(ctx: ProbeContext) -> u32 {
    let _ = try_decode_enter(&ctx);
    0
}

fn try_decode_enter(ctx: &ProbeContext) -> ProbeResult {
    if enabled_for_target(LEVEL_TOKEN).is_none() {
        return Ok(());
    }
    let n_tokens = ctx.arg::<u32>(1).ok_or(-1i64)?;
    // The engine decodes one sequence (id 0) per call.
    let seqs = Seqs {
        n: 1,
        flags: 0,
        mask: 1,
        multi: u8::from(n_tokens > 1),
    };
    decode_enter(ctx, n_tokens, ctx.arg::<u32>(2).ok_or(-1i64)?, seqs)
}

/// The sequences of a decode call's batch ([`DecodeEvent::n_seqs`] and the fields after
/// it); all zero when not read.
#[derive(Clone, Copy, Default)]
pub(super) struct Seqs {
    pub n: u8,
    pub flags: u8,
    pub mask: u8,
    pub multi: u8,
}

/// A decode call's entry, for every target: stashes and emits the record.
pub(super) fn decode_enter(ctx: &ProbeContext, n_tokens: u32, pos: u32, seqs: Seqs) -> ProbeResult {
    let ev = DecodeEvent {
        header: header(EventKind::Decode, 0),
        n_tokens,
        pos,
        ret: 0,
        n_seqs: seqs.n,
        seq_flags: seqs.flags,
        seq_mask: seqs.mask,
        seq_multi: seqs.multi,
    };
    DECODE_STASH.insert(current_tid(), ev, 0)?;
    emit(ctx, &ev);
    Ok(())
}

/// `engine_decode` return.
#[uretprobe]
pub fn engine_decode_ret(ctx: RetProbeContext) -> u32 {
    let _ = decode_exit(&ctx);
    0
}

/// A decode call's return, for every target: closes the thread's stashed entry.
pub(super) fn decode_exit(ctx: &RetProbeContext) -> ProbeResult {
    let tid = current_tid();
    // SAFETY: the value is copied out before the entry is removed.
    let Some(mut ev) = (unsafe { DECODE_STASH.get(tid) }).copied() else {
        return Ok(());
    };
    DECODE_STASH.remove(tid)?;
    ev.header = header(EventKind::Decode, EVENT_FLAG_EXIT);
    ev.ret = ctx.ret::<i32>();
    // Wake the collector only for someone who reacts to tokens at once (QoS, live view).
    emit_waking_if(ctx, &ev, CONTROL_FLAG_WAKE_ON_DECODE);
    Ok(())
}
