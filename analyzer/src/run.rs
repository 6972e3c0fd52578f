//! The whole analysis: read the trace, build the model, write every view into a
//! directory. What `profinfer analyze` and `cargo xtask analyze` call.

use std::{
    fs::File,
    io::{BufWriter, Write},
    path::{Path, PathBuf},
};

pub use crate::export::dot::ColorBy;
use crate::{
    AnalyzeError, IterSelector,
    dag::{self, ProfDag},
    export::{
        self, chrome,
        index::{Figure, OutputFile, Page},
        perfetto,
        summary::{self, Summary},
        timeline_parts,
    },
    ingest::{self, IngestInfo, NoProgress, Progress},
    model::TraceModel,
    op_groups::GroupBy,
    report,
    stats::{self, ProfStat},
    timeline::{RangeSpec, TimeRange},
};

/// Format of the timeline file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimelineFormat {
    /// Chrome Trace Event JSON (`timeline.json`), opened by Perfetto UI and
    /// chrome://tracing.
    Chrome,
    /// Perfetto's protobuf TrackEvent trace (`timeline.perfetto-trace`), opened by Perfetto UI
    /// and `trace_processor`; compact and streamed (see [`crate::export::perfetto`]).
    Perfetto,
    /// Both files (`timeline.perfetto-trace` for Perfetto, `timeline.json` for tools that
    /// read Chrome JSON), however long the run.
    Both,
    /// Both when the timeline fits one file; for a longer run only the Perfetto files (the
    /// JSON is 2.4 times the protobuf), which `Both` or `Chrome` still write.
    #[default]
    Auto,
}

impl TimelineFormat {
    /// Whether the Chrome JSON is written.
    pub fn chrome(self, split: bool) -> bool {
        match self {
            TimelineFormat::Chrome | TimelineFormat::Both => true,
            TimelineFormat::Auto => !split,
            TimelineFormat::Perfetto => false,
        }
    }

    /// Whether the Perfetto protobuf trace is written.
    pub fn perfetto(self) -> bool {
        !matches!(self, TimelineFormat::Chrome)
    }
}

/// Options of [`run`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct AnalyzeOptions {
    /// Iteration of the ProfDAG and the per-node tables.
    pub iter: IterSelector,
    /// Metric that colours the DAG.
    pub color_by: ColorBy,
    /// Timeline format.
    pub format: TimelineFormat,
    /// Render DOT files to SVG with Graphviz.
    pub render_svg: bool,
    /// Draw the ProfStat plots.
    pub plots: bool,
    /// The part of the run the timeline shows (`--tokens`, `--time`; all of it if none).
    pub timeline_range: Option<RangeSpec>,
    /// The largest full-detail Perfetto file: a longer timeline is cut into files of
    /// decode call ranges beside an overview ([`timeline_parts`]).
    pub part_bytes: u64,
}

impl Default for AnalyzeOptions {
    fn default() -> Self {
        AnalyzeOptions {
            iter: IterSelector::FirstDecode,
            color_by: ColorBy::Time,
            format: TimelineFormat::default(),
            render_svg: true,
            plots: true,
            timeline_range: None,
            part_bytes: timeline_parts::DEFAULT_PART_BYTES,
        }
    }
}

impl AnalyzeOptions {
    /// Sets the DAG iteration.
    pub fn with_iter(mut self, iter: IterSelector) -> Self {
        self.iter = iter;
        self
    }

    /// Sets the colouring metric.
    pub fn with_color_by(mut self, c: ColorBy) -> Self {
        self.color_by = c;
        self
    }

    /// Sets the timeline format.
    pub fn with_format(mut self, format: TimelineFormat) -> Self {
        self.format = format;
        self
    }

    /// Shows only `range` in the timeline.
    pub fn with_timeline_range(mut self, range: Option<RangeSpec>) -> Self {
        self.timeline_range = range;
        self
    }

    /// Sets the largest full-detail Perfetto file.
    pub fn with_part_bytes(mut self, bytes: u64) -> Self {
        self.part_bytes = bytes;
        self
    }

    /// Switches SVG rendering and plots on or off (off keeps tests fast).
    pub fn with_graphics(mut self, on: bool) -> Self {
        self.render_svg = on;
        self.plots = on;
        self
    }
}

/// What [`run`] did.
#[derive(Clone, Debug)]
pub struct AnalyzeReport {
    /// The output directory.
    pub out_dir: PathBuf,
    /// Files written.
    pub files: Vec<OutputFile>,
    /// The summary (also in `summary.json`).
    pub summary: Summary,
    /// Reading details.
    pub ingest: IngestInfo,
    /// Computed nodes of the DAG, if one was built.
    pub dag_nodes: Option<usize>,
    /// Warnings (also in the summary), including non-fatal export problems.
    pub warnings: Vec<String>,
}

/// Analyzes `trace` and writes every view into `out` (created if missing).
///
/// # Errors
/// [`AnalyzeError::Trace`] for a file that is not a readable trace (a truncated trace is
/// analyzed up to its last complete chunk, with a warning); write errors.
pub fn run(trace: &Path, out: &Path, opts: &AnalyzeOptions) -> Result<AnalyzeReport, AnalyzeError> {
    run_with_progress(trace, out, opts, &NoProgress)
}

fn create(path: &Path) -> Result<BufWriter<File>, AnalyzeError> {
    File::create(path)
        .map(BufWriter::new)
        .map_err(|source| AnalyzeError::Write {
            path: path.to_path_buf(),
            source,
        })
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> AnalyzeError + '_ {
    move |source| AnalyzeError::Write {
        path: path.to_path_buf(),
        source,
    }
}

fn json_err(path: &Path) -> impl FnOnce(serde_json::Error) -> AnalyzeError + '_ {
    move |source| AnalyzeError::Json {
        path: path.to_path_buf(),
        source,
    }
}

/// Op types in the page's top-operators table.
const PAGE_TOP_OPS: usize = 15;

/// Collects output files and warnings while writing.
struct Outputs<'a> {
    dir: &'a Path,
    files: Vec<OutputFile>,
    warnings: Vec<String>,
    /// Pictures that were not made, and why (for the page).
    missing: Vec<(String, String)>,
}

impl Outputs<'_> {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn add(&mut self, file: &str, view: &'static str, description: impl Into<String>) {
        self.files.push(OutputFile {
            file: file.to_owned(),
            view,
            description: description.into(),
        });
    }

    /// Records that `file` was not made: a warning, and the reason for the page.
    fn not_made(&mut self, file: &str, why: String) {
        self.warnings.push(why.clone());
        self.missing.push((file.to_owned(), why));
    }

    /// The page's figure of `file`: its SVG if it was written and reads back, else why
    /// not (`off` when graphics were switched off).
    fn figure(&self, file: &str, title: &str, caption: &str, off: bool) -> Figure {
        let svg = if self.files.iter().any(|f| f.file == file) {
            std::fs::read(self.path(file)).map_err(|e| format!("cannot read it back: {e}"))
        } else if let Some((_, why)) = self.missing.iter().find(|(f, _)| f == file) {
            Err(why.clone())
        } else if off {
            Err("graphics were switched off (--no-graphics)".to_owned())
        } else {
            Err("not written (see the warnings above)".to_owned())
        };
        Figure {
            file: file.to_owned(),
            title: title.to_owned(),
            caption: caption.to_owned(),
            svg,
        }
    }

    fn with_writer(
        &mut self,
        file: &str,
        view: &'static str,
        description: &str,
        f: impl FnOnce(&mut BufWriter<File>) -> Result<(), AnalyzeError>,
    ) -> Result<(), AnalyzeError> {
        let path = self.path(file);
        let mut w = create(&path)?;
        f(&mut w)?;
        w.flush().map_err(io_err(&path))?;
        self.add(file, view, description);
        Ok(())
    }
}

/// [`run`] with a progress reporter (called while reading).
///
/// # Errors
/// As [`run`].
pub fn run_with_progress(
    trace: &Path,
    out: &Path,
    opts: &AnalyzeOptions,
    progress: &dyn Progress,
) -> Result<AnalyzeReport, AnalyzeError> {
    let (model, reader, info) = ingest::load(trace, progress)?;
    std::fs::create_dir_all(out).map_err(io_err(out))?;
    let mut o = Outputs {
        dir: out,
        files: Vec::new(),
        warnings: Vec::new(),
        missing: Vec::new(),
    };
    let dag = match dag::build(&model, opts.iter) {
        Ok(d) => Some(d),
        Err(e) => {
            o.not_made("dag_layers.svg", format!("no ProfDAG: {e}"));
            None
        }
    };
    let stat = stats::compute(&model, dag.as_ref());
    let mut summary = summary::summarize(
        &model,
        reader.header(),
        reader.footer(),
        &info,
        stat.op_types.clone(),
    );

    write_timeline(&model, opts, &mut o)?;
    let dag_nodes = match &dag {
        Some(d) => {
            write_dag(d, opts, &mut o)?;
            Some(d.computed_nodes())
        }
        None => None,
    };
    write_stats(&stat, opts, &mut o)?;
    write_flame(&model, opts, &mut o)?;

    summary.warnings.extend(o.warnings.iter().cloned());
    let path = o.path("summary.json");
    o.with_writer("summary.json", "summary", "machine-readable summary", |w| {
        summary::write(&summary, w).map_err(json_err(&path))
    })?;
    let report = report::build(
        &model,
        summary.clone(),
        trace.display().to_string(),
        GroupBy::OpType,
        PAGE_TOP_OPS,
    );
    let page = page(&o, &report, &reader.header().target.args, opts);
    let path = o.path("index.html");
    let files = o.files.clone();
    o.with_writer(
        "index.html",
        "summary",
        "the one-page report (this page)",
        |w| {
            export::index::write(
                &Page {
                    files: &files,
                    ..page
                },
                w,
            )
            .map_err(io_err(&path))
        },
    )?;
    Ok(AnalyzeReport {
        out_dir: out.to_path_buf(),
        files: o.files,
        warnings: summary.warnings.clone(),
        summary,
        ingest: info,
        dag_nodes,
    })
}

/// The page's pictures, read back from the output directory, with their captions.
fn page<'a>(
    o: &Outputs<'_>,
    report: &'a report::Report,
    command: &'a [String],
    opts: &AnalyzeOptions,
) -> Page<'a> {
    let dag_off = !opts.render_svg;
    let plots_off = !opts.plots;
    let layers = o
        .files
        .iter()
        .find(|f| f.file == "dag_layers.dot")
        .map_or_else(String::new, |f| format!(" ({})", f.description));
    Page {
        report,
        command,
        dag: o.figure(
            "dag_layers.svg",
            "Per-layer DAG",
            &format!(
                "The graph of the chosen decode call with the transformer blocks collapsed \
                 into one{layers}: boxes are operators coloured by their time, arrows the \
                 tensors between them; the full graph is in dag.svg / dag.dot."
            ),
            dag_off,
        ),
        plots: vec![
            o.figure(
                "latency.svg",
                "Latency per decode call",
                "Wall time of each decode call in run order: red dots are prefill chunks, \
                 the blue line the decode steps; a rising line means tokens get dearer as \
                 the context grows, spikes are stalls to look up in timeline.json.",
                plots_off,
            ),
            o.figure(
                "growth.svg",
                "Node classes over context length",
                "Time per decode step of the node classes whose time grows fastest with \
                 the number of tokens in context: a flat line does not depend on the \
                 context, a slope is work proportional to it (attention).",
                plots_off,
            ),
            o.figure(
                "matmul.svg",
                "Matrix products: time against size",
                "Every matrix product of the run, time against multiply-adds on log-log \
                 axes, with the linear fit over the dense products; points on the line \
                 run at the fitted rate, points above it are slower than their size \
                 predicts (memory-bound or badly split across threads).",
                plots_off,
            ),
            o.figure(
                "load_balance.svg",
                "Load balance per op type",
                "For each op type, largest time first, the share of the threads' time \
                 inside its nodes spent waiting for the slowest thread: long bars are \
                 work split unevenly across threads.",
                plots_off,
            ),
        ],
        flame: o.figure(
            "flame.svg",
            "Where the time goes",
            "Flame graph of the run: each bar is a frame (phase, graph, layer, op type, \
             node class) and its width the time spent in it; hover for numbers, click to \
             zoom, flame.folded feeds other tools.",
            plots_off,
        ),
        files: &[],
    }
}

/// Removes the timeline files an earlier analysis into the folder left (a split
/// timeline's parts, its overview).
fn remove_old_timelines(o: &Outputs<'_>) {
    let Ok(entries) = std::fs::read_dir(o.dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let part = name.starts_with("timeline.tokens-") && name.ends_with(".perfetto-trace");
        if part || name == OVERVIEW_FILE {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The overview file of a split timeline.
const OVERVIEW_FILE: &str = "timeline.overview.perfetto-trace";

fn write_timeline(
    model: &TraceModel,
    opts: &AnalyzeOptions,
    o: &mut Outputs<'_>,
) -> Result<(), AnalyzeError> {
    remove_old_timelines(o);
    let range = opts.timeline_range.as_ref().map(|r| r.resolve(model));
    let shown = opts
        .timeline_range
        .as_ref()
        .map_or_else(String::new, |r| format!(" ({r})"));
    let planned = timeline_parts::plan(model, range.unwrap_or(TimeRange::ALL), opts.part_bytes);
    let split = planned.len() > 1;
    if opts.format.perfetto() && split {
        write_split_timeline(model, opts, range, planned, o)?;
    } else if opts.format.perfetto() {
        let path = o.path("timeline.perfetto-trace");
        let desc = format!(
            "Perfetto protobuf trace{shown}: tokens, graphs, phases, operators per thread with \
             their args, flows from graphs to operators, thread states, counters, QoS and \
             loss marks (open in ui.perfetto.dev or trace_processor)"
        );
        o.with_writer("timeline.perfetto-trace", "ProfTime", &desc, |w| {
            let popts = perfetto::PerfettoOptions {
                range,
                ..perfetto::PerfettoOptions::default()
            };
            perfetto::write(model, &popts, w)
                .map(|_| ())
                .map_err(io_err(&path))
        })?;
    }
    if opts.format.chrome(split) {
        let path = o.path("timeline.json");
        let desc = format!(
            "Chrome Trace Event JSON{shown}: tokens, graphs, phases, operators per thread, \
             thread states, counters, QoS and loss marks (open in ui.perfetto.dev)"
        );
        o.with_writer("timeline.json", "ProfTime", &desc, |w| {
            let copts = chrome::ChromeOptions {
                range,
                ..chrome::ChromeOptions::default()
            };
            chrome::write(model, &copts, w).map_err(io_err(&path))
        })?;
    } else if opts.format.perfetto() {
        let _ = std::fs::remove_file(o.path("timeline.json"));
    }
    Ok(())
}

/// A timeline larger than one file: the overview, then each part (written again as
/// halves when it came out too large).
fn write_split_timeline(
    model: &TraceModel,
    opts: &AnalyzeOptions,
    range: Option<TimeRange>,
    planned: Vec<timeline_parts::TimelinePart>,
    o: &mut Outputs<'_>,
) -> Result<(), AnalyzeError> {
    let _ = std::fs::remove_file(o.path("timeline.perfetto-trace"));
    let path = o.path(OVERVIEW_FILE);
    let json = if opts.format.chrome(true) {
        ""
    } else {
        "; timeline.json is not written for a run this long (--format both writes it)"
    };
    let layers = timeline_parts::overview_has_layers(
        model,
        range.unwrap_or(TimeRange::ALL),
        opts.part_bytes,
    );
    let desc = format!(
        "Perfetto overview of the whole run: tokens, graphs, {}phases, backend calls, \
         counters, QoS and loss marks, without operators or thread states; the full detail \
         is in the {} timeline.tokens-* files{json}",
        if layers { "layers, " } else { "" },
        planned.len()
    );
    o.with_writer(OVERVIEW_FILE, "ProfTime", &desc, |w| {
        let popts = perfetto::PerfettoOptions {
            layers,
            ..perfetto::PerfettoOptions::overview(range)
        };
        perfetto::write(model, &popts, w)
            .map(|_| ())
            .map_err(io_err(&path))
    })?;
    let dir = o.dir.to_path_buf();
    let written = timeline_parts::write_parts(
        model,
        planned,
        opts.part_bytes,
        |part| {
            let path = dir.join(part.file_name());
            let mut w = create(&path)?;
            perfetto::write(model, &perfetto::PerfettoOptions::part(part.range), &mut w)
                .map_err(io_err(&path))?;
            w.flush().map_err(io_err(&path))?;
            Ok::<u64, AnalyzeError>(std::fs::metadata(&path).map_or(0, |m| m.len()))
        },
        |part| {
            let _ = std::fs::remove_file(dir.join(part.file_name()));
        },
    )?;
    let n = written.len();
    for (i, (part, _)) in written.iter().enumerate() {
        let desc = format!(
            "Perfetto protobuf trace, part {} of {n}: decode calls {} to {} in full detail \
             (operators per thread, flows, thread states)",
            i + 1,
            part.tokens.start,
            part.tokens.end.saturating_sub(1).max(part.tokens.start)
        );
        o.add(&part.file_name(), "ProfTime", desc);
    }
    Ok(())
}

fn write_dag(d: &ProfDag, opts: &AnalyzeOptions, o: &mut Outputs<'_>) -> Result<(), AnalyzeError> {
    let label = format!("decode call {} ({} @{})", d.token, d.phase.name(), d.pos);
    let path = o.path("dag.dot");
    o.with_writer(
        "dag.dot",
        "ProfDAG",
        &format!("DAG of {label}, coloured by {}", opts.color_by.label()),
        |w| export::dot::write_dag(d, &opts.color_by, w).map_err(io_err(&path)),
    )?;
    let path = o.path("dag.json");
    o.with_writer(
        "dag.json",
        "ProfDAG",
        &format!("DAG of {label} as JSON"),
        |w| export::json::write_dag(d, w).map_err(json_err(&path)),
    )?;
    let layers = dag::collapse_layers(d);
    let path = o.path("dag_layers.dot");
    o.with_writer(
        "dag_layers.dot",
        "ProfDAG",
        &format!(
            "per-layer view: {} transformer blocks collapsed",
            layers.n_layers
        ),
        |w| export::dot::write_layers(&layers, w).map_err(io_err(&path)),
    )?;
    let path = o.path("dag_layers.json");
    o.with_writer(
        "dag_layers.json",
        "ProfDAG",
        "per-layer view as JSON",
        |w| export::json::write_layers(&layers, w).map_err(json_err(&path)),
    )?;
    if opts.render_svg {
        // The per-layer view first: it is small and always renders; the full DAG of a
        // large model may exceed Graphviz's time limit.
        for name in ["dag_layers", "dag"] {
            let (dot, svg) = (
                o.path(&format!("{name}.dot")),
                o.path(&format!("{name}.svg")),
            );
            let nodes = d.dag.node_count();
            if name == "dag" && nodes > export::dot::MAX_SVG_NODES {
                o.warnings.push(format!(
                    "the DAG has {nodes} nodes, more than Graphviz lays out in reasonable time \
                     ({} max): dag_layers.svg shows the structure, dag.dot/dag.json have every \
                     node; render it by hand with `dot -Tsvg {} -o {}` (minutes)",
                    export::dot::MAX_SVG_NODES,
                    dot.display(),
                    svg.display()
                ));
                continue;
            }
            match export::dot::render_svg(&dot, &svg) {
                Ok(()) => o.add(
                    &format!("{name}.svg"),
                    "ProfDAG",
                    format!("{name}.dot rendered by Graphviz"),
                ),
                Err(e) => o.not_made(&format!("{name}.svg"), e),
            }
        }
    }
    Ok(())
}

fn write_flame(
    model: &TraceModel,
    opts: &AnalyzeOptions,
    o: &mut Outputs<'_>,
) -> Result<(), AnalyzeError> {
    use export::flame::{self, FlameWeight};
    let lines = flame::folded(model, FlameWeight::Time);
    let path = o.path("flame.folded");
    o.with_writer(
        "flame.folded",
        "flame graph",
        "folded stacks (phase;graph;layer;op type;node class, weight ns) for any flame-graph tool",
        |w| flame::write_folded(&lines, w).map_err(io_err(&path)),
    )?;
    if opts.plots && lines.is_empty() {
        o.missing.push((
            "flame.svg".to_owned(),
            "no operator or phase time to draw".to_owned(),
        ));
    } else if opts.plots {
        let path = o.path("flame.svg");
        o.with_writer(
            "flame.svg",
            "flame graph",
            "where the time goes: phase, graph, layer, op type, node (widths = time)",
            |w| {
                flame::write_svg(&lines, "profinfer: where the time goes", "ns", w)
                    .map_err(io_err(&path))
            },
        )?;
    }
    Ok(())
}

fn write_stats(
    s: &ProfStat,
    opts: &AnalyzeOptions,
    o: &mut Outputs<'_>,
) -> Result<(), AnalyzeError> {
    let path = o.path("stats.json");
    o.with_writer(
        "stats.json",
        "ProfStat",
        "every ProfStat table and fit",
        |w| export::json::write_stats(s, w).map_err(json_err(&path)),
    )?;
    type CsvFn = fn(&ProfStat, &mut BufWriter<File>) -> std::io::Result<()>;
    let backend_tables: [(&str, &str, CsvFn); 2] = [
        (
            "backends.csv",
            "per op type, shape and backend: count and time, the same op on each backend (Fig 12)",
            |s, w| export::csv::write_backend_ops(s, w),
        ),
        (
            "token_split.csv",
            "per decode call: compute per backend, copies, sync waits, KV I/O",
            |s, w| export::csv::write_token_split(s, w),
        ),
    ];
    let backend_tables = if s.backends.is_some() {
        &backend_tables[..]
    } else {
        &[]
    };
    let tables: [(&str, &str, CsvFn); 6] = [
        (
            "iterations.csv",
            "latency per decode call and time per node class",
            |s, w| export::csv::write_iterations(s, w),
        ),
        (
            "growth.csv",
            "node classes by growth of their time with context length",
            |s, w| export::csv::write_growth(s, w),
        ),
        (
            "matmul.csv",
            "matrix products: time against K·N·M·H",
            |s, w| export::csv::write_matmul(s, w),
        ),
        (
            "op_types.csv",
            "per op type: count, time, share, idle share, counter metrics",
            |s, w| export::csv::write_op_types(s, w),
        ),
        (
            "load_balance.csv",
            "per node and thread: busy time and idle share",
            |s, w| export::csv::write_load_balance(s, w),
        ),
        (
            "experts.csv",
            "mixture of experts: experts per layer and iteration, reuse distance, time, major faults",
            |s, w| export::csv::write_experts(s, w),
        ),
    ];
    for &(file, desc, f) in tables.iter().chain(backend_tables) {
        let path = o.path(file);
        o.with_writer(file, "ProfStat", desc, |w| f(s, w).map_err(io_err(&path)))?;
    }
    if opts.plots {
        type PlotFn = fn(&ProfStat, &Path) -> Result<(), String>;
        let plots: [(&str, &str, PlotFn); 4] = [
            (
                "latency.svg",
                "latency per decode call",
                export::plot::latency,
            ),
            (
                "growth.svg",
                "node classes' time over context length",
                export::plot::growth,
            ),
            (
                "matmul.svg",
                "MUL_MAT time against complexity, log-log, with the linear fit",
                export::plot::matmul,
            ),
            (
                "load_balance.svg",
                "thread idle share per op type (load balance)",
                export::plot::load_balance,
            ),
        ];
        let expert_plots: [(&str, &str, PlotFn); 3] = [
            (
                "experts.svg",
                "experts each decode iteration activated in the first layer, with the expert products' time (Fig 13)",
                export::plot::experts::activations,
            ),
            (
                "expert_frequency.svg",
                "activations per layer and expert",
                export::plot::experts::frequency,
            ),
            (
                "expert_reuse.svg",
                "expert products' time against the mean reuse distance, with Pearson's r",
                export::plot::experts::reuse,
            ),
        ];
        let expert_plots = if s.experts.is_some() {
            &expert_plots[..]
        } else {
            &[]
        };
        let backend_plots: [(&str, &str, PlotFn); 2] = [
            (
                "backends.svg",
                "time per decode call: compute per backend, copies, sync waits, KV I/O",
                export::plot::backends::split,
            ),
            (
                "backend_timeline.svg",
                "one decode step by backend and thread: splits, operators, copies, waits, KV I/O (Fig 7)",
                export::plot::backends::timeline,
            ),
        ];
        let backend_plots = if s.backends.is_some() {
            &backend_plots[..]
        } else {
            &[]
        };
        for &(file, desc, f) in plots.iter().chain(expert_plots).chain(backend_plots) {
            let path = o.path(file);
            match f(s, &path) {
                Ok(()) => o.add(file, "ProfStat", desc),
                Err(message) => o.not_made(file, AnalyzeError::Plot { path, message }.to_string()),
            }
        }
    }
    Ok(())
}
