//! `profinfer export TRACE... --parquet DIR`: every run as rows of Parquet tables keyed
//! by run (`run-tables`), appendable across traces, for SQL over many runs.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use indicatif::ProgressBar;

use crate::analyze::EventsBar;

/// Arguments of `profinfer export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Trace files.
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// Directory of the tables (created if missing): `DIR/<table>/<run_id>.parquet`,
    /// added to what is there (exporting a trace again rewrites its own files).
    #[arg(long, value_name = "DIR")]
    pub parquet: PathBuf,
    /// A label stored with each run in the `runs` table (`rk3588/qwen2-1.5b/q4_0`).
    #[arg(long, default_value = "")]
    pub label: String,
}

/// Exports every trace and prints one line per run.
pub fn run(args: &ExportArgs) -> anyhow::Result<()> {
    for trace in &args.traces {
        let bar = EventsBar::new(ProgressBar::new(0));
        let run = run_tables::export_trace(trace, &args.parquet, &args.label, &bar)
            .with_context(|| format!("exporting {}", trace.display()))?;
        bar.finish();
        let rows: Vec<String> = run
            .rows
            .iter()
            .map(|(table, n)| format!("{table} {n}"))
            .collect();
        eprintln!(
            "{}: run {} ({}) in {}",
            trace.display(),
            run.run_id,
            rows.join(", "),
            args.parquet.display()
        );
    }
    Ok(())
}
