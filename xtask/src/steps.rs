//! Named, timed steps: each prints one line when it starts and one when it ends, with
//! how long it took, and the run ends with a summary and a table of the steps' times.

use std::fmt;
use std::time::{Duration, Instant};

use anyhow::Result;

/// Outcome of one step.
#[derive(Debug)]
pub struct StepRecord {
    /// What the step did.
    pub name: String,
    /// How long it took.
    pub elapsed: Duration,
    /// `None` on success, the error message on failure.
    pub error: Option<String>,
}

/// A sequence of timed steps of one xtask command.
#[derive(Debug)]
pub struct Steps {
    /// Name of the xtask command, used in the summary.
    command: &'static str,
    /// Finished steps in order.
    records: Vec<StepRecord>,
    /// When the command started.
    started: Instant,
}

impl Steps {
    /// Starts the steps of `command`.
    pub fn new(command: &'static str) -> Self {
        Self {
            command,
            records: Vec::new(),
            started: Instant::now(),
        }
    }

    /// Runs one step, prints its outcome and time, and returns its result.
    pub fn run<T>(&mut self, name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        eprintln!("==> {name}");
        let start = Instant::now();
        let result = f();
        let elapsed = start.elapsed();
        let error = result.as_ref().err().map(|e| format!("{e:#}"));
        match &error {
            None => eprintln!("<== {name}: ok ({})", Secs(elapsed)),
            Some(e) => eprintln!("<== {name}: FAILED after {}: {e}", Secs(elapsed)),
        }
        self.records.push(StepRecord {
            name: name.to_owned(),
            elapsed,
            error,
        });
        result
    }

    /// Records a step that was skipped, with the reason.
    pub fn skip(&mut self, name: &str, reason: &str) {
        eprintln!("==> {name}: skipped ({reason})");
    }

    /// Whether every step so far succeeded.
    pub fn all_ok(&self) -> bool {
        self.records.iter().all(|r| r.error.is_none())
    }

    /// The failed steps, a line each with what failed: printed after the summary, so the
    /// last lines of a long log (all a CI page may show) name the failures.
    pub fn failures(&self) -> String {
        self.records
            .iter()
            .filter_map(|r| {
                let e = r.error.as_ref()?;
                Some(format!("failed: {}: {e}\n", r.name))
            })
            .collect()
    }

    /// The one-line summary: overall result, total time and each step's time.
    pub fn summary(&self) -> String {
        let verdict = if self.all_ok() { "PASSED" } else { "FAILED" };
        let parts: Vec<String> = self
            .records
            .iter()
            .map(|r| {
                let mark = if r.error.is_some() { " FAILED" } else { "" };
                format!("{} {}{mark}", r.name, Secs(r.elapsed))
            })
            .collect();
        format!(
            "xtask {}: {verdict} in {} [{}]",
            self.command,
            Secs(self.started.elapsed()),
            parts.join(", ")
        )
    }

    /// Each step's name, time in seconds and result, a row each under a header, the
    /// columns aligned: printed after the summary.
    pub fn table(&self) -> String {
        let width = self.records.iter().map(|r| r.name.chars().count());
        let width = width.chain(["step".len()]).max().unwrap_or(0);
        let mut table = format!("{:<width$}  {:>8}  result\n", "step", "seconds");
        for r in &self.records {
            let result = if r.error.is_some() { "FAILED" } else { "ok" };
            let secs = r.elapsed.as_secs_f64();
            table.push_str(&format!("{:<width$}  {secs:>8.1}  {result}\n", r.name));
        }
        table
    }
}

/// A duration printed as seconds with one decimal.
pub struct Secs(pub Duration);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1}s", self.0.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::anyhow;

    #[test]
    fn summary_reports_failures() {
        let mut steps = Steps::new("test");
        steps.run("a", || Ok(())).expect("a succeeds");
        assert!(steps.all_ok());
        let _ = steps.run("b", || -> Result<()> { Err(anyhow!("boom")) });
        assert!(!steps.all_ok());
        let summary = steps.summary();
        assert!(summary.starts_with("xtask test: FAILED"), "{summary}");
        assert!(
            summary.contains("b ") && summary.contains(" FAILED]"),
            "{summary}"
        );
        assert_eq!(steps.failures(), "failed: b: boom\n");
    }

    #[test]
    fn the_table_has_a_row_per_step_with_its_seconds_and_result() {
        let mut steps = Steps::new("demo");
        for (name, ms, error) in [
            ("apt packages", 1240, None),
            ("build", 312_050, Some("boom")),
        ] {
            steps.records.push(StepRecord {
                name: name.into(),
                elapsed: Duration::from_millis(ms),
                error: error.map(str::to_owned),
            });
        }
        assert_eq!(
            steps.table(),
            "step           seconds  result\n\
             apt packages       1.2  ok\n\
             build            312.1  FAILED\n"
        );
        assert_eq!(Steps::new("x").table(), "step   seconds  result\n");
    }

    #[test]
    fn secs_has_one_decimal() {
        assert_eq!(Secs(Duration::from_millis(1240)).to_string(), "1.2s");
    }
}
