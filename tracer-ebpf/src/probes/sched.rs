//! Scheduler level: context switches and wake-ups of the target's threads, and the
//! thread set that says which threads those are.
//!
//! The thread set `TIDS` is seeded by the collector (the target's tids) and kept current
//! here: a thread the target creates (`task:task_newtask` in the target's thread group
//! with `CLONE_THREAD`) becomes a member, a member that exits is removed. Child
//! *processes* (fork, vfork, posix_spawn) are not members: they are other programs'
//! threads, not the engine's, and would put their scheduling into the engine's trace.

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid, macros::tracepoint, programs::TracePointContext,
};
use common::{
    control::LEVEL_SCHED,
    event::{COMM_LEN, EventKind, SchedSwitchEvent, SchedWakeupEvent, TaskEvent},
};

use crate::{
    emit::{ProbeResult, emit, enabled_any, header},
    maps::TIDS,
};

fn is_target(tid: u32) -> bool {
    // SAFETY: plain lookup, the value is not kept.
    unsafe { TIDS.get(tid) }.is_some()
}

// name: sched_switch
// field:char prev_comm[16];	offset:8;	size:16;	signed:0;
// field:pid_t prev_pid;	offset:24;	size:4;	signed:1;
// field:int prev_prio;	offset:28;	size:4;	signed:1;
// field:long prev_state;	offset:32;	size:8;	signed:1;
// field:char next_comm[16];	offset:40;	size:16;	signed:0;
// field:pid_t next_pid;	offset:56;	size:4;	signed:1;
// field:int next_prio;	offset:60;	size:4;	signed:1;
/// `sched:sched_switch`.
#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    let _ = try_sched_switch(&ctx);
    0
}

fn try_sched_switch(ctx: &TracePointContext) -> ProbeResult {
    if enabled_any(LEVEL_SCHED).is_none() {
        return Ok(());
    }
    // SAFETY: offsets from the tracepoint format above; reads go through the helper.
    let prev_tid: i32 = unsafe { ctx.read_at(24) }?;
    // SAFETY: as above.
    let next_tid: i32 = unsafe { ctx.read_at(56) }?;
    if !is_target(prev_tid as u32) && !is_target(next_tid as u32) {
        return Ok(());
    }
    let ev = SchedSwitchEvent {
        header: header(EventKind::SchedSwitch, 0),
        prev_tid: prev_tid as u32,
        next_tid: next_tid as u32,
        // SAFETY: as above.
        prev_prio: unsafe { ctx.read_at(28) }?,
        // SAFETY: as above.
        next_prio: unsafe { ctx.read_at(60) }?,
        // SAFETY: as above.
        prev_state: unsafe { ctx.read_at::<i64>(32) }? as u64,
        // SAFETY: as above.
        prev_comm: unsafe { ctx.read_at::<[u8; COMM_LEN]>(8) }?,
        // SAFETY: as above.
        next_comm: unsafe { ctx.read_at::<[u8; COMM_LEN]>(40) }?,
    };
    emit(ctx, &ev);
    Ok(())
}

// name: sched_wakeup (sched_wakeup_new has the same format)
// field:char comm[16];	offset:8;	size:16;	signed:0;
// field:pid_t pid;	offset:24;	size:4;	signed:1;
// field:int prio;	offset:28;	size:4;	signed:1;
// field:int target_cpu;	offset:32;	size:4;	signed:1;
fn wakeup(ctx: &TracePointContext, kind: EventKind) -> ProbeResult {
    if enabled_any(LEVEL_SCHED).is_none() {
        return Ok(());
    }
    // SAFETY: offsets from the tracepoint format above; reads go through the helper.
    let tid: i32 = unsafe { ctx.read_at(24) }?;
    if !is_target(tid as u32) {
        return Ok(());
    }
    let ev = SchedWakeupEvent {
        header: header(kind, 0),
        target_tid: tid as u32,
        // SAFETY: as above.
        prio: unsafe { ctx.read_at(28) }?,
        // SAFETY: as above.
        target_cpu: unsafe { ctx.read_at::<i32>(32) }? as u32,
        _pad: 0,
    };
    emit(ctx, &ev);
    Ok(())
}

/// `sched:sched_wakeup`.
#[tracepoint]
pub fn sched_wakeup(ctx: TracePointContext) -> u32 {
    let _ = wakeup(&ctx, EventKind::SchedWakeup);
    0
}

/// `sched:sched_wakeup_new`.
#[tracepoint]
pub fn sched_wakeup_new(ctx: TracePointContext) -> u32 {
    let _ = wakeup(&ctx, EventKind::SchedWakeupNew);
    0
}

/// `clone(2)`'s `CLONE_THREAD`: the new task shares the caller's thread group.
const CLONE_THREAD: u64 = 0x0001_0000;

/// `task:task_newtask`, in the creating task's context before the new task first runs:
/// the offsets of `pid` and `clone_flags` come from the format file (the `comm` field
/// before them changed between kernels), passed in the control record.
#[tracepoint]
pub fn task_newtask(ctx: TracePointContext) -> u32 {
    let _ = try_newtask(&ctx);
    0
}

fn try_newtask(ctx: &TracePointContext) -> ProbeResult {
    let Some(c) = crate::maps::CONTROL.get(0).copied() else {
        return Ok(());
    };
    let pid_tgid = bpf_get_current_pid_tgid();
    if c.target_tgid == 0 || (pid_tgid >> 32) as u32 != c.target_tgid {
        return Ok(());
    }
    // SAFETY: offsets come from the tracepoint's format file; reads go through the helper.
    let flags: u64 = unsafe { ctx.read_at(c.newtask_clone_flags_offset as usize) }?;
    if flags & CLONE_THREAD == 0 {
        return Ok(());
    }
    // SAFETY: as above.
    let child: i32 = unsafe { ctx.read_at(c.newtask_pid_offset as usize) }?;
    TIDS.insert(child as u32, 1, 0)?;
    let ev = TaskEvent {
        header: header(EventKind::TaskNew, 0),
        parent_tid: pid_tgid as u32,
        child_tid: child as u32,
    };
    emit(ctx, &ev);
    Ok(())
}

// name: sched_process_exit
// field:pid_t pid;	offset:24;	size:4;	signed:1;
/// `sched:sched_process_exit`.
#[tracepoint]
pub fn sched_process_exit(ctx: TracePointContext) -> u32 {
    let _ = try_exit(&ctx);
    0
}

fn try_exit(ctx: &TracePointContext) -> ProbeResult {
    // SAFETY: offset from the tracepoint format above.
    let tid: i32 = unsafe { ctx.read_at(24) }?;
    if !is_target(tid as u32) {
        return Ok(());
    }
    TIDS.remove(tid as u32)?;
    let ev = TaskEvent {
        header: header(EventKind::TaskExit, 0),
        parent_tid: tid as u32,
        child_tid: tid as u32,
    };
    emit(ctx, &ev);
    Ok(())
}
