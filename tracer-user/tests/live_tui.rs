//! End to end: `profinfer live` in a tmux pane against the engine. The screen must show
//! live tokens/s and the operator table; switching the op level off (`3`) must show
//! `op:off` and stop the operator counts; `q` must leave the engine running and write a
//! complete trace. When the target exits (or is killed) the view must show its exit
//! status and the final token and event counts, the same as the trace's footer and
//! analysis, and stay until `q`. Needs root (eBPF) and tmux (`cargo xtask setup` installs
//! it; missing, it fails the tests under `PROFINFER_REQUIRE_ROOT=1`, as in CI).
//!
//! Where a test needs the target to be running at a given moment, the target is
//! `engine chat` reading its messages from a FIFO this test holds open ([`TargetInput`]):
//! the engine generates a reply only when the test writes a line, and it cannot exit
//! before the test closes the FIFO (end of input). Its being alive, and the tokens the
//! screen shows, are then the test's doing, not a matter of how fast the machine decodes
//! (the test once ran a 400-token `engine run` of a 1B-shaped model and hoped it lasted
//! past the quit). This runs the tiny model: generating the 1B-shaped one took CI time.
//! It also asks of the view what an interactive target needs: a reply's tokens and
//! operators are on the screen while the target waits for its next message, not only
//! once more records push them out of the analyzer's reordering window.

#[macro_use]
mod support;

use std::{
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use trace_format::TraceReader;

/// Tokens of each chat reply (`engine chat -n`): the first comes from the message's
/// prefill, the other `REPLY_TOKENS - 1` from decode steps. The tiny model's greedy reply
/// to [`MESSAGE`] does not end its turn sooner (checked in the target's log).
const REPLY_TOKENS: u64 = 8;
/// What the test sends for each reply: `/reset` first, so that every turn's prompt is
/// the same few tokens and the tiny model's 512-token context never fills.
const MESSAGE: &str = "/reset\nhi\n";

/// The note `engine chat` writes for each reply cut at [`REPLY_TOKENS`] tokens.
fn reply_cut_note() -> String {
    format!("[reply cut at {REPLY_TOKENS} tokens by -n]")
}

/// Longest wait for one screen condition.
const SCREEN_TIMEOUT: Duration = Duration::from_secs(90);

/// How long the final screen is watched for not closing on keys other than `q`.
const STAYS_FOR: Duration = Duration::from_secs(2);

fn tmux(args: &[&str]) -> std::process::Output {
    Command::new("tmux").args(args).output().expect("tmux runs")
}

fn capture(session: &str) -> String {
    String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", session]).stdout).into_owned()
}

/// Polls the pane until `pred` holds; returns that screen (panics with it on timeout).
fn wait_screen(session: &str, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let s = capture(session);
        if pred(&s) {
            return s;
        }
        assert!(
            start.elapsed() < SCREEN_TIMEOUT,
            "timed out waiting for {what}; screen:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The number after `tokens/s ` in the title of the sparkline, if any.
fn tokens_per_s(screen: &str) -> Option<f64> {
    let rest = &screen[screen.find("tokens/s ")? + "tokens/s ".len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// The words of a screen line, table borders removed.
fn words(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| c.is_whitespace() || c == '│')
        .filter(|w| !w.is_empty())
}

/// The count column of the operator table's `MUL_MAT` row.
fn mul_mat_count(screen: &str) -> Option<String> {
    let line = screen.lines().find(|l| words(l).any(|w| w == "MUL_MAT"))?;
    let mut w = words(line).skip_while(|w| *w != "MUL_MAT");
    w.next()?;
    w.next().map(str::to_owned)
}

fn decoded(screen: &str) -> Option<u64> {
    let rest = &screen[screen.find("decoded ")? + "decoded ".len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// The numbers on the final box's line that starts with `label`, up to the box's border.
fn box_numbers(screen: &str, label: &str) -> Option<Vec<u64>> {
    let line = screen.lines().find(|l| l.contains(label))?;
    let rest = &line[line.find(label)? + label.len()..];
    let inside = rest.split('│').next()?;
    inside
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().ok())
        .collect()
}

/// Prompt tokens and decode steps.
type Tokens = (u64, u64);
/// Events written, lost, produced.
type Events = (u64, u64, u64);

/// What the final screen's box says.
fn final_counts(screen: &str) -> Option<(Tokens, Events)> {
    let t = box_numbers(screen, "│tokens  ")?;
    let e = box_numbers(screen, "│events  ")?;
    Some((
        (*t.first()?, *t.get(1)?),
        (*e.first()?, *e.get(1)?, *e.get(2)?),
    ))
}

fn pid_of(screen: &str) -> Option<u32> {
    let rest = &screen[screen.find(" pid ")? + 5..];
    rest.split_whitespace().next()?.parse().ok()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

/// The target's stdin: a FIFO this test holds open for writing. `engine chat` reads one
/// message per line and waits for the next, so it generates only when the test
/// [`send`](TargetInput::send)s, and stays alive until the test
/// [`close`](TargetInput::close)s the FIFO (end of input). The file is removed on drop.
struct TargetInput {
    path: std::path::PathBuf,
    /// Open for reading and writing: on Linux that does not wait for a reader (the
    /// shell's `< FIFO` opens the other end later), and this is the FIFO's only writer.
    file: Option<std::fs::File>,
}

impl TargetInput {
    /// Makes the FIFO `name` next to the other test files and opens it.
    fn new(name: &str) -> TargetInput {
        let path = support::trace_path(name).with_extension("stdin.fifo");
        let _ = std::fs::remove_file(&path);
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .expect("temp paths have no NUL");
        // SAFETY: `c_path` is a valid NUL-terminated string for the duration of the call.
        let made = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
        assert_eq!(
            made,
            0,
            "mkfifo {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open the FIFO");
        TargetInput {
            path,
            file: Some(file),
        }
    }

    /// Asks the target for one reply of [`REPLY_TOKENS`] tokens.
    fn send(&mut self) {
        use std::io::Write as _;
        self.file
            .as_mut()
            .expect("the FIFO is open")
            .write_all(MESSAGE.as_bytes())
            .expect("write to the target's stdin");
    }

    /// Closes the test's end: the target reads end of input and exits.
    fn close(&mut self) {
        self.file = None;
    }
}

impl Drop for TargetInput {
    fn drop(&mut self) {
        self.close();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The `profinfer live` target that waits for [`TargetInput`]: `engine chat` on the tiny
/// model, [`REPLY_TOKENS`] per reply, a statistics line per turn in its log.
fn chat_target(engine: &Path, model: &Path) -> String {
    format!(
        "{} chat -m {} -t 2 -n {REPLY_TOKENS} --stats",
        engine.display(),
        model.display()
    )
}

/// How many replies the target's log shows cut at [`REPLY_TOKENS`] tokens.
fn replies_in_log(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .matches(&reply_cut_note())
        .count()
}

/// Waits until the target's log shows `n` replies (each cut at [`REPLY_TOKENS`] tokens:
/// none ended sooner); panics with the log on timeout.
fn wait_replies(log: &Path, n: usize) {
    let start = Instant::now();
    while replies_in_log(log) < n {
        assert!(
            start.elapsed() < SCREEN_TIMEOUT,
            "timed out waiting for {n} replies of {REPLY_TOKENS} tokens; log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

struct Session(String);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = tmux(&["kill-session", "-t", &self.0]);
    }
}

#[test]
fn screen_parsers_read_the_table_through_borders() {
    let screen = "│MUL_MAT          1234     5.00 ms │\n┌ tokens/s 25.0  TTFT - decoded 7 ──┐";
    assert_eq!(mul_mat_count(screen).as_deref(), Some("1234"));
    assert_eq!(tokens_per_s(screen), Some(25.0));
    assert_eq!(decoded(screen), Some(7));
}

/// The live view of `engine chat` ([`TargetInput`]): tokens/s and the operator table
/// after the first reply; with the op level off the operator counts hold while the test
/// asks for more replies; after `q` the engine (blocked on its input) is alive and
/// answers one more message untraced, and exits when the test closes its input, having
/// answered every message in full.
#[test]
fn live_view_shows_tokens_ops_and_level_toggle_in_tmux() {
    require_root!();
    if !require_tmux() {
        return;
    }
    let (engine, model) = support::engine_and_model();
    let trace = support::trace_path("live");
    let log = std::path::PathBuf::from(format!("{}.target.log", trace.display()));
    let mut input = TargetInput::new("live");
    let session = Session(format!("profinfer-live-test-{}", std::process::id()));
    start_live(
        &session,
        &trace,
        &chat_target(engine, model),
        Some(input.path.as_path()),
    );
    let mut sent = 0;

    // Live tokens/s and the operator table, after one reply.
    input.send();
    sent += 1;
    let s = wait_screen(&session.0, "tokens/s and the operator table", |s| {
        tokens_per_s(s).is_some_and(|t| t > 0.0) && mul_mat_count(s).is_some()
    });
    assert!(s.contains("3:op:on"), "op level on at start:\n{s}");
    let pid = pid_of(&s).unwrap_or_else(|| panic!("no pid in the title:\n{s}"));
    assert!(pid > 0);

    // Switch the op level off: the indicator says so, and the table stops growing while
    // tokens keep coming (a reply asked for each round).
    tmux(&["send-keys", "-t", &session.0, "3"]);
    wait_screen(&session.0, "op:off", |s| s.contains("3:op:off"));
    // Records already in flight (ring buffer, reordering window, snapshot) still count
    // for a moment: wait until the count holds while three more tokens are decoded.
    let start = Instant::now();
    let mut before = capture(&session.0);
    loop {
        let ops_before = mul_mat_count(&before)
            .unwrap_or_else(|| panic!("no MUL_MAT row with op off:\n{before}"));
        let tokens_before =
            decoded(&before).unwrap_or_else(|| panic!("no decoded count:\n{before}"));
        input.send();
        sent += 1;
        let after = wait_screen(&session.0, "3 more tokens with op off", |s| {
            decoded(s).is_some_and(|d| d >= tokens_before + 3)
        });
        if mul_mat_count(&after).as_deref() == Some(ops_before.as_str()) {
            break;
        }
        assert!(
            start.elapsed() < SCREEN_TIMEOUT,
            "operator counts kept growing with the op level off:\n{before}\n---\n{after}"
        );
        before = after;
    }

    // Quit: the view ends; the engine, waiting for its next message, is still there.
    tmux(&["send-keys", "-t", &session.0, "q"]);
    let s = wait_screen(&session.0, "profinfer to exit", |s| {
        s.contains("PROFINFER_EXIT=")
    });
    assert!(s.contains("PROFINFER_EXIT=0"), "profinfer failed:\n{s}");
    assert!(
        alive(pid),
        "the engine (pid {pid}) stopped when the view quit"
    );

    // The trace is complete and says why it ended.
    let reader = TraceReader::open(&trace).expect("trace opens");
    let footer = reader.footer().expect("footer written");
    assert!(
        footer.end_reason.contains("live view"),
        "{}",
        footer.end_reason
    );
    assert!(footer.events_written > 0);

    // The engine goes on without the probes: it answers one more message.
    input.send();
    sent += 1;
    wait_replies(&log, sent);
    assert!(alive(pid), "the engine (pid {pid}) stopped after a reply");

    // End of its input: it exits, and its log has every reply in full.
    input.close();
    let start = Instant::now();
    while alive(pid) {
        assert!(
            start.elapsed() < SCREEN_TIMEOUT,
            "the engine did not exit at the end of its input"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let text = std::fs::read_to_string(&log).expect("target log");
    assert_eq!(
        text.matches(&reply_cut_note()).count(),
        sent,
        "one reply of {REPLY_TOKENS} tokens per message; log: {text}"
    );
    let _ = std::fs::remove_file(&trace);
    let _ = std::fs::remove_file(&log);
}

/// `profinfer report --json` of a trace: (prompt tokens, decode steps, events written).
fn analysed_counts(trace: &Path) -> (u64, u64, u64) {
    let out = Command::new(env!("CARGO_BIN_EXE_profinfer"))
        .args(["report", "--json"])
        .arg(trace)
        .output()
        .expect("profinfer report runs");
    support::assert_success(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("report JSON");
    let n = |p: &str| {
        v.pointer(p)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or_else(|| panic!("no {p} in the report"))
    };
    (
        n("/summary/tokens/prefill"),
        n("/summary/tokens/decode"),
        n("/summary/events/written"),
    )
}

/// Starts `profinfer live -o trace -- TARGET` (a shell command line) in a 100x30 tmux
/// pane, its stdin from `stdin` if given (the target inherits it; the view reads its keys
/// from the pane's terminal); the shell prints `PROFINFER_EXIT=` when profinfer exits.
fn start_live(session: &Session, trace: &Path, target: &str, stdin: Option<&Path>) {
    let redirect = stdin.map_or_else(String::new, |p| format!(" < {}", p.display()));
    let cmd = format!(
        "{} live -o {} -- {target}{redirect}; echo PROFINFER_EXIT=$?; sleep 600",
        env!("CARGO_BIN_EXE_profinfer"),
        trace.display(),
    );
    let out = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session.0,
        "-x",
        "100",
        "-y",
        "30",
        &cmd,
    ]);
    assert!(out.status.success(), "tmux new-session: {out:?}");
}

/// After the target ended: the final screen says how (`reason`, the footer's words),
/// its token and event counts are the trace's, and it stays until `q`.
fn check_final_screen(session: &Session, trace: &Path, reason: &str) {
    let s = wait_screen(&session.0, "the final screen", |s| {
        s.contains("recording finished") && final_counts(s).is_some()
    });
    eprintln!("final screen:\n{s}");
    assert!(
        s.contains(&format!("{reason}: recording finished")),
        "exit status {reason:?} not shown:\n{s}"
    );
    assert!(s.contains("[target exited]"), "{s}");
    let ((prompt, decode), (written, lost, produced)) = final_counts(&s).expect("counts");

    // The trace is complete by now: the footer and the analysis give the same numbers.
    let reader = TraceReader::open(trace).expect("trace opens");
    let footer = reader.footer().expect("footer written");
    assert_eq!(footer.end_reason, reason);
    assert_eq!(
        (written, lost, produced),
        (
            footer.events_written,
            footer.events_lost,
            footer.events_produced
        ),
        "final screen's events vs the footer:\n{s}"
    );
    let (a_prompt, a_decode, a_written) = analysed_counts(trace);
    assert_eq!(
        (prompt, decode, written),
        (a_prompt, a_decode, a_written),
        "final screen vs profinfer report:\n{s}"
    );
    assert!(decode > 0, "no token decoded:\n{s}");
    assert_eq!(decoded(&s), Some(decode), "the frame behind the box:\n{s}");
    if written < 10_000 {
        assert!(
            s.contains(&format!("events {written}")),
            "status line:\n{s}"
        );
    }

    // Other keys do not close it (they sort the table); only `q` does.
    for key in ["x", "s", "3", "Space"] {
        tmux(&["send-keys", "-t", &session.0, key]);
    }
    let start = Instant::now();
    while start.elapsed() < STAYS_FOR {
        let s = capture(&session.0);
        assert!(
            s.contains("recording finished") && !s.contains("PROFINFER_EXIT="),
            "the final screen closed before q:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    tmux(&["send-keys", "-t", &session.0, "q"]);
    let s = wait_screen(&session.0, "profinfer to exit on q", |s| {
        s.contains("PROFINFER_EXIT=")
    });
    assert!(s.contains("PROFINFER_EXIT=0"), "profinfer failed:\n{s}");
}

/// Whether tmux runs; if not, a loud skip, or a failure under `PROFINFER_REQUIRE_ROOT=1`:
/// that switch is CI's, where `cargo xtask setup` has installed tmux (its apt list), and
/// a root test that skips there is a test that never runs.
fn require_tmux() -> bool {
    let ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        support::skip_unless_required(
            support::REQUIRE_ROOT_ENV,
            "the live view tests need tmux, which does not run",
            "apt-get install tmux, or run `cargo xtask setup`",
        );
    }
    ok
}

#[test]
fn final_screen_parser_reads_the_box() {
    let screen = "┌ tokens/s 1.0  decoded 19 ─┐\n\
                  │c┌ target exited with status 0: recording finished ──┐ │\n\
                  │s│tokens  prompt 3  decoded 19                       │█│\n\
                  │s│events  4860 written, 0 lost (4861 produced)        │ │\n";
    assert_eq!(final_counts(screen), Some(((3, 19), (4860, 0, 4861))));
}

/// The tiny model: a 300-token run (about a second) and an 8-token one (well under):
/// after the target exits, all tokens and events are shown with the exit status.
#[test]
fn live_view_shows_the_final_state_when_the_target_exits() {
    require_root!();
    if !require_tmux() {
        return;
    }
    let (engine, model) = support::engine_and_model();
    for tokens in [300, 8] {
        let trace = support::trace_path(&format!("live-exit-{tokens}"));
        let session = Session(format!(
            "profinfer-live-exit-{tokens}-{}",
            std::process::id()
        ));
        start_live(
            &session,
            &trace,
            &format!(
                "{} run -m {} -p hi -n {tokens} -t 2 --ignore-eos",
                engine.display(),
                model.display()
            ),
            None,
        );
        check_final_screen(&session, &trace, "target exited with status 0");
        let _ = std::fs::remove_file(&trace);
        let _ = std::fs::remove_file(format!("{}.target.log", trace.display()));
    }
}

/// A target killed by a signal: the final screen says which. The target is `engine
/// chat` ([`TargetInput`]), killed once its one reply is in its log: it is waiting for
/// its next message then, so it is alive to be killed however fast it decoded.
#[test]
fn live_view_shows_a_target_killed_by_a_signal() {
    require_root!();
    if !require_tmux() {
        return;
    }
    let (engine, model) = support::engine_and_model();
    let trace = support::trace_path("live-killed");
    let log = std::path::PathBuf::from(format!("{}.target.log", trace.display()));
    let mut input = TargetInput::new("live-killed");
    let session = Session(format!("profinfer-live-killed-{}", std::process::id()));
    start_live(
        &session,
        &trace,
        &chat_target(engine, model),
        Some(input.path.as_path()),
    );
    input.send();
    let s = wait_screen(&session.0, "a few tokens", |s| {
        decoded(s).is_some_and(|d| d >= 3)
    });
    let pid = pid_of(&s).expect("pid in the title");
    wait_replies(&log, 1);
    assert!(
        alive(pid),
        "the engine (pid {pid}) exited before its input ended"
    );
    let killed = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success(), "kill -KILL {pid}");
    check_final_screen(&session, &trace, "target killed by signal 9");
    drop(input);
    let _ = std::fs::remove_file(&trace);
    let _ = std::fs::remove_file(&log);
}
