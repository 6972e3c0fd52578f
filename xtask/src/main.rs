//! `cargo xtask`: project tasks — set-up, test, demo and benchmarks.
//!
//! Every subprocess is printed before it runs; every step prints how long it took; a
//! failing step makes the command exit with a non-zero code.

mod apt;
mod bench;
mod board;
mod build_cache;
mod cross;
mod demo;
mod digest;
mod dist;
mod engine;
mod eval;
mod llama_builds;
mod llama_cross;
mod llama_libs;
mod llama_tests;
mod llama_vulkan;
mod oracle_env;
mod paths;
mod process;
mod programs;
mod real_model;
mod sdist;
mod setup;
mod steps;
mod test;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::steps::Steps;

/// profinfer's project tasks.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about)]
struct Cli {
    /// The task to run.
    #[command(subcommand)]
    task: Task,
}

/// The tasks.
#[derive(Debug, Subcommand)]
enum Task {
    /// Install what the project needs (apt packages, nightly rust-src, bpf-linker, cargo-fuzz).
    Setup {
        /// Also build/install the llama.cpp oracle (Python venv in `.venv`) and the older
        /// llama.cpp builds (`.venv/llama-builds/`).
        #[arg(long)]
        oracle: bool,
    },
    /// Set up (with the oracle) and run every test, then a fuzz smoke run.
    Test,
    /// Install what it needs, build, fetch SmolLM2, chat with it traced, analyze the trace.
    Demo,
    /// Build the board tarball: static `engine` and `profinfer` for
    /// `<target>-unknown-linux-musl`, the eBPF object and the board guide (`out/dist/`).
    Dist {
        /// Architecture: aarch64 (arm64 boards, OpenHarmony) or x86_64.
        #[arg(long, default_value = "aarch64")]
        target: String,
    },
    /// Prepare the emulated arm64 board (static aarch64 build, Debian arm64 kernels and
    /// busybox, cached) and run the board tests in it (`tracer-user/tests/board.rs`; root).
    Board,
    /// Analyze a trace into every view (runs `profinfer analyze`; extra options pass through).
    Analyze {
        /// The trace file.
        trace: std::path::PathBuf,
        /// Output directory.
        #[arg(short, long)]
        output: std::path::PathBuf,
        /// Further `profinfer analyze` options (e.g. `--iter prefill --color-by bandwidth`).
        #[arg(last = true)]
        rest: Vec<String>,
    },
    /// The evaluation: accuracy against the engine's own timestamps, what recording
    /// costs, the papers' findings, as DuckDB queries over the exported runs; writes
    /// docs/evaluation.md (`--quick`: a CI-sized run into out/eval/evaluation.md).
    Eval {
        /// SmolLM2 only, short runs, two cost pairs (CI).
        #[arg(long)]
        quick: bool,
    },
    /// Benchmarks.
    Bench {
        /// Which benchmark.
        #[command(subcommand)]
        which: BenchTask,
    },
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
enum BenchTask {
    /// The engine against llama.cpp on the same models and threads.
    LlamaCpp(bench::llama_cpp::BenchConfig),
    /// What recording costs the traced program: CPU time per decode token of the engine
    /// and of unmodified llama.cpp, untraced against traced per recording configuration,
    /// two lengths, interleaved pairs (needs root).
    Overhead {
        /// Traced programs, comma-separated: `engine`, `llama.cpp`.
        #[arg(long, value_delimiter = ',', default_value = "engine,llama.cpp")]
        targets: Vec<String>,
        /// Models, comma-separated: `smollm2` (the demo's real model) or PRESET:DTYPE
        /// (generated weights with a preset's shapes).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "smollm2,llama3.2-1b:q8_0"
        )]
        models: Vec<String>,
        /// Threads of the traced program.
        #[arg(short = 't', long, default_value_t = 2)]
        threads: u32,
        /// Interleaved pairs per configuration.
        #[arg(long, default_value_t = 5)]
        pairs: u32,
        /// Generated tokens of the short and the long run.
        #[arg(long, value_delimiter = ',', num_args = 1..=2, default_value = "16,144")]
        lengths: Vec<u32>,
        /// Recordings, comma-separated (default: all on SmolLM2, `default` on generated
        /// models): default, token+graph, token+graph+counters, exact spans, op counters.
        #[arg(long, value_delimiter = ',')]
        recordings: Option<Vec<String>>,
        /// Also the in-process comparison of sampled windows ON/PERIOD (every model);
        /// `off` to skip.
        #[arg(long, default_value = "48/96")]
        windows: String,
        /// Generated tokens of a windows run.
        #[arg(long, default_value_t = 480)]
        window_tokens: u32,
        /// Also the in-process comparison of the always-on mode: `--sample 997` with its
        /// CPU-clock sampler switched on and off in windows ON/PERIOD; `off` to skip.
        #[arg(long, default_value = "48/96")]
        sample_windows: String,
        /// Run everything measured in a cgroup limited to this many CPUs (the constrained
        /// condition: the program and the collector share the quota; root).
        #[arg(long, value_name = "CPUS")]
        cpu_quota: Option<f64>,
    },
    /// Per-hit uprobe cost of every engine probe point (needs root and bpftrace).
    Probes {
        /// Calls per symbol per run.
        #[arg(long, default_value_t = 200_000)]
        calls: u64,
        /// Interleaved repetitions.
        #[arg(short = 'r', long, default_value_t = 3)]
        reps: u32,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (name, result, steps) = match cli.task {
        Task::Setup { oracle } => run("setup", |s| setup::run(s, oracle)),
        Task::Test => {
            test::build_tests_without_lto();
            run("test", test::run)
        }
        Task::Demo => run("demo", demo::run),
        Task::Board => run("board", board::run_tests),
        Task::Eval { quick } => run("eval", |s| eval::run(s, eval::EvalConfig { quick })),
        Task::Dist { target } => run("dist", |s| {
            dist::run(s, cross::Arch::parse(&target)?).map(|_| ())
        }),
        Task::Analyze {
            trace,
            output,
            rest,
        } => run("analyze", |s| {
            let profinfer = s.run("build profinfer", programs::profinfer)?;
            s.run("profinfer analyze", || {
                process::run(
                    std::process::Command::new(&profinfer)
                        .arg("analyze")
                        .arg(&trace)
                        .arg("-o")
                        .arg(&output)
                        .args(&rest),
                )
            })
        }),
        Task::Bench {
            which: BenchTask::LlamaCpp(config),
        } => run("bench llama-cpp", |s| bench::llama_cpp::run(s, &config)),
        Task::Bench {
            which:
                BenchTask::Overhead {
                    targets,
                    models,
                    threads,
                    pairs,
                    lengths,
                    recordings,
                    windows,
                    window_tokens,
                    sample_windows,
                    cpu_quota,
                },
        } => run("bench overhead", |s| {
            let config = bench::overhead::OverheadConfig {
                targets: parse_each(&targets, bench::overhead::Target::parse)?,
                models: parse_each(&models, bench::overhead::BenchModel::parse)?,
                threads,
                pairs,
                lengths: match lengths[..] {
                    [a, b] => (a, b),
                    _ => anyhow::bail!("--lengths SHORT,LONG"),
                },
                recordings,
                windows: (windows != "off").then_some(windows),
                window_tokens,
                sample_windows: (sample_windows != "off").then_some(sample_windows),
                cpu_quota,
            };
            bench::overhead::run(s, &config)
        }),
        Task::Bench {
            which: BenchTask::Probes { calls, reps },
        } => run("bench probes", |s| {
            bench::probes::run(s, &bench::probes::ProbesConfig { calls, reps })
        }),
    };
    eprintln!("{}", steps.summary());
    eprint!("{}{}", steps.table(), steps.failures());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cargo xtask {name}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one task's steps and returns its name, result and step records.
fn run(
    name: &'static str,
    f: impl FnOnce(&mut Steps) -> Result<()>,
) -> (&'static str, Result<()>, Steps) {
    let mut steps = Steps::new(name);
    let result = f(&mut steps);
    (name, result, steps)
}

/// Each of `items` parsed with `parse`.
fn parse_each<T>(items: &[String], parse: fn(&str) -> Result<T>) -> Result<Vec<T>> {
    items.iter().map(|s| parse(s)).collect()
}
