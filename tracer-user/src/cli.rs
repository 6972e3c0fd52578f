//! The command line: `record`, `live`, `analyze`, `report`, `diff`, `export`, `probes`,
//! `symbols`.

use std::{path::PathBuf, process::ExitCode};

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

use crate::{
    config::{FileConfig, Overrides, TracerConfig},
    record::{RecordRequest, TargetSpec, record},
    targets::{
        TargetChoice, TargetKind,
        engine::points,
        llama_cpp::{
            build::GgmlBuild,
            layout::offsets::{GivenOffset, OffsetSource},
            libraries,
            plan::{self as llama_plan, LlamaCppPlan},
        },
    },
};

/// eBPF-based tracer for LLM inference.
#[derive(Parser, Debug)]
#[command(name = "profinfer", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Record a trace of an engine run (`-- CMD ARGS...`) or of a running engine (`--pid`).
    Record(Box<RecordArgs>),
    /// Record and watch live: tokens/s, phases, operators, threads, probe levels (`q` quits
    /// and leaves the target running).
    Live(Box<LiveArgs>),
    /// Analyze a trace: ProfDAG, ProfTime (Chrome JSON), ProfStat, summary.json, index.html.
    Analyze(Box<crate::analyze::AnalyzeArgs>),
    /// Print a trace's report: summary, top operators (by type, node or layer), threads,
    /// losses (`--json` for scripts).
    Report(crate::report::ReportArgs),
    /// Compare two traces: time per call by op type, node or layer, token timings,
    /// counters, what is in one run only (`--json` for scripts).
    Diff(crate::diff::DiffArgs),
    /// Export traces as Parquet tables keyed by run (runs, tokens, graphs, operators,
    /// operator_counters, threads, counters, experts), appendable, for SQL over many runs.
    Export(crate::export::ExportArgs),
    /// List what would be probed in a binary (the engine, or a llama.cpp program or
    /// library): symbols, first instruction, probe cost, and the detected llama.cpp build.
    Probes {
        /// The binary or library.
        #[arg(value_name = "BINARY_OR_LIB")]
        binary: PathBuf,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// List the engine probe symbols this version knows.
    Symbols,
}

#[derive(Args, Debug)]
struct RecordArgs {
    /// Trace file to write.
    #[arg(short, long)]
    output: PathBuf,
    /// Show the live view while recording (as `profinfer live`).
    #[arg(long)]
    tui: bool,
    #[command(flatten)]
    capture: CaptureArgs,
}

#[derive(Args, Debug)]
struct LiveArgs {
    /// Trace file to write (default: a new file in the temporary directory, shown at exit).
    #[arg(short, long)]
    output: Option<PathBuf>,
    #[command(flatten)]
    capture: CaptureArgs,
}

/// What to record and how: shared by `record` and `live`.
#[derive(Args, Debug)]
struct CaptureArgs {
    /// TOML configuration (see tracer.example.toml); flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Attach to this running process instead of starting a command.
    #[arg(long, conflicts_with = "command")]
    pid: Option<u32>,
    /// Probe levels to record, comma-separated: token,graph,op,phase,sched.
    #[arg(long, value_delimiter = ',')]
    levels: Option<Vec<String>>,
    /// Parse operator structure (dtype, shape, strides, sources).
    #[arg(long, overrides_with = "no_structure")]
    structure: bool,
    /// Do not parse operator structure.
    #[arg(long)]
    no_structure: bool,
    /// Probe both bounds of every operator span on every thread (implied by --pmc): the
    /// engine's starts, llama.cpp's barrier waits. Two or more probe hits per node and
    /// thread instead of one; by default the unprobed bound is where the barrier between
    /// nodes released (exact up to a waiting thread's leaving it).
    #[arg(long)]
    exact_spans: bool,
    /// Probe the engine's node ends one at a time (one probe hit per node and thread)
    /// instead of taking them batched: by default an engine that has `engine_op_times`
    /// takes each node's end time itself while profinfer is attached and hands them over
    /// in tables of up to 32 (one hit per table, ~2 ms behind at most).
    #[arg(long)]
    per_node_ends: bool,
    /// Record operators in sampled windows of ON decode steps in every PERIOD (`8/32`):
    /// their probes are detached in between, so the recording costs about ON/PERIOD of a
    /// full one; every view marks which tokens were traced.
    #[arg(long, value_name = "ON/PERIOD")]
    op_windows: Option<String>,
    /// Keep the kernel's eBPF run-time statistics on for the whole recording: exact
    /// per-program run counts in the cost line, at ~45 ns more per probe hit (by default
    /// they are on 0.5 s in every 5 s and the counts are scaled).
    #[arg(long)]
    probe_stats_always: bool,
    /// Read performance counters in operator probes (at each operator's start and end).
    #[arg(long, overrides_with = "no_pmc")]
    pmc: bool,
    /// Do not read performance counters.
    #[arg(long)]
    no_pmc: bool,
    /// Counters to read, comma-separated (default: hardware where available + software).
    #[arg(long, value_delimiter = ',')]
    counters: Option<Vec<String>>,
    /// Output buffer: ring or perf.
    #[arg(long)]
    buffer: Option<String>,
    /// Ring buffer size in bytes (power of two).
    #[arg(long)]
    ring_bytes: Option<u64>,
    /// Perf buffer pages per CPU (power of two).
    #[arg(long)]
    perf_pages: Option<u32>,
    /// Switch operator probes off below this many decode tokens/s (0 = never).
    #[arg(long)]
    qos_min_tps: Option<f64>,
    /// Relative headroom above --qos-min-tps before operator probes come back.
    #[arg(long)]
    qos_hysteresis: Option<f64>,
    /// Stop recording after this many seconds (the target keeps running).
    #[arg(long)]
    duration: Option<f64>,
    /// Most bytes on disk: one trace file stops there (the target keeps running); with
    /// --switch-output, the series' oldest files are removed to stay within it (an
    /// always-on flight recorder). `512K`, `64M`, `2G`.
    #[arg(long, value_name = "SIZE")]
    max_size: Option<String>,
    /// Write a numbered series of complete trace files (OUT.001.ext, OUT.002.ext, ...),
    /// starting the next at the first token boundary once the current one reaches SIZE
    /// (`64M`) or has been open TIME (`30s`, `10m`, `1h`). Each file reads alone;
    /// `profinfer report OUT` (or analyze, diff, export) reads the series as one.
    #[arg(long, value_name = "SIZE|TIME")]
    switch_output: Option<String>,
    /// Always-on mode: sample the target's threads' CPU time HZ times a second (997 is
    /// usual) and count the samples per operator, phase and thread, instead of probing
    /// every operator; keeps the token probes only, unless --levels asks for more. The
    /// trace holds a small histogram per thread and second.
    #[arg(long, value_name = "HZ")]
    sample: Option<u32>,
    #[command(flatten)]
    target: TargetArgs,
    /// The command to start, after `--`.
    #[arg(last = true)]
    command: Vec<String>,
}

impl CaptureArgs {
    fn overrides(&self) -> Overrides {
        let flag = |on: bool, off: bool| match (on, off) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        };
        Overrides {
            levels: self.levels.clone(),
            structure: flag(self.structure, self.no_structure),
            pmc: flag(self.pmc, self.no_pmc),
            exact_spans: self.exact_spans.then_some(true),
            per_node_ends: self.per_node_ends.then_some(true),
            op_windows: self.op_windows.clone(),
            stats_always: self.probe_stats_always.then_some(true),
            counters: self.counters.clone(),
            buffer: self.buffer.clone(),
            ring_bytes: self.ring_bytes,
            perf_pages: self.perf_pages,
            qos_min_tps: self.qos_min_tps,
            qos_hysteresis: self.qos_hysteresis,
            duration_secs: self.duration,
            max_size: self.max_size.clone(),
            switch_output: self.switch_output.clone(),
            sample_hz: self.sample,
        }
    }
}

/// Runs the command line; errors are printed by `main` as one line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Symbols => {
            for s in common::engine_abi::symbols::ALL {
                println!("{s}");
            }
        }
        Command::Probes { binary, target } => {
            if let Some(plan) = llama_plan_if_any(&binary, &target)? {
                print_llama_probes(&plan);
                return Ok(ExitCode::SUCCESS);
            }
            let pts = points::resolve(&binary)?;
            println!(
                "{} (build-id {})",
                pts.path.display(),
                pts.build_id.as_deref().unwrap_or("none")
            );
            println!(
                "{:<28} {:>10}  {:<28} {:<12} {:>6}  attach cost",
                "symbol", "address", "first instruction", "entry cost", "attach"
            );
            for p in &pts.points {
                println!(
                    "{:<28} {:>#10x}  {:<28} {:<12} {:>+6}  {} ({})",
                    p.symbol,
                    p.address,
                    p.first_insn,
                    p.entry_cost.name(),
                    p.attach_offset,
                    p.attach_cost.name(),
                    p.attach_insn
                );
            }
        }
        Command::Analyze(args) => crate::analyze::run(&args)?,
        Command::Report(args) => crate::report::run(&args)?,
        Command::Diff(args) => crate::diff::run(&args)?,
        Command::Export(args) => crate::export::run(&args)?,
        Command::Record(args) => {
            let req = args.capture.request(args.output.clone())?;
            if args.tui {
                live(req)?;
            } else {
                let summary = record(req).context("record failed")?;
                eprintln!("{summary}");
                // A failing target makes `profinfer record` fail too (as `strace` and
                // `time` do), so scripts and the demo do not take a broken run for a trace.
                // A full disk is a failed recording (the files before it are complete).
                if summary.output_failed {
                    return Ok(ExitCode::FAILURE);
                }
                if let Some(end) = summary.target_end {
                    return Ok(ExitCode::from(end.exit_code()));
                }
            }
        }
        Command::Live(args) => {
            let output = args.output.clone().unwrap_or_else(default_live_trace);
            live(args.capture.request(output)?)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

impl CaptureArgs {
    fn request(&self, output: PathBuf) -> anyhow::Result<RecordRequest> {
        let file = match &self.config {
            Some(p) => FileConfig::load(p)?,
            None => FileConfig::default(),
        };
        let config = TracerConfig::build(&file, &self.overrides())?;
        let target = match (self.pid, self.command.is_empty()) {
            (Some(pid), _) => TargetSpec::Pid(pid),
            (None, false) => TargetSpec::Command(self.command.clone()),
            (None, true) => anyhow::bail!("give a command after `--` or --pid PID"),
        };
        Ok(RecordRequest {
            output,
            config,
            target,
            choice: self.target.choice(),
        })
    }
}

/// What the target is and where its llama.cpp parts are (`record`, `live`, `probes`).
#[derive(Args, Debug)]
struct TargetArgs {
    /// What the target is: `auto` (the engine if it has its probe symbols, else
    /// llama.cpp), `engine`, or `llama.cpp` (unmodified llama-cli, llama-bench,
    /// llama-server, or a binding that loads libllama).
    #[arg(long, value_enum, default_value = "auto")]
    target: TargetArg,
    /// A llama.cpp library to probe that the command does not link (a Python binding
    /// loads libllama at run time): repeat for each; with --pid the mapped ones are found.
    #[arg(long = "lib", value_name = "PATH")]
    libs: Vec<PathBuf>,
    /// A llama.cpp struct offset to use instead of the one derived from the build's code
    /// (`ggml_tensor.name=256`, from `offsetof` against the build's `ggml.h`): for a
    /// build whose layout cannot be derived; repeat for each field. Checked like derived
    /// ones, before and on attach.
    #[arg(long = "ggml-offset", value_name = "FIELD=BYTES")]
    ggml_offsets: Vec<GivenOffset>,
}

impl TargetArgs {
    /// The recording's [`TargetChoice`].
    fn choice(&self) -> TargetChoice {
        TargetChoice {
            kind: self.target.into(),
            libs: self.libs.clone(),
            ggml_offsets: self.ggml_offsets.clone(),
        }
    }
}

/// `--target`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum TargetArg {
    /// The engine if the binary has its probe symbols, else llama.cpp.
    Auto,
    /// profinfer's engine.
    Engine,
    /// Unmodified llama.cpp.
    #[value(name = "llama.cpp", alias = "llama-cpp")]
    LlamaCpp,
}

impl From<TargetArg> for TargetKind {
    fn from(t: TargetArg) -> TargetKind {
        match t {
            TargetArg::Auto => TargetKind::Auto,
            TargetArg::Engine => TargetKind::Engine,
            TargetArg::LlamaCpp => TargetKind::LlamaCpp,
        }
    }
}

/// The llama.cpp plan for `binary` when `--target` asks for it, or when `auto` finds no
/// engine probe symbols.
fn llama_plan_if_any(
    binary: &std::path::Path,
    t: &TargetArgs,
) -> anyhow::Result<Option<LlamaCppPlan>> {
    let engine = || points::resolve(binary).is_ok();
    if t.target == TargetArg::Engine || (t.target == TargetArg::Auto && engine()) {
        return Ok(None);
    }
    let files = libraries::candidate_files(binary, None, &t.libs);
    let build = GgmlBuild::detect(&files, &t.ggml_offsets)?;
    Ok(Some(LlamaCppPlan::new(binary, build)))
}

/// `profinfer probes` for llama.cpp: the build, then every probe with its cost.
fn print_llama_probes(plan: &LlamaCppPlan) {
    let b = plan.build();
    println!("llama.cpp: {}", b.describe());
    println!("  ggml core: {}", b.base_lib.display());
    match &b.llama_lib {
        Some(l) => println!("  libllama:  {}", l.display()),
        None => println!("  libllama:  not linked (no token level)"),
    }
    let unknown: Vec<&str> = b
        .op_names
        .iter()
        .filter(|n| common::op_catalog::op_id(n).is_none())
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        println!(
            "  ops profinfer has no name for (recorded as GGML_OP_<n>): {}",
            unknown.join(", ")
        );
    }
    if let Some(why) = &b.op_level_missing {
        println!("  no op level: {why}");
    }
    println!(
        "  struct layout ({} of {} offsets read from the build's code):",
        b.layout_fields
            .iter()
            .filter(|f| matches!(f.source, OffsetSource::Derived(_)))
            .count(),
        b.layout_fields.len()
    );
    for f in &b.layout_fields {
        println!("    {:<26} {:>5}  {}", f.field, f.offset, f.source);
    }
    if b.barrier_point.is_none() {
        println!(
            "  ggml_barrier cannot be probed: a node's span on a thread runs to its next node's start (barrier wait included)"
        );
    }
    println!(
        "{:<6} {:<48} {:<10} {:<28} cost",
        "level", "symbol", "attach", "instruction"
    );
    let all = common::control::DETAIL_EXACT_SPANS;
    for (site, point, _, level) in plan.sites(common::control::LEVEL_ALL, all) {
        let entry = site.attach_kind() == "uprobe";
        let symbol = if site.offset > 0 {
            format!("{}+{:#x}", site.symbol, site.offset)
        } else {
            site.symbol.clone()
        };
        println!(
            "{:<6} {:<48} {:<10} {:<28} {}",
            level,
            symbol,
            site.attach_kind(),
            if entry {
                point.attach_insn.as_str()
            } else {
                ""
            },
            if entry {
                point.attach_cost.name()
            } else {
                "uretprobe"
            }
        );
    } // Not attached anywhere: the dispatch program jumps to it at expert products.
    if b.op_level_missing.is_none()
        && let Some(op) = plan.expert_product_op()
    {
        let info = llama_plan::expert_route_info(op);
        println!(
            "{:<6} {:<48} {:<10} {:<28} {}",
            info.level,
            info.point,
            info.attach,
            llama_plan::EXPERT_ROUTE,
            info.cost_class
        );
    }
}

/// `profinfer live`'s trace when no `-o` is given: a new file in the temporary directory.
fn default_live_trace() -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    std::env::temp_dir().join(format!(
        "profinfer-live-{secs}-{}.pftrace",
        std::process::id()
    ))
}

/// The live view over a recording; prints where the trace and the target's output are.
fn live(req: RecordRequest) -> anyhow::Result<()> {
    let log = PathBuf::from(format!("{}.target.log", req.output.display()));
    let outcome = crate::tui::run(req, log).context("live view failed")?;
    eprintln!("{}", outcome.summary);
    eprintln!(
        "profinfer: trace {} (profinfer analyze {} -o DIR); target output {}",
        outcome.summary.output.display(),
        outcome.summary.output.display(),
        outcome.target_log.display()
    );
    Ok(())
}
