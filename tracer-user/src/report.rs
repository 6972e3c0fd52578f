//! `profinfer report TRACE`: the terminal report (summary, top operators by type, node
//! or layer, threads, losses), or its JSON with `--json`. The work is done by
//! [`analyzer::report`].

use std::io::Write as _;
use std::path::PathBuf;

use analyzer::op_groups::GroupBy;
use anyhow::Context as _;
use clap::{Args, ValueEnum};
use indicatif::ProgressBar;

use crate::analyze::EventsBar;

/// Groupings on the command line.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ByArg {
    /// Op type (MUL_MAT, RMS_NORM, ...).
    Type,
    /// Node name (ffn_up-3, result_output, ...).
    Node,
    /// Layer.
    Layer,
}

impl From<ByArg> for GroupBy {
    fn from(b: ByArg) -> GroupBy {
        match b {
            ByArg::Type => GroupBy::OpType,
            ByArg::Node => GroupBy::Node,
            ByArg::Layer => GroupBy::Layer,
        }
    }
}

/// Arguments of `profinfer report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The trace file.
    pub trace: PathBuf,
    /// Group operator time by op type, node name or layer.
    #[arg(long, value_enum, default_value = "type")]
    pub by: ByArg,
    /// Number of groups shown.
    #[arg(short = 'n', long, default_value_t = 15)]
    pub top: usize,
    /// Print JSON instead of the table (for scripts).
    #[arg(long)]
    pub json: bool,
}

/// Prints the report of `args.trace` to stdout.
pub fn run(args: &ReportArgs) -> anyhow::Result<()> {
    let bar = EventsBar::new(ProgressBar::new(0));
    let report = analyzer::report::report(&args.trace, args.by.into(), args.top, &bar)
        .with_context(|| format!("reporting on {}", args.trace.display()))?;
    bar.finish();
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report).context("writing JSON")?;
        writeln!(out)?;
    } else {
        analyzer::export::terminal::write(&report, &mut out).context("writing the report")?;
    }
    Ok(())
}
