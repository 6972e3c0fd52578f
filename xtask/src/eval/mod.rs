//! `cargo xtask eval [--quick]`: profinfer's evaluation, regenerated. Records the engine
//! on SmolLM2 (and, in the full run, llama3.2-1b's shapes and llama.cpp), exports every
//! run into the Parquet run tables (`profinfer export --parquet`), measures what
//! recording costs (`cargo xtask bench overhead`'s pairs), and makes every table with
//! DuckDB queries over those runs (`scripts/eval/sql/`), into `docs/evaluation.md`
//! (full run) or `out/eval/evaluation.md` (`--quick`, as CI runs it).

mod board_counters;
mod doc;
mod llama_ops;
mod machine;
mod recordings;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result};

use crate::bench::overhead::{self, BenchModel, Measured, OverheadConfig, Target};
use crate::paths;
use crate::process;
use crate::real_model::SMOLLM2;
use crate::steps::Steps;
use board_counters::BoardCounters;
use doc::Source;
use llama_ops::LlamaOps;
use recordings::{EngineRun, Recorder};

/// The DuckDB wheel the queries run on (PyPI, into the project's `.venv`).
const DUCKDB: &str = "duckdb==2.0.1";

/// Seed of generated (preset) models.
const SEED: u64 = 1;

/// The engine's backend split of the split run (seed 002 Figs 7/12): layers 0–14 of
/// SmolLM2's 30 on the accel backend (one thread, each operator stretched to twice its
/// compute time, a slower accelerator), the rest on one CPU thread.
const SPLIT_FLAGS: &[&str] = &[
    "--accel-threads",
    "1",
    "--offload-layers",
    "0..15",
    "--accel-speed",
    "0.5",
];

/// The mixture of experts of Fig 13: 4 layers of 32 experts (4 used per token), ~115 MB
/// in q4_0, experts ~110 MB of it, so memory limits of tens of MB evict experts.
const MOE_PRESET: &str = "small-moe";

/// Sampled windows of the in-process cost comparison: operators recorded in 128 decode
/// steps of every 256.
const WINDOWS: &str = "128/256";

/// How much to run.
#[derive(Clone, Copy, Debug)]
pub struct EvalConfig {
    /// The CI-sized run: SmolLM2 only, short generations, two cost pairs.
    pub quick: bool,
}

impl EvalConfig {
    fn command(self) -> &'static str {
        if self.quick {
            "cargo xtask eval --quick"
        } else {
            "cargo xtask eval"
        }
    }

    /// Decode tokens of the accuracy runs.
    fn accuracy_tokens(self) -> u32 {
        if self.quick { 16 } else { 64 }
    }

    /// Memory limits of the expert runs (`engine run --mem-limit`; `none`: unlimited),
    /// from the whole model down to half of it.
    fn memory_limits(self) -> &'static [&'static str] {
        if self.quick {
            &["none", "96M"]
        } else {
            &["none", "112M", "96M", "80M", "64M"]
        }
    }

    /// The limit whose run the expert figures show.
    fn figure_limit(self) -> &'static str {
        "96M"
    }

    /// Decode tokens of the expert runs.
    fn expert_tokens(self) -> u32 {
        if self.quick { 16 } else { 48 }
    }

    /// Decode tokens of the arm64 board's counters run (under emulation).
    fn board_tokens(self) -> u32 {
        if self.quick { 4 } else { 8 }
    }

    /// Decode tokens of the context-growth run.
    fn context_tokens(self) -> u32 {
        if self.quick { 64 } else { 960 }
    }

    /// The constrained condition: SmolLM2's default recording with every measured
    /// command in a cgroup of one CPU's quota (2 threads on 1 CPU of time, the collector
    /// included), as on a board whose inference gets part of the cores.
    fn constrained(self) -> OverheadConfig {
        let mut c = self.overhead();
        c.models = vec![BenchModel::SmolLm2];
        c.recordings = Some(vec!["default".into()]);
        c.cpu_quota = Some(1.0);
        // The windows are an unconstrained measure (they run outside the quota).
        c.windows = None;
        c.sample_windows = None;
        c
    }

    /// The cost benchmark's configuration.
    fn overhead(self) -> OverheadConfig {
        if self.quick {
            OverheadConfig {
                targets: vec![Target::Engine],
                models: vec![BenchModel::SmolLm2],
                threads: 2,
                pairs: 2,
                lengths: (8, 24),
                recordings: Some(vec!["default".into(), "token+graph".into()]),
                // Two untraced windows of 128 steps. A switch (the probes' detachment)
                // takes a few hundred ms: ~60 steps of SmolLM2's 4.9 ms on a fast VM,
                // where 48/96 left 1 untraced step per run.
                windows: Some(WINDOWS.into()),
                window_tokens: 512,
                sample_windows: None,
                cpu_quota: None,
            }
        } else {
            OverheadConfig {
                targets: vec![Target::Engine, Target::LlamaCpp],
                models: vec![
                    BenchModel::SmolLm2,
                    BenchModel::Preset {
                        preset: "llama3.2-1b".into(),
                        dtype: "q4_0".into(),
                    },
                ],
                threads: 2,
                pairs: 6,
                lengths: (16, 80),
                recordings: None,
                // The in-process comparison (every model and target): 6 runs of 1024
                // steps, 4 untraced windows each.
                windows: Some(WINDOWS.into()),
                window_tokens: 1024,
                sample_windows: Some(WINDOWS.into()),
                cpu_quota: None,
            }
        }
    }
}

/// Makes sure the project's `.venv` can `import duckdb`.
fn ensure_duckdb() -> Result<()> {
    crate::oracle_env::ensure()?;
    let python = paths::venv_python();
    if process::succeeds(Command::new(&python).args(["-c", "import duckdb"])) {
        eprintln!("    duckdb present in {}", paths::venv_dir().display());
        return Ok(());
    }
    process::run(Command::new(&python).args(["-m", "pip", "install", "-q", DUCKDB]))
}

/// Runs the evaluation.
pub fn run(steps: &mut Steps, cfg: EvalConfig) -> Result<()> {
    if !crate::process::is_root() {
        anyhow::bail!(
            "cargo xtask eval records with eBPF probes and sets a cgroup CPU quota: run it as root"
        );
    }
    let engine = steps.run("build engine", crate::programs::engine)?;
    let profinfer = steps.run("build profinfer", crate::programs::profinfer)?;
    let smollm2 = steps.run("SmolLM2", || SMOLLM2.ensure())?;
    steps.run("DuckDB in .venv", ensure_duckdb)?;
    let out = paths::out_dir().join("eval");
    let runs = out.join("runs");
    if runs.exists() {
        std::fs::remove_dir_all(&runs).with_context(|| format!("clearing {}", runs.display()))?;
    }
    let scratch = out.join("traces");
    for d in [&runs, &scratch] {
        paths::create_dir(d)?;
    }
    let machine = machine::Machine::read();
    let sections = Sections {
        cfg,
        smollm2: &smollm2,
        recorder: Recorder {
            engine: &engine,
            profinfer: &profinfer,
            runs: &runs,
            scratch: &scratch,
        },
        figures: if cfg.quick {
            out.join("img")
        } else {
            paths::repo_root().join("docs/img/eval")
        },
    };
    let accuracy_runs = sections.accuracy(steps)?;
    let llama_ops = sections.llama_ops(steps)?;
    let context = sections.context(steps)?;
    let (counters, board_counters) = sections.counters(steps)?;
    let split = sections.split(steps)?;
    let expert_runs = sections.experts(steps)?;
    let costs = [cfg.overhead(), cfg.constrained()];
    let measured = cost(steps, &costs, &runs)?;
    // A query that fails does not lose the runs' hour: the document is written with what
    // the other queries made, and the failure is reported after it.
    let tables = out.join("tables");
    let tables_result = steps.run("tables (DuckDB)", || make_tables(cfg, &runs, &tables));
    let evaluation = doc::Evaluation {
        cfg,
        machine: &machine,
        tables: &tables,
        accuracy_runs: &accuracy_runs,
        llama_ops: llama_ops.as_ref(),
        context: &context,
        counters: &counters,
        board_counters: &board_counters,
        split: &split,
        expert_runs: &expert_runs,
        figure_limit: cfg.figure_limit(),
        overhead: &costs[0],
        constrained: &costs[1],
        overhead_markdown: costs
            .iter()
            .zip(&measured)
            .map(|(c, m)| overhead::accounting_markdown(c, m))
            .collect::<Vec<_>>()
            .join("\n"),
        figures: &sections.figures,
    };
    let text = evaluation.markdown()?;
    let mut written = vec![out.join("evaluation.md")];
    if !cfg.quick {
        written.push(paths::repo_root().join("docs/evaluation.md"));
    }
    for f in &written {
        std::fs::write(f, &text).with_context(|| format!("writing {}", f.display()))?;
        eprintln!("wrote {}", f.display());
    }
    eprintln!(
        "run tables: {} (query them: scripts/eval/sql/*.sql with DuckDB)",
        runs.display()
    );
    outcome(tables_result, &evaluation.uncomputed_verdicts())
}

/// The recorded sections of the evaluation, each a method: its recordings (into the run
/// tables) and the figures drawn from them.
struct Sections<'a> {
    /// How much to run.
    cfg: EvalConfig,
    /// The real model.
    smollm2: &'a Path,
    /// Records the engine into the run tables.
    recorder: Recorder<'a>,
    /// Where the figures are copied.
    figures: PathBuf,
}

impl Sections<'_> {
    /// Accuracy: the real model, and in the full run llama3.2-1b's shapes, each recorded
    /// with default and exact spans against the engine's ground truth.
    fn accuracy(&self, steps: &mut Steps) -> Result<Vec<EngineRun>> {
        let mut models = vec![("smollm2", self.smollm2.to_path_buf())];
        if !self.cfg.quick {
            let m = steps.run("model llama3.2-1b q4_0", || {
                crate::engine::ensure_model(self.recorder.engine, "llama3.2-1b", "q4_0", SEED)
            })?;
            models.push(("llama3.2-1b-q4_0", m));
        }
        let mut accuracy_runs = Vec::new();
        for (name, model) in &models {
            for exact in [false, true] {
                let kind = if exact { "accuracy-exact" } else { "accuracy" };
                let tokens = self.cfg.accuracy_tokens();
                let mut run = EngineRun::new(format!("{kind}/{name}"), model, 64, tokens);
                run.ground_truth = true;
                if exact {
                    run.record_flags.push("--exact-spans".into());
                }
                steps.run(&format!("record {}", run.label), || {
                    self.recorder.record(&run)
                })?;
                accuracy_runs.push(run);
            }
        }
        Ok(accuracy_runs)
    }

    /// llama.cpp has no ground truth inside: its traced ops against its own benchmark of
    /// the same ops (full run only: the test programs are a 10-minute build, once).
    fn llama_ops(&self, steps: &mut Steps) -> Result<Option<LlamaOps>> {
        if self.cfg.quick {
            return Ok(None);
        }
        let tests = steps.run("llama.cpp's test programs", crate::llama_tests::ensure)?;
        let bench = crate::oracle_env::llama_bin_dir()?.join("llama-bench");
        let tokens = self.cfg.accuracy_tokens();
        let ops = steps.run("llama.cpp's ops against test-backend-ops", || {
            llama_ops::run(&self.recorder, &tests, &bench, self.smollm2, tokens)
        })?;
        Ok(Some(ops))
    }

    /// Findings: a long generation for latency against context, products, balance.
    fn context(&self, steps: &mut Steps) -> Result<EngineRun> {
        let tokens = self.cfg.context_tokens();
        let context = EngineRun::new("context/smollm2", self.smollm2, 16, tokens);
        let trace = steps.run("record context/smollm2", || self.recorder.record(&context))?;
        self.figures_of(steps, "context", &trace, Source::Context)?;
        Ok(context)
    }

    /// Fig 11: operators' counters (hardware where the machine has a PMU, software here
    /// otherwise), read at both bounds of every operator span; then the same on the
    /// emulated arm64 board, whose PMU counts instructions: one engine thread on one CPU,
    /// a 4-token prompt (prefill is slow under emulation).
    fn counters(&self, steps: &mut Steps) -> Result<(EngineRun, BoardCounters)> {
        let tokens = self.cfg.accuracy_tokens();
        let mut counters = EngineRun::new("counters/smollm2", self.smollm2, 64, tokens);
        counters.record_flags.push("--pmc".into());
        steps.run("record counters/smollm2", || {
            self.recorder.record(&counters)
        })?;
        let guest_kit = steps.run("arm64 board kit", crate::board::prepare_guest)?;
        let tokens = self.cfg.board_tokens();
        let mut arm64 = EngineRun::new(board_counters::LABEL, self.smollm2, 4, tokens);
        arm64.threads = 1;
        arm64.record_flags.push("--pmc".into());
        let board = steps.run("record counters on the arm64 board", || {
            board_counters::run(&self.recorder, &guest_kit, &arm64)
        })?;
        Ok((counters, board))
    }

    /// Figs 7/12: half the layers on the accel backend at half speed, one CPU thread.
    fn split(&self, steps: &mut Steps) -> Result<EngineRun> {
        let tokens = self.cfg.accuracy_tokens();
        let mut split = EngineRun::new("split/smollm2", self.smollm2, 64, tokens);
        split.threads = 1;
        split.engine_flags = SPLIT_FLAGS.iter().map(|s| (*s).into()).collect();
        let trace = steps.run("record split/smollm2", || self.recorder.record(&split))?;
        self.figures_of(steps, "split", &trace, Source::Split)?;
        Ok(split)
    }

    /// Fig 13: an MoE model's experts under a sweep of memory limits.
    fn experts(&self, steps: &mut Steps) -> Result<Vec<EngineRun>> {
        let moe = steps.run(&format!("model {MOE_PRESET} q4_0"), || {
            crate::engine::ensure_model(self.recorder.engine, MOE_PRESET, "q4_0", SEED)
        })?;
        let (tokens, mut expert_runs) = (self.cfg.expert_tokens(), Vec::new());
        for &limit in self.cfg.memory_limits() {
            let label = format!("experts/{MOE_PRESET}/{limit}");
            let mut run = EngineRun::new(label, &moe, 16, tokens);
            run.record_flags.push("--pmc".into());
            if limit != "none" {
                run.engine_flags = vec!["--mem-limit".into(), limit.into(), "--cold".into()];
            }
            let trace = steps.run(&format!("record {}", run.label), || {
                self.recorder.record(&run)
            })?;
            if limit == self.cfg.figure_limit() {
                self.figures_of(steps, "experts", &trace, Source::Experts)?;
            }
            expert_runs.push(run);
        }
        Ok(expert_runs)
    }

    /// The step `figures (<name>)`: [`figures_of`] the recording `trace`, analysed in
    /// the scratch directory `<name>-views`.
    fn figures_of(
        &self,
        steps: &mut Steps,
        name: &str,
        trace: &Path,
        source: Source,
    ) -> Result<()> {
        let views = self.recorder.scratch.join(format!("{name}-views"));
        let (profinfer, dir) = (self.recorder.profinfer, &self.figures);
        steps.run(&format!("figures ({name})"), || {
            figures_of(profinfer, trace, &views, dir, source)
        })
    }
}

/// Cost: interleaved pairs, CPU time per decode token, for each of `costs` (unconstrained,
/// under a CPU quota); every pair and windows run is written into the run tables.
fn cost(steps: &mut Steps, costs: &[OverheadConfig; 2], runs: &Path) -> Result<Vec<Measured>> {
    let mut measured = Vec::new();
    for (c, name) in costs
        .iter()
        .zip(["cost (bench overhead)", "cost under a CPU quota"])
    {
        measured.push(steps.run(name, || {
            let mut inner = Steps::new("bench overhead");
            overhead::measure_all(&mut inner, c)
        })?);
    }
    let all_pairs: Vec<_> = measured.iter().flat_map(|m| m.pairs.iter()).collect();
    let all_windows: Vec<_> = measured.iter().flat_map(|m| m.window_runs.iter()).collect();
    for (name, json) in [
        ("cost_pairs.json", serde_json::to_vec_pretty(&all_pairs)?),
        (
            "cost_windows.json",
            serde_json::to_vec_pretty(&all_windows)?,
        ),
    ] {
        let file = runs.join(name);
        std::fs::write(&file, json).with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(measured)
}

/// Tables: every query of this run ([`queries`]) with DuckDB over the run tables in
/// `runs`, into `tables`.
fn make_tables(cfg: EvalConfig, runs: &Path, tables: &Path) -> Result<()> {
    let bucket = if cfg.quick { 16 } else { 64 };
    process::run(
        Command::new(paths::venv_python())
            .arg(paths::repo_root().join("scripts/eval/tables.py"))
            .arg("--runs")
            .arg(runs)
            .arg("--out")
            .arg(tables)
            .arg("--bucket")
            .arg(bucket.to_string())
            .arg("--strict")
            .args(queries(cfg)?),
    )
}

/// The evaluation's result once its document is written: the tables' (a query that
/// failed or had no rows), and an error naming every accuracy verdict that could not be
/// computed. A verdict not met is published, not an error (it depends on the machine's
/// speed); one without data is.
fn outcome(tables: Result<()>, uncomputed: &[String]) -> Result<()> {
    if uncomputed.is_empty() {
        return tables;
    }
    let why = format!(
        "accuracy verdicts that could not be computed (no span of the level scored against \
         the engine's ground truth): {}",
        uncomputed.join(", ")
    );
    Err(match tables {
        Err(e) => e.context(why),
        Ok(()) => anyhow::anyhow!(why),
    })
}

/// Queries only the full run has input for.
const FULL_RUN_QUERIES: &[&str] = &["llama_ops"];

/// The queries of `scripts/eval/sql/` this run makes.
fn queries(cfg: EvalConfig) -> Result<Vec<String>> {
    let dir = paths::repo_root().join("scripts/eval/sql");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "sql")
            && let Some(stem) = path.file_stem().and_then(|s| s.to_str())
            && !(cfg.quick && FULL_RUN_QUERIES.contains(&stem))
        {
            names.push(stem.to_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// The figures `profinfer analyze` draws from `source`'s run, copied to `dir`.
///
/// # Errors
/// The analysis failed, or did not draw one of `source`'s figures ([`copy_figures`]).
fn figures_of(
    profinfer: &Path,
    trace: &Path,
    views: &Path,
    dir: &Path,
    source: Source,
) -> Result<()> {
    // `profinfer analyze` writes into its directory without clearing it: a figure an
    // earlier evaluation left there must not stand in for one this run did not draw.
    if views.exists() {
        std::fs::remove_dir_all(views).with_context(|| format!("clearing {}", views.display()))?;
    }
    process::run(
        Command::new(profinfer)
            .arg("analyze")
            .arg(trace)
            .arg("-o")
            .arg(views),
    )?;
    copy_figures(trace, views, dir, source)
}

/// Copies `source`'s figures ([`doc::FIGURES`]) from the analysis of `trace` in `views`
/// to `dir`.
///
/// # Errors
/// A figure the analysis did not draw (no file, or the analysis' `summary.json` warns that
/// it could not draw it: a failed plot may leave a partial file), naming every such
/// figure, the trace and the analysis' warnings about it; every evaluation recording has
/// the input of its figures, so none may be missing. Or a copy failed.
fn copy_figures(trace: &Path, views: &Path, dir: &Path, source: Source) -> Result<()> {
    let summary = views.join("summary.json");
    let warnings: Vec<String> = std::fs::read(&summary)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| {
            v["warnings"].as_array().map(|w| {
                w.iter()
                    .filter_map(|w| w.as_str().map(str::to_owned))
                    .collect()
            })
        })
        .with_context(|| {
            format!(
                "{}: no warnings list (the analysis of {} did not finish)",
                summary.display(),
                trace.display()
            )
        })?;
    paths::create_dir(dir)?;
    let mut missing = Vec::new();
    for name in doc::FIGURES
        .iter()
        .filter(|f| f.source == source)
        .map(|f| f.file)
    {
        let from = views.join(name);
        let failed = format!("cannot draw plot `{}`", from.display());
        let about: Vec<&str> = warnings
            .iter()
            .filter(|w| w.contains(name))
            .map(String::as_str)
            .collect();
        if !from.is_file() || about.iter().any(|w| w.starts_with(&failed)) {
            missing.push(if about.is_empty() {
                format!("{name} (no file, no warning about it)")
            } else {
                format!("{name} ({})", about.join("; "))
            });
            continue;
        }
        let to = dir.join(name);
        std::fs::copy(&from, &to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    }
    if !missing.is_empty() {
        anyhow::bail!(
            "`profinfer analyze {}` drew no {} (analysis in {})",
            trace.display(),
            missing.join(", "),
            views.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory of its own, removed at the end.
    struct Scratch(std::path::PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!("xtask-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A stand-in for `profinfer analyze TRACE -o DIR`: writes `figures` and a
    /// `summary.json` with `warnings` into DIR.
    fn fake_profinfer(dir: &Path, figures: &[&str], warnings: &[String]) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let script = dir.join("profinfer");
        let summary = serde_json::json!({ "warnings": warnings }).to_string();
        let mut text = "#!/bin/sh\nset -e\nmkdir -p \"$4\"\n".to_owned();
        for f in figures {
            text.push_str(&format!("echo '<svg/>' > \"$4/{f}\"\n"));
        }
        text.push_str(&format!(
            "cat > \"$4/summary.json\" <<'EOF'\n{summary}\nEOF\n"
        ));
        std::fs::write(&script, text).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        script
    }

    fn split_figures() -> Vec<&'static str> {
        doc::FIGURES
            .iter()
            .filter(|f| f.source == Source::Split)
            .map(|f| f.file)
            .collect()
    }

    #[test]
    fn a_verdict_that_could_not_be_computed_fails_the_evaluation_but_not_met_does_not() {
        outcome(Ok(()), &[]).unwrap();
        let missing = ["accuracy/smollm2 prefill op > 100 us".to_owned()];
        let e = format!("{:#}", outcome(Ok(()), &missing).unwrap_err());
        assert!(e.contains("accuracy/smollm2 prefill op > 100 us"), "{e}");
        let e = format!(
            "{:#}",
            outcome(Err(anyhow::anyhow!("accuracy.sql failed")), &missing).unwrap_err()
        );
        assert!(
            e.contains("could not be computed") && e.contains("accuracy.sql failed"),
            "{e}"
        );
        let e = outcome(Err(anyhow::anyhow!("cost.sql failed")), &[]).unwrap_err();
        assert_eq!(e.to_string(), "cost.sql failed");
    }

    #[test]
    fn every_figure_of_a_source_is_copied() {
        let s = Scratch::new("figures-all");
        let all = split_figures();
        let profinfer = fake_profinfer(&s.0, &all, &[]);
        let (views, dir) = (s.0.join("views"), s.0.join("img"));
        figures_of(
            &profinfer,
            Path::new("split.pftrace"),
            &views,
            &dir,
            Source::Split,
        )
        .unwrap();
        for f in all {
            assert!(dir.join(f).is_file(), "{f}");
        }
    }

    #[test]
    fn a_figure_the_analysis_did_not_draw_is_an_error_naming_it_and_the_trace() {
        let s = Scratch::new("figures-missing");
        let all = split_figures();
        let (views, dir) = (s.0.join("views"), s.0.join("img"));
        // An earlier analysis left every figure in the views directory: it is cleared.
        std::fs::create_dir_all(&views).unwrap();
        for f in &all {
            std::fs::write(views.join(f), "stale").unwrap();
        }
        let profinfer = fake_profinfer(&s.0, &all[1..], &[]);
        let e = figures_of(
            &profinfer,
            Path::new("split.pftrace"),
            &views,
            &dir,
            Source::Split,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains(all[0]) && e.contains("split.pftrace"), "{e}");
        assert!(e.contains("no file, no warning about it"), "{e}");
        for f in &all[1..] {
            assert!(!e.contains(f), "{f} was drawn: {e}");
        }
    }

    #[test]
    fn a_plot_the_analysis_failed_to_draw_is_an_error_even_with_its_file() {
        let s = Scratch::new("figures-failed");
        let all = split_figures();
        let views = s.0.join("views");
        let why = format!(
            "cannot draw plot `{}`: no decode step with a split",
            views.join(all[1]).display()
        );
        let profinfer = fake_profinfer(&s.0, &all, std::slice::from_ref(&why));
        let e = figures_of(
            &profinfer,
            Path::new("split.pftrace"),
            &views,
            &s.0.join("img"),
            Source::Split,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains(&why) && e.contains("split.pftrace"), "{e}");
    }
}
