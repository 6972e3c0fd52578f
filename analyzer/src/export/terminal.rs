//! The [`Report`] as aligned plain text for a terminal (`profinfer report`).

use std::io::{self, Write};

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
    let s = &r.summary;
    writeln!(w, "profinfer report: {}", r.trace)?;
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
    writeln!(
        w,
        "graphs    {} ({:.1} per call, {:.0} nodes each)",
        s.graphs, s.graphs_per_token, s.nodes_per_graph
    )?;

    writeln!(w)?;
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
    }

    if !r.threads.is_empty() {
        writeln!(w)?;
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
    }

    if !s.warnings.is_empty() {
        writeln!(w)?;
        writeln!(w, "warnings")?;
        for warning in &s.warnings {
            writeln!(w, "  {warning}")?;
        }
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
    }
}
