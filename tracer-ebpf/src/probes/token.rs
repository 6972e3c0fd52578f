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
    decode_enter(
        ctx,
        ctx.arg::<u32>(1).ok_or(-1i64)?,
        ctx.arg::<u32>(2).ok_or(-1i64)?,
    )
}

/// A decode call's entry, for every target: stashes and emits the record.
pub(super) fn decode_enter(ctx: &ProbeContext, n_tokens: u32, pos: u32) -> ProbeResult {
    let ev = DecodeEvent {
        header: header(EventKind::Decode, 0),
        n_tokens,
        pos,
        ret: 0,
        _pad: 0,
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
