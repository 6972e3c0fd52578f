//! Generating models into `out/models` with the engine binary.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Result;

use crate::paths;
use crate::process;

/// The `out/models` file for a preset, dtype and seed.
pub fn model_path(preset: &str, dtype: &str, seed: u64) -> PathBuf {
    paths::out_dir()
        .join("models")
        .join(format!("{preset}-{dtype}-seed{seed}.gguf"))
}

/// Generates the model with `engine gen-model` unless `out/models` already has it.
pub fn ensure_model(
    engine: &std::path::Path,
    preset: &str,
    dtype: &str,
    seed: u64,
) -> Result<PathBuf> {
    let path = model_path(preset, dtype, seed);
    if path.is_file() {
        eprintln!("    model present: {}", path.display());
        return Ok(path);
    }
    let dir = path
        .parent()
        .map_or_else(paths::out_dir, std::path::Path::to_path_buf);
    paths::create_dir(&dir)?;
    // Write to a temporary name first so an interrupted run leaves no truncated model.
    let partial = path.with_extension("gguf.partial");
    process::run(
        Command::new(engine)
            .args(["gen-model", "--preset", preset, "--dtype", dtype, "--seed"])
            .arg(seed.to_string())
            .arg("-o")
            .arg(&partial),
    )?;
    std::fs::rename(&partial, &path).map_err(|e| {
        anyhow::anyhow!(
            "cannot move {} to {}: {e}",
            partial.display(),
            path.display()
        )
    })?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_path_names_preset_dtype_and_seed() {
        let p = model_path("tiny-llama", "q8_0", 1);
        assert!(
            p.ends_with("out/models/tiny-llama-q8_0-seed1.gguf"),
            "{}",
            p.display()
        );
    }
}
