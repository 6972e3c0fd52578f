//! One measured run and the two-length pairs built from them: CPU time of everything the
//! run started (the program, and under `profinfer record` the collector too) from
//! `wait4`, wall time, and for traced runs the trace's footer.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use common::event::EventKind;
use trace_format::ProbeCost;

use crate::process;

/// What one run used.
#[derive(Clone, Debug, Default)]
pub struct RunSample {
    /// User + system CPU time of the process and the children it waited for, s.
    pub cpu_s: f64,
    /// Wall time, s.
    pub wall_s: f64,
    /// The footer's cost section (traced runs).
    pub cost: Option<ProbeCost>,
    /// Size of the trace file, bytes (traced runs).
    pub trace_bytes: u64,
    /// Operator records in the trace (traced runs).
    pub op_records: u64,
    /// All records in the trace (traced runs).
    pub records: u64,
}

/// Runs `cmd` to its end (its output discarded) and measures it with `wait4`.
pub fn run(cmd: &mut Command) -> Result<RunSample> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", process::display(cmd)))?;
    // Read stderr to its end first so a chatty child never blocks on a full pipe.
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read as _;
        let _ = e.read_to_string(&mut stderr);
    }
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: `rusage` is plain integers; zeroed is a valid value that wait4 overwrites.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for (`Child` never waited for it); the
    // pointers are to live locals.
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall_s = start.elapsed().as_secs_f64();
    if got != pid {
        bail!(
            "waiting for {}: {}",
            process::display(cmd),
            std::io::Error::last_os_error()
        );
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        let tail: String = stderr
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        bail!(
            "`{}` failed (wait status {status:#x}):\n{tail}",
            process::display(cmd)
        );
    }
    // `Child` would otherwise wait again on drop: it does not (std never waits on drop),
    // and its pid is reaped.
    drop(child);
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(RunSample {
        cpu_s: secs(usage.ru_utime) + secs(usage.ru_stime),
        wall_s,
        ..RunSample::default()
    })
}

/// `cmd`, inside the CPU quota if there is one.
pub fn within(quota: Option<&super::quota::CpuQuota>, cmd: Command) -> Command {
    match quota {
        Some(q) => q.wrap(&cmd),
        None => cmd,
    }
}

/// Runs `program args` under `profinfer record -o trace flags --` (inside `quota`, if
/// any, the recorder with the program) and measures it, with what the trace holds.
pub fn run_traced(
    profinfer: &Path,
    trace: &Path,
    flags: &[&str],
    program: &Path,
    args: &[String],
    quota: Option<&super::quota::CpuQuota>,
) -> Result<RunSample> {
    let mut cmd = Command::new(profinfer);
    cmd.arg("record")
        .arg("-o")
        .arg(trace)
        .args(flags)
        .arg("--")
        .arg(program)
        .args(args);
    let mut s = run(&mut within(quota, cmd))?;
    let reader = trace_format::TraceReader::open(trace)
        .with_context(|| format!("reading {}", trace.display()))?;
    s.cost = reader.footer().map(|f| f.cost.clone());
    s.trace_bytes = std::fs::metadata(trace)
        .with_context(|| format!("reading {}", trace.display()))?
        .len();
    let mut chunks = reader.chunks();
    while let Some(chunk) = chunks.next() {
        let chunk = chunk.with_context(|| format!("reading {}", trace.display()))?;
        for record in chunk.records() {
            let record = record.with_context(|| format!("reading {}", trace.display()))?;
            s.records += 1;
            if matches!(
                record.kind(),
                Some(
                    EventKind::OpSpan
                        | EventKind::OpSpanPmc
                        | EventKind::OpCompute
                        | EventKind::OpComputeExit
                )
            ) {
                s.op_records += 1;
            }
        }
        chunks.recycle(chunk);
    }
    Ok(s)
}

/// Untraced and traced runs of a short and a long generation, interleaved (ABBA): what
/// one more decode token costs is the difference of the two lengths, so loading, the
/// prompt and the recorder's start and end cancel.
#[derive(Clone, Debug)]
pub struct Pair {
    /// Untraced (short, long).
    pub untraced: (RunSample, RunSample),
    /// Traced (short, long).
    pub traced: (RunSample, RunSample),
}

/// Per decode token, from two runs of `short` and `long` tokens.
pub fn per_token(short: f64, long: f64, lengths: (u32, u32)) -> f64 {
    (long - short) / f64::from(lengths.1 - lengths.0).max(1.0)
}

impl Pair {
    /// CPU time per decode token, untraced and traced, s.
    pub fn cpu(&self, lengths: (u32, u32)) -> (f64, f64) {
        (
            per_token(self.untraced.0.cpu_s, self.untraced.1.cpu_s, lengths),
            per_token(self.traced.0.cpu_s, self.traced.1.cpu_s, lengths),
        )
    }

    /// Wall time per decode token, untraced and traced, s.
    pub fn wall(&self, lengths: (u32, u32)) -> (f64, f64) {
        (
            per_token(self.untraced.0.wall_s, self.untraced.1.wall_s, lengths),
            per_token(self.traced.0.wall_s, self.traced.1.wall_s, lengths),
        )
    }

    /// The collector's CPU time per decode token (from the traced runs' footers), s.
    pub fn collector_cpu(&self, lengths: (u32, u32)) -> Option<f64> {
        let ns = |s: &RunSample| s.cost.as_ref().map(|c| c.collector_cpu_ns as f64 / 1e9);
        Some(per_token(ns(&self.traced.0)?, ns(&self.traced.1)?, lengths))
    }
}

/// Measures one pair: the untraced and the traced run at both lengths, in the order
/// `flip` chooses (U T T U, or T U U T), so neither side always runs first.
pub fn pair(
    flip: bool,
    untraced: &mut dyn FnMut(u32) -> Result<RunSample>,
    traced: &mut dyn FnMut(u32) -> Result<RunSample>,
    lengths: (u32, u32),
) -> Result<Pair> {
    let (short, long) = lengths;
    let (us, ts, tl, ul);
    if flip {
        ts = traced(short)?;
        us = untraced(short)?;
        ul = untraced(long)?;
        tl = traced(long)?;
    } else {
        us = untraced(short)?;
        ts = traced(short)?;
        tl = traced(long)?;
        ul = untraced(long)?;
    }
    Ok(Pair {
        untraced: (us, ul),
        traced: (ts, tl),
    })
}

/// A scratch trace path under `out/bench`.
pub fn scratch_trace(name: &str) -> Result<PathBuf> {
    let dir = crate::paths::out_dir().join("bench");
    crate::paths::create_dir(&dir)?;
    Ok(dir.join(name))
}

/// `median (min..max)` of a sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// Median (of an even count, the mean of the two middle values).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of `v`; `None` for an empty sample.
    pub fn of(mut v: Vec<f64>) -> Option<Spread> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_runs_abba_and_keeps_each_side_s_runs() {
        for (flip, order) in [(false, "U8 T8 T24 U24"), (true, "T8 U8 U24 T24")] {
            let calls = std::cell::RefCell::new(Vec::new());
            let sample = |side: &str, n: u32| {
                calls.borrow_mut().push(format!("{side}{n}"));
                Ok(RunSample {
                    cpu_s: f64::from(n),
                    wall_s: if side == "T" { 1.0 } else { 0.0 },
                    cost: None,
                    trace_bytes: 0,
                    op_records: 0,
                    records: 0,
                })
            };
            let p = pair(
                flip,
                &mut |n| sample("U", n),
                &mut |n| sample("T", n),
                (8, 24),
            )
            .expect("pair");
            assert_eq!(calls.borrow().join(" "), order);
            assert_eq!((p.untraced.0.cpu_s, p.untraced.1.cpu_s), (8.0, 24.0));
            assert_eq!((p.traced.0.cpu_s, p.traced.1.cpu_s), (8.0, 24.0));
            assert!(p.untraced.0.wall_s == 0.0 && p.traced.1.wall_s == 1.0);
        }
    }

    #[test]
    fn spread_takes_the_middle_and_the_ends() {
        let s = Spread::of(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = Spread::of(vec![4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
        assert_eq!(Spread::of(Vec::new()), None);
    }

    #[test]
    fn per_token_is_the_slope_between_the_lengths() {
        assert!((per_token(1.0, 3.0, (16, 144)) - 2.0 / 128.0).abs() < 1e-12);
    }

    /// A real child: CPU time is measured (a busy loop), a failure is an error with the
    /// child's last words.
    #[test]
    fn runs_are_measured_with_wait4() {
        let s = run(
            Command::new("sh").args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"])
        )
        .unwrap();
        assert!(s.cpu_s > 0.0 && s.wall_s >= s.cpu_s * 0.5, "{s:?}");
        let e = run(Command::new("sh").args(["-c", "echo broken >&2; exit 3"])).unwrap_err();
        assert!(format!("{e:#}").contains("broken"), "{e:#}");
    }
}
