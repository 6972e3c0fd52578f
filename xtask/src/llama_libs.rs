//! llama.cpp's shared libraries in a build: every `libllama*.so*` and `libggml*.so*`
//! collected into one directory, and checked to find each other there through a RUNPATH
//! of `$ORIGIN` (no `LD_LIBRARY_PATH`).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::build_cache::copy_entry;
use crate::process;

/// The library a llama.cpp build always makes (the binding loads it).
pub const LIBLLAMA: &str = "libllama.so";

/// Copies every `libllama*.so*` and `libggml*.so*` under `build_dir` (CMake leaves them in
/// several directories in older llama.cpp) into `lib`, symlinks as symlinks; returns their
/// names.
pub fn collect_libraries(build_dir: &Path, lib: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let mut dirs = vec![build_dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))?
        {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let file_type = entry.file_type()?;
            if file_type.is_dir() {
                if name != "CMakeFiles" {
                    dirs.push(path);
                }
            } else if is_library_name(&name) {
                if names.contains(&name) {
                    bail!("two libraries named {name} in {}", build_dir.display());
                }
                copy_entry(&path, &lib.join(&name))?;
                names.push(name);
            }
        }
    }
    if !names.iter().any(|n| n == LIBLLAMA) {
        bail!("the build made no {LIBLLAMA} under {}", build_dir.display());
    }
    names.sort();
    Ok(names)
}

/// Whether `name` is one of llama.cpp's shared libraries (`libggml-cpu.so`,
/// `libllama.so.0.0.1`).
fn is_library_name(name: &str) -> bool {
    (name.starts_with("libllama") || name.starts_with("libggml"))
        && (name.ends_with(".so") || name.contains(".so."))
}

/// Checks that every llama.cpp library a library in `lib` needs (`DT_NEEDED`, read with
/// `readelf -d`) is in `lib` under that name and found through a RUNPATH of `$ORIGIN`, so
/// the loader needs no `LD_LIBRARY_PATH`.
pub fn check_libraries(lib: &Path) -> Result<()> {
    for entry in std::fs::read_dir(lib).with_context(|| format!("cannot read {}", lib.display()))? {
        let entry = entry?;
        if entry.file_type()?.is_symlink() {
            continue;
        }
        let path = entry.path();
        let dynamic = parse_dynamic(&process::stdout(
            Command::new("readelf").arg("-d").arg(&path),
        )?);
        let ours: Vec<&String> = dynamic
            .needed
            .iter()
            .filter(|n| is_library_name(n))
            .collect();
        for needed in &ours {
            if !lib.join(needed).exists() {
                bail!(
                    "{} needs {needed}, which is not in {}",
                    path.display(),
                    lib.display()
                );
            }
        }
        if !ours.is_empty() && !dynamic.runpath.split(':').any(|d| d == "$ORIGIN") {
            bail!(
                "{} needs {} but its RUNPATH is `{}`, not `$ORIGIN`: the loader would not find \
                 them without LD_LIBRARY_PATH",
                path.display(),
                ours.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                dynamic.runpath
            );
        }
    }
    Ok(())
}

/// What `readelf -d` says about a library's dynamic section.
#[derive(Debug, Default, PartialEq, Eq)]
struct Dynamic {
    /// `DT_NEEDED` names, in order.
    needed: Vec<String>,
    /// `DT_RUNPATH` (or `DT_RPATH`), empty if none.
    runpath: String,
}

/// Parses `readelf -d` output: the bracketed value of the `(NEEDED)` and `(RUNPATH)`
/// (or `(RPATH)`) lines.
fn parse_dynamic(readelf: &str) -> Dynamic {
    let mut dynamic = Dynamic::default();
    for line in readelf.lines() {
        let value = || {
            line.split_once('[')
                .and_then(|(_, rest)| rest.rsplit_once(']'))
                .map(|(v, _)| v.to_owned())
                .unwrap_or_default()
        };
        if line.contains("(NEEDED)") {
            dynamic.needed.push(value());
        } else if line.contains("(RUNPATH)") || line.contains("(RPATH)") {
            dynamic.runpath = value();
        }
    }
    dynamic
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_names() {
        for name in [
            "libllama.so",
            "libggml-base.so",
            "libggml-cpu.so.0",
            "libllama.so.0.0.1",
        ] {
            assert!(is_library_name(name), "{name}");
        }
        for name in ["libstdc++.so.6", "libllama.a", "libggml.solib", "llama.so"] {
            assert!(!is_library_name(name), "{name}");
        }
    }

    #[test]
    fn readelf_dynamic_section_is_parsed() {
        let text = "Dynamic section at offset 0x1b5d10 contains 33 entries:\n  \
            Tag        Type                         Name/Value\n \
            0x0000000000000001 (NEEDED)             Shared library: [libggml.so]\n \
            0x0000000000000001 (NEEDED)             Shared library: [libstdc++.so.6]\n \
            0x000000000000000e (SONAME)             Library soname: [libllama.so]\n \
            0x000000000000001d (RUNPATH)            Library runpath: [$ORIGIN]\n";
        assert_eq!(
            parse_dynamic(text),
            Dynamic {
                needed: vec!["libggml.so".into(), "libstdc++.so.6".into()],
                runpath: "$ORIGIN".into(),
            }
        );
    }
}
