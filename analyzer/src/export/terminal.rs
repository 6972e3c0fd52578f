//! The [`Report`] and the [`Diff`] as aligned plain text for a terminal (`profinfer
//! report`, `profinfer diff`).

use std::io::{self, Write};

use crate::diff::{Diff, DiffRow, Significance};
use crate::export::{counter_value, summary::Distribution};
use crate::report::Report;

/// Milliseconds with precision that suits their size (`0.042`, `4.21`, `421.3`, `4213`).
pub fn ms(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A share (0..1) as a percentage with one decimal.
pub fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

/// A key cut to `width` characters (with `…` when cut).
fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Writes the report.
pub fn write(r: &Report, mut w: impl Write) -> io::Result<()> {
    write_header(r, &mut w)?;
    writeln!(w)?;
    write_top(r, &mut w)?;
    if !r.threads.is_empty() {
        writeln!(w)?;
        write_threads(r, &mut w)?;
    }
    if let Some(b) = &r.backends {
        write_backends(b, &mut w)?;
    }
    if let Some(win) = &r.windows {
        writeln!(w)?;
        write_windows(win, &mut w)?;
    }
    if let Some(sampled) = &r.sampled {
        writeln!(w)?;
        write_sampled(sampled, &mut w)?;
    }
    let s = &r.summary;
    if !s.warnings.is_empty() {
        writeln!(w)?;
        writeln!(w, "warnings")?;
        for warning in &s.warnings {
            writeln!(w, "  {warning}")?;
        }
    }
    Ok(())
}

/// The trace, target, recording, event and token lines at the top of the report.
fn write_header(r: &Report, w: &mut impl Write) -> io::Result<()> {
    let s = &r.summary;
    if s.trace.files > 1 {
        writeln!(
            w,
            "profinfer report: {} (a series of {} files, read as one)",
            r.trace, s.trace.files
        )?;
    } else {
        writeln!(w, "profinfer report: {}", r.trace)?;
    }
    let end = s
        .trace
        .end_reason
        .as_deref()
        .unwrap_or("no footer: recording did not end cleanly");
    writeln!(
        w,
        "target    {} (pid {}), {} thread{}; {}",
        s.trace.target,
        s.trace.pid,
        s.threads,
        if s.threads == 1 { "" } else { "s" },
        end
    )?;
    let counters = if s.trace.counters.is_empty() {
        "none".to_owned()
    } else {
        s.trace.counters.join(", ")
    };
    writeln!(w, "recording {}", s.trace.recording.text)?;
    writeln!(w, "counters  {counters}")?;
    writeln!(
        w,
        "events    {} written, {} lost{}",
        s.events.written,
        s.events.lost,
        if s.events.late > 0 {
            format!(", {} late", s.events.late)
        } else {
            String::new()
        }
    )?;
    let mut tokens = format!(
        "tokens    prefill {} in {} call{}, decode {}",
        s.tokens.prefill,
        s.tokens.prefill_calls,
        if s.tokens.prefill_calls == 1 { "" } else { "s" },
        s.tokens.decode
    );
    if !s.runs.is_empty() {
        tokens.push_str(&format!("; {} runs", s.runs.len()));
    }
    if !s.requests.is_empty() {
        tokens.push_str(&format!("; {} requests", s.requests.len()));
    }
    if let Some(t) = s.ttft_ms {
        tokens.push_str(&format!("; TTFT {} ms", ms(t)));
    }
    if let Some(d) = &s.tpot_ms {
        tokens.push_str(&format!(
            "; TPOT {} ms (p50 {}, p99 {}; {:.1} tok/s)",
            ms(d.mean),
            ms(d.p50),
            ms(d.p99),
            if d.mean > 0.0 { 1e3 / d.mean } else { 0.0 }
        ));
    }
    writeln!(w, "{tokens}")?;
    write_sequences(s, w)?;
    write_runs(&s.run_groups, s.runs.len(), w)?;
    write_requests(&s.requests, w)?;
    writeln!(
        w,
        "graphs    {} ({:.1} per call, {:.0} nodes each)",
        s.graphs, s.graphs_per_token, s.nodes_per_graph
    )?;
    Ok(())
}

/// The table of the top operators (or why there is none).
fn write_top(r: &Report, w: &mut impl Write) -> io::Result<()> {
    if r.top.is_empty() {
        writeln!(w, "no operator events (was the op level recorded?)")?;
    } else {
        writeln!(
            w,
            "top {} by {} (of {} ms operator time in {} ms traced)",
            r.top.len(),
            r.by.name(),
            ms(r.op_total_ms),
            ms(r.traced_ms)
        )?;
        let kw = r
            .top
            .iter()
            .map(|g| g.key.chars().count())
            .max()
            .unwrap_or(0)
            .clamp(5, 28);
        writeln!(
            w,
            "  {:<kw$} {:>7} {:>10} {:>6} {:>9} {:>9} {:>9} {:>9} {:>5}",
            r.by.name(),
            "count",
            "total ms",
            "share",
            "mean µs",
            "p50 µs",
            "p99 µs",
            "ms/call",
            "idle"
        )?;
        for g in &r.top {
            writeln!(
                w,
                "  {:<kw$} {:>7} {:>10} {:>6} {:>9.1} {:>9.1} {:>9.1} {:>9} {:>5}",
                fit(&g.key, kw),
                g.count,
                ms(g.total_ms),
                pct(g.share),
                g.mean_us,
                g.p50_us,
                g.p99_us,
                ms(g.per_token_ms),
                pct(g.idle_share)
            )?;
        }
        if r.omitted > 0 {
            writeln!(w, "  … {} more (raise -n)", r.omitted)?;
        }
        if r.top.iter().any(|g| !g.quantiles_exact) {
            writeln!(
                w,
                "  (p50/p99 of groups of over {} executions are a DDSketch's, within {:.0} %)",
                crate::streaming_stats::EXACT_VALUES,
                crate::streaming_stats::SKETCH_RELATIVE_ERROR * 100.0
            )?;
        }
    }
    Ok(())
}

/// The per-thread table: operator busy time and scheduler states.
fn write_threads(r: &Report, w: &mut impl Write) -> io::Result<()> {
    writeln!(w, "threads")?;
    writeln!(
        w,
        "  {:>8} {:<16} {:>8} {:>10} {:>6} {:>11} {:>11} {:>11}",
        "tid", "name", "ops", "busy ms", "busy", "running ms", "runnable ms", "sleeping ms"
    )?;
    for t in &r.threads {
        let name = format!("{}{}", fit(&t.name, 14), if t.main { " *" } else { "" });
        writeln!(
            w,
            "  {:>8} {:<16} {:>8} {:>10} {:>6} {:>11} {:>11} {:>11}",
            t.tid,
            name,
            t.op_slices,
            ms(t.op_busy_ms),
            pct(t.op_busy_share),
            ms(t.running_ms),
            ms(t.runnable_ms),
            ms(t.sleeping_ms)
        )?;
    }
    writeln!(
        w,
        "  (* main thread; busy = inside operators; scheduler times need the sched level)"
    )?;
    Ok(())
}

/// Shares of a sampled recording's CPU time per phase, with their sampling error.
fn write_sampled(s: &crate::model::SampledReport, w: &mut impl Write) -> io::Result<()> {
    let phase_total =
        |shares: &[crate::model::SampledShare]| -> u64 { shares.iter().map(|x| x.samples).sum() };
    writeln!(
        w,
        "sampled   CPU-clock samples of the target's threads at {} Hz: {} (decode {}, \
         prefill {}, outside decode calls {}); share ± one standard error",
        s.hz,
        s.samples,
        phase_total(&s.decode),
        phase_total(&s.prefill),
        s.outside
    )?;
    for (phase, shares) in [("decode", &s.decode), ("prefill", &s.prefill)] {
        if shares.is_empty() {
            continue;
        }
        writeln!(
            w,
            "  {phase:<22} {:>8} {:>8} {:>7} {:>10}",
            "samples", "share", "± err", "CPU ms"
        )?;
        for x in shares.iter().take(12) {
            writeln!(
                w,
                "  {:<22} {:>8} {:>7.1} % {:>5.1} % {:>10.1}",
                fit(&x.op, 22),
                x.samples,
                100.0 * x.share,
                100.0 * x.stderr,
                x.cpu_ms
            )?;
        }
    }
    Ok(())
}

/// The sampled windows line: how much recording operators (or sampling) cost per step.
fn write_windows(win: &crate::windows::WindowStats, w: &mut impl Write) -> io::Result<()> {
    let (on, what) = match win.switched {
        "sampler" => ("CPU-clock sampler on", "sampling"),
        _ => ("operators recorded", "recording operators"),
    };
    writeln!(
        w,
        "windows   {on} in {} of {} decode steps ({} at a switch left out); \
         time per step {} ms traced, {} ms untraced: {what} costs {:+.1} %",
        win.traced_steps,
        win.traced_steps + win.untraced_steps + win.switch_steps,
        win.switch_steps,
        ms(win.traced_p50_ms),
        ms(win.untraced_p50_ms),
        100.0 * win.slowdown
    )?;
    Ok(())
}

/// A rate in tokens per second, `–` when absent (`9774`, `412.3`).
pub(crate) fn rate(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 1000.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
        None => "–".to_owned(),
    }
}

/// Sequences per decode call, when some call carried several (llama-server's slots:
/// `docs/views.md#sequences`): `sequences up to 2 per call: 1 in 5 calls, 2 in 18`.
fn write_sequences(s: &crate::export::summary::Summary, w: &mut impl Write) -> io::Result<()> {
    let Some(q) = s.sequences.as_ref().filter(|q| q.max_per_call > 1) else {
        return Ok(());
    };
    let parts: Vec<String> = q
        .calls
        .iter()
        .map(|c| match c.sequences {
            0 => format!("unknown in {}", c.calls),
            n => format!("{n} in {}", c.calls),
        })
        .collect();
    writeln!(
        w,
        "sequences up to {} per decode call: {}{}",
        q.max_per_call,
        parts.join(", "),
        if q.lower_bound_calls > 0 {
            format!(
                " ({} calls counted in part: a lower bound)",
                q.lower_bound_calls
            )
        } else {
            String::new()
        }
    )
}

/// Requests shown by `profinfer report` (the rest are in `summary.json`).
const REPORT_REQUESTS: usize = 16;

/// The requests of a trace whose calls carry several sequences, one row each
/// (`docs/views.md#sequences`); nothing otherwise.
fn write_requests(
    requests: &[crate::run_timings::RequestTimings],
    w: &mut impl Write,
) -> io::Result<()> {
    if requests.is_empty() {
        return Ok(());
    }
    writeln!(
        w,
        "requests  {} (each sequence id's calls, from the sequences each call carried)",
        requests.len()
    )?;
    writeln!(
        w,
        "  {:>3} {:>3} {:>9} {:>7} {:>5} {:>8} {:>9} {:>8} {:>13}",
        "#",
        "seq",
        "start ms",
        "prefill",
        "steps",
        "max seqs",
        "TTFT ms",
        "TPOT ms",
        "decode tok/s"
    )?;
    for r in requests.iter().take(REPORT_REQUESTS) {
        writeln!(
            w,
            "  {:>3} {:>3} {:>9} {:>7} {:>5} {:>8} {:>9} {:>8} {:>13}",
            r.index,
            r.seq,
            ms(r.start_ms),
            r.prefill_calls,
            r.decode_steps,
            r.max_seqs_per_call,
            if r.started_before {
                "before".to_owned()
            } else {
                r.ttft_ms.map_or_else(|| "–".to_owned(), ms)
            },
            r.tpot_ms.map_or_else(|| "–".to_owned(), ms),
            rate(r.decode_tokens_per_s)
        )?;
    }
    if requests.len() > REPORT_REQUESTS {
        writeln!(
            w,
            "  … {} more in summary.json",
            requests.len() - REPORT_REQUESTS
        )?;
    }
    Ok(())
}

/// The runs of a trace with several (sequences from position 0), one row per shape
/// with the medians of its runs (`docs/views.md#runs`); nothing for one run.
fn write_runs(
    groups: &[crate::run_timings::RunGroup],
    runs: usize,
    w: &mut impl Write,
) -> io::Result<()> {
    if groups.is_empty() {
        return Ok(());
    }
    writeln!(
        w,
        "runs      {runs} sequences from position 0, by shape (medians of each shape's runs)"
    )?;
    let labels: Vec<String> = groups.iter().map(|g| g.shape.label()).collect();
    let ids: Vec<String> = groups.iter().map(|g| g.runs_text()).collect();
    let lw = labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(5, 28);
    let iw = ids
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(4, 16);
    writeln!(
        w,
        "  {:<iw$} {:<lw$} {:>7} {:>9} {:>14} {:>13}",
        "runs", "shape", "threads", "TTFT ms", "prefill tok/s", "decode tok/s"
    )?;
    for ((g, label), id) in groups.iter().zip(&labels).zip(&ids) {
        writeln!(
            w,
            "  {:<iw$} {:<lw$} {:>7} {:>9} {:>14} {:>13}",
            fit(id, iw),
            fit(label, lw),
            g.shape
                .threads
                .map_or_else(|| "–".to_owned(), |t| t.to_string()),
            g.ttft_ms.map_or_else(|| "–".to_owned(), ms),
            rate(g.prefill_tokens_per_s),
            rate(g.decode_tokens_per_s)
        )?;
    }
    Ok(())
}

/// Rows of the side-by-side table the report shows.
const SIDE_BY_SIDE_ROWS: usize = 8;

/// The backend split: totals, then the same op and shape on each backend (Fig 12).
fn write_backends(b: &crate::backends::BackendStats, w: &mut impl Write) -> io::Result<()> {
    let t = &b.total;
    let calls = b.split_calls.max(1) as f64;
    let per_call = |ns: u64| ms(ns as f64 / 1e6 / calls);
    writeln!(w)?;
    writeln!(
        w,
        "backends  {} (ms per decode call, over {} calls)",
        b.backends.join(", "),
        calls
    )?;
    for (name, ns) in &t.compute_ns {
        writeln!(
            w,
            "  {name:<22} {:>9}  ({} splits)",
            per_call(*ns),
            t.splits.get(name).copied().unwrap_or(0)
        )?;
    }
    if t.gpu_submits > 0 {
        writeln!(
            w,
            "  {:<22} {:>9}  ({} vkQueueSubmit)",
            "  GPU submissions",
            per_call(t.gpu_submit_ns),
            t.gpu_submits
        )?;
    }
    if t.fence_waits > 0 {
        writeln!(
            w,
            "  {:<22} {:>9}  ({} vkWaitForFences)",
            "  GPU fence waits",
            per_call(t.fence_wait_ns),
            t.fence_waits
        )?;
    }
    if t.recorded_nodes > 0 {
        writeln!(
            w,
            "  {:<22} {:>9}  ({} nodes)",
            "  CPU recording nodes",
            per_call(t.record_ns),
            t.recorded_nodes
        )?;
    }
    if t.gpu_timed_nodes > 0 {
        writeln!(
            w,
            "  {:<22} {:>9}  ({} nodes, GPU timestamps)",
            "  GPU executing nodes",
            per_call(t.gpu_node_ns),
            t.gpu_timed_nodes
        )?;
    }
    if t.copies > 0 || t.syncs > 0 {
        writeln!(
            w,
            "  {:<22} {:>9}  ({} copies, {:.1} KiB)",
            "copies",
            per_call(t.copy_ns),
            t.copies,
            t.copy_bytes as f64 / 1024.0
        )?;
        writeln!(
            w,
            "  {:<22} {:>9}  ({} syncs)",
            "CPU waits for backend",
            per_call(t.sync_ns),
            t.syncs
        )?;
    }
    if t.host_io_bytes > 0 {
        writeln!(
            w,
            "  {:<22} {:>9}  ({:.1} KiB inputs in, results out)",
            "host I/O",
            per_call(t.host_io_ns),
            t.host_io_bytes as f64 / 1024.0
        )?;
    }
    if t.kv_io_ns > 0 {
        writeln!(
            w,
            "  {:<22} {:>9}  ({:.1} MiB out, {:.1} MiB in)",
            "KV I/O",
            per_call(t.kv_io_ns),
            t.kv_bytes_out as f64 / 1048576.0,
            t.kv_bytes_in as f64 / 1048576.0
        )?;
    }
    let mut both = b.side_by_side();
    if both.is_empty() {
        return Ok(());
    }
    both.sort_by_key(|(_, _, rows)| {
        std::cmp::Reverse(rows.iter().map(|r| r.total_ns).sum::<u64>())
    });
    writeln!(w, "  same op and shape on each backend, mean per node:")?;
    for (op, shape, rows) in both.iter().take(SIDE_BY_SIDE_ROWS) {
        let cells: Vec<String> = rows.iter().map(|r| r.cell()).collect();
        writeln!(
            w,
            "  {:<14} {:<20} {}",
            fit(op, 14),
            fit(shape, 20),
            cells.join("   ")
        )?;
    }
    Ok(())
}

/// A signed change with its relative size (`-2.50 (-23.4%)`).
fn change(delta: f64, base: Option<f64>) -> String {
    let sign = if delta > 0.0 { "+" } else { "" };
    match base.filter(|b| *b != 0.0) {
        Some(b) => format!("{sign}{} ({})", ms(delta), relative(delta / b)),
        None => format!("{sign}{}", ms(delta)),
    }
}

/// A relative change: a percentage while small (`-23.4%`), a factor from 2× on (`×41.0`,
/// `×0.25`), where percentages stop being read.
pub(crate) fn relative(rel: f64) -> String {
    let ratio = 1.0 + rel;
    if ratio >= 2.0 || (ratio > 0.0 && ratio <= 0.5) {
        format!(
            "×{}",
            if ratio >= 10.0 {
                format!("{ratio:.0}")
            } else {
                format!("{ratio:.2}")
            }
        )
    } else {
        format!("{:+.1}%", rel * 100.0)
    }
}

/// Writes the comparison of two runs: token timings, then the groups by |Δ| (`top` rows).
pub fn write_diff(d: &Diff, top: usize, mut w: impl Write) -> io::Result<()> {
    writeln!(w, "profinfer diff (B against A)")?;
    for (name, r) in [("A", &d.a), ("B", &d.b)] {
        let cmd = if r.command.is_empty() {
            "(attached to a running process)".to_owned()
        } else {
            r.command.join(" ")
        };
        writeln!(w, "  {name}  {}  {cmd}", r.trace)?;
    }
    writeln!(w)?;
    writeln!(w, "  {:<14} {:>10} {:>10}  change", "", "A", "B")?;
    let line = |w: &mut dyn Write, label: &str, a: Option<f64>, b: Option<f64>| -> io::Result<()> {
        let f = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), ms);
        let c = match (a, b) {
            (Some(a), Some(b)) => change(b - a, Some(a)),
            _ => String::new(),
        };
        writeln!(w, "  {label:<14} {:>10} {:>10}  {c}", f(a), f(b))
    };
    let (sa, sb) = (&d.a.summary, &d.b.summary);
    let dist = |s: &Option<Distribution>, f: fn(&Distribution) -> f64| s.as_ref().map(f);
    line(&mut w, "TTFT ms", sa.ttft_ms, sb.ttft_ms)?;
    line(
        &mut w,
        "TPOT mean ms",
        dist(&sa.tpot_ms, |d| d.mean),
        dist(&sb.tpot_ms, |d| d.mean),
    )?;
    line(
        &mut w,
        "TPOT p50 ms",
        dist(&sa.tpot_ms, |d| d.p50),
        dist(&sb.tpot_ms, |d| d.p50),
    )?;
    line(
        &mut w,
        "TPOT p99 ms",
        dist(&sa.tpot_ms, |d| d.p99),
        dist(&sb.tpot_ms, |d| d.p99),
    )?;
    line(
        &mut w,
        "ops ms/call",
        Some(d.a.op_ms_per_call),
        Some(d.b.op_ms_per_call),
    )?;
    writeln!(w, "  {:<14} {:>10} {:>10}", "calls", d.a.calls, d.b.calls)?;
    writeln!(w)?;
    let phase = d.phase.call_name();
    let shown: Vec<_> = d
        .rows
        .iter()
        .filter(|r| r.a.is_some() && r.b.is_some())
        .take(top)
        .collect();
    let kw = shown
        .iter()
        .map(|r| r.key.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(5, 28);
    writeln!(
        w,
        "by {}, ms per {phase}, largest change first",
        d.by.name()
    )?;
    writeln!(
        w,
        "  {:<kw$} {:>9} {:>9} {:>9} {:>8}  ",
        d.by.name(),
        "A",
        "B",
        "Δ",
        "Δ%"
    )?;
    for r in &shown {
        let a = r.a.as_ref().map_or(0.0, |s| s.ms_per_call);
        let b = r.b.as_ref().map_or(0.0, |s| s.ms_per_call);
        let rel = r.relative.map_or_else(|| "-".to_owned(), relative);
        let note = match r.significance {
            Significance::Changed => "",
            Significance::WithinNoise => "within noise",
            Significance::OneRun => "",
        };
        writeln!(
            w,
            "  {:<kw$} {:>9} {:>9} {:>9} {:>8}  {note}",
            fit(&r.key, kw),
            ms(a),
            ms(b),
            format!(
                "{}{}",
                if r.delta_ms > 0.0 { "+" } else { "" },
                ms(r.delta_ms)
            ),
            rel
        )?;
    }
    let shared = d.rows.len() - d.only_a.len() - d.only_b.len();
    if shared > shown.len() {
        writeln!(w, "  … {} more (raise -n)", shared - shown.len())?;
    }
    write_counter_deltas(d, &shown, kw, phase, &mut w)?;
    for (name, only) in [("A", &d.only_a), ("B", &d.only_b)] {
        if !only.is_empty() {
            let list: Vec<&str> = only.iter().take(12).map(String::as_str).collect();
            let more = if only.len() > 12 {
                format!(" … ({} in all)", only.len())
            } else {
                String::new()
            };
            writeln!(w, "only in {name}: {}{more}", list.join(", "))?;
        }
    }
    if !d.notes.is_empty() {
        writeln!(w)?;
        for n in &d.notes {
            writeln!(w, "note: {n}")?;
        }
    }
    writeln!(
        w,
        "(within noise: |Δ| is less than twice the standard error of the per-call means)"
    )?;
    Ok(())
}

/// A counter's change, `A → B (relative)` (no relative change from 0).
pub(crate) fn counter_change(counter: &str, (a, b): (f64, f64)) -> String {
    let rel = if a != 0.0 {
        format!(" ({})", relative((b - a) / a))
    } else {
        String::new()
    };
    format!(
        "{} → {}{rel}",
        counter_value(counter, a),
        counter_value(counter, b)
    )
}

/// Counters per call of the shown groups, A → B with the relative change, for the
/// counters both runs recorded (those that are zero in every shown row are left out).
fn write_counter_deltas(
    d: &Diff,
    shown: &[&DiffRow],
    kw: usize,
    phase: &str,
    w: &mut impl Write,
) -> io::Result<()> {
    let counters: Vec<&str> = d
        .shared_counters()
        .into_iter()
        .filter(|c| shown.iter().any(|r| r.counter(c) != (0.0, 0.0)))
        .collect();
    if counters.is_empty() || shown.is_empty() {
        return Ok(());
    }
    const CELL: usize = 26;
    writeln!(w)?;
    writeln!(
        w,
        "counters per {phase}, by {}, A → B (same rows)",
        d.by.name()
    )?;
    write!(w, "  {:<kw$}", d.by.name())?;
    for c in &counters {
        write!(w, " {:>CELL$}", fit(c, CELL))?;
    }
    writeln!(w)?;
    for r in shown {
        write!(w, "  {:<kw$}", fit(&r.key, kw))?;
        for c in &counters {
            let cell = counter_change(c, r.counter(c));
            write!(w, " {cell:>CELL$}")?;
        }
        writeln!(w)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_at_a_glance() {
        assert_eq!(ms(0.0421), "0.042");
        assert_eq!(ms(4.213), "4.21");
        assert_eq!(ms(421.34), "421.3");
        assert_eq!(ms(4213.4), "4213");
        assert_eq!(pct(0.1234), "12.3%");
        assert_eq!(fit("blk.12.ffn_down", 8), "blk.12.…");
        assert_eq!(fit("short", 8), "short");
        assert_eq!(change(-2.5, Some(10.0)), "-2.50 (-25.0%)");
        assert_eq!(change(30.0, Some(10.0)), "+30.00 (×4.00)");
        assert_eq!(change(-7.5, Some(10.0)), "-7.50 (×0.25)");
        assert_eq!(relative(40.0), "×41");
        assert_eq!(change(0.5, None), "+0.500");
    }

    /// The report of `llama-bench -p 16 -n 8 -r 2`'s calls (each 1 ms, 0.5 ms apart).
    fn bench_report() -> String {
        let r = crate::synthetic::llama_bench_report(16, 8, 2);
        let mut out = Vec::new();
        write(&r, &mut out).expect("writes");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn a_server_trace_shows_sequences_per_call_and_each_request() {
        let r = crate::synthetic::llama_server_report();
        assert_eq!(r.summary.ttft_ms, None);
        // 15 + 6 prompt tokens: the second call counts as prompt work.
        assert_eq!(r.summary.tokens.prefill, 21);
        // 14 steps of two slots, one of one.
        assert_eq!(r.summary.tokens.decode, 29);
        let mut out = Vec::new();
        write(&r, &mut out).expect("writes");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(
            text.contains("sequences up to 2 per decode call: 1 in 2, 2 in 15\n"),
            "{text}"
        );
        assert!(text.contains("; 2 requests;"), "{text}");
        let rows = table_rows(&text, "requests ");
        // Slot 1 first (its prompt alone), then slot 0 (its prompt in call 1, 1.5 ms
        // in): one prefill call and 15 steps each, first token at its call's exit.
        assert_eq!(
            rows,
            [
                vec!["0", "1", "0.000", "1", "15", "2", "1.00", "1.50", "666.7"],
                vec!["1", "0", "1.50", "1", "15", "2", "1.00", "1.50", "666.7"],
            ],
            "{text}"
        );
    }

    #[test]
    fn sampled_windows_get_their_line_after_a_blank_one_and_none_without() {
        let mut r = crate::synthetic::llama_bench_report(16, 8, 2);
        let without = {
            let mut out = Vec::new();
            write(&r, &mut out).expect("writes");
            String::from_utf8(out).expect("utf-8")
        };
        assert!(!without.contains("windows   "), "{without}");
        r.windows = Some(crate::windows::WindowStats {
            traced_steps: 12,
            untraced_steps: 30,
            switch_steps: 2,
            traced_p50_ms: 21.0,
            untraced_p50_ms: 20.0,
            slowdown: 0.05,
            switched: "operators",
        });
        let mut out = Vec::new();
        write(&r, &mut out).expect("writes");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(
            text.contains(
                "\n\nwindows   operators recorded in 12 of 44 decode steps (2 at a switch left \
                 out); time per step 21.00 ms traced, 20.00 ms untraced: recording operators \
                 costs +5.0 %\n"
            ),
            "{text}"
        );
    }

    /// The rows (cells split on whitespace) of the report's table titled `title`.
    fn table_rows<'a>(text: &'a str, title: &str) -> Vec<Vec<&'a str>> {
        text.lines()
            .skip_while(|l| !l.starts_with(title))
            .skip(2)
            .take_while(|l| l.starts_with("  "))
            .map(|l| l.split_whitespace().collect())
            .collect()
    }

    #[test]
    fn several_runs_show_a_row_per_shape_and_no_single_ttft() {
        let text = bench_report();
        let tokens = text
            .lines()
            .find(|l| l.starts_with("tokens"))
            .expect("tokens");
        assert!(tokens.contains("; 6 runs;"), "{tokens}");
        assert!(!tokens.contains("TTFT"), "{tokens}");
        let rows = table_rows(&text, "runs ");
        assert_eq!(
            rows,
            [
                vec!["0–2", "prompt", "16", "–", "1.00", "16000", "–"],
                vec!["3", "prompt", "1", "–", "1.00", "1000", "–"],
                vec![
                    "4–5", "prompt", "1", "+", "7", "steps", "–", "1.00", "1000", "666.7"
                ],
            ],
            "{text}"
        );
    }
}
