//! Entries of the per-user build cache (`~/.cache/profinfer/`): a directory named by
//! what it holds and a key of its build info, built in `<entry>.partial` and renamed into
//! place only when complete (an interrupted build is never taken for a cached one), with
//! its build info recorded in it ([`BUILD_INFO`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::digest::sha256_hex;
use crate::paths;

/// Name of the file in a cache entry (or an install) recording how its content was built.
pub const BUILD_INFO: &str = "build-info.txt";

/// Name of the build log in a cache entry.
pub const BUILD_LOG: &str = "build.log";

/// The entry `<dir>/<name>-<key>` of the build `info` describes (the key: 16 hex digits
/// of its SHA-256).
pub fn entry(dir: &Path, name: &str, info: &str) -> PathBuf {
    dir.join(format!("{name}-{}", &sha256_hex(info.as_bytes())[..16]))
}

/// Whether `dir` records `info` as its build info.
pub fn built_with(dir: &Path, info: &str) -> bool {
    std::fs::read_to_string(dir.join(BUILD_INFO)).is_ok_and(|recorded| recorded == info)
}

/// Starts building `entry`: returns `<entry>.partial`, created empty.
pub fn start(entry: &Path) -> Result<PathBuf> {
    let mut partial = entry.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    remove_if_present(&partial)?;
    paths::create_dir(&partial)?;
    Ok(partial)
}

/// Completes the build in `partial` ([`start`]): removes its `work` directory, records
/// `info` as its build info and renames it to `entry` (replacing a stale one).
pub fn finish(partial: &Path, entry: &Path, info: &str) -> Result<()> {
    remove_if_present(&partial.join("work"))?;
    std::fs::write(partial.join(BUILD_INFO), info)
        .with_context(|| format!("cannot write {}", partial.join(BUILD_INFO).display()))?;
    remove_if_present(entry)?;
    std::fs::rename(partial, entry)
        .with_context(|| format!("cannot move {} to {}", partial.display(), entry.display()))
}

/// Removes the directory `dir` if it exists.
pub fn remove_if_present(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    Ok(())
}

/// Copies the directory `from` to `to` (which must not exist), symlinks as symlinks.
pub fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    paths::create_dir(to)?;
    for entry in
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?
    {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            copy_entry(&entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Copies one file, or recreates one symlink with the same target.
pub fn copy_entry(from: &Path, to: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(from)
        .with_context(|| format!("cannot stat {}", from.display()))?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(from)
            .with_context(|| format!("cannot read the link {}", from.display()))?;
        std::os::unix::fs::symlink(&target, to)
            .with_context(|| format!("cannot create the link {}", to.display()))
    } else {
        std::fs::copy(from, to)
            .map(drop)
            .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_keyed_by_its_build_info_and_replaced_only_when_complete() {
        let dir = std::env::temp_dir().join(format!("xtask-build-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let a = entry(&dir, "x-1", "flags=a\n");
        assert_ne!(a, entry(&dir, "x-1", "flags=b\n"));
        assert!(a.file_name().unwrap().to_string_lossy().starts_with("x-1-"));
        let partial = start(&a).expect("start");
        std::fs::create_dir_all(partial.join("work")).expect("work");
        std::fs::write(partial.join("lib.so"), b"elf").expect("write");
        assert!(!built_with(&a, "flags=a\n"));
        finish(&partial, &a, "flags=a\n").expect("finish");
        assert!(built_with(&a, "flags=a\n") && !built_with(&a, "flags=b\n"));
        assert!(a.join("lib.so").is_file() && !a.join("work").exists() && !partial.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn copy_tree_keeps_symlinks() {
        let dir = std::env::temp_dir().join(format!("xtask-copy-tree-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let from = dir.join("from");
        std::fs::create_dir_all(from.join("sub")).expect("dir");
        std::fs::write(from.join("libggml.so.0.1"), b"elf").expect("write");
        std::os::unix::fs::symlink("libggml.so.0.1", from.join("libggml.so.0")).expect("link");
        std::fs::write(from.join("sub").join("a.py"), b"x").expect("write");
        copy_tree(&from, &dir.join("to")).expect("copy");
        let to = dir.join("to");
        assert_eq!(
            std::fs::read_link(to.join("libggml.so.0")).expect("link"),
            Path::new("libggml.so.0.1")
        );
        assert_eq!(
            std::fs::read(to.join("libggml.so.0")).expect("read"),
            b"elf"
        );
        assert_eq!(
            std::fs::read(to.join("sub").join("a.py")).expect("read"),
            b"x"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
