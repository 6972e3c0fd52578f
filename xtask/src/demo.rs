//! `cargo xtask demo`: install what the demo needs, build, fetch a real model (SmolLM2),
//! chat with it while `profinfer record` traces the run, analyze the trace, and show the
//! headline numbers and where the outputs are.
//!
//! It needs nothing done before: the eBPF toolchain (nightly `rust-src`, bpf-linker),
//! graphviz and the model are installed or fetched by its own first steps.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use serde::Deserialize;

use crate::paths;
use crate::process;
use crate::programs;
use crate::real_model::SMOLLM2;
use crate::setup;
use crate::steps::Steps;

/// The question the demo asks SmolLM2 through its chat template.
pub const PROMPT: &str = "What does a profiler tell a programmer? Answer in two sentences.";
/// Most tokens the answer may have (it usually ends earlier, at the end-of-turn token).
pub const N_GENERATE: u32 = 96;
/// Threads the demo runs with.
pub const THREADS: u32 = 2;
/// The cargo profile the demo builds its programs in.
pub const PROFILE: &str = "release";

/// Runs the demo steps.
pub fn run(steps: &mut Steps) -> Result<()> {
    setup::install(steps, setup::DEMO)?;
    let built = steps.run(
        "build the engine and profinfer (and its eBPF probes)",
        || programs::build(PROFILE, &[programs::ENGINE, programs::PROFINFER]),
    )?;
    let (engine_bin, profinfer) = (&built[0], &built[1]);
    let model = steps.run(
        &format!("fetch the demo model ({})", SMOLLM2.description),
        || SMOLLM2.ensure(),
    )?;
    let demo_dir = paths::out_dir().join("demo");
    paths::create_dir(&demo_dir)?;
    let trace = demo_dir.join("trace.pftrace");
    let analysis = demo_dir.join("analysis");
    let self_profile = demo_dir.join("self-profile.jsonl");
    let mut engine_run = Command::new(engine_bin);
    engine_run
        .args(["run", "--chat", "-p", PROMPT, "--temp", "0"])
        .args([
            "-n",
            &N_GENERATE.to_string(),
            "-t",
            &THREADS.to_string(),
            "-m",
        ])
        .arg(&model);
    let traced = process::is_root();
    if traced {
        steps.run("chat with SmolLM2, traced by profinfer record", || {
            println!("\nuser> {PROMPT}\nassistant> (streamed as it is generated)\n");
            let mut record = Command::new(profinfer);
            record.arg("record").arg("-o").arg(&trace).arg("--");
            record
                .arg(engine_run.get_program())
                .args(engine_run.get_args());
            record.arg("--self-profile").arg(&self_profile);
            process::run(&mut record)
        })?;
        steps.run("analyze the trace (profinfer analyze)", || {
            process::run(
                Command::new(profinfer)
                    .arg("analyze")
                    .arg(&trace)
                    .arg("-o")
                    .arg(&analysis),
            )
        })?;
    } else {
        let reason = "tracing needs root (CAP_BPF, CAP_PERFMON): run `sudo -E cargo xtask demo`";
        eprintln!("\n!!! {reason}\n");
        steps.run("chat with SmolLM2 (not traced)", || {
            println!("\nuser> {PROMPT}\nassistant> (streamed as it is generated)\n");
            process::run(&mut engine_run)
        })?;
        steps.skip("trace and analyze", reason);
    }
    println!();
    if traced {
        print_headline(&analysis.join("summary.json"))?;
    }
    println!("outputs:");
    println!("  model:            {}", model.display());
    if traced {
        println!("  trace:            {}", trace.display());
        println!(
            "  engine ground truth (--self-profile): {}",
            self_profile.display()
        );
        for (what, file) in [
            ("analysis (open in a browser)", "index.html"),
            (
                "timeline (open in https://ui.perfetto.dev)",
                "timeline.perfetto-trace",
            ),
            ("timeline as Chrome JSON", "timeline.json"),
            ("flame graph", "flame.svg"),
            ("summary", "summary.json"),
        ] {
            let path = analysis.join(file);
            if path.exists() {
                println!("  {what}: {}", path.display());
            }
        }
        println!(
            "next: {p} report {t}   (top operators in the terminal; --by layer|node)",
            p = profinfer.display(),
            t = trace.display()
        );
    }
    Ok(())
}

/// The part of `summary.json` the demo prints.
#[derive(Debug, Deserialize)]
struct Headline {
    /// Token counts.
    tokens: HeadlineTokens,
    /// Time to first token, ms.
    ttft_ms: Option<f64>,
    /// Time per output token, ms.
    tpot_ms: Option<HeadlineDistribution>,
    /// Record totals.
    events: HeadlineEvents,
    /// Threads seen.
    threads: usize,
    /// Per operator type, as the analyzer orders them.
    op_types: Vec<HeadlineOp>,
}

/// Token counts of `summary.json`.
#[derive(Debug, Deserialize)]
struct HeadlineTokens {
    /// Prompt tokens.
    prefill: u64,
    /// Decode steps.
    decode: u64,
}

/// A distribution of `summary.json`.
#[derive(Debug, Deserialize)]
struct HeadlineDistribution {
    /// Mean, ms.
    mean: f64,
    /// Median, ms.
    p50: f64,
}

/// Record totals of `summary.json`.
#[derive(Debug, Deserialize)]
struct HeadlineEvents {
    /// Records written by the probes.
    written: u64,
    /// Records lost.
    lost: u64,
}

/// One op type row of `summary.json`.
#[derive(Debug, Deserialize)]
struct HeadlineOp {
    /// Op name.
    op: String,
    /// Executions.
    count: u64,
    /// Mean time, µs.
    mean_us: f64,
    /// Share of decode time.
    share_of_token_time: f64,
}

/// Prints where the traced run's time went, from the analysis' `summary.json`.
fn print_headline(summary: &Path) -> Result<()> {
    let text = std::fs::read_to_string(summary)
        .with_context(|| format!("cannot read {}", summary.display()))?;
    let h: Headline = serde_json::from_str(&text)
        .with_context(|| format!("{} is not the analyzer's summary", summary.display()))?;
    println!("where the time went (from the trace):");
    println!(
        "  {} prompt tokens, {} decode steps, {} threads; {} records, {} lost",
        h.tokens.prefill, h.tokens.decode, h.threads, h.events.written, h.events.lost
    );
    if let Some(ttft) = h.ttft_ms {
        println!("  time to first token: {ttft:.1} ms");
    }
    if let Some(tpot) = &h.tpot_ms {
        println!(
            "  time per output token: {:.2} ms mean, {:.2} ms median",
            tpot.mean, tpot.p50
        );
    }
    let mut ops: Vec<&HeadlineOp> = h.op_types.iter().collect();
    ops.sort_by(|a, b| b.share_of_token_time.total_cmp(&a.share_of_token_time));
    println!("  operators by share of decode time:");
    for op in ops.iter().take(5) {
        println!(
            "    {:<10} {:>5.1} %  {:>7} runs  {:>8.1} µs mean",
            op.op,
            100.0 * op.share_of_token_time,
            op.count,
            op.mean_us
        );
    }
    println!();
    Ok(())
}
