//! Privilege and environment checks, each failing with one clear line.

use std::path::Path;

/// Where the tool expects tracefs.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Capability numbers (linux/capability.h).
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// An environment problem that stops recording.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// Not root and missing the capabilities eBPF tracing needs.
    #[error(
        "profinfer needs root, or CAP_BPF and CAP_PERFMON (missing: {missing}); run it with sudo"
    )]
    MissingCapabilities {
        /// Names of the missing capabilities.
        missing: String,
    },
    /// tracefs is not mounted and mounting it failed.
    #[error(
        "tracefs is not mounted at {TRACEFS} and mounting it failed (run: mount -t tracefs tracefs {TRACEFS})"
    )]
    TracefsMissing {
        /// Why the mount failed.
        #[source]
        source: std::io::Error,
    },
}

/// Effective capability bits of this process (from `/proc/self/status`).
fn effective_caps() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// Checks for CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN, which implies both on old kernels).
pub fn check_capabilities() -> Result<(), EnvError> {
    let caps = effective_caps();
    let has = |c: u32| caps & (1u64 << c) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    let missing: Vec<&str> = [(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]
        .into_iter()
        .filter(|(c, _)| !has(*c))
        .map(|(_, n)| n)
        .collect();
    Err(EnvError::MissingCapabilities {
        missing: missing.join(", "),
    })
}

/// Makes sure tracefs is mounted at [`TRACEFS`], mounting it if needed.
pub fn ensure_tracefs() -> Result<(), EnvError> {
    if Path::new(TRACEFS).join("events").is_dir() {
        return Ok(());
    }
    let src = c"tracefs";
    let target = c"/sys/kernel/tracing";
    // SAFETY: all pointers are valid NUL-terminated strings; data may be null.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            src.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(EnvError::TracefsMissing {
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Reads the byte offset of `field` from a tracepoint's format file.
pub fn tracepoint_field_offset(category: &str, name: &str, field: &str) -> Option<u32> {
    let path = Path::new(TRACEFS)
        .join("events")
        .join(category)
        .join(name)
        .join("format");
    let text = std::fs::read_to_string(path).ok()?;
    parse_field_offset(&text, field)
}

/// The `offset:` of the field named `field` in a tracepoint format text.
fn parse_field_offset(format: &str, field: &str) -> Option<u32> {
    for line in format.lines() {
        let line = line.trim();
        let Some(decl) = line.strip_prefix("field:") else {
            continue;
        };
        let mut parts = decl.split(';');
        let name_decl = parts.next()?.trim();
        let ident = name_decl
            .rsplit(|c: char| c.is_whitespace() || c == '*')
            .next()?
            .split('[')
            .next()?;
        if ident != field {
            continue;
        }
        for p in parts {
            if let Some(v) = p.trim().strip_prefix("offset:") {
                return v.trim().parse().ok();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_offsets_parse_from_both_fork_formats() {
        // 6.x (`__data_loc` comms) and pre-6.x layouts of sched_process_fork.
        let new = "\tfield:__data_loc char[] parent_comm;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:pid_t parent_pid;\toffset:12;\tsize:4;\tsigned:1;\n\tfield:__data_loc char[] child_comm;\toffset:16;\tsize:4;\tsigned:0;\n\tfield:pid_t child_pid;\toffset:20;\tsize:4;\tsigned:1;\n";
        let old = "\tfield:char parent_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t parent_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:char child_comm[16];\toffset:28;\tsize:16;\tsigned:0;\n\tfield:pid_t child_pid;\toffset:44;\tsize:4;\tsigned:1;\n";
        assert_eq!(parse_field_offset(new, "parent_pid"), Some(12));
        assert_eq!(parse_field_offset(new, "child_pid"), Some(20));
        assert_eq!(parse_field_offset(old, "parent_pid"), Some(24));
        assert_eq!(parse_field_offset(old, "child_pid"), Some(44));
        assert_eq!(parse_field_offset(old, "parent_comm"), Some(8));
        assert_eq!(parse_field_offset(old, "nope"), None);
    }
}
