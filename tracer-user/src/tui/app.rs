//! The live view's state and actions: the latest [`LiveSnapshot`], the table's sort and
//! grouping, pause, the probe levels the user asked for, and the [`Mode`] that routes
//! keys. Plain data, tested without a terminal; `render.rs` draws it.

use common::control::{LEVEL_GRAPH, LEVEL_OP, LEVEL_PHASE, LEVEL_SCHED, LEVEL_TOKEN};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::feed::{LiveUpdate, RecordingEnd};
use super::snapshot::{LiveSnapshot, OpRow};

/// The probe levels the keys `1`..`5` switch, in key order, with their names.
pub const LEVEL_KEYS: [(u32, &str); 5] = [
    (LEVEL_TOKEN, "token"),
    (LEVEL_GRAPH, "graph"),
    (LEVEL_OP, "op"),
    (LEVEL_PHASE, "phase"),
    (LEVEL_SCHED, "sched"),
];

/// What keys do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Recording: keys sort, pause, switch levels, quit.
    Live,
    /// `q` pressed: waiting for the collector to detach and finish the trace.
    Quitting,
    /// Recording ended by itself (the target exited, `--duration`) or failed: the final
    /// frame and the totals stay until `q` (the table can still be sorted).
    Finished {
        /// How recording ended, or its error.
        outcome: Result<RecordingEnd, String>,
    },
}

/// Columns the operator table can be sorted by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortColumn {
    /// Op type or class name.
    Name,
    /// Executions.
    Count,
    /// Total time.
    Total,
    /// Mean time.
    Mean,
    /// Share of token time.
    Share,
}

impl SortColumn {
    /// In column order.
    pub const ALL: [SortColumn; 5] = [
        SortColumn::Name,
        SortColumn::Count,
        SortColumn::Total,
        SortColumn::Mean,
        SortColumn::Share,
    ];

    /// The next column (wrapping).
    pub fn next(self) -> SortColumn {
        let i = SortColumn::ALL.iter().position(|&c| c == self).unwrap_or(0);
        SortColumn::ALL[(i + 1) % SortColumn::ALL.len()]
    }

    /// Column heading.
    pub fn title(self) -> &'static str {
        match self {
            SortColumn::Name => "name",
            SortColumn::Count => "count",
            SortColumn::Total => "total",
            SortColumn::Mean => "mean",
            SortColumn::Share => "share",
        }
    }
}

/// Rows per op type or per node class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grouping {
    /// `MUL_MAT`, `ADD`...
    OpType,
    /// `ffn_up`, `kq`... (node names without the layer).
    Class,
}

/// What the event loop must do after a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing outside the app.
    None,
    /// Ask the collector for these user levels.
    SetLevels(u32),
    /// Ask the collector to stop (detach, finish the trace, leave the target running).
    Stop,
    /// Leave the live view.
    Exit,
}

/// How a probe level is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LevelState {
    /// Probes attached and on.
    On,
    /// Switched off by the user.
    Off,
    /// Wanted by the user, held off by the QoS controller.
    QosOff,
    /// Asked for, not yet confirmed by the collector.
    Pending,
    /// Not attached (configuration): cannot be switched on.
    Unavailable,
}

impl LevelState {
    /// Short label (`on`, `off`, `qos-off`, `...`, `n/a`).
    pub fn label(self) -> &'static str {
        match self {
            LevelState::On => "on",
            LevelState::Off => "off",
            LevelState::QosOff => "qos-off",
            LevelState::Pending => "...",
            LevelState::Unavailable => "n/a",
        }
    }
}

/// The live view's state.
#[derive(Clone, Debug)]
pub struct App {
    /// Key routing.
    pub mode: Mode,
    /// The frame shown (frozen while paused).
    pub shown: Option<LiveSnapshot>,
    /// The newest frame received (shown when unpaused).
    pub newest: Option<LiveSnapshot>,
    /// Display frozen.
    pub paused: bool,
    /// Table sort column.
    pub sort: SortColumn,
    /// Largest first.
    pub descending: bool,
    /// Rows per op type or per class.
    pub grouping: Grouping,
    /// Levels the user asked for (`None` until the first change: the collector's).
    pub wanted_levels: Option<u32>,
    /// Trace file being written.
    pub trace_path: String,
    /// Where the target's output goes.
    pub target_log: String,
    /// A one-line message (last action's result).
    pub message: String,
    /// The target's pid, once the collector has started it or attached to it.
    pub target_pid: Option<u32>,
    /// The target exited (seen through its pidfd, before the collector's final frame,
    /// which comes only once the trace is finished).
    pub target_exited: bool,
}

impl App {
    /// A new view of a recording into `trace_path`.
    pub fn new(trace_path: String, target_log: String) -> App {
        App {
            mode: Mode::Live,
            shown: None,
            newest: None,
            paused: false,
            sort: SortColumn::Total,
            descending: true,
            grouping: Grouping::OpType,
            wanted_levels: None,
            trace_path,
            target_log,
            message: String::new(),
            target_pid: None,
            target_exited: false,
        }
    }

    /// Takes an update from the aggregator. Returns whether the view must exit (the
    /// recording finished after the user quit).
    pub fn on_update(&mut self, update: LiveUpdate) -> bool {
        match update {
            LiveUpdate::Started { pid } => {
                self.target_pid = Some(pid);
                false
            }
            LiveUpdate::Snapshot(s) => {
                if !self.paused {
                    self.shown = Some((*s).clone());
                }
                self.newest = Some(*s);
                false
            }
            LiveUpdate::Finished(s, outcome) => {
                // The final frame is always shown.
                self.paused = false;
                self.shown = Some((*s).clone());
                self.newest = Some(*s);
                if self.mode == Mode::Quitting {
                    return true;
                }
                self.mode = Mode::Finished { outcome };
                false
            }
        }
    }

    /// The target exited (seen by the render loop before the collector's final frame).
    pub fn on_target_exit(&mut self) {
        self.target_exited = true;
    }

    /// Whether the view shows a target that exited while the trace is being finished.
    pub fn finishing(&self) -> bool {
        self.target_exited && !matches!(self.mode, Mode::Finished { .. })
    }

    /// Handles one key.
    pub fn on_key(&mut self, key: KeyEvent) -> Action {
        let ctrl_c =
            key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
        match &self.mode {
            // Only a leave key closes the final screen: a stray key must not lose it.
            Mode::Finished { .. } if ctrl_c => Action::Exit,
            Mode::Finished { .. } => match key.code {
                KeyCode::Char('q') | KeyCode::Esc | KeyCode::Enter => Action::Exit,
                code => {
                    if !self.arrange_table(code) {
                        self.message = "recording finished: q leaves".to_owned();
                    }
                    Action::None
                }
            },
            Mode::Quitting => Action::None,
            Mode::Live if ctrl_c => self.quit(),
            Mode::Live => match key.code {
                KeyCode::Char('q') | KeyCode::Esc => self.quit(),
                KeyCode::Char('p') | KeyCode::Char(' ') => {
                    self.toggle_pause();
                    Action::None
                }
                KeyCode::Char('s' | 'r' | 'g') | KeyCode::Tab => {
                    self.arrange_table(key.code);
                    Action::None
                }
                KeyCode::Char('o') => self.toggle_level(LEVEL_OP),
                KeyCode::Char(c @ '1'..='5') => {
                    let i = c as usize - '1' as usize;
                    self.toggle_level(LEVEL_KEYS[i].0)
                }
                _ => Action::None,
            },
        }
    }

    /// Sort (`s`, Tab), reverse (`r`) or regroup (`g`) the operator table; whether the
    /// key was one of these.
    fn arrange_table(&mut self, code: KeyCode) -> bool {
        match code {
            KeyCode::Char('s') | KeyCode::Tab => self.sort = self.sort.next(),
            KeyCode::Char('r') => self.descending = !self.descending,
            KeyCode::Char('g') => {
                self.grouping = match self.grouping {
                    Grouping::OpType => Grouping::Class,
                    Grouping::Class => Grouping::OpType,
                };
            }
            _ => return false,
        }
        true
    }

    fn quit(&mut self) -> Action {
        self.mode = Mode::Quitting;
        self.message = "stopping: detaching the probes, finishing the trace...".to_owned();
        Action::Stop
    }

    /// Freezes or unfreezes the display (data keeps coming in).
    pub fn toggle_pause(&mut self) {
        self.paused = !self.paused;
        if !self.paused {
            self.shown = self.newest.clone();
        }
    }

    /// Switches one level for the user; asks the collector unless it is not attached.
    pub fn toggle_level(&mut self, level: u32) -> Action {
        let Some(status) = self.newest.as_ref().map(|s| &s.status) else {
            self.message = "no data from the collector yet".to_owned();
            return Action::None;
        };
        let name = level_name(level);
        if status.attached_levels & level == 0 {
            self.message = format!("{name} probes are not attached (see --levels / config)");
            return Action::None;
        }
        let wanted = self.wanted_levels.unwrap_or(status.user_levels) ^ level;
        self.wanted_levels = Some(wanted);
        self.message = format!(
            "{name} probes {}",
            if wanted & level != 0 { "on" } else { "off" }
        );
        Action::SetLevels(wanted)
    }

    /// How each level of [`LEVEL_KEYS`] is shown.
    pub fn level_states(&self) -> Vec<(&'static str, LevelState)> {
        let status = self.newest.as_ref().map(|s| &s.status);
        LEVEL_KEYS
            .iter()
            .map(|&(bit, name)| {
                let state = match status {
                    None => LevelState::Pending,
                    Some(s) if s.attached_levels & bit == 0 => LevelState::Unavailable,
                    Some(s) => {
                        let wanted = self.wanted_levels.unwrap_or(s.user_levels);
                        if wanted & bit != s.user_levels & bit {
                            LevelState::Pending
                        } else if s.user_levels & bit == 0 {
                            LevelState::Off
                        } else if s.effective_levels & bit == 0 {
                            LevelState::QosOff
                        } else {
                            LevelState::On
                        }
                    }
                };
                (name, state)
            })
            .collect()
    }

    /// The operator rows of the shown frame, grouped and sorted.
    pub fn op_rows(&self) -> Vec<OpRow> {
        let Some(s) = &self.shown else {
            return Vec::new();
        };
        let mut rows = match self.grouping {
            Grouping::OpType => s.by_type.clone(),
            Grouping::Class => s.by_class.clone(),
        };
        sort_rows(&mut rows, self.sort, self.descending);
        rows
    }
}

/// Sorts rows by a column; ties by name, so the order is stable between frames.
pub fn sort_rows(rows: &mut [OpRow], by: SortColumn, descending: bool) {
    rows.sort_by(|a, b| {
        let o = match by {
            SortColumn::Name => a.name.cmp(&b.name),
            SortColumn::Count => a.count.cmp(&b.count),
            SortColumn::Total => a.total_ns.cmp(&b.total_ns),
            SortColumn::Mean => a.mean_ns.total_cmp(&b.mean_ns),
            SortColumn::Share => a.share.total_cmp(&b.share),
        };
        let o = if descending { o.reverse() } else { o };
        o.then_with(|| a.name.cmp(&b.name))
    });
}

/// The name of a level bit.
pub fn level_name(level: u32) -> &'static str {
    LEVEL_KEYS
        .iter()
        .find(|&&(bit, _)| bit == level)
        .map_or("?", |&(_, n)| n)
}

#[cfg(test)]
mod tests {
    use common::control::LEVEL_ALL;

    use super::*;
    use crate::observe::{CollectorStatus, effective_levels};

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    fn row(name: &str, count: u64, total_ns: u64) -> OpRow {
        OpRow {
            name: name.to_owned(),
            count,
            total_ns,
            mean_ns: total_ns as f64 / count as f64,
            share: total_ns as f64 / 1000.0,
            counters: Vec::new(),
            top_experts: Vec::new(),
        }
    }

    fn snap(status: CollectorStatus, decode_steps: u64) -> LiveSnapshot {
        LiveSnapshot {
            by_type: vec![
                row("ADD", 10, 50),
                row("MUL_MAT", 4, 400),
                row("CPY", 4, 40),
            ],
            by_class: vec![row("ffn_up", 2, 300)],
            decode_steps,
            status,
            ..LiveSnapshot::default()
        }
    }

    fn status(user: u32, qos_op_on: bool) -> CollectorStatus {
        CollectorStatus {
            attached_levels: LEVEL_ALL,
            user_levels: user,
            effective_levels: effective_levels(LEVEL_ALL, user, qos_op_on),
            qos_op_on,
            ..CollectorStatus::default()
        }
    }

    fn live_app() -> App {
        let mut app = App::new("t.pftrace".into(), "t.log".into());
        app.on_update(LiveUpdate::Snapshot(Box::new(snap(
            status(LEVEL_ALL, true),
            1,
        ))));
        app
    }

    #[test]
    fn sort_cycles_and_reverses() {
        let mut app = live_app();
        let names = |app: &App| {
            app.op_rows()
                .iter()
                .map(|r| r.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&app),
            ["MUL_MAT", "ADD", "CPY"],
            "total, largest first"
        );
        app.on_key(key('s'));
        assert_eq!(app.sort, SortColumn::Mean);
        assert_eq!(names(&app), ["MUL_MAT", "CPY", "ADD"]);
        app.on_key(key('s'));
        app.on_key(key('s'));
        assert_eq!(app.sort, SortColumn::Name);
        app.on_key(key('r'));
        assert_eq!(names(&app), ["ADD", "CPY", "MUL_MAT"]);
        app.on_key(key('s'));
        assert_eq!(app.sort, SortColumn::Count);
        // Ascending count; CPY and MUL_MAT tie at 4 and stay in name order.
        assert_eq!(names(&app), ["CPY", "MUL_MAT", "ADD"]);
        app.on_key(key('g'));
        assert_eq!(names(&app), ["ffn_up"]);
    }

    #[test]
    fn pause_freezes_the_shown_frame() {
        let mut app = live_app();
        app.on_key(key('p'));
        app.on_update(LiveUpdate::Snapshot(Box::new(snap(
            status(LEVEL_ALL, true),
            9,
        ))));
        assert_eq!(app.shown.as_ref().map(|s| s.decode_steps), Some(1));
        app.on_key(key('p'));
        assert_eq!(app.shown.as_ref().map(|s| s.decode_steps), Some(9));
    }

    #[test]
    fn level_toggle_asks_the_collector_and_shows_pending_until_confirmed() {
        let mut app = live_app();
        assert_eq!(
            app.on_key(key('3')),
            Action::SetLevels(LEVEL_ALL & !LEVEL_OP)
        );
        let op = |app: &App| app.level_states()[2].1;
        assert_eq!(op(&app), LevelState::Pending);
        app.on_update(LiveUpdate::Snapshot(Box::new(snap(
            status(LEVEL_ALL & !LEVEL_OP, true),
            2,
        ))));
        assert_eq!(op(&app), LevelState::Off);
        // `o` is the op level too: back on.
        assert_eq!(app.on_key(key('o')), Action::SetLevels(LEVEL_ALL));
    }

    #[test]
    fn qos_held_op_level_is_shown_as_such() {
        let mut app = App::new(String::new(), String::new());
        app.on_update(LiveUpdate::Snapshot(Box::new(snap(
            status(LEVEL_ALL, false),
            1,
        ))));
        assert_eq!(app.level_states()[2], ("op", LevelState::QosOff));
        assert_eq!(app.level_states()[0], ("token", LevelState::On));
    }

    #[test]
    fn unattached_levels_cannot_be_switched() {
        let mut app = App::new(String::new(), String::new());
        assert_eq!(app.on_key(key('1')), Action::None, "no status yet");
        let s = CollectorStatus {
            attached_levels: LEVEL_TOKEN,
            user_levels: LEVEL_TOKEN,
            effective_levels: LEVEL_TOKEN,
            ..CollectorStatus::default()
        };
        app.on_update(LiveUpdate::Snapshot(Box::new(snap(s, 1))));
        assert_eq!(app.on_key(key('5')), Action::None);
        assert_eq!(app.level_states()[4].1, LevelState::Unavailable);
        assert!(app.message.contains("sched"), "{}", app.message);
    }

    #[test]
    fn quit_stops_then_exits_when_the_collector_is_done() {
        let mut app = live_app();
        assert_eq!(app.on_key(key('q')), Action::Stop);
        assert_eq!(app.mode, Mode::Quitting);
        assert_eq!(app.on_key(key('x')), Action::None);
        let done = LiveUpdate::Finished(
            Box::new(snap(status(LEVEL_ALL, true), 3)),
            Ok(RecordingEnd::default()),
        );
        assert!(app.on_update(done));
    }

    fn exited(code: i32) -> RecordingEnd {
        RecordingEnd {
            reason: format!("target exited with status {code}"),
            target_end: Some(crate::target::TargetEnd::Exited(code)),
            ..RecordingEnd::default()
        }
    }

    #[test]
    fn target_exit_keeps_the_final_frame_until_q() {
        let mut app = live_app();
        assert!(!app.on_update(LiveUpdate::Started { pid: 42 }));
        assert_eq!(app.target_pid, Some(42));
        app.on_target_exit();
        assert!(app.finishing(), "exited, final frame not in yet");
        let done = LiveUpdate::Finished(Box::new(snap(status(LEVEL_ALL, true), 3)), Ok(exited(0)));
        assert!(!app.on_update(done));
        assert!(matches!(app.mode, Mode::Finished { .. }));
        assert!(!app.finishing());
        assert_eq!(app.shown.as_ref().map(|s| s.decode_steps), Some(3));
        // Stray keys and level keys do not leave; the table can still be arranged.
        assert_eq!(app.on_key(key('z')), Action::None);
        assert!(app.message.contains("q leaves"), "{}", app.message);
        assert_eq!(app.on_key(key('3')), Action::None);
        assert_eq!(app.on_key(key('s')), Action::None);
        assert_eq!(app.sort, SortColumn::Mean);
        assert_eq!(app.on_key(key('q')), Action::Exit);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(app.on_key(ctrl_c), Action::Exit);
        let mut app = live_app();
        assert_eq!(app.on_key(ctrl_c), Action::Stop);
    }

    #[test]
    fn the_final_frame_replaces_a_paused_one() {
        let mut app = live_app();
        app.on_key(key('p'));
        let done = LiveUpdate::Finished(Box::new(snap(status(LEVEL_ALL, true), 7)), Ok(exited(1)));
        app.on_update(done);
        assert_eq!(app.shown.as_ref().map(|s| s.decode_steps), Some(7));
    }
}
