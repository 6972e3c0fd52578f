//! The overhead benchmark's rows and their Markdown tables.

use std::fmt::Write as _;

use super::measure::{Pair, RunSample, Spread, per_token};
use super::{OverheadConfig, RECORDINGS, Recording};

/// One target × model × recording.
#[derive(Clone, Debug)]
pub struct Row {
    /// `engine` or `llama.cpp`.
    pub target: &'static str,
    /// The model's label.
    pub model: String,
    /// The recording's name.
    pub recording: &'static str,
    /// The goal for this row, % of decode CPU time.
    pub goal: Option<f64>,
    /// Untraced CPU time per decode token, ms (median over pairs).
    pub untraced_cpu_ms: f64,
    /// Traced against untraced CPU time per decode token, % (per pair).
    pub cpu: Spread,
    /// Traced against untraced wall time per decode token, % (per pair).
    pub wall: Spread,
    /// Traced minus untraced CPU time per decode token, µs (median over pairs).
    pub added_us: f64,
    /// The collector's CPU time per decode token, µs (median over pairs).
    pub collector_us: Option<f64>,
    /// Probe program runs per decode token (statistics runs).
    pub hits_per_token: Option<f64>,
    /// Time inside the eBPF programs per decode token, µs (statistics runs).
    pub programs_us: Option<f64>,
    /// Trace bytes per operator record (the long traced run of the last pair), if any.
    pub bytes_per_op_record: Option<f64>,
    /// Trace bytes per decode token (median over pairs).
    pub bytes_per_token: f64,
}

impl Row {
    /// The row of `recording` from its pairs and its two statistics runs.
    pub fn new(
        target: &'static str,
        model: &str,
        recording: &Recording,
        goal: Option<f64>,
        pairs: &[Pair],
        stats: &(RunSample, RunSample),
        lengths: (u32, u32),
    ) -> Row {
        let pct = |(u, t): (f64, f64)| 100.0 * (t / u.max(f64::MIN_POSITIVE) - 1.0);
        let nan = Spread {
            median: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
        };
        let cpu = Spread::of(pairs.iter().map(|p| pct(p.cpu(lengths))).collect()).unwrap_or(nan);
        let wall = Spread::of(pairs.iter().map(|p| pct(p.wall(lengths))).collect()).unwrap_or(nan);
        let median = |v: Vec<f64>| Spread::of(v).map_or(f64::NAN, |s| s.median);
        let untraced_cpu_ms = median(pairs.iter().map(|p| p.cpu(lengths).0 * 1e3).collect());
        let added_us = median(
            pairs
                .iter()
                .map(|p| {
                    let (u, t) = p.cpu(lengths);
                    (t - u) * 1e6
                })
                .collect(),
        );
        let collector: Vec<f64> = pairs
            .iter()
            .filter_map(|p| p.collector_cpu(lengths))
            .map(|s| s * 1e6)
            .collect();
        let collector_us = Spread::of(collector).map(|s| s.median);
        let (hits_per_token, programs_us) = match (&stats.0.cost, &stats.1.cost) {
            (Some(a), Some(b)) if a.stats_enabled && b.stats_enabled => (
                Some(per_token(a.hits() as f64, b.hits() as f64, lengths)),
                Some(per_token(a.run_ns() as f64, b.run_ns() as f64, lengths) / 1e3),
            ),
            _ => (None, None),
        };
        let last = pairs.last().map(|p| &p.traced.1);
        let bytes_per_op_record = last
            .filter(|s| s.op_records > 0)
            .map(|s| s.trace_bytes as f64 / s.op_records as f64);
        let bytes_per_token = median(
            pairs
                .iter()
                .map(|p| {
                    per_token(
                        p.traced.0.trace_bytes as f64,
                        p.traced.1.trace_bytes as f64,
                        lengths,
                    )
                })
                .collect(),
        );
        Row {
            target,
            model: model.to_owned(),
            recording: recording.name,
            goal,
            untraced_cpu_ms,
            cpu,
            wall,
            added_us,
            collector_us,
            hits_per_token,
            programs_us,
            bytes_per_op_record,
            bytes_per_token,
        }
    }

    /// What no program accounts for, µs per token: the added CPU time minus the
    /// programs' and the collector's.
    pub fn unaccounted_us(&self) -> Option<f64> {
        Some(self.added_us - self.programs_us? - self.collector_us?)
    }

    /// Whether the row meets its goal (by the median).
    pub fn verdict(&self) -> &'static str {
        match self.goal {
            Some(g) if self.cpu.median <= g => "met",
            Some(_) => "**not met**",
            None => "",
        }
    }

    /// A progress line.
    pub fn one_line(&self) -> String {
        format!(
            "    {} / {} / {}: CPU per decode token {:+.1} % ({:+.1}..{:+.1}), wall {:+.1} %",
            self.target,
            self.model,
            self.recording,
            self.cpu.median,
            self.cpu.min,
            self.cpu.max,
            self.wall.median
        )
    }
}

/// The in-process comparison of one sampled-windows recording.
#[derive(Clone, Debug)]
pub struct WindowRow {
    /// `engine` or `llama.cpp`.
    pub target: &'static str,
    /// The model's label.
    pub model: String,
    /// `ON/PERIOD`.
    pub windows: String,
    /// Traced against untraced decode step time, % (per run).
    pub slowdown: Spread,
    /// Traced steps (last run).
    pub traced_steps: usize,
    /// Untraced steps (last run).
    pub untraced_steps: usize,
    /// Steps left out around the switches (last run).
    pub switch_steps: usize,
    /// Untraced decode step, ms (last run).
    pub untraced_p50_ms: f64,
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.filter(|v| v.is_finite())
        .map_or_else(|| "–".into(), |v| format!("{v:.digits$}"))
}

/// The tables, their legend and the command.
pub fn markdown(cfg: &OverheadConfig, rows: &[Row], windows: &[WindowRow]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "Decode cost of recording, end to end: CPU time per decode token of the program and \
         the recorder together (the run's `wait4` CPU time, children included), as the \
         difference of a {}-token and a {}-token generation, untraced and traced interleaved \
         (ABBA), {} pairs at {} threads; median and range over the pairs.\n",
        cfg.lengths.0, cfg.lengths.1, cfg.pairs, cfg.threads
    );
    let _ = writeln!(
        t,
        "| target | model | recording | untraced CPU/token | CPU/token (range) | goal | wall/token \
         (range) | added µs/token | eBPF programs µs/token (runs) | collector µs/token | \
         unaccounted µs/token (ns/run) | trace B/op record | trace KB/token |"
    );
    let _ = writeln!(
        t,
        "|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in rows {
        let goal = r
            .goal
            .map_or_else(String::new, |g| format!("≤ +{g} %: {}", r.verdict()));
        let programs = match (r.programs_us, r.hits_per_token) {
            (Some(us), Some(h)) => format!("{us:.1} ({h:.0})"),
            _ => "–".into(),
        };
        let unaccounted = match (r.unaccounted_us(), r.hits_per_token) {
            (Some(u), Some(h)) if h >= 1.0 => format!("{u:.1} ({:.0})", u * 1e3 / h),
            (Some(u), _) => format!("{u:.1}"),
            _ => "–".into(),
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {:.2} ms | {:+.1} % ({:+.1}..{:+.1}) | {goal} | {:+.1} % \
             ({:+.1}..{:+.1}) | {:.0} | {programs} | {} | {unaccounted} | {} | {:.1} |",
            r.target,
            r.model,
            r.recording,
            r.untraced_cpu_ms,
            r.cpu.median,
            r.cpu.min,
            r.cpu.max,
            r.wall.median,
            r.wall.min,
            r.wall.max,
            r.added_us,
            opt(r.collector_us, 1),
            opt(r.bytes_per_op_record, 1),
            r.bytes_per_token / 1024.0
        );
    }
    let _ = writeln!(t, "\nRecordings:\n");
    for rec in RECORDINGS {
        if rows.iter().any(|r| r.recording == rec.name) {
            let _ = writeln!(t, "- **{}**: {}", rec.name, rec.what);
        }
    }
    let _ = writeln!(
        t,
        "\nColumns: *added µs/token* = traced minus untraced CPU time per decode token. \
         *eBPF programs*: the kernel's run-time statistics of the recorder's programs \
         (`BPF_ENABLE_STATS`, on for the whole of two extra runs with \
         `--probe-stats-always`), per decode token, with the program runs per token. \
         *Collector*: the `profinfer` process's CPU time (trace footer). *Unaccounted* = \
         added − programs − collector: the uprobe traps (entering and leaving the kernel \
         around each program) and what they do to the program's caches and branch \
         predictors, with the same per program run in ns. *Trace B/op record*: the whole \
         trace file divided by its operator records."
    );
    if !windows.is_empty() {
        let _ = writeln!(
            t,
            "\nIn-process comparison (`profinfer record --op-windows ON/PERIOD`): operators \
             recorded in windows of ON decode steps in every PERIOD, their probes detached \
             in between; `profinfer report`'s `windows` line compares the median decode step \
             of the traced steps with that of the untraced steps of the same run (same \
             process, cache, KV state and minutes of the machine; steps during a switch \
             left out). Rows `--sample 997, ON/PERIOD` are the always-on mode: its \
             CPU-clock timers attached in the windows and detached in between, so the \
             comparison is what sampling costs. Median and range over {} runs of {} \
             tokens.\n",
            cfg.pairs, cfg.window_tokens
        );
        let _ = writeln!(
            t,
            "| target | model | windows | traced vs untraced step (range) | steps traced / \
             untraced / switching (last run) | untraced step |"
        );
        let _ = writeln!(t, "|---|---|---|---:|---|---:|");
        for w in windows {
            let _ = writeln!(
                t,
                "| {} | {} | {} | {:+.2} % ({:+.2}..{:+.2}) | {} / {} / {} | {:.2} ms |",
                w.target,
                w.model,
                w.windows,
                w.slowdown.median,
                w.slowdown.min,
                w.slowdown.max,
                w.traced_steps,
                w.untraced_steps,
                w.switch_steps,
                w.untraced_p50_ms
            );
        }
    }
    let _ = writeln!(t, "\nCommand: `{}` (as root).", cfg.command());
    t
}
