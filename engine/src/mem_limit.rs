//! `engine run --mem-limit BYTES [--cold]`: run under a memory budget smaller than the
//! model, the situation of seed 002's Fig 13 (an MoE model whose experts do not all fit).
//!
//! The process moves itself into a memory cgroup of its own before it loads anything,
//! so the page cache of the memory-mapped model file is charged to it and reclaimed
//! when the budget is reached: experts not used for a while are evicted and paged in
//! again from storage (major faults) when the router picks them. cgroup v2
//! (`memory.max` in a child of the unified hierarchy) and v1 (`memory.limit_in_bytes`
//! under `/sys/fs/cgroup/memory`) are both supported. `--cold` first drops the file's
//! pages from the page cache, so even the first touches are reads from storage.

use std::fs;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::EngineError;

/// Prefix of the cgroups this module makes (stale ones are removed on the next run).
const GROUP_PREFIX: &str = "profinfer-engine-";

/// Where memory cgroups live on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Hierarchy {
    /// cgroup v2: the unified hierarchy mounted here, with the memory controller.
    V2(PathBuf),
    /// cgroup v1: the memory controller's hierarchy mounted here.
    V1(PathBuf),
}

impl Hierarchy {
    /// The first memory-capable hierarchy among the usual mount points.
    fn find() -> Option<Hierarchy> {
        for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
            let root = Path::new(root);
            if fs::read_to_string(root.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"))
            {
                return Some(Hierarchy::V2(root.to_owned()));
            }
        }
        let v1 = Path::new("/sys/fs/cgroup/memory");
        v1.join("memory.limit_in_bytes")
            .exists()
            .then(|| Hierarchy::V1(v1.to_owned()))
    }

    fn root(&self) -> &Path {
        match self {
            Hierarchy::V2(p) | Hierarchy::V1(p) => p,
        }
    }

    /// The file that sets the limit.
    fn limit_file(&self) -> &'static str {
        match self {
            Hierarchy::V2(_) => "memory.max",
            Hierarchy::V1(_) => "memory.limit_in_bytes",
        }
    }
}

fn io_error(what: String) -> impl FnOnce(std::io::Error) -> EngineError {
    move |source| EngineError::Io { what, source }
}

/// Moves this process into a new memory cgroup limited to `bytes`; returns its path.
///
/// # Errors
/// [`EngineError::MemLimit`] when no memory cgroup hierarchy is mounted or the process
/// may not create one (not root); I/O errors writing the cgroup files.
pub fn enter(bytes: u64) -> Result<PathBuf, EngineError> {
    let h = Hierarchy::find().ok_or_else(|| EngineError::MemLimit {
        why: "no memory cgroup hierarchy is mounted (looked for cgroup v2 at /sys/fs/cgroup \
              and v1 at /sys/fs/cgroup/memory)"
            .into(),
    })?;
    remove_stale(h.root());
    if let Hierarchy::V2(root) = &h {
        // Children get the memory controller only if the parent delegates it.
        let _ = fs::write(root.join("cgroup.subtree_control"), "+memory");
    }
    let group = h
        .root()
        .join(format!("{GROUP_PREFIX}{}", std::process::id()));
    fs::create_dir_all(&group).map_err(|e| EngineError::MemLimit {
        why: format!(
            "cannot create the cgroup {} ({e}); --mem-limit needs root",
            group.display()
        ),
    })?;
    let limit = group.join(h.limit_file());
    fs::write(&limit, bytes.to_string())
        .map_err(io_error(format!("writing {bytes} to {}", limit.display())))?;
    if let Hierarchy::V2(_) = &h {
        // No swap either: the budget is the budget (absent without swap accounting).
        let _ = fs::write(group.join("memory.swap.max"), "0");
    }
    let procs = group.join("cgroup.procs");
    fs::OpenOptions::new()
        .write(true)
        .open(&procs)
        .and_then(|mut f| f.write_all(std::process::id().to_string().as_bytes()))
        .map_err(io_error(format!("joining {}", procs.display())))?;
    Ok(group)
}

/// Removes this module's cgroups of processes that have exited (`rmdir` of a cgroup
/// fails while it has members, so a live one is never removed).
fn remove_stale(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(GROUP_PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir(e.path());
        }
    }
}

/// Drops `path`'s pages from the page cache (written back first, so dirty pages of a
/// file just generated go too), so the next reads come from storage.
///
/// # Errors
/// I/O errors opening or syncing the file; an `fadvise` failure.
pub fn drop_cached(path: &Path) -> Result<(), EngineError> {
    let file = fs::File::open(path).map_err(io_error(format!("opening {}", path.display())))?;
    file.sync_all()
        .map_err(io_error(format!("writing back {}", path.display())))?;
    // SAFETY: a valid open descriptor; offset 0 and length 0 mean the whole file.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(EngineError::Io {
            what: format!("dropping the cached pages of {}", path.display()),
            source: std::io::Error::from_raw_os_error(rc),
        });
    }
    Ok(())
}

/// Parses a byte count: a number with an optional K, M or G suffix (powers of 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                _ => return Err(format!("`{s}`: the suffix must be K, M or G")),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a byte count (like 512M or 2.5G)"))?;
    if v.is_nan() || v <= 0.0 {
        return Err(format!("`{s}`: the limit must be positive"));
    }
    Ok((v * mult as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn byte_counts_with_suffixes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("48M"), Ok(48 << 20));
        assert_eq!(parse_bytes("2.5g"), Ok(5 << 29));
        assert!(parse_bytes("12X").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("lots").is_err());
    }
}
