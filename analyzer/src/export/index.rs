//! `index.html`: the one-page report a user reads first. Self-contained (every picture
//! is embedded as a `data:` URI, no script or style from elsewhere), so it works from
//! `file://`, offline, and when mailed on its own: the run's header, token timings, the
//! top operators, threads, the per-layer DAG, every plot with a sentence on how to read
//! it, the flame graph, and links to the raw files.

use std::io::{self, Write};

use base64::Engine as _;

use crate::export::{
    eng,
    summary::Distribution,
    terminal::{pct, rate},
};
use crate::report::Report;

/// One output file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct OutputFile {
    /// File name inside the output directory.
    pub file: String,
    /// View it belongs to (`ProfDAG`, `ProfTime`, `ProfStat`, `summary`).
    pub view: &'static str,
    /// What it shows.
    pub description: String,
}

/// A picture of the page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Figure {
    /// File name of the SVG in the output directory.
    pub file: String,
    /// Heading.
    pub title: String,
    /// One sentence: what it shows and how to read it.
    pub caption: String,
    /// The SVG, or why there is none.
    pub svg: Result<Vec<u8>, String>,
}

/// Everything the page shows.
#[derive(Clone, Debug)]
pub struct Page<'a> {
    /// Summary, top operators by type and threads (the terminal report's content).
    pub report: &'a Report,
    /// The target's command line from the trace header (empty when attached by pid).
    pub command: &'a [String],
    /// The per-layer DAG.
    pub dag: Figure,
    /// The plots, in page order.
    pub plots: Vec<Figure>,
    /// The flame graph (an interactive SVG: embedded as an `<object>` so its script runs).
    pub flame: Figure,
    /// Every file written, linked at the end.
    pub files: &'a [OutputFile],
}

/// HTML-escapes text and attribute values.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A command line as a shell would take it back (arguments with spaces or quotes in
/// single quotes).
pub(crate) fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `data:` URI of an SVG.
fn svg_uri(svg: &[u8]) -> String {
    format!(
        "data:image/svg+xml;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(svg)
    )
}

/// Milliseconds in engineering notation (`4.5 ms`, `12.3 µs`), `–` when absent.
pub(crate) fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| eng(v * 1e-3, "s"))
}

/// Microseconds in engineering notation.
fn us(v: f64) -> String {
    eng(v * 1e-6, "s")
}

pub(crate) const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1b1b1b;background:#fafafa}\
main{max-width:1200px;margin:0 auto;padding:1em 2em 4em}\
h1{font-size:1.6em;margin:.6em 0 .2em}h2{margin-top:1.8em;border-bottom:1px solid #ccc;padding-bottom:.2em}\
nav a{margin-right:1em}code{background:#eee;padding:1px 4px;border-radius:3px}\
table{border-collapse:collapse;margin:.5em 0;background:#fff}\
td,th{padding:3px 10px;text-align:left;border-bottom:1px solid #e4e4e4;vertical-align:top}\
th{background:#f0f0f0}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}td.n,td.s{white-space:nowrap}\
.wide{overflow-x:auto;max-width:100%}\
table.kv th{background:none;font-weight:600;white-space:nowrap}\
.bar{display:inline-block;height:.8em;background:#4a7bd0;margin-right:6px;vertical-align:middle}\
.warn{color:#9a3b00;background:#fff4e5;border-left:4px solid #e08a00;padding:.4em .8em;margin:.3em 0}\
.ok{color:#1d6b2c}.bad{color:#9a3b00;font-weight:600}\
figure{margin:1.2em 0;background:#fff;border:1px solid #ddd;padding:.8em}\
figure img,figure object{max-width:100%;height:auto;display:block;margin:0 auto}\
figcaption{color:#444;margin-top:.5em;font-size:.95em}figcaption b{color:#1b1b1b}\
figure img.tall{max-height:1300px;width:auto}.missing{color:#666;font-style:italic}\
";

/// Writes the page.
///
/// # Errors
/// I/O errors of `w`.
pub fn write(page: &Page<'_>, mut w: impl Write) -> io::Result<()> {
    let r = page.report;
    let s = &r.summary;
    let name = s.trace.target.rsplit('/').next().unwrap_or(&s.trace.target);
    writeln!(
        w,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>profinfer: {}</title>\n<style>{STYLE}</style></head><body><main>",
        esc(name)
    )?;
    writeln!(w, "<h1>profinfer report: {}</h1>", esc(name))?;
    writeln!(
        w,
        "<nav><a href=\"#run\">run</a><a href=\"#timings\">token timings</a>\
         <a href=\"#operators\">top operators</a><a href=\"#threads\">threads</a>{}\
         <a href=\"#dag\">per-layer DAG</a><a href=\"#plots\">plots</a>\
         <a href=\"#flame\">flame graph</a><a href=\"#files\">raw files</a></nav>",
        if r.backends.as_ref().is_some_and(|b| b.is_interesting()) {
            "<a href=\"#backends\">backends</a>"
        } else {
            ""
        }
    )?;
    write_run(page, &mut w)?;
    write_timings(r, &mut w)?;
    write_operators(r, &mut w)?;
    write_threads(r, &mut w)?;
    write_backends(r, &mut w)?;
    writeln!(w, "<h2 id=\"dag\">Per-layer DAG</h2>")?;
    write_figure(&page.dag, false, true, &mut w)?;
    writeln!(w, "<h2 id=\"plots\">Plots</h2>")?;
    for f in &page.plots {
        write_figure(f, false, false, &mut w)?;
    }
    writeln!(w, "<h2 id=\"flame\">Flame graph</h2>")?;
    write_figure(&page.flame, true, false, &mut w)?;
    write_files(page.files, &mut w)?;
    writeln!(w, "</main></body></html>")
}

pub(crate) fn kv(w: &mut impl Write, rows: &[(&str, String)]) -> io::Result<()> {
    writeln!(w, "<table class=\"kv\">")?;
    for (k, v) in rows {
        writeln!(w, "<tr><th>{}</th><td>{v}</td></tr>", esc(k))?;
    }
    writeln!(w, "</table>")
}

fn write_run(page: &Page<'_>, w: &mut impl Write) -> io::Result<()> {
    let s = &page.report.summary;
    writeln!(w, "<h2 id=\"run\">Run</h2>")?;
    let command = if page.command.is_empty() {
        "<span class=\"missing\">not recorded (attached to a running process)</span>".to_owned()
    } else {
        format!("<code>{}</code>", esc(&shell_words(page.command)))
    };
    let end = match (&s.trace.end_reason, s.trace.truncated_at) {
        (Some(reason), None) => format!("<span class=\"ok\">complete</span> ({})", esc(reason)),
        (_, Some(off)) => format!("<span class=\"bad\">truncated at byte {off}</span>"),
        (None, None) => {
            "<span class=\"bad\">no footer: recording did not end cleanly</span>".to_owned()
        }
    };
    let counters = if s.trace.counters.is_empty() {
        "none".to_owned()
    } else {
        esc(&s.trace.counters.join(", "))
    };
    let mut events = format!(
        "{} written, {} lost",
        s.events.written,
        if s.events.lost > 0 {
            format!("<span class=\"bad\">{}</span>", s.events.lost)
        } else {
            "0".to_owned()
        }
    );
    if s.events.late > 0 {
        events.push_str(&format!(", {} late", s.events.late));
    }
    kv(
        w,
        &[
            (
                "target",
                format!(
                    "<code>{}</code> (pid {})",
                    esc(&s.trace.target),
                    s.trace.pid
                ),
            ),
            ("command line", command),
            ("recording", esc(&s.trace.recording.text)),
            ("threads", s.threads.to_string()),
            ("counters", counters),
            ("events", events),
            ("trace", end),
            (
                "graphs",
                format!(
                    "{} ({:.1} per decode call, {:.0} nodes each)",
                    s.graphs, s.graphs_per_token, s.nodes_per_graph
                ),
            ),
            ("traced", ms(Some(page.report.traced_ms))),
        ],
    )?;
    for warning in &s.warnings {
        writeln!(w, "<p class=\"warn\">⚠ {}</p>", esc(warning))?;
    }
    Ok(())
}

fn dist(d: Option<&Distribution>) -> String {
    d.map_or_else(
        || "–".to_owned(),
        |d| {
            format!(
                "mean {}, p50 {}, p99 {} (n = {})",
                ms(Some(d.mean)),
                ms(Some(d.p50)),
                ms(Some(d.p99)),
                d.n
            )
        },
    )
}

fn write_timings(r: &Report, w: &mut impl Write) -> io::Result<()> {
    let s = &r.summary;
    writeln!(w, "<h2 id=\"timings\">Token timings</h2>")?;
    let rate = s.tpot_ms.as_ref().filter(|d| d.mean > 0.0).map_or_else(
        || "–".to_owned(),
        |d| format!("{:.1} tokens/s", 1e3 / d.mean),
    );
    kv(
        w,
        &[
            (
                "prefill",
                format!(
                    "{} tokens in {} call{}",
                    s.tokens.prefill,
                    s.tokens.prefill_calls,
                    if s.tokens.prefill_calls == 1 { "" } else { "s" }
                ),
            ),
            ("decode steps", s.tokens.decode.to_string()),
            (
                "TTFT (time to first token)",
                if !s.requests.is_empty() {
                    format!("one per request: {} requests, below", s.requests.len())
                } else if s.runs.is_empty() {
                    ms(s.ttft_ms)
                } else if s.ttft_ms.is_some() {
                    // One generation after llama.cpp's warm-up run.
                    format!("{} (after a warm-up run)", ms(s.ttft_ms))
                } else {
                    format!("one per run: {} runs, below", s.runs.len())
                },
            ),
            ("sequences per decode call", sequences_text(s)),
            ("TPOT (time per output token)", dist(s.tpot_ms.as_ref())),
            ("decode rate", rate),
            ("decode step latency", dist(s.decode_latency_ms.as_ref())),
        ],
    )?;
    write_runs(s, w)?;
    write_requests(s, w)
}

/// `1` (every call one sequence), `up to 2: 1 in 5 calls, 2 in 18`, or `not recorded`.
fn sequences_text(s: &crate::export::summary::Summary) -> String {
    let Some(q) = &s.sequences else {
        return "not recorded".to_owned();
    };
    if q.max_per_call <= 1 && q.calls.len() == 1 {
        return q.max_per_call.to_string();
    }
    let parts: Vec<String> = q
        .calls
        .iter()
        .map(|c| match c.sequences {
            0 => format!("unknown in {} calls", c.calls),
            n => format!("{n} in {} calls", c.calls),
        })
        .collect();
    format!("up to {}: {}", q.max_per_call, parts.join(", "))
}

/// A trace whose calls carry several sequences: every request (one sequence id's calls).
fn write_requests(s: &crate::export::summary::Summary, w: &mut impl Write) -> io::Result<()> {
    if s.requests.is_empty() {
        return Ok(());
    }
    writeln!(
        w,
        "<h3 id=\"requests\">Requests</h3>\n<p>Decode calls carried several sequences \
         (llama-server batches its slots into one <code>llama_decode</code>), so the time to \
         first token is per request: the calls of one sequence id, from its prompt to its \
         last step (<code>docs/views.md#sequences</code>). \
         TPOT and decode tokens/s are per sequence.</p>"
    )?;
    writeln!(
        w,
        "<details{}><summary>Every request ({})</summary>\
         <table><tr><th class=\"n\">request</th><th class=\"n\">sequence</th>\
         <th class=\"n\">start</th><th class=\"n\">first call</th>\
         <th class=\"n\">prefill calls</th><th class=\"n\">decode steps</th>\
         <th class=\"n\">most sequences per call</th><th class=\"n\">TTFT</th>\
         <th class=\"n\">TPOT</th><th class=\"n\">decode tokens/s</th></tr>",
        if s.requests.len() <= OPEN_RUNS {
            " open"
        } else {
            ""
        },
        s.requests.len()
    )?;
    for r in &s.requests {
        writeln!(
            w,
            "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td></tr>",
            r.index,
            r.seq,
            ms(Some(r.start_ms)),
            r.first_call,
            r.prefill_calls,
            r.decode_steps,
            r.max_seqs_per_call,
            if r.started_before {
                "began before the recording".to_owned()
            } else {
                ms(r.ttft_ms)
            },
            ms(r.tpot_ms),
            rate(r.decode_tokens_per_s)
        )?;
    }
    writeln!(w, "</table></details>")
}

/// Runs shown in the table of every run without opening it.
const OPEN_RUNS: usize = 12;

/// A trace of several runs (sequences from position 0): one row per shape with the
/// medians of its runs, then every run.
fn write_runs(s: &crate::export::summary::Summary, w: &mut impl Write) -> io::Result<()> {
    if s.runs.is_empty() {
        return Ok(());
    }
    writeln!(
        w,
        "<h3 id=\"runs\">Runs</h3>\n<p>The process decoded {} sequences, each from position 0 \
         (a cleared KV cache: <code>llama-bench</code>'s warm-ups and test repetitions), so \
         each is a run with its own time to first token and rates. Runs of one shape (prompt \
         tokens, decode steps, threads) are one row with the median of its runs; TPOT above \
         pools the runs' token intervals.</p>",
        s.runs.len()
    )?;
    writeln!(
        w,
        "<table><tr><th>runs</th><th>shape</th><th class=\"n\">threads</th>\
         <th class=\"n\">TTFT</th><th class=\"n\">prefill tokens/s</th>\
         <th class=\"n\">decode tokens/s</th></tr>"
    )?;
    let threads = |t: Option<u32>| t.map_or_else(|| "–".to_owned(), |t| t.to_string());
    for g in &s.run_groups {
        writeln!(
            w,
            "<tr><td>{}{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(&g.runs_text()),
            if g.runs.len() > 1 {
                format!(" <small>({}, median)</small>", g.runs.len())
            } else {
                String::new()
            },
            esc(&g.shape.label()),
            threads(g.shape.threads),
            ms(g.ttft_ms),
            rate(g.prefill_tokens_per_s),
            rate(g.decode_tokens_per_s)
        )?;
    }
    writeln!(w, "</table>")?;
    writeln!(
        w,
        "<details{}><summary>Every run ({})</summary>\
         <table><tr><th class=\"n\">run</th><th class=\"n\">start</th>\
         <th class=\"n\">decode calls</th><th>shape</th><th class=\"n\">threads</th>\
         <th class=\"n\">TTFT</th><th class=\"n\">prefill tokens/s</th>\
         <th class=\"n\">TPOT</th><th class=\"n\">decode tokens/s</th></tr>",
        if s.runs.len() <= OPEN_RUNS {
            " open"
        } else {
            ""
        },
        s.runs.len()
    )?;
    for r in &s.runs {
        let last = r.first_call + r.calls.saturating_sub(1);
        let calls = if last > r.first_call {
            format!("{}–{last}", r.first_call)
        } else {
            r.first_call.to_string()
        };
        writeln!(
            w,
            "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{calls}</td>\
             <td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            r.index,
            ms(Some(r.start_ms)),
            esc(&r.shape.label()),
            threads(r.shape.threads),
            ms(r.ttft_ms),
            rate(r.prefill_tokens_per_s),
            ms(r.tpot_ms),
            rate(r.decode_tokens_per_s)
        )?;
    }
    writeln!(w, "</table></details>")
}

/// Operator shares of a sampled recording (`record --sample`), per phase.
fn write_sampled(s: &crate::model::SampledReport, w: &mut impl Write) -> io::Result<()> {
    writeln!(
        w,
        "<p>Sampled: {} CPU-clock samples of the target's threads at {} Hz ({} outside \
         decode calls). Each sample is 1/{} s of one thread's CPU time; a share is the \
         operator's fraction of the phase's samples, ± one standard error \
         (√(p(1−p)/n)). <em>thread-pool wait</em> is time waiting between operators, \
         <em>no operator</em> everything else the threads ran.</p>",
        s.samples, s.hz, s.outside, s.hz
    )?;
    for (phase, shares) in [("decode", &s.decode), ("prefill", &s.prefill)] {
        if shares.is_empty() {
            continue;
        }
        writeln!(
            w,
            "<table><tr><th>{phase}</th><th>share</th><th class=\"n\">± err</th>\
             <th class=\"n\">samples</th><th class=\"n\">CPU time</th></tr>"
        )?;
        for x in shares {
            writeln!(
                w,
                "<tr><td>{}</td><td class=\"s\"><span class=\"bar\" style=\"width:{:.0}px\">\
                 </span>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td></tr>",
                esc(&x.op),
                (x.share * 120.0).max(1.0),
                pct(x.share),
                pct(x.stderr),
                x.samples,
                ms(Some(x.cpu_ms))
            )?;
        }
        writeln!(w, "</table>")?;
    }
    Ok(())
}

fn write_operators(r: &Report, w: &mut impl Write) -> io::Result<()> {
    writeln!(w, "<h2 id=\"operators\">Top operators</h2>")?;
    if let Some(s) = &r.sampled {
        write_sampled(s, w)?;
        if r.top.is_empty() {
            return Ok(());
        }
    }
    if r.top.is_empty() {
        return writeln!(
            w,
            "<p class=\"missing\">No operator events (was the op level recorded?)</p>"
        );
    }
    writeln!(
        w,
        "<p>By op type, largest time first: {} of operator time in {} traced. \
         Share is of operator time; idle is the share of the threads' time inside the op \
         spent waiting for the slowest thread; counters are sums over the op's nodes.</p>",
        ms(Some(r.op_total_ms)),
        ms(Some(r.traced_ms))
    )?;
    let counters = &r.summary.trace.counters;
    write!(
        w,
        "<div class=\"wide\"><table><tr><th>op type</th><th>share</th><th class=\"n\">total</th>\
         <th class=\"n\">count</th><th class=\"n\">mean</th><th class=\"n\">p50</th>\
         <th class=\"n\">p99</th><th class=\"n\">per call</th><th class=\"n\">idle</th>"
    )?;
    for c in counters {
        write!(w, "<th class=\"n\">{}</th>", esc(c))?;
    }
    writeln!(w, "</tr>")?;
    for g in &r.top {
        write!(
            w,
            "<tr><td>{}</td><td class=\"s\"><span class=\"bar\" style=\"width:{:.0}px\"></span>{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>",
            esc(&g.key),
            (g.share * 120.0).max(1.0),
            pct(g.share),
            ms(Some(g.total_ms)),
            g.count,
            us(g.mean_us),
            us(g.p50_us),
            us(g.p99_us),
            ms(Some(g.per_token_ms)),
            pct(g.idle_share)
        )?;
        for c in counters {
            let v = g
                .counters
                .get(c)
                .map_or_else(|| "–".to_owned(), |&v| eng(v as f64, ""));
            write!(w, "<td class=\"n\">{v}</td>")?;
        }
        writeln!(w, "</tr>")?;
    }
    writeln!(w, "</table></div>")?;
    if r.omitted > 0 {
        writeln!(
            w,
            "<p>{} more op types in <a href=\"op_types.csv\">op_types.csv</a>; by node name \
             or layer: <code>profinfer report --by node|layer TRACE</code>.</p>",
            r.omitted
        )?;
    }
    Ok(())
}

fn write_threads(r: &Report, w: &mut impl Write) -> io::Result<()> {
    writeln!(w, "<h2 id=\"threads\">Threads</h2>")?;
    if r.threads.is_empty() {
        return writeln!(w, "<p class=\"missing\">No target threads seen.</p>");
    }
    writeln!(
        w,
        "<table><tr><th>tid</th><th>name</th><th class=\"n\">op slices</th>\
         <th class=\"n\">op busy</th><th class=\"n\">of traced</th><th class=\"n\">running</th>\
         <th class=\"n\">runnable</th><th class=\"n\">sleeping</th></tr>"
    )?;
    for t in &r.threads {
        writeln!(
            w,
            "<tr><td>{}{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td></tr>",
            t.tid,
            if t.main { " (main)" } else { "" },
            esc(&t.name),
            t.op_slices,
            ms(Some(t.op_busy_ms)),
            pct(t.op_busy_share),
            ms(Some(t.running_ms)),
            ms(Some(t.runnable_ms)),
            ms(Some(t.sleeping_ms))
        )?;
    }
    writeln!(w, "</table>")
}

/// The split across backends (when the trace has more than one, or KV-budget I/O): per
/// decode call, each backend's splits and time, then the copies, waits, GPU submissions
/// and fence waits between them, and the same op and shape on each backend.
fn write_backends(r: &Report, w: &mut impl Write) -> io::Result<()> {
    let Some(b) = r.backends.as_ref().filter(|b| b.is_interesting()) else {
        return Ok(());
    };
    let calls = b.tokens.len().max(1) as f64;
    let per_call = |ns: u64| ms(Some(ns as f64 / 1e6 / calls));
    let t = &b.total;
    writeln!(w, "<h2 id=\"backends\">Backends</h2>")?;
    let gpu_note = if t.gpu_timed_nodes > 0 {
        "the GPU's own time per node is from the timestamps it wrote between them"
    } else {
        "the GPU's own time per node needs its timestamps (llama.cpp's \
         <code>GGML_VK_PERF_LOGGER=1</code>)"
    };
    writeln!(
        w,
        "<p>{} over {} decode calls: time per call. A GPU backend's time is the CPU's \
         call for its split (recording, submitting and the fence waits inside); {gpu_note} \
         (docs/llama-cpp.md).</p>",
        esc(&b.backends.join(", ")),
        b.tokens.len()
    )?;
    writeln!(
        w,
        "<table><tr><th>what</th><th class=\"n\">per call</th><th>count</th></tr>"
    )?;
    let mut row = |what: &str, ns: u64, count: String| {
        writeln!(
            w,
            "<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(what),
            per_call(ns),
            esc(&count)
        )
    };
    for (name, ns) in &t.compute_ns {
        row(
            name,
            *ns,
            format!("{} splits", t.splits.get(name).copied().unwrap_or(0)),
        )?;
    }
    if t.gpu_submits > 0 {
        row(
            "GPU submissions (vkQueueSubmit)",
            t.gpu_submit_ns,
            t.gpu_submits.to_string(),
        )?;
    }
    if t.fence_waits > 0 {
        row(
            "GPU fence waits (vkWaitForFences)",
            t.fence_wait_ns,
            t.fence_waits.to_string(),
        )?;
    }
    if t.recorded_nodes > 0 {
        row(
            "CPU recording GPU nodes",
            t.record_ns,
            t.recorded_nodes.to_string(),
        )?;
    }
    if t.gpu_timed_nodes > 0 {
        row(
            "GPU executing nodes (timestamps)",
            t.gpu_node_ns,
            t.gpu_timed_nodes.to_string(),
        )?;
    }
    if t.copies > 0 {
        row(
            "copies between backends",
            t.copy_ns,
            format!("{} ({:.1} KiB)", t.copies, t.copy_bytes as f64 / 1024.0),
        )?;
    }
    if t.syncs > 0 {
        row("CPU waits for a backend", t.sync_ns, t.syncs.to_string())?;
    }
    if t.host_io_bytes > 0 {
        row(
            "host I/O (inputs in, results out)",
            t.host_io_ns,
            format!("{:.1} KiB", t.host_io_bytes as f64 / 1024.0),
        )?;
    }
    if t.kv_io_ns > 0 {
        row(
            "KV I/O",
            t.kv_io_ns,
            format!(
                "{:.1} MiB out, {:.1} MiB in",
                t.kv_bytes_out as f64 / 1048576.0,
                t.kv_bytes_in as f64 / 1048576.0
            ),
        )?;
    }
    writeln!(w, "</table>")?;
    let mut both = b.side_by_side();
    // The largest first, as in the report.
    both.sort_by_key(|(_, _, rows)| {
        std::cmp::Reverse(rows.iter().map(|r| r.total_ns).sum::<u64>())
    });
    if !both.is_empty() {
        writeln!(
            w,
            "<p>The same op and shape on each backend (mean per node):</p>\
             <table><tr><th>op</th><th>shape</th><th>backends</th></tr>"
        )?;
        for (op, shape, rows) in both.iter().take(12) {
            let cells: Vec<String> = rows.iter().map(|r| r.cell()).collect();
            writeln!(
                w,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(op),
                esc(shape),
                esc(&cells.join(" · "))
            )?;
        }
        writeln!(w, "</table>")?;
    }
    Ok(())
}

/// A figure: the picture as a `data:` URI (`<object>` for interactive SVGs, whose
/// scripts do not run in an `<img>`), or why there is none.
/// `tall` pictures (the DAG) are scaled to fit the height of a screen; the link under
/// them opens the full size.
fn write_figure(f: &Figure, interactive: bool, tall: bool, w: &mut impl Write) -> io::Result<()> {
    write_figure_body(f, interactive, tall, w)?;
    writeln!(
        w,
        "<figcaption><b>{}.</b> {} <a href=\"{2}\">{2}</a></figcaption></figure>",
        esc(&f.title),
        esc(&f.caption),
        esc(&f.file)
    )
}

/// A figure embedded in a page that has no files beside it: the caption without a link.
pub(crate) fn write_embedded_figure(f: &Figure, w: &mut impl Write) -> io::Result<()> {
    write_figure_body(f, false, false, w)?;
    writeln!(
        w,
        "<figcaption><b>{}.</b> {}</figcaption></figure>",
        esc(&f.title),
        esc(&f.caption)
    )
}

/// Opens the figure and writes its picture (or why there is none).
fn write_figure_body(
    f: &Figure,
    interactive: bool,
    tall: bool,
    w: &mut impl Write,
) -> io::Result<()> {
    writeln!(w, "<figure id=\"fig-{}\">", esc(&f.file))?;
    match &f.svg {
        Ok(svg) => {
            let uri = svg_uri(svg);
            if interactive {
                write!(
                    w,
                    "<object type=\"image/svg+xml\" data=\"{uri}\" style=\"width:100%\">\
                     <img src=\"{uri}\" alt=\"{}\"></object>",
                    esc(&f.title)
                )?;
            } else {
                write!(
                    w,
                    "<img{} src=\"{uri}\" alt=\"{}\">",
                    if tall { " class=\"tall\"" } else { "" },
                    esc(&f.title)
                )?;
            }
            writeln!(w)?;
        }
        Err(why) => writeln!(
            w,
            "<p class=\"missing\">No picture ({}): {}</p>",
            esc(&f.file),
            esc(why)
        )?,
    }
    Ok(())
}

fn write_files(files: &[OutputFile], w: &mut impl Write) -> io::Result<()> {
    writeln!(w, "<h2 id=\"files\">Raw files</h2>")?;
    if files
        .iter()
        .any(|f| f.file == "timeline.overview.perfetto-trace")
    {
        writeln!(
            w,
            "<p>This run's timeline is too long for one file Perfetto's UI opens: open \
             <code>timeline.overview.perfetto-trace</code> in ui.perfetto.dev (Open trace \
             file) to find the stretch to look at, then the <code>timeline.tokens-*</code> \
             file of its decode calls for the full detail (<code>profinfer analyze \
             --tokens A..B</code> makes the timeline of any range); docs/views.md says how \
             to read each view.</p>"
        )?;
    } else {
        writeln!(
            w,
            "<p>Open <code>timeline.perfetto-trace</code> (Perfetto protobuf) or \
             <code>timeline.json</code> (Chrome JSON) in ui.perfetto.dev (Open trace file); \
             the JSON also in chrome://tracing; docs/views.md says how to read each view.</p>"
        )?;
    }
    let mut views: Vec<&str> = Vec::new();
    for f in files {
        if !views.contains(&f.view) {
            views.push(f.view);
        }
    }
    for view in views {
        writeln!(w, "<h3>{}</h3><ul>", esc(view))?;
        for f in files.iter().filter(|f| f.view == view) {
            writeln!(
                w,
                "<li><a href=\"{0}\">{0}</a> — {1}</li>",
                esc(&f.file),
                esc(&f.description)
            )?;
        }
        writeln!(w, "</ul>")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_quote_what_a_shell_would_split() {
        let args = ["engine", "-p", "hello world", "it's", ""].map(String::from);
        assert_eq!(shell_words(&args), r"engine -p 'hello world' 'it'\''s' ''");
    }

    #[test]
    fn svgs_become_data_uris() {
        assert_eq!(svg_uri(b"<svg/>"), "data:image/svg+xml;base64,PHN2Zy8+");
    }

    /// The page of `llama-bench -p 16 -n 8 -r 2`'s calls: the runs instead of one TTFT.
    #[test]
    fn several_runs_get_a_table_instead_of_one_ttft() {
        let report = crate::synthetic::llama_bench_report(16, 8, 2);
        let none = |file: &str| Figure {
            file: file.to_owned(),
            title: file.to_owned(),
            caption: String::new(),
            svg: Err("not drawn".to_owned()),
        };
        let page = Page {
            report: &report,
            command: &[],
            dag: none("dag_layers.svg"),
            plots: Vec::new(),
            flame: none("flame.svg"),
            files: &[],
        };
        let mut out = Vec::new();
        write(&page, &mut out).expect("writes");
        let html = String::from_utf8(out).expect("utf-8");
        assert!(
            html.contains("<td>one per run: 6 runs, below</td>"),
            "{html}"
        );
        assert!(html.contains("<h3 id=\"runs\">Runs</h3>"));
        assert!(html.contains("<td>0–2 <small>(3, median)</small></td><td>prompt 16</td>"));
        assert!(html.contains("<td>prompt 1 + 7 steps</td>"));
        // Every run, the last with its 8 calls.
        assert!(html.contains("<details open><summary>Every run (6)</summary>"));
        assert!(html.contains("<td class=\"n\">12–19</td>"), "{html}");
    }

    #[test]
    fn markup_is_escaped() {
        assert_eq!(esc("<a href=\"x\">&"), "&lt;a href=&quot;x&quot;&gt;&amp;");
    }
}
