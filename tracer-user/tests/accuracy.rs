//! Accuracy of the tracer's spans against the engine's own timestamps (root only).
//!
//! `engine run --self-profile FILE` reads `CLOCK_MONOTONIC` inside the body of every
//! probe entry point; the probes read the same clock (`bpf_ktime_get_ns`) at the uprobe
//! (before the body) and the uretprobe (after it). So every self-profile span must have
//! a tracer span that contains it, and the difference is the probe's own cost. Metrics
//! of lm-Meter (seed 000): accuracy A = (1 − |L − G| / G) × 100 % and scaled error
//! ε = |L − G| [µs] / G [ms], L the tracer's duration, G the engine's.
//!
//! Prints a Markdown table per level (for docs/performance.md); run with
//! `cargo test --release -p tracer-user --test accuracy -- --nocapture`.

use std::collections::HashMap;

use trace_format::{Event, TraceReader};

#[macro_use]
mod support;

use support::{engine_and_model, events, profinfer, trace_path};

/// A closed span of one thread.
#[derive(Clone, Copy, Debug)]
struct Span {
    tid: u32,
    start: u64,
    end: u64,
}

impl Span {
    fn dur(self) -> u64 {
        self.end - self.start
    }
}

/// Pairs entry/exit records per thread: `key` of an entry, and its span.
#[derive(Default)]
struct Pairer<K> {
    open: HashMap<u32, (K, u64)>,
    closed: Vec<(K, Span)>,
}

impl<K: Clone> Pairer<K> {
    fn enter(&mut self, tid: u32, key: K, ts: u64) {
        assert!(
            self.open.insert(tid, (key, ts)).is_none(),
            "nested entry on {tid}"
        );
    }

    fn exit(&mut self, tid: u32, ts: u64) {
        let (key, start) = self.open.remove(&tid).expect("exit after entry");
        self.closed.push((
            key,
            Span {
                tid,
                start,
                end: ts,
            },
        ));
    }
}

/// Per-level accumulation of the lm-Meter metrics, and the pairs they come from.
#[derive(Default)]
struct Metrics {
    accuracy: Vec<f64>,
    eps: Vec<f64>,
    overhead_ns: Vec<f64>,
    engine_ns: Vec<f64>,
    /// (tracer span, engine span) of every pair, for the neighbour check.
    pairs: Vec<(Span, Span)>,
}

impl Metrics {
    /// Adds one pair; asserts the tracer span contains the engine span.
    fn add(&mut self, level: &str, tracer: Span, engine: Span) {
        assert_eq!(tracer.tid, engine.tid, "{level}: same thread");
        assert!(
            tracer.start <= engine.start && tracer.end >= engine.end,
            "{level}: tracer span {tracer:?} does not contain engine span {engine:?}"
        );
        let (l, g) = (tracer.dur() as f64, engine.dur().max(1) as f64);
        let diff = (l - g).abs();
        self.accuracy.push((1.0 - diff / g) * 100.0);
        self.eps.push((diff / 1e3) / (g / 1e6));
        self.overhead_ns.push(l - g);
        self.engine_ns.push(g);
        self.pairs.push((tracer, engine));
    }

    fn mean(v: &[f64]) -> f64 {
        v.iter().sum::<f64>() / v.len().max(1) as f64
    }

    fn median(v: &[f64]) -> f64 {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
    }

    /// The median excess L − G is at most `max_ns` (the tracer span is never shorter:
    /// containment is asserted per span in [`Metrics::add`]).
    fn assert_excess_within(&self, level: &str, max_ns: f64) {
        assert!(!self.overhead_ns.is_empty(), "{level}: no spans");
        let excess = Self::median(&self.overhead_ns);
        assert!(
            excess <= max_ns,
            "{level}: median L − G {:.2} µs > {:.0} µs",
            excess / 1e3,
            max_ns / 1e3
        );
    }

    /// Every tracer span lies between its engine span's neighbours on the same thread:
    /// it starts at or after the previous engine span of the level ended and ends at or
    /// before the next one starts. A bound taken from a neighbouring event (the next
    /// token's entry, the previous node's exit) breaks it by a whole span, however long
    /// or short spans are on this machine; the probes' own time never does, since each
    /// probe fires between the two bodies it separates.
    fn assert_between_neighbours(&self, level: &str) {
        let mut by_thread: HashMap<u32, Vec<(Span, Span)>> = HashMap::new();
        for &(t, e) in &self.pairs {
            by_thread.entry(e.tid).or_default().push((t, e));
        }
        for pairs in by_thread.values_mut() {
            pairs.sort_by_key(|(_, e)| (e.start, e.end));
            for w in pairs.windows(2) {
                let ((t0, e0), (t1, e1)) = (w[0], w[1]);
                assert!(
                    t0.end <= e1.start,
                    "{level}: tracer span {t0:?} ends after the next engine span {e1:?} starts"
                );
                assert!(
                    t1.start >= e0.end,
                    "{level}: tracer span {t1:?} starts before the previous engine span {e0:?} ends"
                );
            }
        }
    }
}

/// Bound on the median L − G of the levels whose both bounds are probed (tokens, graphs,
/// phases; operators with `--exact-spans`): the probe pair's own time inside the span,
/// 5–7 µs measured for tokens and graphs on this VM, with room for a slower machine; a
/// probe that grew several times its cost fails it, whatever the spans' length. (No bar
/// on lm-Meter's accuracy A = 1 − |L − G| / G here: for a fixed probe cost it depends on
/// how long a token takes on the machine, so the A and ε figures are measured and
/// published by `cargo xtask eval` in docs/evaluation.md, not asserted.)
const MAX_PAIR_EXCESS_NS: f64 = 20_000.0;
/// Bound on the median L − G of operators in the default recording, whose start is the
/// barrier's release rather than a probe: the probes' own time (1–5 µs) plus the
/// thread's wake-up from the barrier (5.4 µs measured on the tiny model with 2 vCPUs
/// under load).
const MAX_INFERRED_START_EXCESS_NS: f64 = 30_000.0;

/// Generated tokens of each recording: medians over 64 steps rather than 16, so a few
/// preempted steps do not move the median across a bar.
const TOKENS: u32 = 64;

/// The bars every recording keeps on every model: containment and pairing (asserted
/// while measuring), each tracer span between its engine neighbours, and the median
/// excess of each level within its bound (`exact`: operators' starts probed too).
fn assert_bars(levels: &HashMap<&'static str, Metrics>, exact: bool) {
    for level in ["token", "graph", "op", "phase"] {
        let m = levels
            .get(level)
            .unwrap_or_else(|| panic!("no {level} spans"));
        m.assert_between_neighbours(level);
        let bound = if level == "op" && !exact {
            MAX_INFERRED_START_EXCESS_NS
        } else {
            MAX_PAIR_EXCESS_NS
        };
        m.assert_excess_within(level, bound);
    }
}

fn json_u64(v: &serde_json::Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("`{key}` in {v}"))
}

#[test]
fn tracer_spans_contain_the_engines_self_profile_spans() {
    require_root!();
    let (_, model) = engine_and_model();
    for (label, flags, exact) in [
        (
            "default (node ends probed, starts at the barrier's release)",
            &[][..],
            false,
        ),
        (
            "--exact-spans --no-structure (both bounds probed)",
            &["--exact-spans", "--no-structure"][..],
            true,
        ),
    ] {
        println!("\nprofinfer record {label}, tiny-llama q8_0, 2 threads, {TOKENS} tokens:");
        assert_bars(&measure(model, flags), exact);
    }
}

/// On the real model, the default recording keeps the same bars as on the tiny one; its
/// lm-Meter figures (tokens and graphs of milliseconds, A ≈ 99.9 %) are printed here and
/// published by the evaluation.
#[test]
fn default_recording_is_accurate_on_smollm2() {
    require_root!();
    let Some(model) = support::smollm2() else {
        return;
    };
    println!("\nprofinfer record (default), SmolLM2-135M Q4_1, 2 threads, {TOKENS} tokens:");
    assert_bars(&measure(&model, &[]), false);
}

/// Records one run of `model` with `flags`, pairs and checks every span, prints the
/// table and returns the metrics per level (and `op > 100 µs`).
fn measure(model: &std::path::Path, flags: &[&str]) -> HashMap<&'static str, Metrics> {
    let (engine, _) = engine_and_model();
    let out = trace_path("accuracy");
    let profile = out.with_extension("selfprof.jsonl");
    let o = profinfer()
        .arg("record")
        .arg("-o")
        .arg(&out)
        .args(flags)
        .arg("--")
        .arg(engine)
        .args(["run", "-m"])
        .arg(model)
        .args([
            "-p",
            "hello world",
            "-n",
            &TOKENS.to_string(),
            "-t",
            "2",
            "--seed",
            "0",
        ])
        .args(["--ignore-eos", "--self-profile"])
        .arg(&profile)
        .output()
        .expect("profinfer runs");
    support::assert_success(&o);

    let r = TraceReader::open(&out).expect("trace opens");
    let footer = r.footer().expect("footer").clone();
    assert_eq!(footer.events_lost, 0, "nothing lost: every span can pair");
    let mut tokens: Pairer<()> = Pairer::default();
    let mut graphs: Pairer<u64> = Pairer::default();
    let mut phases: Pairer<&'static str> = Pairer::default();
    for e in events(&r) {
        let h = e.header();
        let exit = h.is_exit();
        match &e {
            Event::Decode(_) if exit => tokens.exit(h.tid, h.ts_ns),
            Event::Decode(_) => tokens.enter(h.tid, (), h.ts_ns),
            Event::Graph(_) if exit => graphs.exit(h.tid, h.ts_ns),
            Event::Graph(g) => graphs.enter(h.tid, g.graph_id, h.ts_ns),
            Event::Phase(_) if exit => phases.exit(h.tid, h.ts_ns),
            Event::Phase(_) => {
                let name = match h.kind {
                    30 => "embed",
                    31 => "copy_logits",
                    32 => "softmax",
                    33 => "sample",
                    k => panic!("phase kind {k}"),
                };
                phases.enter(h.tid, name, h.ts_ns);
            }
            _ => {}
        }
    }
    // Operator spans as the analyzer makes them (their starts inferred from the barrier
    // where only ends were probed), keyed by (graph, node index, thread).
    let (model, _, _) = analyzer::ingest::load(&out, &analyzer::NoProgress).expect("loads");
    let mut tracer_ops: HashMap<(u64, u32, u32), Span> = HashMap::new();
    for g in model.graphs() {
        for ns in model.graph_node_spans(g) {
            let index = model.nodes()[ns.node as usize].index;
            for sl in model.span_slices(ns) {
                let tid = model.threads()[sl.thread as usize].tid;
                let span = Span {
                    tid,
                    start: sl.start_ns,
                    end: sl.end_ns,
                };
                assert!(
                    tracer_ops.insert((g.graph_id, index, tid), span).is_none(),
                    "(graph, node, thread) is unique"
                );
            }
        }
    }
    let tracer_graphs: HashMap<u64, Span> = graphs.closed.iter().copied().collect();
    let mut tracer_tokens: HashMap<u32, Vec<Span>> = HashMap::new();
    for (_, s) in &tokens.closed {
        tracer_tokens.entry(s.tid).or_default().push(*s);
    }
    let mut tracer_phases: HashMap<(u32, String), Vec<Span>> = HashMap::new();
    for (name, s) in &phases.closed {
        tracer_phases
            .entry((s.tid, (*name).to_owned()))
            .or_default()
            .push(*s);
    }

    let text = std::fs::read_to_string(&profile).expect("self-profile written");
    let mut levels: HashMap<&str, Metrics> = HashMap::new();
    let mut token_seen: HashMap<u32, usize> = HashMap::new();
    let mut phase_seen: HashMap<(u32, String), usize> = HashMap::new();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("JSON line");
        let engine_span = Span {
            tid: json_u64(&v, "tid") as u32,
            start: json_u64(&v, "start_ns"),
            end: json_u64(&v, "end_ns"),
        };
        let level = v["level"].as_str().expect("level");
        let tracer_span = match level {
            "token" => {
                let n = token_seen.entry(engine_span.tid).or_default();
                *n += 1;
                tracer_tokens
                    .get(&engine_span.tid)
                    .and_then(|v| v.get(*n - 1))
            }
            "graph" => tracer_graphs.get(&json_u64(&v, "graph")),
            "op" => {
                let key = (
                    json_u64(&v, "graph"),
                    json_u64(&v, "node") as u32,
                    engine_span.tid,
                );
                tracer_ops.get(&key)
            }
            "phase" => {
                let name = v["name"].as_str().expect("phase name").to_owned();
                let n = phase_seen
                    .entry((engine_span.tid, name.clone()))
                    .or_default();
                *n += 1;
                tracer_phases
                    .get(&(engine_span.tid, name))
                    .and_then(|v| v.get(*n - 1))
            }
            other => panic!("unknown level {other}"),
        };
        let level: &'static str = match level {
            "token" => "token",
            "graph" => "graph",
            "op" => "op",
            _ => "phase",
        };
        let tracer_span =
            tracer_span.unwrap_or_else(|| panic!("no tracer span for self-profile span {v}"));
        levels
            .entry(level)
            .or_default()
            .add(level, *tracer_span, engine_span);
        if level == "op" && engine_span.dur() > 100_000 {
            levels
                .entry("op > 100 µs")
                .or_default()
                .add(level, *tracer_span, engine_span);
        }
        *counts.entry(level).or_default() += 1;
    }
    // The pairing is complete both ways: as many tracer spans as engine spans per level.
    assert_eq!(counts.get("token").copied(), Some(tokens.closed.len()));
    assert_eq!(counts.get("graph").copied(), Some(graphs.closed.len()));
    assert_eq!(counts.get("op").copied(), Some(tracer_ops.len()));
    assert_eq!(counts.get("phase").copied(), Some(phases.closed.len()));

    println!(
        "\n| level | spans | median G | mean accuracy A | median A | mean ε (µs/ms) | median ε | median L − G |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for level in ["token", "graph", "op", "op > 100 µs", "phase"] {
        let Some(m) = levels.get(level) else {
            continue;
        };
        println!(
            "| {level} | {} | {:.2} µs | {:.2} % | {:.2} % | {:.2} | {:.2} | {:.2} µs |",
            m.accuracy.len(),
            Metrics::median(&m.engine_ns) / 1e3,
            Metrics::mean(&m.accuracy),
            Metrics::median(&m.accuracy),
            Metrics::mean(&m.eps),
            Metrics::median(&m.eps),
            Metrics::median(&m.overhead_ns) / 1e3,
        );
    }
    std::fs::remove_file(&out).ok();
    std::fs::remove_file(&profile).ok();
    levels
}
