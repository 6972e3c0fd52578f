//! `index.html`: every output with a link and the headline numbers.

use std::io::{self, Write};

use crate::export::summary::Summary;

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

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn opt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.3} ms"))
}

/// Writes the page.
///
/// # Errors
/// I/O errors of `w`.
pub fn write(summary: &Summary, files: &[OutputFile], mut w: impl Write) -> io::Result<()> {
    writeln!(
        w,
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>profinfer analysis</title>\n\
         <style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:2px 10px;text-align:left}}\
         .warn{{color:#a40}}</style></head><body>"
    )?;
    writeln!(
        w,
        "<h1>profinfer analysis: {}</h1>",
        esc(&summary.trace.target)
    )?;
    writeln!(w, "<table>")?;
    let tpot = summary.tpot_ms;
    let rows = [
        ("prefill tokens", summary.tokens.prefill.to_string()),
        ("decode steps", summary.tokens.decode.to_string()),
        ("TTFT", opt_ms(summary.ttft_ms)),
        ("TPOT mean", opt_ms(tpot.map(|d| d.mean))),
        (
            "TPOT p50 / p99",
            format!(
                "{} / {}",
                opt_ms(tpot.map(|d| d.p50)),
                opt_ms(tpot.map(|d| d.p99))
            ),
        ),
        ("threads", summary.threads.to_string()),
        (
            "events written / lost",
            format!("{} / {}", summary.events.written, summary.events.lost),
        ),
        ("unpaired records", summary.unpaired.total().to_string()),
        ("QoS switches", summary.qos_switches.to_string()),
    ];
    for (k, v) in rows {
        writeln!(w, "<tr><th>{k}</th><td>{}</td></tr>", esc(&v))?;
    }
    writeln!(w, "</table>")?;
    for warning in &summary.warnings {
        writeln!(w, "<p class=\"warn\">⚠ {}</p>", esc(warning))?;
    }
    for view in ["ProfTime", "ProfDAG", "ProfStat", "summary"] {
        let mine: Vec<_> = files.iter().filter(|f| f.view == view).collect();
        if mine.is_empty() {
            continue;
        }
        writeln!(w, "<h2>{view}</h2><ul>")?;
        for f in mine {
            writeln!(
                w,
                "<li><a href=\"{0}\">{0}</a> — {1}</li>",
                esc(&f.file),
                esc(&f.description)
            )?;
        }
        writeln!(w, "</ul>")?;
    }
    writeln!(
        w,
        "<p>Open <code>timeline.json</code> in <a href=\"https://ui.perfetto.dev\">ui.perfetto.dev</a> \
         or chrome://tracing. See docs/views.md for how to read each view.</p></body></html>"
    )
}
