//! A recording cut into a numbered series of complete trace files
//! (`profinfer record --switch-output`, as `perf record --switch-output` does): how the
//! members are named and found. Each member is a whole trace (preamble, header, chunks,
//! footer) readable alone: it begins with the state records its events need (node
//! descriptions, leaf nodes, the threads the target made, counters opened), copied from
//! earlier members and stamped with the member's start; its header's settings say its
//! place ([`SeriesMember`]). A reader of the whole series skips those copies in every
//! member but the first one it reads.
//!
//! Names: the recording asked for `run.pftrace` writes `run.001.pftrace`,
//! `run.002.pftrace`, ... (three digits, more past 999); `run` writes `run.001`, ...

use std::{
    io,
    path::{Path, PathBuf},
};

/// A series member's place, from its header's settings (`series`, `series_head`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeriesMember {
    /// Its number in the series, from 1.
    pub index: u32,
    /// State records at its start copied from earlier members.
    pub head_records: u64,
}

/// The stem and extension (with its dot, or empty) a series of `base` shares.
fn stem_and_ext(base: &Path) -> (String, String) {
    let name = base
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (stem.to_owned(), format!(".{ext}")),
        _ => (name, String::new()),
    }
}

/// The path of member `index` of the series a recording to `base` writes.
pub fn member_path(base: &Path, index: u32) -> PathBuf {
    let (stem, ext) = stem_and_ext(base);
    base.with_file_name(format!("{stem}.{index:03}{ext}"))
}

/// The members of `base`'s series that exist, in series order, with their numbers.
///
/// # Errors
/// The folder cannot be listed.
pub fn members(base: &Path) -> io::Result<Vec<(u32, PathBuf)>> {
    let (stem, ext) = stem_and_ext(base);
    let dir = match base.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let prefix = format!("{stem}.");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(number) = name
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(ext.as_str()))
        else {
            continue;
        };
        if number.len() >= 3
            && number.bytes().all(|b| b.is_ascii_digit())
            && let Ok(index) = number.parse::<u32>()
        {
            found.push((index, base.with_file_name(&name)));
        }
    }
    found.sort();
    Ok(found)
}

/// The files a trace path stands for: the file itself when it exists, else the members
/// of the series a recording to it wrote (empty when there are none).
pub fn trace_files(path: &Path) -> Vec<PathBuf> {
    if path.exists() {
        return vec![path.to_path_buf()];
    }
    members(path)
        .map(|m| m.into_iter().map(|(_, p)| p).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_named_after_the_base_and_found_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().join("run.pftrace");
        assert_eq!(member_path(&base, 7), dir.path().join("run.007.pftrace"));
        assert_eq!(
            member_path(&dir.path().join("run"), 1234),
            dir.path().join("run.1234")
        );
        for i in [10, 2, 1000, 3] {
            std::fs::write(member_path(&base, i), b"x").expect("write");
        }
        // Neither another stem, nor a short number, nor another extension.
        for other in [
            "runx.001.pftrace",
            "run.01.pftrace",
            "run.004.json",
            "run.pftrace.tmp",
        ] {
            std::fs::write(dir.path().join(other), b"x").expect("write");
        }
        let found: Vec<u32> = members(&base).expect("list").iter().map(|m| m.0).collect();
        assert_eq!(found, vec![2, 3, 10, 1000]);
        assert_eq!(trace_files(&base).len(), 4);
        std::fs::write(&base, b"x").expect("write");
        assert_eq!(
            trace_files(&base),
            vec![base.clone()],
            "a file that exists is itself"
        );
        assert!(trace_files(&dir.path().join("none.pftrace")).is_empty());
    }
}
