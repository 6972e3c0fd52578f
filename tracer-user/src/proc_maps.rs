//! A process's file mappings, from `/proc/PID/maps`: which files it has mapped, where,
//! and which are code (llama.cpp's libraries to probe, the sampler's addresses to name).

use std::path::PathBuf;

/// One file-backed mapping of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// Whether it is mapped executable.
    pub executable: bool,
    /// The file.
    pub path: PathBuf,
}

/// The file-backed mappings of `pid`, in the kernel's (address) order; empty when the
/// process is gone or its maps cannot be read.
pub fn read(pid: u32) -> Vec<Mapping> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    text.lines().filter_map(parse_line).collect()
}

/// `start-end perms offset dev inode path` of a mapping of a file (not `[vdso]`, not
/// anonymous memory).
fn parse_line(line: &str) -> Option<Mapping> {
    let mut f = line.split_whitespace();
    let (range, perms, offset) = (f.next()?, f.next()?, f.next()?);
    let path = f.nth(2)?;
    if !path.starts_with('/') {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        offset: u64::from_str_radix(offset, 16).ok()?,
        executable: perms.contains('x'),
        path: PathBuf::from(path),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_lines_keep_files_and_say_which_are_code() {
        let m = parse_line("7f12a000-7f12c000 r-xp 00003000 08:01 1234   /usr/lib/libggml-cpu.so")
            .expect("executable file mapping");
        assert_eq!((m.start, m.end, m.offset), (0x7f12a000, 0x7f12c000, 0x3000));
        assert!(m.executable);
        let data = parse_line("7f12a000-7f12c000 rw-p 00000000 08:01 1234 /usr/lib/x.so")
            .expect("data mapping of a file");
        assert!(!data.executable);
        assert!(parse_line("7ffd000-7ffe000 r-xp 00000000 00:00 0 [vdso]").is_none());
        assert!(parse_line("7ffd000-7ffe000 rw-p 00000000 00:00 0").is_none());
        let own = read(std::process::id());
        assert!(
            own.iter().any(|m| m.executable),
            "this test's own code is mapped"
        );
    }
}
