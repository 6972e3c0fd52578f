//! `cargo xtask bench llama-cpp`: the engine against llama.cpp on the same GGUF files and
//! thread count, runs interleaved A/B/A/B, reported as a Markdown table.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use serde::Deserialize;

use crate::engine;
use crate::oracle_env;
use crate::paths;
use crate::process;
use crate::steps::Steps;

/// Seed of the benchmarked models' random weights.
pub const BENCH_SEED: u64 = 1;

/// What to benchmark.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Model preset.
    pub preset: String,
    /// Weight types, one model each.
    pub dtypes: Vec<String>,
    /// Threads for both implementations.
    pub threads: u32,
    /// Interleaved repetitions (each runs A once, then B once).
    pub reps: u32,
    /// Prompt tokens of the prefill test.
    pub prompt: u32,
    /// Generated tokens of the decode test.
    pub generate: u32,
}

/// The throughput figures both `engine bench --json` and the oracle's `bench` print.
#[derive(Debug, Clone, Copy, Deserialize)]
struct Throughput {
    /// Prompt tokens per second.
    prefill_tokens_per_s: f64,
    /// Generated tokens per second.
    decode_tokens_per_s: f64,
}

/// Mean results of one model.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Weight type.
    pub dtype: String,
    /// Engine prefill tokens/s.
    pub engine_prefill: f64,
    /// llama.cpp prefill tokens/s.
    pub llama_prefill: f64,
    /// Engine decode tokens/s.
    pub engine_decode: f64,
    /// llama.cpp decode tokens/s.
    pub llama_decode: f64,
}

/// Runs the benchmark and writes `out/bench/llama-cpp.md`.
pub fn run(steps: &mut Steps, config: &BenchConfig) -> Result<()> {
    steps.run("llama.cpp oracle venv", oracle_env::ensure)?;
    let engine_bin = steps.run("build release binaries", engine::build_release)?;
    let mut rows = Vec::new();
    for dtype in &config.dtypes {
        let model = steps.run(&format!("model {}-{dtype}", config.preset), || {
            engine::ensure_model(&engine_bin, &config.preset, dtype, BENCH_SEED)
        })?;
        let row = steps.run(&format!("bench {}-{dtype}", config.preset), || {
            bench_model(&engine_bin, &model, dtype, config)
        })?;
        rows.push(row);
    }
    let report = format!(
        "Engine vs llama.cpp (llama-cpp-python {}), preset `{}`, {} threads, pp{} / tg{}, \
         mean of {} interleaved runs each.\n\n{}",
        oracle_env::LLAMA_CPP_PYTHON_VERSION,
        config.preset,
        config.threads,
        config.prompt,
        config.generate,
        config.reps,
        markdown_table(&rows)
    );
    let dir = paths::out_dir().join("bench");
    paths::create_dir(&dir)?;
    let path = dir.join("llama-cpp.md");
    std::fs::write(&path, &report).with_context(|| format!("cannot write {}", path.display()))?;
    println!("\n{report}");
    println!("written to {}", path.display());
    Ok(())
}

/// Benchmarks one model: engine, llama.cpp, engine, llama.cpp, ... and averages.
fn bench_model(engine_bin: &Path, model: &Path, dtype: &str, config: &BenchConfig) -> Result<Row> {
    let mut engine_runs = Vec::new();
    let mut llama_runs = Vec::new();
    for rep in 0..config.reps {
        eprintln!("    rep {}/{}", rep + 1, config.reps);
        engine_runs.push(process::json::<Throughput>(
            Command::new(engine_bin)
                .arg("bench")
                .arg("-m")
                .arg(model)
                .args(["-t", &config.threads.to_string()])
                .args([
                    "-p",
                    &config.prompt.to_string(),
                    "-n",
                    &config.generate.to_string(),
                ])
                .args(["-r", "1", "--json"]),
        )?);
        llama_runs.push(process::json::<Throughput>(
            Command::new(paths::venv_python())
                .arg(paths::oracle_script())
                .arg("bench")
                .arg("--model")
                .arg(model)
                .args(["--threads", &config.threads.to_string()])
                .args([
                    "-p",
                    &config.prompt.to_string(),
                    "-n",
                    &config.generate.to_string(),
                ])
                .args(["--reps", "1"]),
        )?);
    }
    let mean = |runs: &[Throughput], f: fn(&Throughput) -> f64| {
        runs.iter().map(f).sum::<f64>() / runs.len().max(1) as f64
    };
    Ok(Row {
        dtype: dtype.to_owned(),
        engine_prefill: mean(&engine_runs, |t| t.prefill_tokens_per_s),
        llama_prefill: mean(&llama_runs, |t| t.prefill_tokens_per_s),
        engine_decode: mean(&engine_runs, |t| t.decode_tokens_per_s),
        llama_decode: mean(&llama_runs, |t| t.decode_tokens_per_s),
    })
}

/// The results as a Markdown table with engine/llama.cpp ratios.
pub fn markdown_table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| dtype | prefill tok/s engine | prefill tok/s llama.cpp | prefill ratio | \
         decode tok/s engine | decode tok/s llama.cpp | decode ratio |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.1} | {} | {:.1} | {:.1} | {} |",
            r.dtype,
            r.engine_prefill,
            r.llama_prefill,
            ratio(r.engine_prefill, r.llama_prefill),
            r.engine_decode,
            r.llama_decode,
            ratio(r.engine_decode, r.llama_decode),
        );
    }
    out
}

/// `a / b` with two decimals, or `n/a` when `b` is not positive.
fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "n/a".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_one_row_per_dtype_with_ratios() {
        let rows = [
            Row {
                dtype: "q8_0".into(),
                engine_prefill: 50.0,
                llama_prefill: 100.0,
                engine_decode: 30.0,
                llama_decode: 20.0,
            },
            Row {
                dtype: "f16".into(),
                engine_prefill: 1.0,
                llama_prefill: 0.0,
                engine_decode: 1.0,
                llama_decode: 4.0,
            },
        ];
        let table = markdown_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[2],
            "| q8_0 | 50.0 | 100.0 | 0.50 | 30.0 | 20.0 | 1.50 |"
        );
        assert_eq!(lines[3], "| f16 | 1.0 | 0.0 | n/a | 1.0 | 4.0 | 0.25 |");
    }
}
