//! ProfTime (seed 002 §4.2) as Chrome Trace Event JSON, which Perfetto UI and
//! chrome://tracing open: an encoder of the [`crate::timeline`] walk.
//!
//! - one process per track group (the target; in a split pass one per backend), one
//!   thread per thread track, with its `X` slices (they nest: op ⊂ graph ⊂ token);
//! - a second thread per thread, tid [`STATE_TID_BASE`] + tid, with its scheduler
//!   states, so they do not break the nesting; GPU lanes at [`GPU_TID_BASE`] + backend
//!   kind, the CPU's waits for an accel at [`SYNC_TID`];
//! - `C` counter samples (decode tokens/s, each counter's rate per decode call) and
//!   global `i` instants (QoS switches, loss records, recording marks);
//! - `ts`/`dur` in µs relative to the first event, with ns kept as 3 decimals; flows are
//!   left out (the Perfetto encoding has them).

use std::{
    collections::HashMap,
    fmt::Write as _,
    io::{self, Write},
};

use crate::{
    export::{json_str, us},
    model::TraceModel,
    timeline::{
        self, Arg, ArgValue, Instant, Layout, Slice, TimeRange, TimelineOptions, TimelineSink,
        TrackId,
    },
};

/// Thread-state tracks use tid `STATE_TID_BASE + tid`.
pub const STATE_TID_BASE: u64 = 1_000_000_000;

/// A GPU's lane (its nodes' execution from its timestamps) uses tid `GPU_TID_BASE + kind`.
pub const GPU_TID_BASE: u64 = 2_000_000_000;
/// The track of the CPU's waits for the accel (a split pass).
pub const SYNC_TID: u64 = STATE_TID_BASE - 1;

/// Options of the timeline export.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ChromeOptions {
    /// Emit operator slices (the bulk of the file).
    pub ops: bool,
    /// Emit thread-state slices.
    pub states: bool,
    /// Only what begins in this range (`profinfer analyze --tokens`, `--time`).
    pub range: Option<TimeRange>,
}

impl Default for ChromeOptions {
    fn default() -> Self {
        ChromeOptions {
            ops: true,
            states: true,
            range: None,
        }
    }
}

/// The Chrome JSON tid of a track that holds slices.
fn chrome_tid(track: TrackId) -> Option<u64> {
    match track {
        TrackId::Thread(tid) => Some(u64::from(tid)),
        TrackId::Sched(tid) => Some(STATE_TID_BASE + u64::from(tid)),
        TrackId::GpuLane(kind) => Some(GPU_TID_BASE + u64::from(kind)),
        TrackId::SyncWaits => Some(SYNC_TID),
        _ => None,
    }
}

/// The encoder: one JSON event per line.
struct ChromeSink<W: Write> {
    w: W,
    first: bool,
    base: u64,
    /// The target's pid (counters and instants).
    pid: u32,
    /// Track → (pid, name) of every track.
    tracks: HashMap<TrackId, (u32, String)>,
    /// The current track's pid and tid.
    current: (u32, u64),
    line: String,
}

impl<W: Write> ChromeSink<W> {
    fn raw(&mut self, obj: &str) -> io::Result<()> {
        if self.first {
            self.first = false;
        } else {
            self.w.write_all(b",\n")?;
        }
        self.w.write_all(obj.as_bytes())
    }

    fn ts(&self, ns: u64) -> String {
        us(ns.saturating_sub(self.base))
    }

    /// A metadata event (`process_name`, `thread_sort_index`, …).
    fn meta(&mut self, pid: u32, tid: Option<u64>, what: &str, args: &str) -> io::Result<()> {
        let tid = tid.map_or_else(String::new, |t| format!(r#","tid":{t}"#));
        self.raw(&format!(
            r#"{{"ph":"M","pid":{pid}{tid},"name":"{what}","args":{args}}}"#
        ))
    }
}

/// `args` as a JSON object into `out`.
fn write_args(out: &mut String, args: &[Arg<'_>]) {
    out.push('{');
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&json_str(&a.name));
        out.push(':');
        // Writing to a String cannot fail.
        let _ = match a.value {
            ArgValue::Uint(v) => write!(out, "{v}"),
            ArgValue::Int(v) => write!(out, "{v}"),
            ArgValue::Double(v) => write!(out, "{v:.3}"),
            ArgValue::Str(s) => write!(out, "{}", json_str(s)),
        };
    }
    out.push('}');
}

impl<W: Write> TimelineSink for ChromeSink<W> {
    fn tracks(&mut self, layout: &Layout) -> io::Result<()> {
        for t in &layout.tracks {
            self.tracks.insert(t.id, (t.pid, t.name.clone()));
            let name = format!(r#"{{"name":{}}}"#, json_str(&t.name));
            let (tid, prefix) = match t.id {
                TrackId::Process | TrackId::BackendProcess(_) => (None, "process"),
                id => match chrome_tid(id) {
                    Some(tid) => (Some(tid), "thread"),
                    // Counters and instants are named in their events.
                    None => continue,
                },
            };
            self.meta(t.pid, tid, &format!("{prefix}_name"), &name)?;
            if let Some(sort) = t.sort_index {
                let args = format!(r#"{{"sort_index":{sort}}}"#);
                self.meta(t.pid, tid, &format!("{prefix}_sort_index"), &args)?;
            }
        }
        Ok(())
    }

    fn sequence(&mut self, track: TrackId) -> io::Result<()> {
        let pid = self.tracks.get(&track).map_or(self.pid, |t| t.0);
        self.current = (pid, chrome_tid(track).unwrap_or(0));
        Ok(())
    }

    fn begin(&mut self, s: &Slice<'_>) -> io::Result<()> {
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        let _ = write!(
            line,
            r#"{{"ph":"X","pid":{},"tid":{},"name":{},"cat":{},"ts":{},"dur":{},"args":"#,
            self.current.0,
            self.current.1,
            json_str(s.name.as_str()),
            json_str(s.category),
            self.ts(s.start_ns),
            us(s.end_ns.saturating_sub(s.start_ns)),
        );
        write_args(&mut line, s.args);
        line.push('}');
        let r = self.raw(&line);
        self.line = line;
        r
    }

    fn end(&mut self, _ts_ns: u64) -> io::Result<()> {
        // `X` events carry their duration.
        Ok(())
    }

    fn counter(&mut self, track: TrackId, ts_ns: u64, value: f64) -> io::Result<()> {
        let name = self.tracks.get(&track).map_or("", |t| t.1.as_str());
        let key = if track == TrackId::TokensPerSecond {
            "tokens/s"
        } else {
            "per_s"
        };
        let line = format!(
            r#"{{"ph":"C","pid":{},"name":{},"ts":{},"args":{{{}:{value:.3}}}}}"#,
            self.pid,
            json_str(name),
            self.ts(ts_ns),
            json_str(key),
        );
        self.raw(&line)
    }

    fn instant(&mut self, i: &Instant<'_>) -> io::Result<()> {
        let mut line = format!(
            r#"{{"ph":"i","s":"g","pid":{},"tid":0,"name":{},"cat":"{}","ts":{}"#,
            self.pid,
            json_str(&i.name),
            i.category,
            self.ts(i.ts_ns),
        );
        if !i.args.is_empty() {
            line.push_str(r#","args":"#);
            write_args(&mut line, i.args);
        }
        line.push('}');
        self.raw(&line)
    }
}

/// Writes the timeline.
///
/// # Errors
/// I/O errors of `w`.
pub fn write(model: &TraceModel, opts: &ChromeOptions, mut w: impl Write) -> io::Result<()> {
    let base = model.first_ns().unwrap_or(0);
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    let mut sink = ChromeSink {
        w: &mut w,
        first: true,
        base,
        pid: model.target_pid(),
        tracks: HashMap::new(),
        current: (model.target_pid(), 0),
        line: String::new(),
    };
    // Flows are not drawn in this format.
    let opts = TimelineOptions::new(opts.ops, opts.states, false).with_range(opts.range);
    timeline::walk(model, &opts, &mut sink)?;
    w.write_all(b"\n],\"otherData\":{\"base_ns\":")?;
    w.write_all(base.to_string().as_bytes())?;
    w.write_all(b"}}\n")?;
    w.flush()
}
