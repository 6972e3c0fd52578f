//! Running subprocesses: every command is printed before it runs, and every failure names
//! the command that failed.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, ExitStatus, Output, Stdio};

use anyhow::{Context, Result, bail};

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
    fn failing_command_is_named_in_the_error() {
        let mut cmd = Command::new("false");
        let err = run(&mut cmd).expect_err("`false` fails");
        assert!(err.to_string().contains("`false` failed"), "{err}");
    }

    #[test]
    fn truncate_marks_long_text() {
        assert_eq!(truncate("abcdef", 3), "abc...");
        assert_eq!(truncate("abc", 3), "abc");
    }
}
