//! `profinfer diff --html`: the comparison of two runs as one self-contained page (same
//! style and rules as `index.html`: pictures embedded, no script, works offline): the
//! two runs, their token timings side by side, the time-per-token distributions
//! overlaid, the groups that changed most as paired bars, the full table with the
//! noise test, counters per group, what is in one run only, and the notes on what
//! could not be matched.

use std::io::{self, Write};

use crate::diff::{Diff, DiffRow, DiffRun, DiffSide, Significance};
use crate::export::{
    eng,
    index::{Figure, STYLE, esc, kv, ms, shell_words, write_embedded_figure},
    plot,
    summary::Distribution,
    terminal::{counter_change, relative},
};

/// Groups drawn in the paired-bar picture.
const BARS: usize = 12;

/// Writes the page.
///
/// # Errors
/// I/O errors of `w` (a plot that cannot be drawn is replaced by its reason, not an
/// error).
pub fn write(d: &Diff, mut w: impl Write) -> io::Result<()> {
    writeln!(
        w,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>profinfer diff</title>\n<style>{STYLE}</style></head><body><main>"
    )?;
    writeln!(w, "<h1>profinfer diff: B against A</h1>")?;
    writeln!(
        w,
        "<nav><a href=\"#runs\">runs</a><a href=\"#timings\">token timings</a>\
         <a href=\"#groups\">by {0}</a><a href=\"#counters\">counters</a></nav>",
        esc(d.by.name())
    )?;
    write_runs(d, &mut w)?;
    write_timings(d, &mut w)?;
    write_groups(d, &mut w)?;
    write_counters(d, &mut w)?;
    writeln!(w, "</main></body></html>")
}

fn write_runs(d: &Diff, w: &mut impl Write) -> io::Result<()> {
    writeln!(w, "<h2 id=\"runs\">Runs</h2>")?;
    let run = |r: &DiffRun| {
        let cmd = if r.command.is_empty() {
            "<span class=\"missing\">attached to a running process</span>".to_owned()
        } else {
            format!("<code>{}</code>", esc(&shell_words(&r.command)))
        };
        format!(
            "<code>{}</code>: {cmd} — {} thread{}, {} {}{}",
            esc(&r.trace),
            r.summary.threads,
            if r.summary.threads == 1 { "" } else { "s" },
            r.calls,
            esc(d.phase.call_name()),
            if r.calls == 1 { "" } else { "s" },
        )
    };
    kv(w, &[("A (baseline)", run(&d.a)), ("B", run(&d.b))])?;
    for n in &d.notes {
        writeln!(w, "<p class=\"warn\">⚠ {}</p>", esc(n))?;
    }
    Ok(())
}

/// `+1.2 ms (−23.4 %)`: B − A in engineering notation with the relative change.
fn change(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => {
            let sign = if b > a { "+" } else { "" };
            let rel = if a != 0.0 {
                format!(" ({})", relative((b - a) / a))
            } else {
                String::new()
            };
            format!("{sign}{}{rel}", ms(Some(b - a)))
        }
        _ => "–".to_owned(),
    }
}

fn write_timings(d: &Diff, w: &mut impl Write) -> io::Result<()> {
    writeln!(w, "<h2 id=\"timings\">Token timings</h2>")?;
    let (sa, sb) = (&d.a.summary, &d.b.summary);
    let dist = |s: &Option<Distribution>, f: fn(&Distribution) -> f64| s.as_ref().map(f);
    let rows: [(&str, Option<f64>, Option<f64>); 5] = [
        ("TTFT", sa.ttft_ms, sb.ttft_ms),
        (
            "TPOT mean",
            dist(&sa.tpot_ms, |d| d.mean),
            dist(&sb.tpot_ms, |d| d.mean),
        ),
        (
            "TPOT p50",
            dist(&sa.tpot_ms, |d| d.p50),
            dist(&sb.tpot_ms, |d| d.p50),
        ),
        (
            "TPOT p99",
            dist(&sa.tpot_ms, |d| d.p99),
            dist(&sb.tpot_ms, |d| d.p99),
        ),
        (
            "operators per call",
            Some(d.a.op_ms_per_call),
            Some(d.b.op_ms_per_call),
        ),
    ];
    writeln!(
        w,
        "<table><tr><th></th><th class=\"n\">A</th><th class=\"n\">B</th>\
         <th class=\"n\">B − A</th></tr>"
    )?;
    for (label, a, b) in rows {
        writeln!(
            w,
            "<tr><th>{label}</th><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td></tr>",
            ms(a),
            ms(b),
            change(a, b)
        )?;
    }
    writeln!(w, "</table>")?;
    let mut svg = String::new();
    let fig = Figure {
        file: "tpot-overlay".to_owned(),
        title: "Time per output token, A and B".to_owned(),
        caption: "Each curve is a run's distribution of time per output token: at a given \
                  time, the share of its tokens that took at most that long. The curve \
                  further left is the faster run; a vertical step is a cluster of equal \
                  times, a long flat tail slow outliers. The legend gives each run's time \
                  to first token."
            .to_owned(),
        svg: plot::tpot_overlay(d, &mut svg).map(|()| svg.into_bytes()),
    };
    write_embedded_figure(&fig, w)
}

fn side_ms(s: &Option<DiffSide>) -> String {
    s.as_ref()
        .map_or_else(|| "–".to_owned(), |s| ms(Some(s.ms_per_call)))
}

fn write_groups(d: &Diff, w: &mut impl Write) -> io::Result<()> {
    let call = d.phase.call_name();
    writeln!(
        w,
        "<h2 id=\"groups\">By {}, time per {call}</h2>",
        esc(d.by.name())
    )?;
    let mut svg = String::new();
    let fig = Figure {
        file: "groups".to_owned(),
        title: format!(
            "The {} {}s that changed most",
            d.rows
                .iter()
                .filter(|r| r.a.is_some() && r.b.is_some())
                .take(BARS)
                .count(),
            d.by.name()
        ),
        caption: format!(
            "For each {0} in both runs, largest change first: A's and B's time per {call} \
             (the {0}'s total divided by the run's {call}s, so runs of different lengths \
             compare).",
            d.by.name()
        ),
        svg: plot::diff_groups(d, BARS, &mut svg).map(|()| svg.into_bytes()),
    };
    write_embedded_figure(&fig, w)?;
    writeln!(
        w,
        "<div class=\"wide\"><table><tr><th>{}</th><th class=\"n\">A</th>\
         <th class=\"n\">B</th><th class=\"n\">B − A</th><th class=\"n\">change</th>\
         <th class=\"n\">runs per {call} A → B</th><th></th></tr>",
        esc(d.by.name())
    )?;
    for r in &d.rows {
        write_group_row(r, w)?;
    }
    writeln!(w, "</table></div>")?;
    writeln!(
        w,
        "<p>within noise: |B − A| is less than twice the standard error of the two \
         per-call means, so the variation between calls could explain it.</p>"
    )?;
    for (name, only) in [("A", &d.only_a), ("B", &d.only_b)] {
        if !only.is_empty() {
            let list: Vec<String> = only
                .iter()
                .map(|k| format!("<code>{}</code>", esc(k)))
                .collect();
            writeln!(w, "<p><b>Only in {name}:</b> {}</p>", list.join(", "))?;
        }
    }
    Ok(())
}

fn write_group_row(r: &DiffRow, w: &mut impl Write) -> io::Result<()> {
    let count = |s: &Option<DiffSide>| s.as_ref().map_or(0.0, |s| s.count_per_call);
    let (rel, note) = match r.significance {
        Significance::Changed => (
            r.relative.map_or_else(|| "–".to_owned(), relative),
            String::new(),
        ),
        Significance::WithinNoise => (
            r.relative.map_or_else(|| "–".to_owned(), relative),
            "within noise".to_owned(),
        ),
        Significance::OneRun => (
            "–".to_owned(),
            format!("in {} only", if r.a.is_some() { "A" } else { "B" }),
        ),
    };
    let class = match r.significance {
        Significance::Changed if r.delta_ms > 0.0 => " class=\"bad\"",
        Significance::Changed => " class=\"ok\"",
        _ => "",
    };
    writeln!(
        w,
        "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
         <td class=\"n\"><span{class}>{}{}</span></td><td class=\"n\">{rel}</td>\
         <td class=\"n\">{} → {}</td><td class=\"missing\">{note}</td></tr>",
        esc(&r.key),
        side_ms(&r.a),
        side_ms(&r.b),
        if r.delta_ms > 0.0 { "+" } else { "" },
        ms(Some(r.delta_ms)),
        eng(count(&r.a), ""),
        eng(count(&r.b), ""),
    )
}

fn write_counters(d: &Diff, w: &mut impl Write) -> io::Result<()> {
    writeln!(
        w,
        "<h2 id=\"counters\">Counters per {}</h2>",
        d.phase.call_name()
    )?;
    let counters = d.shared_counters();
    if counters.is_empty() {
        return writeln!(
            w,
            "<p class=\"missing\">The runs have no counter in common.</p>"
        );
    }
    write!(
        w,
        "<div class=\"wide\"><table><tr><th>{}</th>",
        esc(d.by.name())
    )?;
    for c in &counters {
        write!(w, "<th class=\"n\">{} A → B</th>", esc(c))?;
    }
    writeln!(w, "</tr>")?;
    for r in d.rows.iter().filter(|r| r.a.is_some() && r.b.is_some()) {
        write!(w, "<tr><td><code>{}</code></td>", esc(&r.key))?;
        for c in &counters {
            write!(
                w,
                "<td class=\"n\">{}</td>",
                esc(&counter_change(c, r.counter(c)))
            )?;
        }
        writeln!(w, "</tr>")?;
    }
    writeln!(w, "</table></div>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::{DiffPhase, diff};
    use crate::export::summary;
    use crate::ingest::IngestInfo;
    use crate::op_groups::GroupBy;
    use crate::synthetic::{self, SynthSpec};

    #[test]
    fn the_page_shows_both_runs_and_every_group() {
        let run = |spec: &SynthSpec, name: &str| {
            let m = synthetic::model(spec, None);
            let s = summary::summarize(
                &m,
                &synthetic::synth_header(),
                None,
                &IngestInfo::default(),
                Vec::new(),
            );
            (m, s, name.to_owned())
        };
        let (ma, sa, na) = run(&SynthSpec::sized(6, 10, 2), "a.trace");
        let mut slow = SynthSpec::sized(9, 12, 2);
        slow.op_ns *= 2;
        let (mb, sb, nb) = run(&slow, "b.trace");
        let d = diff(
            (&ma, sa, na, vec!["engine".into(), "-t".into(), "1".into()]),
            (&mb, sb, nb, vec![]),
            GroupBy::Node,
            DiffPhase::Decode,
        );
        let mut page = Vec::new();
        write(&d, &mut page).expect("write");
        let page = String::from_utf8(page).expect("utf-8");
        assert!(page.contains("<code>engine -t 1</code>"));
        assert!(page.contains("attached to a running process"));
        // Both pictures embedded, none missing.
        assert_eq!(
            page.matches("data:image/svg+xml;base64,").count(),
            2,
            "{page}"
        );
        assert!(!page.contains("No picture"));
        for r in &d.rows {
            assert!(
                page.contains(&format!("<code>{}</code>", esc(&r.key))),
                "{}",
                r.key
            );
        }
        assert!(page.contains("Only in B:"));
        assert!(page.ends_with("</main></body></html>\n"));
    }
}
