//! The evaluation's recorded runs: `profinfer record` of the engine (with its own
//! `--self-profile` ground truth where accuracy is measured), exported into the run
//! tables with `profinfer export --parquet`, the ground truth beside them as JSON lines.

use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result};

use crate::process;

/// One recorded engine run.
#[derive(Clone, Debug)]
pub struct EngineRun {
    /// The label in the `runs` table (`accuracy/smollm2`).
    pub label: String,
    /// The model file.
    pub model: PathBuf,
    /// Prompt tokens (ids 1..=n, no tokenizer needed: the same for every model).
    pub prompt: u32,
    /// Generated tokens.
    pub generate: u32,
    /// Threads.
    pub threads: u32,
    /// Whether the engine writes its own spans (`--self-profile`).
    pub ground_truth: bool,
    /// `profinfer record` flags (`--exact-spans`, `--pmc`).
    pub record_flags: Vec<String>,
    /// More `engine run` flags (a backend split, a memory limit).
    pub engine_flags: Vec<String>,
}

/// Where the programs and the run tables are.
pub struct Recorder<'a> {
    /// The `engine` binary.
    pub engine: &'a Path,
    /// The `profinfer` binary.
    pub profinfer: &'a Path,
    /// The run tables (`profinfer export --parquet` directory).
    pub runs: &'a Path,
    /// Scratch directory of traces.
    pub scratch: &'a Path,
}

impl EngineRun {
    /// A run of `generate` tokens after a `prompt`-token prompt on 2 threads, recorded
    /// by default, without ground truth.
    pub fn new(label: impl Into<String>, model: &Path, prompt: u32, generate: u32) -> EngineRun {
        EngineRun {
            label: label.into(),
            model: model.to_path_buf(),
            prompt,
            generate,
            threads: 2,
            ground_truth: false,
            record_flags: Vec::new(),
            engine_flags: Vec::new(),
        }
    }

    /// The traced command: `engine run` with the prompt as token ids.
    pub(super) fn engine_args(&self, profile: Option<&Path>) -> Vec<String> {
        let tokens: Vec<String> = (1..=self.prompt).map(|i| i.to_string()).collect();
        let mut a: Vec<String> = vec![
            "run".into(),
            "-m".into(),
            self.model.display().to_string(),
            "-t".into(),
            self.threads.to_string(),
            "--tokens".into(),
            tokens.join(","),
            "-n".into(),
            self.generate.to_string(),
            "--ignore-eos".into(),
            "--temp".into(),
            "0".into(),
        ];
        a.extend(self.engine_flags.iter().cloned());
        if let Some(p) = profile {
            a.push("--self-profile".into());
            a.push(p.display().to_string());
        }
        a
    }

    /// The command line, as the documentation shows it (programs and the model by file
    /// name, the prompt's ids elided).
    pub fn command(&self) -> String {
        let model = self.model.file_name().map_or_else(
            || self.model.display().to_string(),
            |f| f.to_string_lossy().into_owned(),
        );
        let flags = |f: &[String]| f.iter().map(|a| format!(" {a}")).collect::<String>();
        format!(
            "profinfer record{} -o T.pftrace -- engine run -m {model} -t {} --tokens 1,2,…,{} \
             -n {} --ignore-eos --temp 0{}{} && profinfer export T.pftrace --parquet RUNS \
             --label {}",
            flags(&self.record_flags),
            self.threads,
            self.prompt,
            self.generate,
            flags(&self.engine_flags),
            if self.ground_truth {
                " --self-profile GT.jsonl"
            } else {
                ""
            },
            self.label
        )
    }
}

impl Recorder<'_> {
    /// Records `program args` with `profinfer record FLAGS`, exports the trace into the
    /// run tables with `label`, and returns it.
    pub fn record_program(
        &self,
        label: &str,
        flags: &[String],
        program: &Path,
        args: &[String],
    ) -> Result<PathBuf> {
        let trace = self
            .scratch
            .join(format!("{}.pftrace", label.replace('/', "-")));
        process::run(
            Command::new(self.profinfer)
                .arg("record")
                .args(flags)
                .arg("-o")
                .arg(&trace)
                .arg("--")
                .arg(program)
                .args(args),
        )?;
        self.export(&trace, label)?;
        Ok(trace)
    }

    /// Exports `trace` into the run tables with `label`.
    pub fn export(&self, trace: &Path, label: &str) -> Result<()> {
        process::run(
            Command::new(self.profinfer)
                .arg("export")
                .arg(trace)
                .arg("--parquet")
                .arg(self.runs)
                .arg("--label")
                .arg(label),
        )
    }

    /// Records `run`, exports it, and returns its trace.
    pub fn record(&self, run: &EngineRun) -> Result<PathBuf> {
        let name = run.label.replace('/', "-");
        let profile = self.scratch.join(format!("{name}.selfprof.jsonl"));
        let profile_arg = run.ground_truth.then_some(profile.as_path());
        let trace = self.record_program(
            &run.label,
            &run.record_flags,
            self.engine,
            &run.engine_args(profile_arg),
        )?;
        if run.ground_truth {
            let dir = self.runs.join("ground_truth");
            crate::paths::create_dir(&dir)?;
            ground_truth(&profile, &dir.join(format!("{name}.jsonl")), &run.label)?;
        }
        Ok(trace)
    }
}

/// Rewrites the engine's self-profile as the `ground_truth` lines the SQL joins: the
/// spans (token, graph, op, phase) with one schema and the run's label.
fn ground_truth(profile: &Path, out: &Path, label: &str) -> Result<()> {
    let f =
        std::fs::File::open(profile).with_context(|| format!("reading {}", profile.display()))?;
    let mut w = std::io::BufWriter::new(
        std::fs::File::create(out).with_context(|| format!("writing {}", out.display()))?,
    );
    for line in std::io::BufReader::new(f).lines() {
        let line = line.with_context(|| format!("reading {}", profile.display()))?;
        let v: serde_json::Value = serde_json::from_str(&line)
            .with_context(|| format!("a line of {}: {line}", profile.display()))?;
        let level = v["level"].as_str().unwrap_or_default();
        if !matches!(level, "token" | "graph" | "op" | "phase") {
            continue;
        }
        let row = serde_json::json!({
            "label": label,
            "level": level,
            "name": v.get("name"),
            "op": v.get("op"),
            "tid": v.get("tid"),
            "graph": v.get("graph"),
            "node": v.get("node"),
            "start_ns": v.get("start_ns"),
            "end_ns": v.get("end_ns"),
        });
        writeln!(w, "{row}").with_context(|| format!("writing {}", out.display()))?;
    }
    w.flush()
        .with_context(|| format!("writing {}", out.display()))
}
