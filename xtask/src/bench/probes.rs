//! `cargo xtask bench probes`: the per-hit cost of a uprobe on every engine probe point,
//! next to reference functions that start with a 5-byte nop and with a single-stepped
//! instruction. `engine probe-bench` calls each symbol in a loop (bodies return at once);
//! it runs untraced and traced (bpftrace attaches a counting uprobe — or a uprobe and a
//! uretprobe — to every symbol), interleaved; the per-hit cost is traced − untraced.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::paths;
use crate::process;
use crate::steps::Steps;

/// Symbols `engine probe-bench` calls, in its output order.
const SYMBOLS: &[&str] = &[
    "engine_probe_ref_nop",
    "engine_probe_ref_singlestep",
    "engine_decode",
    "engine_graph_compute",
    "engine_op_compute",
    "engine_phase_embed",
    "engine_phase_copy_logits",
    "engine_phase_softmax",
    "engine_phase_sample",
];

/// How long bpftrace may take to attach.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(60);

/// One line of `engine probe-bench --json`.
#[derive(Debug, Deserialize)]
struct ProbeCost {
    symbol: String,
    ns_per_call: f64,
}

/// Settings of the benchmark.
#[derive(Debug, Clone)]
pub struct ProbesConfig {
    /// Calls per symbol per run.
    pub calls: u64,
    /// Interleaved repetitions.
    pub reps: u32,
}

/// Which probes bpftrace attaches.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Probes {
    Entry,
    EntryAndReturn,
}

fn bpftrace_program(engine: &Path, probes: Probes) -> String {
    let points = |kind: &str| {
        SYMBOLS
            .iter()
            .map(|s| format!("{kind}:{}:{s}", engine.display()))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut program = format!("{} {{ @hits[probe] = count(); }}", points("uprobe"));
    if probes == Probes::EntryAndReturn {
        program.push_str(&format!(
            " {} {{ @rets[probe] = count(); }}",
            points("uretprobe")
        ));
    }
    program
}

fn probe_bench(engine: &Path, calls: u64) -> Result<BTreeMap<String, f64>> {
    let costs: Vec<ProbeCost> = process::json(Command::new(engine).args([
        "probe-bench",
        "--json",
        "--calls",
        &calls.to_string(),
    ]))?;
    Ok(costs
        .into_iter()
        .map(|c| (c.symbol, c.ns_per_call))
        .collect())
}

/// Runs `probe-bench` while bpftrace has `probes` attached; checks every call was hit.
fn traced(engine: &Path, calls: u64, probes: Probes) -> Result<BTreeMap<String, f64>> {
    let mut cmd = Command::new("bpftrace");
    cmd.arg("-e")
        .arg(bpftrace_program(engine, probes))
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    process::announce(&cmd);
    let mut child = cmd
        .spawn()
        .context("starting bpftrace (installed by `cargo xtask setup`)")?;
    let stdout = child.stdout.take().context("bpftrace stdout")?;
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("Attaching") {
                let _ = tx.send(());
            }
            lines.push(line);
        }
        lines
    });
    if rx.recv_timeout(ATTACH_TIMEOUT).is_err() {
        let _ = child.kill();
        bail!("bpftrace did not attach its probes within {ATTACH_TIMEOUT:?}");
    }
    // bpftrace prints "Attaching" just before attaching; give it a moment to finish.
    std::thread::sleep(Duration::from_millis(500));
    let result = probe_bench(engine, calls);
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe_sigint(child.id());
    let _ = child.wait();
    let lines = reader.join().unwrap_or_default();
    let result = result?;
    // Every symbol must have been hit at least `calls` times (plus warm-up calls).
    for sym in SYMBOLS {
        let hits = lines
            .iter()
            .find(|l| l.starts_with("@hits[") && l.contains(&format!(":{sym}]")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if hits < calls {
            bail!(
                "bpftrace counted {hits} hits of {sym}, expected at least {calls}: the probe did not fire"
            );
        }
    }
    Ok(result)
}

fn unsafe_sigint(pid: u32) {
    let _ = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status();
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

/// Runs the benchmark and writes `out/bench/probes.md`.
pub fn run(steps: &mut Steps, cfg: &ProbesConfig) -> Result<()> {
    let engine = steps.run("build engine", crate::programs::engine)?;
    let mut plain: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut entry: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut both: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for rep in 1..=cfg.reps {
        steps.run(
            &format!("rep {rep}/{}: untraced, uprobe, uprobe+uretprobe", cfg.reps),
            || {
                for (sym, ns) in probe_bench(&engine, cfg.calls)? {
                    plain.entry(sym).or_default().push(ns);
                }
                for (sym, ns) in traced(&engine, cfg.calls, Probes::Entry)? {
                    entry.entry(sym).or_default().push(ns);
                }
                for (sym, ns) in traced(&engine, cfg.calls, Probes::EntryAndReturn)? {
                    both.entry(sym).or_default().push(ns);
                }
                Ok(())
            },
        )?;
    }
    let mut table = String::new();
    let _ = writeln!(
        table,
        "Per-hit cost of a uprobe on each probe point (median of {} interleaved runs of {} calls; \
         cost = traced − untraced ns/call).\n",
        cfg.reps, cfg.calls
    );
    let _ = writeln!(
        table,
        "| symbol | untraced ns/call | uprobe µs/hit | uprobe+uretprobe µs/hit | vs nop reference |"
    );
    let _ = writeln!(table, "|---|---:|---:|---:|---:|");
    let base =
        |m: &BTreeMap<String, Vec<f64>>, s: &str| median(m.get(s).cloned().unwrap_or_default());
    let nop_cost = base(&entry, "engine_probe_ref_nop") - base(&plain, "engine_probe_ref_nop");
    for sym in SYMBOLS {
        let p = base(&plain, sym);
        let e = base(&entry, sym) - p;
        let b = base(&both, sym) - p;
        let _ = writeln!(
            table,
            "| `{sym}` | {p:.1} | {:.2} | {:.2} | {:.2}× |",
            e / 1e3,
            b / 1e3,
            if nop_cost > 0.0 { e / nop_cost } else { 0.0 }
        );
    }
    let _ = writeln!(
        table,
        "\nCommand: `cargo xtask bench probes --calls {} --reps {}`",
        cfg.calls, cfg.reps
    );
    println!("\n{table}");
    let out = paths::out_dir().join("bench");
    paths::create_dir(&out)?;
    let file = out.join("probes.md");
    std::fs::write(&file, &table).with_context(|| format!("writing {}", file.display()))?;
    eprintln!("wrote {}", file.display());
    Ok(())
}
