//! `profinfer diff A B`: what changed between two recorded runs, per op type, node name
//! or layer (terminal table, `--json`, and `--html FILE` for the page with plots). The
//! work is done by [`analyzer::diff`].

use std::io::Write as _;
use std::path::PathBuf;

use analyzer::diff::DiffPhase;
use anyhow::Context as _;
use clap::{Args, ValueEnum};

use crate::report::ByArg;

/// Compared calls on the command line.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PhaseArg {
    /// Decode steps (the steady state).
    Decode,
    /// Prefill calls.
    Prefill,
    /// Every operator.
    All,
}

impl From<PhaseArg> for DiffPhase {
    fn from(p: PhaseArg) -> DiffPhase {
        match p {
            PhaseArg::Decode => DiffPhase::Decode,
            PhaseArg::Prefill => DiffPhase::Prefill,
            PhaseArg::All => DiffPhase::All,
        }
    }
}

/// Arguments of `profinfer diff`.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The baseline trace.
    pub a: PathBuf,
    /// The trace compared with it.
    pub b: PathBuf,
    /// Group operator time by op type, node name or layer.
    #[arg(long, value_enum, default_value = "type")]
    pub by: ByArg,
    /// Which calls are compared (per call, so runs of different lengths compare).
    #[arg(long, value_enum, default_value = "decode")]
    pub phase: PhaseArg,
    /// Rows shown.
    #[arg(short = 'n', long, default_value_t = 15)]
    pub top: usize,
    /// Print JSON instead of the table (for scripts).
    #[arg(long, conflicts_with = "html")]
    pub json: bool,
    /// Also write the comparison as a self-contained HTML page (time-per-token
    /// distributions overlaid, paired bars, the full table, counters).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// Prints the comparison to stdout.
pub fn run(args: &DiffArgs) -> anyhow::Result<()> {
    let d = analyzer::diff::diff_traces(&args.a, &args.b, args.by.into(), args.phase.into())
        .with_context(|| format!("comparing {} with {}", args.b.display(), args.a.display()))?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &d).context("writing JSON")?;
        writeln!(out)?;
    } else {
        analyzer::export::terminal::write_diff(&d, args.top, &mut out)
            .context("writing the diff")?;
    }
    if let Some(path) = &args.html {
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut page = std::io::BufWriter::new(file);
        analyzer::export::diff_page::write(&d, &mut page)
            .and_then(|()| page.flush())
            .with_context(|| format!("writing {}", path.display()))?;
        writeln!(out, "HTML: {}", path.display())?;
    }
    Ok(())
}
