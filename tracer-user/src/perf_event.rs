//! `perf_event_open(2)` as the collector uses it: per-thread counters (`pmc`) and
//! uprobes with a reference counter (`counted_uprobe`).

use std::os::fd::{FromRawFd, OwnedFd};

/// `PERF_FLAG_FD_CLOEXEC`.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `PERF_ATTR_SIZE_VER7`.
const PERF_ATTR_SIZE: u32 = 128;

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER7`; the fields the collector sets,
/// everything else (flags included) zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PerfEventAttr {
    /// `type`: the PMU.
    pub perf_type: u32,
    size: u32,
    /// `config`: the event (a uprobe's reference-counter offset in bits 32..).
    pub config: u64,
    /// `sample_period`.
    pub sample_period: u64,
    _sample_type_to_bp_type: [u64; 4],
    /// `config1` (a uprobe's path, as a pointer to a C string).
    pub config1: u64,
    /// `config2` (a uprobe's file offset).
    pub config2: u64,
    _rest: [u64; 7],
}
const _: () = assert!(size_of::<PerfEventAttr>() == PERF_ATTR_SIZE as usize);
const _: () = assert!(core::mem::offset_of!(PerfEventAttr, config1) == 56);
const _: () = assert!(core::mem::offset_of!(PerfEventAttr, config2) == 64);

impl PerfEventAttr {
    /// An attribute of PMU `perf_type` with `config`, the rest zero.
    pub fn new(perf_type: u32, config: u64) -> PerfEventAttr {
        PerfEventAttr {
            perf_type,
            size: PERF_ATTR_SIZE,
            config,
            ..PerfEventAttr::default()
        }
    }
}

/// `perf_event_open(attr, pid, cpu, group = -1, FD_CLOEXEC)`.
pub fn open(attr: &PerfEventAttr, pid: i32, cpu: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: `attr` is a valid perf_event_attr of the size it declares; any pointers it
    // carries (a uprobe's path) are the caller's and live across the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            std::ptr::from_ref(attr),
            pid,
            cpu,
            -1i32,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh fd owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
