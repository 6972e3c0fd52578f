//! Drawing the live view: free functions taking `&App`; [`ui`] lays out the frame
//! (title, tokens/s sparkline, latest token's phases, thread states, operator table,
//! levels and buffer status, help line). Fits 80×24.

use analyzer::model::SchedState;
use ratatui::{
    Frame,
    layout::{Constraint, Layout, Rect},
    style::{Color, Modifier, Style},
    text::{Line, Span},
    widgets::{Block, Borders, Clear, Paragraph, Row, Sparkline, Table, Wrap},
};

use super::{
    app::{App, LevelState, Mode, SortColumn},
    feed::RecordingEnd,
    snapshot::{LiveSnapshot, OpRow},
};
use crate::target::TargetEnd;

/// Counter columns shown in the operator table (the first ones recorded).
pub const MAX_COUNTER_COLUMNS: usize = 2;

/// The help line.
pub const HELP: &str = "q quit  1-5/o probe levels  s sort  r reverse  g type/class  p pause";

/// The help line once recording has ended.
pub const HELP_FINISHED: &str = "q leave  s sort  r reverse  g type/class";

/// The help line's place while the trace is being finished after the target exited.
pub const FINISHING: &str = "target exited: draining the last records, writing the trace...";

/// Draws the whole view.
pub fn ui(f: &mut Frame, app: &App) {
    // The phase box grows with a split pass's extra parts (backends, copies, waits).
    let parts = app
        .shown
        .as_ref()
        .and_then(|s| s.latest.as_ref())
        .map_or(0, |b| b.parts.len());
    let middle_h = (parts as u16 + 2).clamp(7, 12);
    let [title, tokens, middle, table, status, help] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(5),
        Constraint::Length(middle_h),
        Constraint::Min(3),
        Constraint::Length(2),
        Constraint::Length(1),
    ])
    .areas(f.area());
    render_title(f, app, title);
    render_tokens(f, app, tokens);
    let [phases, threads] =
        Layout::horizontal([Constraint::Length(30), Constraint::Min(10)]).areas(middle);
    render_phases(f, app, phases);
    render_threads(f, app, threads);
    render_table(f, app, table);
    render_status(f, app, status);
    let reversed = Style::default().add_modifier(Modifier::REVERSED);
    let help_line = match app.mode {
        Mode::Finished { .. } => Paragraph::new(HELP_FINISHED).style(reversed),
        _ if app.finishing() => Paragraph::new(FINISHING).style(reversed.fg(Color::Yellow)),
        _ => Paragraph::new(HELP).style(reversed),
    };
    f.render_widget(help_line, help);
    if let Mode::Finished { outcome } = &app.mode {
        // Over the latest token's box: the operator table stays in view.
        render_final(f, app, outcome, middle.y);
    }
}

fn render_title(f: &mut Frame, app: &App, area: Rect) {
    let s = app.shown.as_ref();
    // The markers come before the long parts, so a narrow terminal still shows them.
    let mut markers = String::new();
    if app.target_exited {
        markers.push_str("  [target exited]");
    }
    if app.paused {
        markers.push_str("  [PAUSED]");
    }
    let mut text = format!(
        "profinfer live  pid {}  {}{markers}  {:.1} s  trace {}",
        s.map_or(0, |s| s.pid),
        s.map_or("", |s| s.target.rsplit('/').next().unwrap_or("")),
        s.map_or(0.0, |s| s.trace_secs),
        app.trace_path
    );
    if let Some(s) = s {
        if !s.backends.is_empty() {
            let b: Vec<String> = s
                .backends
                .iter()
                .map(|(name, threads)| format!("{name}×{threads}"))
                .collect();
            text.push_str(&format!("  backends {}", b.join(" ")));
        }
        if let Some(kv) = s.kv {
            text.push_str(&format!(
                "  KV swap out {} in {} ({} / {} chunks)",
                fmt_bytes(kv.bytes_out),
                fmt_bytes(kv.bytes_in),
                kv.chunks_out,
                kv.chunks_in
            ));
        }
    }
    f.render_widget(
        Paragraph::new(text).style(Style::default().add_modifier(Modifier::BOLD)),
        area,
    );
}

fn opt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |ms| format!("{ms:.1} ms"))
}

fn render_tokens(f: &mut Frame, app: &App, area: Rect) {
    let s = app.shown.as_ref();
    let title = format!(
        " tokens/s {}  TTFT {}  TPOT {}  prompt {}  decoded {} ",
        s.and_then(|s| s.tps_now)
            .map_or_else(|| "-".to_owned(), |t| format!("{t:.1}")),
        opt_ms(s.and_then(|s| s.ttft_ms)),
        opt_ms(s.and_then(|s| s.tpot_ms)),
        s.map_or(0, |s| s.prefill_tokens),
        s.map_or(0, |s| s.decode_steps),
    );
    let block = Block::default().borders(Borders::ALL).title(title);
    let width = usize::from(block.inner(area).width);
    let data: Vec<u64> = s.map_or_else(Vec::new, |s| {
        let from = s.tps_series.len().saturating_sub(width);
        s.tps_series[from..]
            .iter()
            .map(|&t| (t * 10.0).round() as u64)
            .collect()
    });
    f.render_widget(
        Sparkline::default()
            .block(block)
            .data(&data)
            .style(Style::default().fg(Color::Green)),
        area,
    );
}

/// Nanoseconds in a short unit (`812 ns`, `45.2 µs`, `3.10 ms`, `1.25 s`).
pub fn fmt_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// Bytes in a short unit (`512 B`, `48.0 KiB`, `3.2 MiB`, `1.10 GiB`).
pub fn fmt_bytes(b: u64) -> String {
    let f = b as f64;
    if b < 1 << 10 {
        format!("{b} B")
    } else if b < 1 << 20 {
        format!("{:.1} KiB", f / 1024.0)
    } else if b < 1 << 30 {
        format!("{:.1} MiB", f / 1048576.0)
    } else {
        format!("{:.2} GiB", f / 1073741824.0)
    }
}

/// A count in a short form (`950`, `12.3k`, `4.1M`).
pub fn fmt_count(n: u64) -> String {
    let f = n as f64;
    if n < 10_000 {
        n.to_string()
    } else if n < 10_000_000 {
        format!("{:.1}k", f / 1e3)
    } else {
        format!("{:.1}M", f / 1e6)
    }
}

fn render_phases(f: &mut Frame, app: &App, area: Rect) {
    let latest = app.shown.as_ref().and_then(|s| s.latest.as_ref());
    let title = latest.map_or_else(
        || " latest token ".to_owned(),
        |b| format!(" token #{} ({}) ", b.token, b.phase.name()),
    );
    let lines: Vec<Line> = latest.map_or_else(
        || vec![Line::from("waiting for a token...")],
        |b| {
            let total: u64 = b.parts.iter().map(|p| p.1).sum();
            b.parts
                .iter()
                .map(|&(label, ns)| {
                    let pct = if total == 0 {
                        0.0
                    } else {
                        100.0 * ns as f64 / total as f64
                    };
                    Line::from(format!("{label:<12}{:>10} {pct:>4.0}%", fmt_ns(ns as f64)))
                })
                .collect()
        },
    );
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}

fn state_span(state: Option<SchedState>) -> Span<'static> {
    match state {
        Some(SchedState::Running) => Span::styled("█", Style::default().fg(Color::Green)),
        Some(SchedState::Runnable) => Span::styled("▒", Style::default().fg(Color::Yellow)),
        Some(SchedState::Sleeping) => Span::styled("·", Style::default().fg(Color::DarkGray)),
        None => Span::raw(" "),
    }
}

fn render_threads(f: &mut Frame, app: &App, area: Rect) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(" threads, latest token: █ running ▒ runnable · idle ");
    let inner = block.inner(area);
    let strips = app.shown.as_ref().map_or(&[][..], |s| &s.threads[..]);
    let label_w = 8usize;
    let cells_w = usize::from(inner.width).saturating_sub(label_w);
    let lines: Vec<Line> = if strips.is_empty() {
        vec![Line::from("no scheduler data (sched level off?)")]
    } else {
        strips
            .iter()
            .take(usize::from(inner.height))
            .map(|t| {
                let n = t.cells.len();
                let mut spans = vec![Span::raw(format!("{:<7} ", t.tid))];
                spans.extend((0..cells_w.min(n)).map(|i| {
                    state_span(
                        t.cells
                            .get(i * n / cells_w.min(n).max(1))
                            .copied()
                            .flatten(),
                    )
                }));
                Line::from(spans)
            })
            .collect()
    };
    f.render_widget(Paragraph::new(lines).block(block), area);
}

impl From<&OpRow> for Row<'static> {
    fn from(r: &OpRow) -> Row<'static> {
        let name = if r.top_experts.is_empty() {
            r.name.clone()
        } else {
            let top: Vec<String> = r
                .top_experts
                .iter()
                .map(|(e, n)| format!("e{e}×{n}"))
                .collect();
            format!("{} [{}]", r.name, top.join(" "))
        };
        let mut cells = vec![
            name,
            fmt_count(r.count),
            fmt_ns(r.total_ns as f64),
            fmt_ns(r.mean_ns),
            format!("{:.1}%", 100.0 * r.share),
        ];
        cells.extend(
            r.counters
                .iter()
                .take(MAX_COUNTER_COLUMNS)
                .map(|c| c.map_or_else(|| "-".to_owned(), fmt_count)),
        );
        Row::new(cells)
    }
}

fn render_table(f: &mut Frame, app: &App, area: Rect) {
    let counters: Vec<String> = app.shown.as_ref().map_or_else(Vec::new, |s| {
        s.counter_names
            .iter()
            .take(MAX_COUNTER_COLUMNS)
            .cloned()
            .collect()
    });
    let arrow = if app.descending { "▼" } else { "▲" };
    let mut header: Vec<String> = SortColumn::ALL
        .iter()
        .map(|&c| {
            if c == app.sort {
                format!("{}{arrow}", c.title())
            } else {
                c.title().to_owned()
            }
        })
        .collect();
    header.extend(counters.iter().cloned());
    let mut widths = vec![
        Constraint::Min(12),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(7),
    ];
    widths.extend(counters.iter().map(|_| Constraint::Length(10)));
    let rows = app.op_rows();
    let title = format!(
        " operators by {} ({} rows; {}) ",
        match app.grouping {
            super::app::Grouping::OpType => "type",
            super::app::Grouping::Class => "class",
        },
        rows.len(),
        app.shown.as_ref().map_or("", |s| s.recording.as_str())
    );
    let table = Table::new(rows.iter().map(Row::from), widths)
        .header(Row::new(header).style(Style::default().add_modifier(Modifier::BOLD)))
        .block(Block::default().borders(Borders::ALL).title(title));
    f.render_widget(table, area);
}

fn level_style(state: LevelState) -> Style {
    match state {
        LevelState::On => Style::default().fg(Color::Green),
        LevelState::Off | LevelState::QosOff => Style::default().fg(Color::Red),
        LevelState::Pending => Style::default().fg(Color::Yellow),
        LevelState::Unavailable => Style::default().fg(Color::DarkGray),
    }
}

/// The buffer line: ring fill (estimate), drain rate, lost, skipped by the view.
pub fn buffer_line(s: &LiveSnapshot) -> String {
    let st = &s.status;
    let fill = st.ring_fill().map_or_else(
        || "perf buf".to_owned(),
        |f| format!("ring ~{:.0}%", 100.0 * f),
    );
    let mut line = format!(
        "{fill}  {}/s drained  lost {}  events {}",
        fmt_count(s.drained_per_s.round() as u64),
        fmt_count(st.lost),
        fmt_count(st.written)
    );
    if s.unpaired > 0 {
        line.push_str(&format!("  unpaired {}", fmt_count(s.unpaired)));
    }
    if s.view_dropped > 0 {
        line.push_str(&format!("  view skipped {}", fmt_count(s.view_dropped)));
    }
    line
}

fn render_status(f: &mut Frame, app: &App, area: Rect) {
    let mut spans = vec![Span::raw("levels ")];
    for (i, (name, state)) in app.level_states().into_iter().enumerate() {
        spans.push(Span::raw(format!("{}:", i + 1)));
        spans.push(Span::styled(
            format!("{name}:{} ", state.label()),
            level_style(state),
        ));
    }
    let s = app.newest.as_ref();
    let qos = match s.map(|s| &s.status) {
        Some(st) if st.qos_enabled => format!(
            "QoS {} ({} sw)",
            if st.qos_op_on { "op-on" } else { "op-off" },
            st.qos_switches
        ),
        _ => "QoS off".to_owned(),
    };
    spans.push(Span::raw(qos));
    let mut second = s.map_or_else(|| "waiting for the collector...".to_owned(), buffer_line);
    if !app.message.is_empty() {
        second = format!("{second}  | {}", app.message);
    }
    f.render_widget(
        Paragraph::new(vec![Line::from(spans), Line::from(second)]),
        area,
    );
}

/// The final screen's box: how recording ended (the footer's words: the target's exit
/// status or signal), the final token and event counts (every record applied; the
/// footer's totals), where the trace and the target's output are. `q` leaves. Drawn
/// from row `top` down when it fits below it.
fn render_final(f: &mut Frame, app: &App, outcome: &Result<RecordingEnd, String>, top: u16) {
    let area = f.area();
    let (title, lines, color) = match outcome {
        Ok(end) => {
            let color = match end.target_end {
                Some(TargetEnd::Exited(0)) | None => Color::Green,
                Some(_) => Color::Red,
            };
            (
                format!(" {}: recording finished ", end.reason),
                final_lines(app, end),
                color,
            )
        }
        Err(e) => (
            " recording failed ".to_owned(),
            vec![
                Line::from(e.clone()),
                Line::from(format!("trace   {}", app.trace_path)),
                Line::from(format!("output  {}", app.target_log)),
            ],
            Color::Red,
        ),
    };
    let w = area.width.saturating_sub(4).min(84);
    // Wrapped lines are counted roughly: a long path takes two.
    let inner_w = usize::from(w.saturating_sub(2)).max(1);
    let rows: usize = lines
        .iter()
        .map(|l| l.width().div_ceil(inner_w).max(1))
        .sum();
    let h = (rows as u16 + 2).min(area.height.saturating_sub(2));
    let popup = Rect {
        x: area.x + (area.width - w) / 2,
        y: top.min(area.y + (area.height - h) / 2),
        width: w,
        height: h,
    };
    f.render_widget(Clear, popup);
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(Style::default().fg(color))
                .title(title)
                .title_bottom(" q: leave  s/r/g: arrange the table "),
        ),
        popup,
    );
}

/// The final counts: tokens from the model with every record applied, events from the
/// footer (the same numbers as `profinfer report` on the trace).
fn final_lines(app: &App, end: &RecordingEnd) -> Vec<Line<'static>> {
    let s = app.shown.as_ref();
    let mut events = format!(
        "events  {} written, {} lost ({} produced)",
        end.written, end.lost, end.produced
    );
    if let Some(n) = s.map(|s| s.view_dropped).filter(|&n| n > 0) {
        events.push_str(&format!("; the view skipped {n} (the trace has them)"));
    }
    vec![
        Line::from(format!(
            "tokens  prompt {}  decoded {}",
            s.map_or(0, |s| s.prefill_tokens),
            s.map_or(0, |s| s.decode_steps)
        )),
        Line::from(events),
        Line::from(format!("trace   {}", app.trace_path)),
        Line::from(format!("output  {}", app.target_log)),
    ]
}

#[cfg(test)]
mod tests {
    use ratatui::{Terminal, backend::TestBackend};

    use super::*;
    use crate::{
        observe::CollectorStatus,
        tui::{feed::LiveUpdate, snapshot::OpRow},
    };

    fn screen(app: &App, w: u16, h: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(w, h)).expect("test backend");
        t.draw(|f| ui(f, app)).expect("draw");
        let buf = t.backend().buffer().clone();
        let mut out = String::new();
        for y in 0..h {
            for x in 0..w {
                out.push_str(buf[(x, y)].symbol());
            }
            out.push('\n');
        }
        out
    }

    fn app() -> App {
        let mut app = App::new("/tmp/x.pftrace".into(), "/tmp/x.log".into());
        let snap = LiveSnapshot {
            by_type: vec![OpRow {
                name: "MUL_MAT".into(),
                count: 1234,
                total_ns: 5_000_000,
                mean_ns: 4051.8,
                share: 0.5,
                counters: vec![Some(42)],
                top_experts: Vec::new(),
            }],
            counter_names: vec!["cycles".into()],
            tps_series: vec![10.0, 20.0, 30.0],
            tps_now: Some(25.0),
            status: CollectorStatus {
                attached_levels: common::control::LEVEL_ALL,
                user_levels: common::control::LEVEL_ALL,
                effective_levels: common::control::LEVEL_ALL,
                ..CollectorStatus::default()
            },
            ..LiveSnapshot::default()
        };
        app.on_update(LiveUpdate::Snapshot(Box::new(snap)));
        app
    }

    #[test]
    fn small_terminal_shows_every_part() {
        let s = screen(&app(), 80, 24);
        for want in [
            "tokens/s 25.0",
            "MUL_MAT",
            "1234",
            "50.0%",
            "cycles",
            "3:op:on",
            "q quit",
        ] {
            assert!(s.contains(want), "missing {want:?} in\n{s}");
        }
    }

    #[test]
    fn tiny_terminal_does_not_panic() {
        for (w, h) in [(1, 1), (20, 5), (40, 12)] {
            screen(&app(), w, h);
        }
    }

    fn finished(end: RecordingEnd) -> App {
        let mut a = app();
        let last = LiveSnapshot {
            prefill_tokens: 3,
            decode_steps: 19,
            ..a.shown.clone().expect("a frame")
        };
        a.on_update(LiveUpdate::Finished(Box::new(last), Ok(end)));
        a
    }

    #[test]
    fn final_screen_shows_the_exit_status_and_the_final_counts() {
        let end = RecordingEnd {
            reason: "target exited with status 0".into(),
            target_end: Some(TargetEnd::Exited(0)),
            produced: 4898,
            written: 4898,
            lost: 0,
        };
        for (w, h) in [(80, 24), (100, 30)] {
            let s = screen(&finished(end.clone()), w, h);
            for want in [
                "target exited with status 0: recording finished",
                "prompt 3  decoded 19",
                "events  4898 written, 0 lost (4898 produced)",
                "trace   /tmp/x.pftrace",
                "output  /tmp/x.log",
                "q: leave",
                HELP_FINISHED,
            ] {
                assert!(s.contains(want), "{w}x{h}: missing {want:?} in\n{s}");
            }
        }
        let killed = RecordingEnd {
            reason: TargetEnd::Signaled(9).to_string(),
            target_end: Some(TargetEnd::Signaled(9)),
            ..end
        };
        let s = screen(&finished(killed), 80, 24);
        assert!(s.contains("target killed by signal 9"), "{s}");
    }

    #[test]
    fn a_target_exit_is_said_at_once() {
        let mut a = app();
        a.on_target_exit();
        let s = screen(&a, 80, 24);
        assert!(s.contains("[target exited]"), "{s}");
        assert!(s.contains("target exited: draining"), "{s}");
    }

    #[test]
    fn a_failed_recording_says_why() {
        let mut a = app();
        a.on_update(LiveUpdate::Finished(
            Box::default(),
            Err("writing the trace failed: disk full".into()),
        ));
        let s = screen(&a, 80, 24);
        assert!(s.contains("recording failed"), "{s}");
        assert!(s.contains("disk full"), "{s}");
        assert!(s.contains("q: leave"), "{s}");
    }

    #[test]
    fn units() {
        assert_eq!(fmt_ns(812.0), "812 ns");
        assert_eq!(fmt_ns(45_200.0), "45.2 µs");
        assert_eq!(fmt_ns(3_100_000.0), "3.10 ms");
        assert_eq!(fmt_count(9_999), "9999");
        assert_eq!(fmt_count(12_345), "12.3k");
    }
}
