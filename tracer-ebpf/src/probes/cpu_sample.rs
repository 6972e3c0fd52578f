//! Sampling level (`--sample HZ`): a perf-event program on every CPU's `cpu-clock`
//! timer. When the timer interrupts a thread of the target it sends the thread's user
//! stack ([`CpuSampleEvent`]); the collector names the operator from its frames and
//! counts. Other processes' samples return at the first test.

use aya_ebpf::{
    EbpfContext, bindings::BPF_F_USER_STACK, helpers::generated::bpf_get_stack, macros::perf_event,
    programs::PerfEventContext,
};
use common::{
    control::LEVEL_SAMPLE,
    event::{CpuSampleEvent, EventKind, SAMPLE_FRAMES},
};

use crate::emit::{emit_sample, enabled_for_target, header};

/// `cpu-clock` sample on one CPU.
#[perf_event]
pub fn cpu_sample(ctx: PerfEventContext) -> u32 {
    if enabled_for_target(LEVEL_SAMPLE).is_none() {
        return 0;
    }
    let mut ev = CpuSampleEvent {
        header: header(EventKind::CpuSample, 0),
        n_frames: 0,
        _pad: 0,
        ips: [0; SAMPLE_FRAMES],
    };
    // SAFETY: `ips` is a writable buffer of the size passed; the helper writes at most
    // that many bytes and returns how many it wrote (or a negative errno).
    let n = unsafe {
        bpf_get_stack(
            ctx.as_ptr(),
            ev.ips.as_mut_ptr().cast(),
            (8 * SAMPLE_FRAMES) as u32,
            BPF_F_USER_STACK as u64,
        )
    };
    if n <= 0 {
        // No user stack (a kernel thread never is the target; a thread in its first
        // instructions may have none yet): nothing to attribute.
        return 0;
    }
    ev.n_frames = (n as u32) / 8;
    emit_sample(&ctx, &ev);
    0
}
