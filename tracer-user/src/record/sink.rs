//! Where a recording's records go: the trace file (or a numbered series of them,
//! `--switch-output`, within `--max-size`), and the observer (the live view) that sees
//! every record. Counts what it wrote; target-independent.
//!
//! A series member is cut right after a token's decode exit (a graph's exit when tokens
//! are not probed), when the threads of the target are between forward passes; a file
//! twice the asked size (or age) without one is cut at any record. Each member ends with
//! its own footer (the records produced and lost while it was written) and the next one
//! begins with copies of the state records its events need ([`HeadRecords`]).
//!
//! When writing fails (a full disk), the sink stops: the files before are complete, the
//! one being written is readable up to its last whole chunk, and nothing more is
//! written; the collector then ends the recording, leaving the target running.

use std::{
    collections::VecDeque,
    path::{Path, PathBuf},
    time::Instant,
};

use common::{
    control::{LEVEL_TOKEN, STAT_LOST, STAT_PRODUCED},
    event::{EVENT_FLAG_EXIT, EventKind, LossEvent},
};
use trace_format::{
    ProbeCost, SeriesMember, TraceError, TraceFooter, TraceHeader, TraceWriter, WireRecord,
    member_path, record_bytes,
};

use super::{
    clock::{clocks, collector_header},
    error::RecordError,
    head::HeadRecords,
    probe_maps::ProbeMaps,
};
use crate::{
    observe::RecordObserver,
    output_limits::{OutputLimits, SwitchOutput, human_bytes},
};

/// Room kept below `--max-size` for a file's last chunk header and footer.
const FOOTER_RESERVE: u64 = 64 << 10;

/// Records produced and lost per CPU, as the probes' statistics map counts them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RingCounts {
    /// Records the probes tried to emit, per CPU.
    pub produced: Vec<u64>,
    /// Records lost because the buffer was full, per CPU.
    pub lost: Vec<u64>,
}

impl RingCounts {
    /// The counts now (empty where the map cannot be read).
    pub fn read(maps: &ProbeMaps) -> RingCounts {
        RingCounts {
            produced: maps.stat_per_cpu(STAT_PRODUCED).unwrap_or_default(),
            lost: maps.stat_per_cpu(STAT_LOST).unwrap_or_default(),
        }
    }

    /// The counts since `earlier`, per CPU.
    fn since(&self, earlier: &RingCounts) -> RingCounts {
        let minus = |now: &[u64], then: &[u64]| -> Vec<u64> {
            now.iter()
                .enumerate()
                .map(|(i, &n)| n.saturating_sub(then.get(i).copied().unwrap_or(0)))
                .collect()
        };
        RingCounts {
            produced: minus(&self.produced, &earlier.produced),
            lost: minus(&self.lost, &earlier.lost),
        }
    }

    /// Adds `other` to these counts, per CPU.
    fn add(&mut self, other: &RingCounts) {
        for (mine, theirs) in [
            (&mut self.produced, &other.produced),
            (&mut self.lost, &other.lost),
        ] {
            if mine.len() < theirs.len() {
                mine.resize(theirs.len(), 0);
            }
            for (m, t) in mine.iter_mut().zip(theirs) {
                *m += t;
            }
        }
    }
}

/// Why the sink stopped writing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputStop {
    /// The one file reached `--max-size`.
    SizeCap {
        /// The cap, bytes.
        max: u64,
    },
    /// Writing failed (a full disk): the file being written is readable up to its last
    /// whole chunk.
    Failed {
        /// The file being written.
        path: PathBuf,
        /// The error, on one line.
        error: String,
    },
}

impl OutputStop {
    /// The footer's and summary's end reason.
    pub fn end_reason(&self) -> String {
        match self {
            OutputStop::SizeCap { max } => {
                format!(
                    "--max-size {} reached; target left running",
                    human_bytes(*max)
                )
            }
            OutputStop::Failed { path, error } => format!(
                "writing {} failed ({error}); target left running",
                path.display()
            ),
        }
    }
}

/// The file being written and what it holds.
struct Member {
    writer: TraceWriter,
    index: u32,
    opened: Instant,
    written: u64,
    collector_events: u64,
    /// The ring's counts the members before it took (see [`TraceSink::close_member`]).
    baseline: RingCounts,
}

impl Member {
    /// This member's share of `now`: the records lost since it began, and as produced
    /// what it wrote plus them, apportioned to the CPUs as the ring counted them since it
    /// began. (The probes' produced count runs ahead of the drain by what the buffer
    /// holds, which belongs to the next member; at the recording's end, everything
    /// drained, `now - baseline` is exactly the last member's share.)
    fn share(&self, now: &RingCounts, last: bool) -> RingCounts {
        let delta = now.since(&self.baseline);
        if last {
            return delta;
        }
        let lost: u64 = delta.lost.iter().sum();
        let produced = apportion(&delta.produced, self.written + lost);
        RingCounts {
            produced,
            lost: delta.lost,
        }
    }
}

/// `total` split in proportion to `weights` (rounding down, the rest to the largest);
/// all to the first entry when the weights are zero.
fn apportion(weights: &[u64], total: u64) -> Vec<u64> {
    let sum: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    if weights.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<u64> = if sum == 0 {
        vec![0; weights.len()]
    } else {
        weights
            .iter()
            .map(|&w| (u128::from(w) * u128::from(total) / sum) as u64)
            .collect()
    };
    let rest = total - out.iter().sum::<u64>();
    // The first of the largest (max_by_key would give the last).
    let largest = (0..weights.len())
        .min_by_key(|&i| std::cmp::Reverse(weights[i]))
        .unwrap_or(0);
    out[largest] += rest;
    out
}

/// A series' finished files on disk, oldest first, with their sizes.
#[derive(Default)]
struct SeriesFiles {
    kept: VecDeque<(PathBuf, u64)>,
    /// Their total size.
    bytes: u64,
    removed: u32,
}

impl SeriesFiles {
    fn push(&mut self, path: PathBuf) {
        let size = std::fs::metadata(&path).map_or(0, |m| m.len());
        self.bytes += size;
        self.kept.push_back((path, size));
    }

    /// Removes the oldest files while they and `current` bytes more would pass `max`.
    fn make_room(&mut self, max: u64, current: u64) {
        while self.bytes + current > max {
            let Some((oldest, size)) = self.kept.pop_front() else {
                break;
            };
            let _ = std::fs::remove_file(&oldest);
            self.bytes -= size;
            self.removed += 1;
        }
    }
}

/// The trace writer(s) and the observer, with the counts the footers need.
pub struct TraceSink<'o> {
    /// CPU-clock samples sent and lost in the whole recording (`--sample`), for the last
    /// file's footer.
    pub samples: (u64, u64),
    member: Option<Member>,
    base: PathBuf,
    header: TraceHeader,
    chunk_bytes: usize,
    limits: OutputLimits,
    /// Whether decode calls are probed (then they are the series' cut points).
    tokens_probed: bool,
    head: HeadRecords,
    series: SeriesFiles,
    observer: &'o mut dyn RecordObserver,
    /// Probe records written (all files).
    pub written: u64,
    /// Bytes of probe records drained.
    pub bytes_drained: u64,
    /// Records the collector made itself (counters opened, leaves, QoS switches, losses).
    pub collector_events: u64,
    /// Probe records drained after the sink stopped (not written).
    pub unwritten: u64,
    /// Records written since the last tick (an idle series member is cut on a tick).
    since_tick: u64,
    stop: Option<OutputStop>,
}

/// The record at the start of `bytes` and its kind: as long as its kind says (a buffer
/// entry may be padded), or all of `bytes` for a kind this build does not know. `None`
/// for an entry too short to hold its record.
pub fn split_record(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let kind = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    let size = EventKind::from_u32(kind).map_or(bytes.len(), |k| k.record_size());
    Some((kind, bytes.get(..size)?))
}

fn word(record: &[u8], at: usize) -> u32 {
    record
        .get(at..at + 4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Removes the trace `base` and every member of its series (a new recording to `base`
/// replaces them, as a single file is truncated).
fn clear_old_series(base: &Path) {
    let _ = std::fs::remove_file(base);
    for (_, path) in trace_format::members(base).unwrap_or_default() {
        let _ = std::fs::remove_file(path);
    }
}

impl<'o> TraceSink<'o> {
    /// Creates the trace file (the first member of a series with `--switch-output`) with
    /// `header` and tells the observer the recording began.
    ///
    /// # Errors
    /// [`RecordError::Write`] if the file cannot be created.
    pub fn create(
        path: &Path,
        header: &TraceHeader,
        chunk_bytes: usize,
        limits: OutputLimits,
        observer: &'o mut dyn RecordObserver,
    ) -> Result<TraceSink<'o>, RecordError> {
        if limits.switch.is_some() {
            clear_old_series(path);
        }
        let levels = header.recording_settings().levels.unwrap_or(LEVEL_TOKEN);
        let mut sink = TraceSink {
            samples: (0, 0),
            member: None,
            base: path.to_path_buf(),
            header: header.clone(),
            chunk_bytes,
            limits,
            tokens_probed: levels & LEVEL_TOKEN != 0,
            head: HeadRecords::default(),
            series: SeriesFiles::default(),
            observer,
            written: 0,
            bytes_drained: 0,
            collector_events: 0,
            unwritten: 0,
            since_tick: 0,
            stop: None,
        };
        sink.member = Some(
            sink.open_member(1, RingCounts::default(), 0)
                .map_err(|source| RecordError::Write {
                    path: sink.member_path(1),
                    source,
                })?,
        );
        sink.observer.on_start(header);
        Ok(sink)
    }

    fn member_path(&self, index: u32) -> PathBuf {
        if self.limits.switch.is_some() {
            member_path(&self.base, index)
        } else {
            self.base.clone()
        }
    }

    /// Opens file `index`: its header, then (in a series) the state records stamped
    /// `at_ns`.
    fn open_member(
        &mut self,
        index: u32,
        baseline: RingCounts,
        at_ns: u64,
    ) -> Result<Member, TraceError> {
        let path = self.member_path(index);
        let mut header = self.header.clone();
        let mut collector_events = 0;
        if self.limits.switch.is_some() {
            let mut settings = header.recording_settings();
            settings.series = Some(SeriesMember {
                index,
                head_records: self.head.count() as u64,
            });
            header.set_recording_settings(&settings);
        }
        let mut writer = TraceWriter::create(&path, &header)?;
        writer.set_chunk_bytes(self.chunk_bytes);
        if index > 1 {
            for record in self.head.stamped(at_ns) {
                writer.push_raw(&record)?;
                collector_events += 1;
            }
        }
        Ok(Member {
            writer,
            index,
            opened: Instant::now(),
            written: 0,
            collector_events,
            baseline,
        })
    }

    /// Why the sink stopped writing, if it did.
    pub fn stopped(&self) -> Option<&OutputStop> {
        self.stop.as_ref()
    }

    fn fail(&mut self, error: &TraceError) {
        let path = self
            .member
            .as_ref()
            .map_or_else(|| self.base.clone(), |m| m.writer.path().to_path_buf());
        self.fail_at(path, error);
    }

    /// Writes one record drained from the probes, and starts the next member of a series
    /// after it when one is due (`maps` gives the ring's counts for the footer).
    pub fn probe_record(&mut self, kind: u32, record: &[u8], maps: &ProbeMaps) {
        self.bytes_drained += record.len() as u64;
        self.observer.on_record(record);
        let Some(member) = self.member.as_mut() else {
            self.unwritten += 1;
            return;
        };
        if !Self::fits_limits(self.limits, member, record.len()) {
            self.stop = Some(OutputStop::SizeCap {
                max: self.limits.max_size.unwrap_or(0),
            });
            self.unwritten += 1;
            return;
        }
        if let Err(e) = member.writer.push_raw(record) {
            self.fail(&e);
            return;
        }
        member.written += 1;
        self.written += 1;
        self.since_tick += 1;
        if self.limits.switch.is_some() {
            self.head.observe(kind, record);
        }
        if let (Some(max), Some(_)) = (self.limits.max_size, self.limits.switch) {
            let current = member.writer.len() + FOOTER_RESERVE;
            if self.series.bytes + current > max {
                self.series.make_room(max, current);
            }
        }
        if self.switch_due(kind, record) {
            let at = u64::from(word(record, 8)) | (u64::from(word(record, 12)) << 32);
            self.switch(at, RingCounts::read(maps));
        }
    }

    fn fits_limits(limits: OutputLimits, member: &Member, len: usize) -> bool {
        match (limits.max_size, limits.switch) {
            (Some(max), None) => member.writer.len() + len as u64 + FOOTER_RESERVE <= max,
            _ => true,
        }
    }

    /// Whether the series' next member starts after this record.
    fn switch_due(&self, kind: u32, record: &[u8]) -> bool {
        let (Some(switch), Some(m)) = (self.limits.switch, self.member.as_ref()) else {
            return false;
        };
        let boundary_kind = if self.tokens_probed {
            EventKind::Decode
        } else {
            EventKind::GraphCompute
        };
        let boundary = kind == boundary_kind as u32 && word(record, 4) & EVENT_FLAG_EXIT != 0;
        // How far the member is towards its switch: 1.0 = due at the next boundary.
        let progress = match switch {
            SwitchOutput::Size(bytes) => m.writer.len() as f64 / bytes as f64,
            SwitchOutput::Time(t) => m.opened.elapsed().as_secs_f64() / t.as_secs_f64(),
        };
        // A member switched by time never outgrows half of `--max-size` (switched by
        // size, it is cut at twice that size, which `--max-size` holds).
        let too_big = matches!(switch, SwitchOutput::Time(_))
            && self
                .limits
                .max_size
                .is_some_and(|max| m.writer.len().saturating_mul(2) >= max);
        (boundary && progress >= 1.0) || progress >= 2.0 || too_big
    }

    /// Ends the member being written with its footer and starts the next, removing the
    /// oldest members first when the series would outgrow `--max-size`.
    fn switch(&mut self, at_ns: u64, counts: RingCounts) {
        let Some(member) = self.member.take() else {
            return;
        };
        let index = member.index;
        let next = member_path(&self.base, index + 1);
        let reason = format!(
            "continued in {}",
            next.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        );
        let path = member.writer.path().to_path_buf();
        let share = member.share(&counts, false);
        let mut next_baseline = member.baseline.clone();
        next_baseline.add(&share);
        if let Err(e) =
            self.close_member(member, &counts, false, reason, at_ns, ProbeCost::default())
        {
            self.fail_at(path, &e);
            return;
        }
        self.series.push(path);
        if let Some(max) = self.limits.max_size {
            self.series.make_room(max, FOOTER_RESERVE);
        }
        match self.open_member(index + 1, next_baseline, at_ns) {
            Ok(m) => self.member = Some(m),
            Err(e) => self.fail_at(next, &e),
        }
    }

    fn fail_at(&mut self, path: PathBuf, error: &TraceError) {
        if self.stop.is_none() {
            // The innermost cause (`No space left on device`): the path is said beside it.
            let mut cause: &dyn std::error::Error = error;
            while let Some(next) = cause.source() {
                cause = next;
            }
            self.stop = Some(OutputStop::Failed {
                path,
                error: cause.to_string(),
            });
        }
        self.member = None;
    }

    /// Writes the loss records and the footer of `member` and closes it.
    fn close_member(
        &mut self,
        mut member: Member,
        now: &RingCounts,
        last: bool,
        end_reason: String,
        end_ts_ns: u64,
        cost: ProbeCost,
    ) -> Result<(), TraceError> {
        let delta = member.share(now, last);
        let pid = self.header.target.pid;
        // Loss records are cumulative since the recording began (the series read as one
        // sums nothing twice); the footer has this file's share.
        for (cpu, (&lost, &in_file)) in now.lost.iter().zip(&delta.lost).enumerate() {
            if in_file > 0 {
                member.writer.push(&LossEvent {
                    header: collector_header(EventKind::Loss, pid, 0, cpu as u32),
                    lost,
                })?;
                member.collector_events += 1;
                self.collector_events += 1;
            }
        }
        member.writer.finish(&TraceFooter {
            events_produced: delta.produced.iter().sum(),
            events_written: member.written,
            events_lost: delta.lost.iter().sum(),
            produced_per_cpu: delta.produced,
            lost_per_cpu: delta.lost,
            collector_events: member.collector_events,
            end_reason,
            end_ts_ns,
            cost,
            samples_taken: if last { self.samples.0 } else { 0 },
            samples_lost: if last { self.samples.1 } else { 0 },
        })
    }

    /// Writes one record the collector made.
    ///
    /// # Errors
    /// [`RecordError::Write`] when the sink stops here (it stops for good: the collector
    /// ends the recording on [`TraceSink::stopped`]).
    pub fn collector_record<T: WireRecord>(&mut self, record: &T) -> Result<(), RecordError> {
        let bytes = record_bytes(record);
        self.observer.on_record(bytes);
        let Some(member) = self.member.as_mut() else {
            return Ok(());
        };
        if !Self::fits_limits(self.limits, member, bytes.len()) {
            self.stop.get_or_insert(OutputStop::SizeCap {
                max: self.limits.max_size.unwrap_or(0),
            });
            return Ok(());
        }
        if let Err(e) = member.writer.push_raw(bytes) {
            self.fail(&e);
            return Ok(());
        }
        member.collector_events += 1;
        self.collector_events += 1;
        if self.limits.switch.is_some() {
            self.head.observe(word(bytes, 0), bytes);
        }
        Ok(())
    }

    /// The periodic work: writes the pending chunk out (the file is readable up to
    /// here) and cuts a series member that is due while the target is idle (no record
    /// since the last tick).
    pub fn on_tick(&mut self, maps: &ProbeMaps) {
        let idle = self.since_tick == 0;
        self.since_tick = 0;
        let Some(member) = self.member.as_mut() else {
            return;
        };
        if let Err(e) = member.writer.flush_chunk() {
            self.fail(&e);
            return;
        }
        let due = match self.limits.switch {
            Some(SwitchOutput::Time(t)) => member.opened.elapsed() >= t,
            Some(SwitchOutput::Size(b)) => member.writer.len() >= b,
            None => false,
        };
        if idle && due && member.written > 0 {
            self.switch(clocks().0, RingCounts::read(maps));
        }
    }

    /// The observer (live view), for status and replies.
    pub fn observer(&mut self) -> &mut dyn RecordObserver {
        &mut *self.observer
    }

    /// Writes the last member's loss records and footer, and closes it; what the series
    /// holds. A sink that stopped on a write error writes nothing more.
    ///
    /// # Errors
    /// [`RecordError::Write`].
    pub fn finish(
        mut self,
        counts: &RingCounts,
        end_reason: String,
        end_ts_ns: u64,
        cost: ProbeCost,
    ) -> Result<OutputFiles, RecordError> {
        if let Some(member) = self.member.take() {
            let path = member.writer.path().to_path_buf();
            self.close_member(member, counts, true, end_reason, end_ts_ns, cost)
                .map_err(|source| RecordError::Write {
                    path: path.clone(),
                    source,
                })?;
            self.series.push(path);
        } else if let Some(OutputStop::Failed { path, .. }) = &self.stop {
            self.series.push(path.clone());
        }
        Ok(OutputFiles {
            files: self.series.kept.into_iter().map(|k| k.0).collect(),
            removed: self.series.removed,
            stop: self.stop,
            unwritten: self.unwritten,
        })
    }
}

/// The files a recording left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputFiles {
    /// The trace files, in series order (one without `--switch-output`).
    pub files: Vec<PathBuf>,
    /// Oldest members removed to stay within `--max-size`.
    pub removed: u32,
    /// Why writing stopped early, if it did.
    pub stop: Option<OutputStop>,
    /// Probe records drained after it stopped (not written).
    pub unwritten: u64,
}

impl OutputFiles {
    /// One line on what stopped the output, if something did.
    pub fn stop_line(&self) -> Option<String> {
        let last = self.files.len();
        Some(match self.stop.as_ref()? {
            OutputStop::SizeCap { max } => format!(
                "--max-size {} reached: recording stopped, {} records after it not written",
                human_bytes(*max),
                self.unwritten
            ),
            OutputStop::Failed { path, error } => format!(
                "writing {} failed ({error}): recording stopped, target left running; that \
                 file is readable up to its last whole chunk{}",
                path.display(),
                if last > 1 {
                    format!(", the {} files before it complete", last - 1)
                } else {
                    String::new()
                }
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::apportion;

    #[test]
    fn apportion_keeps_the_total_and_the_shape() {
        assert_eq!(apportion(&[100, 300], 40), vec![10, 30]);
        assert_eq!(apportion(&[1, 1, 1], 10).iter().sum::<u64>(), 10);
        assert_eq!(apportion(&[0, 0], 5), vec![5, 0]);
        assert_eq!(apportion(&[], 5), Vec::<u64>::new());
    }
}
