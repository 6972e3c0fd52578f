//! `profinfer analyze TRACE -o DIR`: clap arguments converted into
//! [`analyzer::AnalyzeOptions`], a progress bar, and a short report. The work is done by
//! the `analyzer` library.

use std::path::PathBuf;

use analyzer::{
    AnalyzeOptions, ColorBy, IterSelector, Progress, TimelineFormat, timeline::RangeSpec,
};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

/// Timeline formats on the command line.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FormatArg {
    /// Chrome Trace Event JSON, `timeline.json` (Perfetto UI, chrome://tracing).
    Chrome,
    /// Perfetto's protobuf TrackEvent trace, `timeline.perfetto-trace` (Perfetto UI,
    /// trace_processor): compact, for long runs.
    Perfetto,
    /// Both files, however long the run.
    Both,
    /// Both files when the timeline fits one Perfetto file, else the Perfetto files only
    /// (an overview and full-detail parts; the JSON would be 2.4 times larger).
    Auto,
}

impl From<FormatArg> for TimelineFormat {
    fn from(f: FormatArg) -> TimelineFormat {
        match f {
            FormatArg::Chrome => TimelineFormat::Chrome,
            FormatArg::Perfetto => TimelineFormat::Perfetto,
            FormatArg::Both => TimelineFormat::Both,
            FormatArg::Auto => TimelineFormat::Auto,
        }
    }
}

/// Arguments of `profinfer analyze`.
#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    /// The trace file.
    pub trace: PathBuf,
    /// Output directory (created if missing).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Iteration of the ProfDAG: a decode step number (0 = first decode step), `prefill`
    /// (the first prefill call) or `prefill:N` (the N-th, 0-based: a prompt longer than
    /// the batch size is prefilled in chunks).
    #[arg(long, default_value = "0")]
    pub iter: IterSelector,
    /// Metric that colours the DAG: time, bandwidth, or a counter name (task-clock, cycles...).
    #[arg(long, default_value = "time")]
    pub color_by: ColorBy,
    /// Timeline format: `timeline.perfetto-trace`, `timeline.json`, both, or auto (both
    /// unless the timeline is split into parts).
    #[arg(long, value_enum, default_value = "auto")]
    pub format: FormatArg,
    /// Timeline of decode calls A..B only (by start, from 0; B not included; `A..` to the
    /// end).
    #[arg(long, value_name = "A..B", conflicts_with = "time")]
    pub tokens: Option<String>,
    /// Timeline of seconds A..B from the first event only (`1.5..3`, `500ms..2s`, `10..`).
    #[arg(long, value_name = "A..B")]
    pub time: Option<String>,
    /// Largest full-detail Perfetto file: a longer timeline is cut into files of decode
    /// call ranges beside an overview file of the whole run (`256M`, `64M`).
    #[arg(long, value_name = "SIZE", default_value = "256M")]
    pub part_size: String,
    /// Do not render SVGs (DAG via Graphviz, plots).
    #[arg(long)]
    pub no_graphics: bool,
}

impl AnalyzeArgs {
    /// The library options.
    pub fn options(&self) -> anyhow::Result<AnalyzeOptions> {
        let range = match (&self.tokens, &self.time) {
            (Some(t), _) => Some(RangeSpec::parse(t, true).ok_or_else(|| {
                anyhow::anyhow!("--tokens {t}: expected decode calls A..B (0..100, 50..)")
            })?),
            (None, Some(t)) => Some(RangeSpec::parse(t, false).ok_or_else(|| {
                anyhow::anyhow!("--time {t}: expected seconds A..B (1.5..3, 500ms..2s, 10..)")
            })?),
            (None, None) => None,
        };
        let part_bytes = crate::output_limits::parse_size(&self.part_size)
            .filter(|&b| b >= crate::output_limits::MIN_SIZE)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--part-size {}: expected a size of at least 64K",
                    self.part_size
                )
            })?;
        Ok(AnalyzeOptions::default()
            .with_timeline_range(range)
            .with_part_bytes(part_bytes)
            .with_format(self.format.into())
            .with_iter(self.iter)
            .with_color_by(self.color_by.clone())
            .with_graphics(!self.no_graphics))
    }
}

/// A progress bar over the events read (on stderr, cleared when done).
pub struct EventsBar(ProgressBar);

impl EventsBar {
    /// Wraps `bar` with the events style.
    pub fn new(bar: ProgressBar) -> EventsBar {
        EventsBar(
            bar.with_style(
                ProgressStyle::with_template("reading {bar:40} {pos}/{len} events ({per_sec})")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            ),
        )
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}

impl Progress for EventsBar {
    fn update(&self, events: u64, expected: Option<u64>) {
        if let Some(total) = expected
            && self.0.length() != Some(total)
        {
            self.0.set_length(total);
        }
        self.0.set_position(events);
    }
}

/// Runs the analysis and prints where the outputs are.
pub fn run(args: &AnalyzeArgs) -> anyhow::Result<()> {
    let opts = args.options()?;
    let bar = EventsBar::new(ProgressBar::new(0));
    let report = analyzer::run_with_progress(&args.trace, &args.output, &opts, &bar)?;
    bar.finish();
    for w in &report.warnings {
        eprintln!("profinfer: warning: {w}");
    }
    let s = &report.summary;
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3} ms"));
    // Several sequences (llama-bench's tests): no single TTFT, the runs are in the report;
    // one generation after a warm-up (llama-completion) has its own.
    let ttft = match (s.ttft_ms, s.runs.len()) {
        (Some(_), n) if n > 1 => format!("{} (after a warm-up run)", ms(s.ttft_ms)),
        (None, n) if n > 1 => format!("{n} runs (per-run TTFT in the report)"),
        _ => ms(s.ttft_ms),
    };
    eprintln!(
        "tokens: prefill {} decode {} | TTFT {} | TPOT mean {} p50 {} p99 {} | events {} lost {}",
        s.tokens.prefill,
        s.tokens.decode,
        ttft,
        ms(s.tpot_ms.map(|d| d.mean)),
        ms(s.tpot_ms.map(|d| d.p50)),
        ms(s.tpot_ms.map(|d| d.p99)),
        s.events.written,
        s.events.lost
    );
    eprintln!(
        "wrote {} files to {} (open {})",
        report.files.len(),
        report.out_dir.display(),
        report.out_dir.join("index.html").display()
    );
    Ok(())
}
