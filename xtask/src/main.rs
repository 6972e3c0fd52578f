//! `cargo xtask`: project tasks — set-up, test, demo and benchmarks.
//!
//! Every subprocess is printed before it runs; every step prints how long it took; a
//! failing step makes the command exit with a non-zero code.

mod bench;
mod demo;
mod digest;
mod engine;
mod oracle_env;
mod paths;
mod process;
mod real_model;
mod setup;
mod steps;
mod test;
mod tracer;

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
        /// Also build/install the llama.cpp oracle (Python venv in `.venv`).
        #[arg(long)]
        oracle: bool,
    },
    /// Set up (with the oracle) and run every test, then a fuzz smoke run.
    Test,
    /// Install what it needs, build, fetch SmolLM2, chat with it traced, analyze the trace.
    Demo,
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
    LlamaCpp {
        /// Model preset.
        #[arg(long, default_value = "llama3.2-1b")]
        preset: String,
        /// Weight types to benchmark, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "f16,q8_0,q4_0")]
        dtypes: Vec<String>,
        /// Threads for both implementations.
        #[arg(short = 't', long, default_value_t = 2)]
        threads: u32,
        /// Interleaved repetitions.
        #[arg(short = 'r', long, default_value_t = 3)]
        reps: u32,
        /// Prompt tokens of the prefill test.
        #[arg(short = 'p', long, default_value_t = 512)]
        prompt: u32,
        /// Generated tokens of the decode test.
        #[arg(short = 'n', long, default_value_t = 128)]
        generate: u32,
    },
    /// Slowdown of the engine (or, with `--target llama.cpp`, of llama.cpp's own
    /// llama-bench) under `profinfer record`, per tracing configuration (seed 002 Table 5;
    /// needs root).
    Overhead {
        /// `engine` or `llama.cpp`.
        #[arg(long, default_value = "engine")]
        target: String,
        /// Model preset.
        #[arg(long, default_value = "llama3.2-1b")]
        preset: String,
        /// Weight type.
        #[arg(long, default_value = "q8_0")]
        dtype: String,
        /// Engine threads.
        #[arg(short = 't', long, default_value_t = 2)]
        threads: u32,
        /// Interleaved repetitions.
        #[arg(short = 'r', long, default_value_t = 3)]
        reps: u32,
        /// Prompt tokens of the prefill test.
        #[arg(short = 'p', long, default_value_t = 128)]
        prompt: u32,
        /// Decode steps of the decode test.
        #[arg(short = 'n', long, default_value_t = 32)]
        generate: u32,
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
        Task::Test => run("test", test::run),
        Task::Demo => run("demo", demo::run),
        Task::Analyze {
            trace,
            output,
            rest,
        } => run("analyze", |s| {
            let profinfer = s.run("build profinfer", tracer::build_release)?;
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
            which:
                BenchTask::LlamaCpp {
                    preset,
                    dtypes,
                    threads,
                    reps,
                    prompt,
                    generate,
                },
        } => {
            let config = bench::llama_cpp::BenchConfig {
                preset,
                dtypes,
                threads,
                reps,
                prompt,
                generate,
            };
            run("bench llama-cpp", |s| bench::llama_cpp::run(s, &config))
        }
        Task::Bench {
            which:
                BenchTask::Overhead {
                    target,
                    preset,
                    dtype,
                    threads,
                    reps,
                    prompt,
                    generate,
                },
        } => run("bench overhead", |s| {
            let target = match target.as_str() {
                "engine" => bench::overhead::Target::Engine,
                "llama.cpp" | "llama-cpp" => bench::overhead::Target::LlamaCpp,
                other => anyhow::bail!("--target {other}: engine or llama.cpp"),
            };
            let config = bench::overhead::OverheadConfig {
                target,
                preset,
                dtype,
                threads,
                reps,
                prompt,
                generate,
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
