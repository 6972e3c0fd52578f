//! The collector's clocks: the trace clock (`CLOCK_MONOTONIC`, what `bpf_ktime_get_ns`
//! reads) and the wall clock, and the header of the records the collector makes itself.

use common::event::{EventHeader, EventKind};

/// `CLOCK_MONOTONIC` and `CLOCK_REALTIME` now, ns.
pub fn clocks() -> (u64, i64) {
    let mut mono = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let mut real = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointers.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut mono);
        libc::clock_gettime(libc::CLOCK_REALTIME, &mut real);
    }
    let m = mono.tv_sec as u64 * 1_000_000_000 + mono.tv_nsec as u64;
    let r = real.tv_sec * 1_000_000_000 + real.tv_nsec;
    (m, r)
}

/// The header of a record the collector makes itself (kind `kind`, stamped now).
pub fn collector_header(kind: EventKind, pid: u32, tid: u32, cpu: u32) -> EventHeader {
    EventHeader {
        kind: kind as u32,
        flags: 0,
        ts_ns: clocks().0,
        pid,
        tid,
        cpu,
        _pad: 0,
    }
}
