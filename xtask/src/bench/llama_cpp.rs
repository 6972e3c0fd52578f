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

/// What to benchmark (`cargo xtask bench llama-cpp`'s options).
#[derive(Debug, Clone, clap::Args)]
pub struct BenchConfig {
    /// Model preset.
    #[arg(long, default_value = "llama3.2-1b")]
    pub preset: String,
    /// Weight types to benchmark, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "f16,q8_0,q4_0")]
    pub dtypes: Vec<String>,
    /// Threads for both implementations.
    #[arg(short = 't', long, default_value_t = 2)]
    pub threads: u32,
    /// Interleaved repetitions.
    #[arg(short = 'r', long, default_value_t = 3)]
    pub reps: u32,
    /// Prompt tokens of the prefill test.
    #[arg(short = 'p', long, default_value_t = 512)]
    pub prompt: u32,
    /// Generated tokens of the decode test.
    #[arg(short = 'n', long, default_value_t = 128)]
    pub generate: u32,
}

/// The throughput figures both `engine bench --json` and the oracle's `bench` print, and
/// the weight stream only the engine reports.
#[derive(Debug, Clone, Copy, Deserialize)]
struct Throughput {
    /// Prompt tokens per second.
    prefill_tokens_per_s: f64,
    /// Generated tokens per second.
    decode_tokens_per_s: f64,
    /// Weight bytes one decode step reads (engine only; the same file, so the same bytes
    /// for llama.cpp).
    #[serde(default)]
    decode_weight_bytes: u64,
    /// Reading those bytes alone with the same threads, GB/s (engine only).
    #[serde(default)]
    weight_read_gb_per_s: f64,
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
    /// Lowest and highest engine/llama.cpp prefill ratio of one interleaved pair.
    pub prefill_pairs: (f64, f64),
    /// Lowest and highest engine/llama.cpp decode ratio of one interleaved pair.
    pub decode_pairs: (f64, f64),
    /// Weight bytes one decode step reads.
    pub decode_bytes: u64,
    /// Fastest rate of reading those bytes alone with the same threads, GB/s.
    pub read_gb_per_s: f64,
}

impl Row {
    /// Averages interleaved pairs of runs (`engine[i]` ran just before `llama[i]`).
    fn from_pairs(dtype: &str, engine: &[Throughput], llama: &[Throughput]) -> Row {
        let mean = |runs: &[Throughput], f: fn(&Throughput) -> f64| {
            runs.iter().map(f).sum::<f64>() / runs.len().max(1) as f64
        };
        let pair_range = |f: fn(&Throughput) -> f64| {
            engine
                .iter()
                .zip(llama)
                .filter(|(_, l)| f(l) > 0.0)
                .map(|(e, l)| f(e) / f(l))
                .fold(None, |r: Option<(f64, f64)>, x| {
                    Some(r.map_or((x, x), |(lo, hi)| (lo.min(x), hi.max(x))))
                })
                .unwrap_or((0.0, 0.0))
        };
        Row {
            dtype: dtype.to_owned(),
            engine_prefill: mean(engine, |t| t.prefill_tokens_per_s),
            llama_prefill: mean(llama, |t| t.prefill_tokens_per_s),
            engine_decode: mean(engine, |t| t.decode_tokens_per_s),
            llama_decode: mean(llama, |t| t.decode_tokens_per_s),
            prefill_pairs: pair_range(|t| t.prefill_tokens_per_s),
            decode_pairs: pair_range(|t| t.decode_tokens_per_s),
            decode_bytes: engine
                .iter()
                .map(|t| t.decode_weight_bytes)
                .max()
                .unwrap_or(0),
            read_gb_per_s: engine
                .iter()
                .map(|t| t.weight_read_gb_per_s)
                .fold(0.0, f64::max),
        }
    }
}

/// Runs the benchmark and writes `out/bench/llama-cpp.md`.
pub fn run(steps: &mut Steps, config: &BenchConfig) -> Result<()> {
    steps.run("llama.cpp oracle venv", oracle_env::ensure)?;
    let engine_bin = steps.run("build release binaries", crate::programs::engine)?;
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
    let threads = config.threads.to_string();
    let (prompt, generate) = (config.prompt.to_string(), config.generate.to_string());
    let sizes = ["-p", &prompt, "-n", &generate];
    for rep in 0..config.reps {
        eprintln!("    rep {}/{}", rep + 1, config.reps);
        engine_runs.push(process::json::<Throughput>(
            Command::new(engine_bin)
                .arg("bench")
                .arg("-m")
                .arg(model)
                .args(["-t", &threads])
                .args(sizes)
                .args(["-r", "1", "--json"]),
        )?);
        llama_runs.push(process::json::<Throughput>(
            Command::new(paths::venv_python())
                .arg(paths::oracle_script())
                .arg("bench")
                .arg("--model")
                .arg(model)
                .args(["--threads", &threads])
                .args(sizes)
                .args(["--reps", "1"]),
        )?);
    }
    Ok(Row::from_pairs(dtype, &engine_runs, &llama_runs))
}

/// The results as a Markdown table: engine/llama.cpp ratios of the means with the range
/// of the interleaved pairs' ratios, and decode's weight stream (bytes per token times
/// tokens/s) beside the rate of reading the same bytes alone.
pub fn markdown_table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| dtype | prefill tok/s engine | prefill tok/s llama.cpp | prefill ratio (pairs) | \
         decode tok/s engine | decode tok/s llama.cpp | decode ratio (pairs) | \
         decode MB/token | decode GB/s engine | decode GB/s llama.cpp | read alone GB/s |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let gb = |tok_s: f64| r.decode_bytes as f64 * tok_s / 1e9;
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.1} | {} | {:.1} | {:.1} | {} | {:.0} | {:.1} | {:.1} | {:.1} |",
            r.dtype,
            r.engine_prefill,
            r.llama_prefill,
            ratio_with_pairs(r.engine_prefill, r.llama_prefill, r.prefill_pairs),
            r.engine_decode,
            r.llama_decode,
            ratio_with_pairs(r.engine_decode, r.llama_decode, r.decode_pairs),
            r.decode_bytes as f64 / 1e6,
            gb(r.engine_decode),
            gb(r.llama_decode),
            r.read_gb_per_s,
        );
    }
    out
}

/// [`ratio`] followed by the pairs' range, `1.05 (0.98–1.10)`.
fn ratio_with_pairs(a: f64, b: f64, (lo, hi): (f64, f64)) -> String {
    if b > 0.0 {
        format!("{} ({lo:.2}–{hi:.2})", ratio(a, b))
    } else {
        ratio(a, b)
    }
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
        let t = |pp: f64, tg: f64, bytes: u64, read: f64| Throughput {
            prefill_tokens_per_s: pp,
            decode_tokens_per_s: tg,
            decode_weight_bytes: bytes,
            weight_read_gb_per_s: read,
        };
        let rows = [
            Row::from_pairs(
                "q8_0",
                &[
                    t(40.0, 30.0, 1_000_000_000, 20.0),
                    t(60.0, 30.0, 1_000_000_000, 25.0),
                ],
                &[t(100.0, 25.0, 0, 0.0), t(100.0, 15.0, 0, 0.0)],
            ),
            Row::from_pairs("f16", &[t(1.0, 1.0, 0, 0.0)], &[t(0.0, 4.0, 0, 0.0)]),
        ];
        let table = markdown_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[2],
            "| q8_0 | 50.0 | 100.0 | 0.50 (0.40–0.60) | 30.0 | 20.0 | 1.50 (1.20–2.00) \
             | 1000 | 30.0 | 20.0 | 25.0 |"
        );
        assert_eq!(
            lines[3],
            "| f16 | 1.0 | 0.0 | n/a | 1.0 | 4.0 | 0.25 (0.25–0.25) | 0 | 0.0 | 0.0 | 0.0 |"
        );
    }
}
