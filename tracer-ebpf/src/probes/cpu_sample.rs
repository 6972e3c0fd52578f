//! Sampling level (`--sample HZ`): a perf-event program on every CPU's `cpu-clock`
//! timer. When the timer interrupts a thread of the target it sends the thread's user
//! stack ([`CpuSampleEvent`]): the frames `bpf_get_stack` walks by frame pointer and the
//! stack's first words, read from the stack pointer, for the collector to scan for
//! return addresses where the code keeps no frame pointers. The collector names the
//! operator and counts. Other processes' samples return at the first test.

use aya_ebpf::{
    EbpfContext,
    bindings::BPF_F_USER_STACK,
    helpers::generated::{bpf_get_stack, bpf_probe_read_user},
    macros::perf_event,
    programs::PerfEventContext,
};
use common::{
    control::LEVEL_SAMPLE,
    event::{CpuSampleEvent, EventKind, SAMPLE_FRAMES, SAMPLE_STACK_WORDS},
};

use crate::emit::{emit_sample_to_ring, enabled_for_target, header};

/// Lowest address of the kernel half on the 64-bit targets (x86-64, arm64): a stack
/// pointer above it is the kernel's (the timer interrupted a system call).
const KERNEL_HALF: u64 = 1 << 63;

/// `cpu-clock` sample on one CPU.
#[perf_event]
pub fn cpu_sample(ctx: PerfEventContext) -> u32 {
    if enabled_for_target(LEVEL_SAMPLE).is_none() {
        return 0;
    }
    let sp = stack_pointer(&ctx);
    emit_sample_to_ring(|ev: &mut CpuSampleEvent| {
        ev.header = header(EventKind::CpuSample, 0);
        // SAFETY: `ips` is a writable buffer of the size passed; the helper writes at
        // most that many bytes and returns how many it wrote (or a negative errno).
        let n = unsafe {
            bpf_get_stack(
                ctx.as_ptr(),
                ev.ips.as_mut_ptr().cast(),
                (8 * SAMPLE_FRAMES) as u32,
                BPF_F_USER_STACK as u64,
            )
        };
        if n <= 0 {
            // No user stack (a thread in its first instructions): nothing to attribute.
            return false;
        }
        ev.n_frames = (n as u32) / 8;
        if sp != 0 && sp < KERNEL_HALF {
            // SAFETY: `stack` is writable for the size passed; the helper reads user
            // memory and fails (leaving zeros) where it is not mapped.
            let read = unsafe {
                bpf_probe_read_user(
                    ev.stack.as_mut_ptr().cast(),
                    (8 * SAMPLE_STACK_WORDS) as u32,
                    sp as *const core::ffi::c_void,
                )
            };
            if read == 0 {
                ev.stack_words = SAMPLE_STACK_WORDS as u32;
            }
        }
        true
    });
    0
}

/// The interrupted context's stack pointer.
#[inline(always)]
fn stack_pointer(ctx: &PerfEventContext) -> u64 {
    // SAFETY: `ctx.ctx` is the program's context, valid for its run; its registers are
    // the interrupted task's.
    #[cfg(bpf_target_arch = "x86_64")]
    let sp = unsafe { (*ctx.ctx).regs.rsp };
    // SAFETY: as above.
    #[cfg(bpf_target_arch = "aarch64")]
    let sp = unsafe { (*ctx.ctx).regs.sp };
    #[cfg(not(any(bpf_target_arch = "x86_64", bpf_target_arch = "aarch64")))]
    let sp = {
        let _ = ctx;
        0u64
    };
    sp
}
