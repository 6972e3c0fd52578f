//! The `COUNTERS` perf-event array: created and pinned by the tool, filled with raw
//! `BPF_MAP_UPDATE_ELEM` calls (aya 0.14 caps perf-event arrays it creates at the number
//! of CPUs and cannot store foreign fds).

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use super::PmcError;

const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;

/// Stores `value_fd` at `index` of the perf-event-array map `map_fd`.
pub(super) fn map_store_fd(
    map_fd: BorrowedFd<'_>,
    index: u32,
    value_fd: i32,
) -> Result<(), PmcError> {
    #[repr(C)]
    struct UpdateAttr {
        map_fd: u32,
        _pad: u32,
        key: u64,
        value: u64,
        flags: u64,
    }
    let key = index;
    let value = value_fd as u32;
    let attr = UpdateAttr {
        map_fd: map_fd.as_raw_fd() as u32,
        _pad: 0,
        key: (&raw const key) as u64,
        value: (&raw const value) as u64,
        flags: 0,
    };
    // SAFETY: `attr` points at live `key`/`value` for the duration of the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_UPDATE_ELEM,
            &raw const attr,
            size_of::<UpdateAttr>() as u32,
        )
    };
    if rc != 0 {
        return Err(PmcError::MapUpdate {
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_OBJ_PIN: libc::c_long = 6;
const BPF_MAP_TYPE_PERF_EVENT_ARRAY: u32 = 4;
/// Where bpffs is (mounted by [`create_pinned_counter_map`] if needed).
pub const BPFFS: &str = "/sys/fs/bpf";
const BPFFS_MAGIC: i64 = 0xcafe_4a11;

/// Creates the per-thread counter map (a perf-event array with `max_entries` slots) and
/// pins it at `pin_path`, so the loader reuses it (aya 0.14 caps perf-event arrays it
/// creates at the number of CPUs). The caller unlinks the pin after loading.
pub fn create_pinned_counter_map(
    max_entries: u32,
    pin_path: &std::path::Path,
) -> std::io::Result<OwnedFd> {
    ensure_bpffs()?;
    let mut attr = [0u32; 30];
    attr[0] = BPF_MAP_TYPE_PERF_EVENT_ARRAY;
    attr[1] = 4; // key size
    attr[2] = 4; // value size
    attr[3] = max_entries;
    // SAFETY: `attr` is a zero-filled `union bpf_attr` prefix large enough for MAP_CREATE.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_CREATE,
            attr.as_ptr(),
            size_of_val(&attr) as u32,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh fd owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let path = std::ffi::CString::new(pin_path.as_os_str().as_encoded_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    #[repr(C)]
    struct PinAttr {
        pathname: u64,
        bpf_fd: u32,
        file_flags: u32,
    }
    let pin = PinAttr {
        pathname: path.as_ptr() as u64,
        bpf_fd: fd.as_raw_fd() as u32,
        file_flags: 0,
    };
    // SAFETY: `pin` points at a live NUL-terminated path.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_PIN,
            &raw const pin,
            size_of::<PinAttr>() as u32,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// Mounts bpffs at [`BPFFS`] unless it is there.
fn ensure_bpffs() -> std::io::Result<()> {
    let dir = c"/sys/fs/bpf";
    // SAFETY: `statfs` is plain data filled by the call.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and out-pointer.
    if unsafe { libc::statfs(dir.as_ptr(), &mut st) } == 0 && st.f_type as i64 == BPFFS_MAGIC {
        return Ok(());
    }
    let fstype = c"bpf";
    // SAFETY: valid NUL-terminated strings; no data.
    if unsafe {
        libc::mount(
            fstype.as_ptr(),
            dir.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
