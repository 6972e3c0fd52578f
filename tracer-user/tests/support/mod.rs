//! Helpers shared by the root-only integration tests: root check with a loud SKIPPED
//! banner, the engine and a tiny model built once, `profinfer` invocations.

#![allow(
    dead_code,
    unused_macros,
    reason = "each test crate includes this module and uses a different subset"
)]

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

use common::event::{LeafNodeEvent, NodeDescEvent, OpSpanEvent};
use trace_format::{Event, TraceReader};

pub fn is_root() -> bool {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The switch that turns the root tests' skip into a failure (set by `cargo xtask test` and
/// `cargo xtask board`, which run as root in CI).
pub const REQUIRE_ROOT_ENV: &str = "PROFINFER_REQUIRE_ROOT";
/// The switch that turns a missing oracle (llama.cpp, llama-cpp-python, SmolLM2) into a
/// failure (set by `cargo xtask test`).
pub const REQUIRE_ORACLE_ENV: &str = "PROFINFER_REQUIRE_ORACLE";

/// Whether the switch `require_env` (`PROFINFER_REQUIRE_…`) is set to `1`.
pub fn required(require_env: &str) -> bool {
    std::env::var_os(require_env).is_some_and(|v| v == "1")
}

/// What a test does when something it needs is missing (`why`): a failure when the switch
/// `require_env` is `1` (the panic tells how to get it: `fix`), else a loud SKIPPED banner
/// on stderr (which the harness shows only for failing tests, hence the switch in CI); the
/// caller then returns.
pub fn skip_unless_required(require_env: &str, why: &str, fix: &str) {
    assert!(!required(require_env), "{why} but {require_env}=1: {fix}");
    eprintln!("\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
    eprintln!("!!! SKIPPED: {why} ({fix}).");
    eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n");
}

/// Returns from the test with a loud banner unless running as root; fails it instead when
/// `PROFINFER_REQUIRE_ROOT=1` ([`REQUIRE_ROOT_ENV`]).
macro_rules! require_root {
    () => {
        if !support::is_root() {
            support::skip_unless_required(
                support::REQUIRE_ROOT_ENV,
                "this test needs root (eBPF) and does not run as root",
                "run the tests as root, as CI does",
            );
            return;
        }
        // Root tests run one at a time: each starts an engine (2 threads) and a
        // collector, and on a 2-CPU machine several at once turn every timing they check
        // (QoS reaction, decode speed with and without probes) into scheduling noise.
        let _serial = support::serial();
    };
}

/// The lock that serialises the root tests of one test binary (see `require_root!`).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A test that panicked while holding it poisons it; the next one still runs.
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Builds the engine once and makes a tiny model; returns (engine, model).
pub fn engine_and_model() -> &'static (PathBuf, PathBuf) {
    static ONCE: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    ONCE.get_or_init(|| {
        let ws = workspace();
        let status = Command::new(env!("CARGO"))
            .args(["build", "--release", "-p", "engine"])
            .current_dir(&ws)
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the engine failed");
        // Where `cargo build` just put it (`CARGO_TARGET_DIR` is passed down to it).
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| ws.join("target"), |d| ws.join(PathBuf::from(d)));
        let engine = target.join("release/engine");
        let model =
            std::env::temp_dir().join(format!("profinfer-test-{}.gguf", std::process::id()));
        generate(&engine, "tiny-llama", "q8_0", &model);
        (engine, model)
    })
}

/// Generates `preset` with weights of `dtype` next to the other test files (once per
/// name in this process).
pub fn gen_model(preset: &str, dtype: &str) -> PathBuf {
    let (engine, _) = engine_and_model();
    let path = std::env::temp_dir().join(format!(
        "profinfer-test-{}-{preset}-{dtype}.gguf",
        std::process::id()
    ));
    if !path.exists() {
        generate(engine, preset, dtype, &path);
    }
    path
}

/// `engine gen-model --preset preset --dtype dtype -o path`, asserting it succeeds.
fn generate(engine: &Path, preset: &str, dtype: &str, path: &Path) {
    let status = Command::new(engine)
        .args(["gen-model", "--preset", preset, "--dtype", dtype, "-o"])
        .arg(path)
        .status()
        .expect("engine runs");
    assert!(status.success(), "gen-model {preset} {dtype}");
}

/// A recorded `engine run` of a model: the trace, the engine's self-profile and what
/// the collector printed.
pub struct EngineRun {
    /// The trace file.
    pub trace: PathBuf,
    /// The engine's `--self-profile` log.
    pub self_profile: PathBuf,
    /// The collector's (and engine's) output.
    pub output: std::process::Output,
}

/// Records `engine run -m model run_args` (trace named `name`), asserting it succeeds;
/// returns the trace and the collector's (and engine's) output.
pub fn record_engine(
    name: &str,
    model: &Path,
    run_args: &[&str],
) -> (PathBuf, std::process::Output) {
    record_engine_with(name, model, &[], run_args)
}

/// [`record_engine`] with `profinfer record` flags.
pub fn record_engine_with(
    name: &str,
    model: &Path,
    flags: &[&str],
    run_args: &[&str],
) -> (PathBuf, std::process::Output) {
    let (engine, _) = engine_and_model();
    let trace = trace_path(name);
    let output = profinfer()
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .args(flags)
        .arg("--")
        .arg(engine)
        .args(["run", "-m"])
        .arg(model)
        .args(run_args)
        .output()
        .expect("profinfer runs");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert_success(&output);
    (trace, output)
}

/// Records `engine run -m model --self-profile ... run_args` (trace named `name`),
/// asserting it succeeds.
pub fn record_run(name: &str, model: &Path, run_args: &[&str]) -> EngineRun {
    let self_profile = trace_path(name).with_extension("selfprofile.jsonl");
    let self_profile_arg = self_profile.to_str().expect("temp paths are UTF-8");
    let args: Vec<&str> = ["--self-profile", self_profile_arg]
        .into_iter()
        .chain(run_args.iter().copied())
        .collect();
    let (trace, output) = record_engine(name, model, &args);
    EngineRun {
        trace,
        self_profile,
        output,
    }
}

/// Where the trace named `name` is written (unique per test process).
pub fn trace_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "profinfer-test-{}-{name}.pftrace",
        std::process::id()
    ))
}

/// The `profinfer` binary built for these tests.
pub fn profinfer() -> Command {
    Command::new(env!("CARGO_BIN_EXE_profinfer"))
}

/// `profinfer record -o out [extra] -- engine run ... -n tokens -t 2`, asserting it
/// succeeds.
pub fn record(out: &Path, extra: &[&str], tokens: u32) -> std::process::Output {
    let output = record_unchecked(out, extra, tokens);
    assert!(output.status.success(), "record failed");
    output
}

/// [`record`] without asserting how it ended (the target's output is not kept).
pub fn record_unchecked(out: &Path, extra: &[&str], tokens: u32) -> std::process::Output {
    let (engine, model) = engine_and_model();
    let n = tokens.to_string();
    let output = profinfer()
        .arg("record")
        .arg("-o")
        .arg(out)
        .args(extra)
        .arg("--")
        .arg(engine)
        .args(["run", "-m"])
        .arg(model)
        .args(["-p", "hello world", "-n", &n, "-t", "2", "--ignore-eos"])
        .stdout(std::process::Stdio::null())
        .output()
        .expect("profinfer runs");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    output
}

/// Makes this process the reaper of orphans, so a target that profinfer left running can
/// be waited for ([`assert_target_completes`]).
pub fn become_subreaper() {
    // SAFETY: prctl with plain integer arguments.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(rc, 0, "PR_SET_CHILD_SUBREAPER");
}

/// Waits for the orphaned target `pid` (after [`become_subreaper`]) and asserts it ran to
/// completion.
pub fn assert_target_completes(pid: u32) {
    let mut st = 0;
    // SAFETY: waits for the reparented target with a valid status pointer.
    let r = unsafe { libc::waitpid(pid as i32, &mut st, 0) };
    assert_eq!(r, pid as i32, "target reparented to the test");
    assert!(
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
        "target finished with exit 0 (status {st:#x})"
    );
}

/// How often the eBPF program `name` ran in a recording (0 if never), from its footer.
pub fn program_runs(footer: &trace_format::TraceFooter, name: &str) -> u64 {
    footer
        .cost
        .programs
        .iter()
        .find(|p| p.program == name)
        .map_or(0, |p| p.hits)
}

/// `profinfer analyze trace -o dir`, asserting it succeeds.
pub fn analyze_into(trace: &Path, dir: &Path) {
    let out = profinfer()
        .arg("analyze")
        .arg(trace)
        .arg("-o")
        .arg(dir)
        .output()
        .expect("profinfer runs");
    assert_success(&out);
}

/// Asserts that a finished command succeeded, printing its stderr if it did not.
pub fn assert_success(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "command failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every event of a complete trace, in file order.
pub fn events(r: &TraceReader) -> Vec<Event> {
    r.events().collect::<Result<_, _>>().expect("trace decodes")
}

/// The node count the engine announced for graph `graph_id` in its self-profile
/// (`engine run --self-profile FILE`): the ground truth for the DAG's computed nodes.
pub fn self_profile_graph_nodes(self_profile: &Path, graph_id: u64) -> u64 {
    std::fs::read_to_string(self_profile)
        .expect("self-profile")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["level"] == "graph" && v["graph"].as_u64() == Some(graph_id))
        .and_then(|v| v["n_nodes"].as_u64())
        .expect("engine graph record")
}

/// The threads that ran operators (sent operator spans).
pub fn op_threads(evs: &[Event]) -> std::collections::HashSet<u32> {
    op_spans(evs).iter().map(|s| s.tid).collect()
}

/// Every operator span (with or without counters), in file order.
pub fn op_spans(evs: &[Event]) -> Vec<OpSpanEvent> {
    evs.iter()
        .filter_map(|e| match e {
            Event::OpSpan(s) => Some(*s),
            Event::OpSpanPmc(s) => Some(s.span),
            _ => None,
        })
        .collect()
}

/// Every node description, in file order.
pub fn node_descs(evs: &[Event]) -> Vec<NodeDescEvent> {
    evs.iter()
        .filter_map(|e| match e {
            Event::NodeDesc(d) => Some(**d),
            _ => None,
        })
        .collect()
}

/// The description of each node address last recorded in the trace.
pub fn last_descs(evs: &[Event]) -> std::collections::HashMap<u64, NodeDescEvent> {
    node_descs(evs)
        .into_iter()
        .map(|d| (d.node_addr, d))
        .collect()
}

/// The recorded leaf nodes (weights, inputs, cache views) by node address.
pub fn leaves(evs: &[Event]) -> std::collections::HashMap<u64, &LeafNodeEvent> {
    evs.iter()
        .filter_map(|e| match e {
            Event::LeafNode(l) => Some((l.node_addr, l)),
            _ => None,
        })
        .collect()
}

/// The SmolLM2 file, or `None` after a loud banner when it is not configured.
pub fn smollm2() -> Option<PathBuf> {
    match std::env::var_os("PROFINFER_SMOLLM2") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            skip_unless_required(
                REQUIRE_ORACLE_ENV,
                "PROFINFER_SMOLLM2 is not set",
                "run `cargo xtask test`, which fetches the model and sets it",
            );
            None
        }
    }
}

/// Runs `cmd` (stdout discarded), asserts it succeeded, and gives its peak RSS in KiB,
/// read with `wait4`.
#[allow(
    clippy::zombie_processes,
    reason = "reaped by wait4, which also gives its resource usage"
)]
pub fn peak_rss_kib(cmd: &mut Command) -> u64 {
    let child = cmd
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("the command runs");
    let mut status = 0;
    // SAFETY: `rusage` is plain data that `wait4` fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child with valid status and rusage pointers.
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(r, child.id() as i32, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed ({status:#x})"
    );
    u64::try_from(usage.ru_maxrss).unwrap_or(0)
}
