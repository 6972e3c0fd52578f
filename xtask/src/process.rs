//! Running subprocesses: every command is printed before it runs, and every failure names
//! the command that failed.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{BufRead as _, BufReader, IsTerminal as _};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::steps::Secs;

/// How often [`run_logged`] prints a progress line when stderr is not a terminal.
const PLAIN_PROGRESS_EVERY: Duration = Duration::from_secs(60);

/// A command line rendered for humans: program and arguments, quoted when needed.
pub fn display(cmd: &Command) -> String {
    let mut out = String::new();
    for (key, value) in cmd.get_envs() {
        if let Some(value) = value {
            let _ = write!(out, "{}={} ", key.to_string_lossy(), quote(value));
        }
    }
    out.push_str(&quote(cmd.get_program()));
    for arg in cmd.get_args() {
        out.push(' ');
        out.push_str(&quote(arg));
    }
    if let Some(dir) = cmd.get_current_dir() {
        let _ = write!(out, "  (in {})", dir.display());
    }
    out
}

/// Quotes one word for display if it contains characters a shell would split on.
fn quote(word: &OsStr) -> String {
    let s = word.to_string_lossy();
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Prints the command line that is about to run.
pub fn announce(cmd: &Command) {
    eprintln!("    $ {}", display(cmd));
}

/// Runs `cmd` with inherited stdio; fails if it cannot start or exits unsuccessfully.
pub fn run(cmd: &mut Command) -> Result<()> {
    announce(cmd);
    let status = cmd
        .status()
        .with_context(|| format!("failed to start `{}`", display(cmd)))?;
    check(cmd, status)
}

/// Runs `cargo test` (`cmd`) with its output passed through, and on failure names the
/// failed tests and test targets in the error: libtest's `test NAME ... FAILED` lines
/// and cargo's list of failed targets (with `--no-fail-fast`), which otherwise scroll
/// away under the steps that follow.
pub fn run_tests(cmd: &mut Command) -> Result<()> {
    announce(cmd);
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("failed to start `{}`", display(cmd)))?;
    let out = child.stdout.take().context("cargo test's stdout")?;
    let err = child.stderr.take().context("cargo test's stderr")?;
    // Each stream is passed through on its own thread, line by line, as it comes.
    let stderr_lines = std::thread::spawn(move || {
        BufReader::new(err)
            .lines()
            .map_while(Result::ok)
            .filter(|l| {
                eprintln!("{l}");
                failed_target(l)
            })
            .collect::<Vec<String>>()
    });
    let failed_tests: Vec<String> = BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .filter(|l| {
            println!("{l}");
            failed_test(l)
        })
        .collect();
    let failed_targets = stderr_lines.join().unwrap_or_default();
    let status = child
        .wait()
        .with_context(|| format!("waiting for `{}`", display(cmd)))?;
    if status.success() {
        return Ok(());
    }
    let mut names: Vec<String> = failed_tests
        .iter()
        .map(|l| {
            l.trim_start_matches("test ")
                .trim_end_matches(" ... FAILED")
                .to_owned()
        })
        .collect();
    names.extend(failed_targets.iter().map(|l| {
        let quoted = l.split_once('`').and_then(|(_, r)| r.rsplit_once('`'));
        format!("target `{}`", quoted.map_or(l.trim(), |(q, _)| q))
    }));
    // Cargo names a lone failed target twice (the rerun hint and the list).
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    if names.is_empty() {
        return check(cmd, status);
    }
    bail!("`{}` failed ({status}): {}", display(cmd), names.join("; "))
}

/// libtest's line for a failed test.
fn failed_test(line: &str) -> bool {
    line.starts_with("test ") && line.ends_with(" ... FAILED")
}

/// A line of cargo's list of failed test targets (`    `-p tracer-user --test record``),
/// or its single-target form (`error: test failed, to rerun pass `...``).
fn failed_target(line: &str) -> bool {
    let t = line.trim();
    (line.starts_with("    `") && t.ends_with('`'))
        || t.starts_with("error: test failed, to rerun pass")
}

/// Runs `cmd` quietly and reports whether it started and exited successfully
/// (for probes such as `cargo fuzz --version`).
pub fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `cmd`, streaming its stderr to ours, and returns its stdout as UTF-8.
pub fn stdout(cmd: &mut Command) -> Result<String> {
    announce(cmd);
    let output: Output = cmd
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("failed to start `{}`", display(cmd)))?;
    check(cmd, output.status)?;
    String::from_utf8(output.stdout)
        .with_context(|| format!("`{}` printed non-UTF-8 output", display(cmd)))
}

/// Runs `cmd` and parses its stdout as one JSON value.
pub fn json<T: serde::de::DeserializeOwned>(cmd: &mut Command) -> Result<T> {
    let text = stdout(cmd)?;
    serde_json::from_str(text.trim()).with_context(|| {
        format!(
            "`{}` did not print the expected JSON; it printed: {}",
            display(cmd),
            truncate(&text, 400)
        )
    })
}

/// Fails with a message naming `cmd` unless `status` is a success.
pub fn check(cmd: &Command, status: ExitStatus) -> Result<()> {
    if status.success() {
        Ok(())
    } else {
        bail!("`{}` failed with {status}", display(cmd))
    }
}

/// Runs a long `cmd` (a build) with its stdout and stderr appended to `log_path`, showing
/// the elapsed time and the log's last line (a spinner on a terminal, a line a minute
/// otherwise) and, when it ends, `"{what} finished in ..."`. On failure it prints the
/// log's last 40 lines and names the command and the log.
pub fn run_logged(cmd: &mut Command, log_path: &Path, what: &str) -> Result<()> {
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let log_err = log
        .try_clone()
        .context("cannot duplicate the log file handle")?;
    cmd.stdin(Stdio::null()).stdout(log).stderr(log_err);
    announce(cmd);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("failed to start `{}`", display(cmd)))?;
    let status = wait_with_progress(&mut child, log_path, what)
        .with_context(|| format!("while waiting for `{}`", display(cmd)))?;
    if !status.success() {
        print_log_tail(log_path, 40);
        bail!(
            "`{}` failed with {status}; full log in {}",
            display(cmd),
            log_path.display()
        );
    }
    Ok(())
}

/// Waits for `child`, showing the elapsed time and the last log line.
fn wait_with_progress(child: &mut Child, log_path: &Path, what: &str) -> Result<ExitStatus> {
    let start = Instant::now();
    let spinner = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("    {spinner} [{elapsed_precise}] {wide_msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    });
    let mut last_plain = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            if let Some(bar) = spinner {
                bar.finish_and_clear();
            }
            eprintln!("    {what} finished in {}", Secs(start.elapsed()));
            return Ok(status);
        }
        let last = last_log_line(log_path);
        match &spinner {
            Some(bar) => bar.set_message(last),
            None if last_plain.elapsed() >= PLAIN_PROGRESS_EVERY => {
                eprintln!(
                    "    ... still building ({} elapsed): {last}",
                    Secs(start.elapsed())
                );
                last_plain = Instant::now();
            }
            None => {}
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The last non-empty line of the log, shortened for a progress display.
fn last_log_line(log_path: &Path) -> String {
    let Ok(file) = File::open(log_path) else {
        return String::new();
    };
    let last = BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter(|l| !l.trim().is_empty())
        .last()
        .unwrap_or_default();
    last.trim().chars().take(120).collect()
}

/// Prints the last `n` lines of the log (after a failure).
fn print_log_tail(log_path: &Path, n: usize) {
    let Ok(file) = File::open(log_path) else {
        return;
    };
    let lines: Vec<String> = BufReader::new(file).lines().map_while(Result::ok).collect();
    for line in &lines[lines.len().saturating_sub(n)..] {
        eprintln!("    | {line}");
    }
}

/// Whether this process runs as root (apt installs and tracing need it).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Number of cores to build with.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
}

/// A new command for `program` running in `dir`.
pub fn in_dir(program: impl AsRef<OsStr>, dir: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(dir);
    cmd
}

/// At most `max` characters of `s`, marked when shortened.
fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let head: String = s.chars().take(max).collect();
        format!("{head}...")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_quotes_words_with_spaces_and_quotes() {
        let mut cmd = Command::new("engine");
        cmd.args(["run", "-p", "it's a test", "--tokens", "1,2"]);
        assert_eq!(
            display(&cmd),
            r"engine run -p 'it'\''s a test' --tokens 1,2"
        );
    }

    #[test]
    fn display_shows_env_and_dir() {
        let mut cmd = Command::new("cargo");
        cmd.arg("test").env("A", "1").current_dir("/tmp");
        assert_eq!(display(&cmd), "A=1 cargo test  (in /tmp)");
    }

    #[test]
    fn failed_tests_and_targets_are_named_in_the_error() {
        let script = "echo 'test a::b ... ok'; echo 'test a::c ... FAILED'; \
                      echo 'error: 2 targets failed:' >&2; \
                      echo '    `-p x --test y`' >&2; echo '    `-p z --lib`' >&2; exit 101";
        let err = run_tests(Command::new("sh").args(["-c", script])).expect_err("exit 101");
        let msg = err.to_string();
        assert!(
            msg.ends_with("a::c; target `-p x --test y`; target `-p z --lib`"),
            "{msg}"
        );
        let one = "echo 'error: test failed, to rerun pass `-p w --test v`' >&2; \
                   echo 'error: 1 target failed:' >&2; echo '    `-p w --test v`' >&2; exit 101";
        let err = run_tests(Command::new("sh").args(["-c", one])).expect_err("exit 101");
        assert!(
            err.to_string()
                .ends_with("(exit status: 101): target `-p w --test v`"),
            "{err}"
        );
        run_tests(Command::new("sh").args(["-c", "echo 'test a ... ok'"])).expect("passes");
    }

    #[test]
    fn failing_command_is_named_in_the_error() {
        let mut cmd = Command::new("false");
        let err = run(&mut cmd).expect_err("`false` fails");
        assert!(err.to_string().contains("`false` failed"), "{err}");
    }

    #[test]
    fn run_logged_appends_output_to_the_log() {
        let log = std::env::temp_dir().join(format!("xtask-run-logged-{}", std::process::id()));
        std::fs::write(&log, "before\n").expect("write");
        run_logged(Command::new("echo").arg("built"), &log, "echo").expect("echo runs");
        assert_eq!(
            std::fs::read_to_string(&log).expect("read"),
            "before\nbuilt\n"
        );
        let err = run_logged(&mut Command::new("false"), &log, "false").expect_err("fails");
        assert!(err.to_string().contains("`false` failed"), "{err}");
        let _ = std::fs::remove_file(&log);
    }

    #[test]
    fn truncate_marks_long_text() {
        assert_eq!(truncate("abcdef", 3), "abc...");
        assert_eq!(truncate("abc", 3), "abc");
    }
}
