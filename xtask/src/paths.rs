//! Where things live: the repository, its build and output directories, and the per-user
//! cache outside the clone.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The repository root (the parent of the `xtask` crate).
pub fn repo_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map_or_else(|| manifest_dir.to_path_buf(), Path::to_path_buf)
}

/// Cargo's target directory (`$CARGO_TARGET_DIR` or `<repo>/target`).
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                repo_root().join(dir)
            }
        }
        _ => repo_root().join("target"),
    }
}

/// The directory for generated artefacts (`<repo>/out`, gitignored).
pub fn out_dir() -> PathBuf {
    repo_root().join("out")
}

/// The project-local Python virtual environment (`<repo>/.venv`, gitignored).
pub fn venv_dir() -> PathBuf {
    repo_root().join(".venv")
}

/// The Python interpreter of the project venv.
pub fn venv_python() -> PathBuf {
    venv_dir().join("bin").join("python")
}

/// The llama.cpp oracle script.
pub fn oracle_script() -> PathBuf {
    repo_root()
        .join("scripts")
        .join("oracle")
        .join("llama_oracle.py")
}

/// The per-user cache of profinfer (`$XDG_CACHE_HOME/profinfer` or `~/.cache/profinfer`),
/// outside the clone so that fresh clones reuse expensive builds.
pub fn user_cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("profinfer"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("neither XDG_CACHE_HOME nor HOME is set; cannot place the wheel cache")?;
    Ok(PathBuf::from(home).join(".cache").join("profinfer"))
}

/// Creates `dir` and its parents.
pub fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_root_holds_the_workspace_manifest() {
        assert!(repo_root().join("Cargo.toml").is_file());
        assert!(repo_root().join("xtask").is_dir());
    }
}
