//! Uprobes with a reference counter (a USDT "semaphore"): the kernel counts a 16-bit
//! variable in the probed file up while the uprobe is attached and down when it goes
//! (the fd closed, or the tracer dead), in every process that maps the file. A target
//! reads it to do work only a tracer wants — the engine takes its node ends only then
//! (`engine_op_times`).
//!
//! aya 0.14 has no reference counters, so the uprobe is opened here through the `uprobe`
//! PMU (`perf_event_open` with `config1` the path, `config2` the file offset and the
//! counter's file offset in `config` bits 32.., kernels ≥ 4.20) and the loaded program
//! attached with `PERF_EVENT_IOC_SET_BPF`.

use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use object::{Object, ObjectSection, ObjectSymbol};

use crate::perf_event::{self, PerfEventAttr};

/// `PERF_EVENT_IOC_ENABLE`.
const PERF_EVENT_IOC_ENABLE: u64 = 0x2400;
/// `PERF_EVENT_IOC_SET_BPF` (`_IOW('$', 8, u32)`).
const PERF_EVENT_IOC_SET_BPF: u64 = 0x4004_2408;
/// Where the kernel says the uprobe PMU's type is.
const UPROBE_PMU_TYPE: &str = "/sys/bus/event_source/devices/uprobe/type";

/// The file offsets of `symbols` in the ELF file `exe` (each address made relative to its
/// section's place in the file; `None` for a symbol it does not define).
pub fn symbol_file_offsets<const N: usize>(
    exe: &Path,
    symbols: [&str; N],
) -> std::io::Result<[Option<u64>; N]> {
    let data = std::fs::read(exe)?;
    let file = object::File::parse(&*data).map_err(std::io::Error::other)?;
    let mut out = [None; N];
    for sym in file.symbols().chain(file.dynamic_symbols()) {
        let Ok(name) = sym.name() else { continue };
        let Some(i) = symbols.iter().position(|&s| s == name) else {
            continue;
        };
        if out[i].is_some() || !sym.is_definition() {
            continue;
        }
        let Some(index) = sym.section_index() else {
            continue;
        };
        let section = file
            .section_by_index(index)
            .map_err(std::io::Error::other)?;
        out[i] = section
            .file_range()
            .map(|(offset, _)| sym.address() - section.address() + offset);
    }
    Ok(out)
}

/// Attaches the loaded uprobe program `prog` at file offset `offset` of `exe` in process
/// `pid` (`None`: every process), with the 16-bit reference counter at file offset
/// `ref_ctr_offset`. The probe stays attached, and the counter counted, while the
/// returned fd is open.
pub fn attach(
    prog: BorrowedFd<'_>,
    exe: &Path,
    offset: u64,
    ref_ctr_offset: u64,
    pid: Option<u32>,
) -> std::io::Result<OwnedFd> {
    let perf_type: u32 = std::fs::read_to_string(UPROBE_PMU_TYPE)?
        .trim()
        .parse()
        .map_err(std::io::Error::other)?;
    let path = CString::new(exe.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let mut attr = PerfEventAttr::new(perf_type, ref_ctr_offset << 32);
    attr.sample_period = 1;
    attr.config1 = path.as_ptr() as u64;
    attr.config2 = offset;
    // A per-process event counts on any CPU; one for every process needs a CPU (any:
    // uprobes fire wherever the process runs), as aya's own does.
    let event = match pid {
        Some(pid) => perf_event::open(&attr, pid as i32, -1)?,
        None => perf_event::open(&attr, -1, 0)?,
    };
    for (request, arg) in [
        (PERF_EVENT_IOC_SET_BPF, prog.as_raw_fd() as u64),
        (PERF_EVENT_IOC_ENABLE, 0),
    ] {
        // SAFETY: ioctls of a perf event fd with an integer argument.
        if unsafe { libc::ioctl(event.as_raw_fd(), request as _, arg) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(event)
}
