//! Per-thread performance counters read by the operator probes (seed 002 §3.4).
//!
//! For each target thread the collector opens one perf event per counter with
//! `pid = tid, cpu = -1, inherit = 0` (exact per-thread attribution; `shared/reference.md`)
//! and stores the fds into the `COUNTERS` perf-event array at `slot * n + i` with a raw
//! `BPF_MAP_UPDATE_ELEM` (aya 0.14 cannot store foreign fds); `PMC_SLOTS` maps the tid
//! to its slot. New threads get counters when the collector sees their `TaskNew` event:
//! operators they run before that (microseconds) carry no counter readings.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use common::{control::MAX_PMC_THREADS, event::MAX_PMC};
use trace_format::CounterInfo;

use crate::perf_event::PerfEventAttr;

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;

/// One counter the user can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterSpec {
    /// Name as given on the command line.
    pub name: &'static str,
    /// `perf_event_attr.type`.
    pub perf_type: u32,
    /// `perf_event_attr.config`.
    pub config: u64,
}

/// Hardware counters (x86-64 / arm64 generic perf names; the PMU maps them per CPU:
/// `cache-misses` is the L3 / last-level refill event, `stalled-cycles-backend` the
/// backend stall cycles).
pub const HARDWARE: [CounterSpec; 4] = [
    CounterSpec {
        name: "cycles",
        perf_type: PERF_TYPE_HARDWARE,
        config: 0,
    },
    CounterSpec {
        name: "instructions",
        perf_type: PERF_TYPE_HARDWARE,
        config: 1,
    },
    CounterSpec {
        name: "cache-misses",
        perf_type: PERF_TYPE_HARDWARE,
        config: 3,
    },
    CounterSpec {
        name: "stalled-cycles-backend",
        perf_type: PERF_TYPE_HARDWARE,
        config: 8,
    },
];

/// Software counters (always available).
pub const SOFTWARE: [CounterSpec; 4] = [
    CounterSpec {
        name: "task-clock",
        perf_type: PERF_TYPE_SOFTWARE,
        config: 1,
    },
    CounterSpec {
        name: "page-faults",
        perf_type: PERF_TYPE_SOFTWARE,
        config: 2,
    },
    CounterSpec {
        name: "major-faults",
        perf_type: PERF_TYPE_SOFTWARE,
        config: 6,
    },
    CounterSpec {
        name: "context-switches",
        perf_type: PERF_TYPE_SOFTWARE,
        config: 3,
    },
];

/// Looks a counter up by name.
pub fn counter_by_name(name: &str) -> Option<CounterSpec> {
    HARDWARE
        .iter()
        .chain(SOFTWARE.iter())
        .find(|c| c.name == name)
        .copied()
}

/// Errors of counter setup.
#[derive(Debug, thiserror::Error)]
pub enum PmcError {
    /// An unknown counter name.
    #[error(
        "unknown counter `{name}` (known: cycles, instructions, cache-misses, stalled-cycles-backend, task-clock, page-faults, major-faults, context-switches)"
    )]
    Unknown {
        /// The name.
        name: String,
    },
    /// Too many counters.
    #[error("at most {MAX_PMC} counters can be read per operator, {count} asked")]
    TooMany {
        /// Number asked for.
        count: usize,
    },
    /// Storing a counter fd into the BPF map failed.
    #[error("storing counter fd in the BPF map failed")]
    MapUpdate {
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// `perf_event_open(attr, pid = tid, cpu = -1)`: counts the thread on any CPU, no inherit.
pub fn open_counter(spec: CounterSpec, tid: i32) -> std::io::Result<OwnedFd> {
    crate::perf_event::open(&PerfEventAttr::new(spec.perf_type, spec.config), tid, -1)
}

/// Stores `value_fd` at `index` of the perf-event-array map `map_fd`.
fn map_store_fd(map_fd: BorrowedFd<'_>, index: u32, value_fd: i32) -> Result<(), PmcError> {
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

/// The counters chosen for a recording, and the fds opened per thread.
#[derive(Debug)]
pub struct PmcSet {
    counters: Vec<CounterSpec>,
    notes: Vec<String>,
    next_slot: u32,
    slots: std::collections::HashMap<u32, u32>,
    fds: Vec<OwnedFd>,
}

impl PmcSet {
    /// Chooses counters: `requested` names, or (empty) hardware where the PMU offers them
    /// plus all software counters. Hardware counters that cannot be opened on this
    /// machine are dropped with one note.
    pub fn choose(requested: &[String]) -> Result<PmcSet, PmcError> {
        let wanted: Vec<CounterSpec> = if requested.is_empty() {
            HARDWARE.iter().chain(SOFTWARE.iter()).copied().collect()
        } else {
            requested
                .iter()
                .map(|n| counter_by_name(n).ok_or_else(|| PmcError::Unknown { name: n.clone() }))
                .collect::<Result<_, _>>()?
        };
        let me = gettid();
        let mut counters = Vec::new();
        let mut missing = Vec::new();
        let mut err = String::new();
        for c in wanted {
            match open_counter(c, me) {
                Ok(_) => counters.push(c),
                Err(e) => {
                    missing.push(c.name);
                    err = e.to_string();
                }
            }
        }
        if counters.len() > MAX_PMC {
            return Err(PmcError::TooMany {
                count: counters.len(),
            });
        }
        let mut notes = Vec::new();
        if !missing.is_empty() {
            notes.push(format!(
                "counters unavailable on this machine ({err}): {}; recording {}",
                missing.join(", "),
                if counters.is_empty() {
                    "no counters".to_owned()
                } else {
                    counters
                        .iter()
                        .map(|c| c.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ));
        }
        Ok(PmcSet {
            counters,
            notes,
            next_slot: 0,
            slots: Default::default(),
            fds: Vec::new(),
        })
    }

    /// No counters at all (counters switched off).
    pub fn none() -> PmcSet {
        PmcSet {
            counters: Vec::new(),
            notes: Vec::new(),
            next_slot: 0,
            slots: Default::default(),
            fds: Vec::new(),
        }
    }

    /// Number of counters per thread.
    pub fn len(&self) -> usize {
        self.counters.len()
    }

    /// True when no counter is recorded.
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }

    /// Bit `c` set for each hardware counter (read with enabled/running times for
    /// multiplexing; see `TracerControl::pmc_scaled`).
    pub fn scaled_mask(&self) -> u32 {
        self.counters
            .iter()
            .enumerate()
            .filter(|(_, c)| c.perf_type == PERF_TYPE_HARDWARE)
            .fold(0, |m, (i, _)| m | 1 << i)
    }

    /// Notes to print once and store in the trace (fallbacks).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The counter table for the trace header.
    pub fn infos(&self) -> Vec<CounterInfo> {
        self.counters
            .iter()
            .map(|c| CounterInfo {
                name: c.name.to_owned(),
                source: if c.perf_type == PERF_TYPE_HARDWARE {
                    "hardware"
                } else {
                    "software"
                }
                .to_owned(),
                perf_type: c.perf_type,
                perf_config: c.config,
            })
            .collect()
    }

    /// Opens the counters of `tid` and stores them at a new slot of `counters_map`.
    /// Returns `(slot, opened mask)`, or `None` when the thread already has a slot or
    /// the slots are exhausted.
    pub fn open_thread(
        &mut self,
        tid: u32,
        counters_map: BorrowedFd<'_>,
    ) -> Result<Option<(u32, u32)>, PmcError> {
        if self.counters.is_empty()
            || self.slots.contains_key(&tid)
            || self.next_slot >= MAX_PMC_THREADS
        {
            return Ok(None);
        }
        let slot = self.next_slot;
        self.next_slot += 1;
        let n = self.counters.len() as u32;
        let mut mask = 0u32;
        for (i, c) in self.counters.iter().enumerate() {
            if let Ok(fd) = open_counter(*c, tid as i32) {
                map_store_fd(counters_map, slot * n + i as u32, fd.as_raw_fd())?;
                self.fds.push(fd);
                mask |= 1 << i;
            }
        }
        self.slots.insert(tid, slot);
        Ok(Some((slot, mask)))
    }
}

/// The calling thread's id.
pub fn gettid() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::gettid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_and_unknown_is_refused() {
        assert_eq!(counter_by_name("task-clock").map(|c| c.config), Some(1));
        assert_eq!(
            counter_by_name("cycles").map(|c| c.perf_type),
            Some(PERF_TYPE_HARDWARE)
        );
        assert!(matches!(
            PmcSet::choose(&["bogus".into()]),
            Err(PmcError::Unknown { .. })
        ));
    }
}
