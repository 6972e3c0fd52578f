//! The files one trace path stands for: the file itself, or the numbered series a
//! recording with `--switch-output` wrote (`trace_format::trace_files`), opened together,
//! with what their headers and footers say as one recording.

use std::path::{Path, PathBuf};

use trace_format::{TraceFooter, TraceHeader, TraceReader};

use crate::AnalyzeError;

/// The open files of one trace, in series order.
#[derive(Debug)]
pub struct TraceFiles {
    readers: Vec<TraceReader>,
    paths: Vec<PathBuf>,
    footer: Option<TraceFooter>,
}

impl TraceFiles {
    /// Opens `path`, or the members of the series a recording to `path` wrote.
    ///
    /// # Errors
    /// [`AnalyzeError::Trace`] when a file cannot be opened or is not a valid trace (for
    /// a path that is neither a file nor a series, the error of opening it).
    pub fn open(path: &Path) -> Result<TraceFiles, AnalyzeError> {
        let mut paths = trace_format::trace_files(path);
        if paths.is_empty() {
            paths.push(path.to_path_buf());
        }
        let readers = paths
            .iter()
            .map(|p| {
                TraceReader::open(p).map_err(|source| AnalyzeError::Trace {
                    path: p.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let footer = combined_footer(&readers, &paths);
        Ok(TraceFiles {
            readers,
            paths,
            footer,
        })
    }

    /// The readers, in series order.
    pub fn readers(&self) -> &[TraceReader] {
        &self.readers
    }

    /// The files, in series order.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// The header of the first file (every member of a series has the recording's
    /// header; only its place in the series differs).
    pub fn header(&self) -> &TraceHeader {
        self.readers[0].header()
    }

    /// The recording's footer: the file's, or for a series the members' totals with the
    /// last member's end (`None` when no file has one).
    pub fn footer(&self) -> Option<&TraceFooter> {
        self.footer.as_ref()
    }

    /// State records at the start of file `i` that repeat earlier files' (skipped when
    /// the series is read as one; the first file read keeps them).
    pub fn head_records(&self, i: usize) -> u64 {
        if i == 0 {
            return 0;
        }
        self.readers[i]
            .header()
            .recording_settings()
            .series
            .map_or(0, |m| m.head_records)
    }
}

/// Adds `b` to `a` element by element.
fn add_per_cpu(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// One footer for the files: the one file's, or the series' totals ending as its last
/// member ends (said so when the last member has no footer: the recording was cut).
fn combined_footer(readers: &[TraceReader], paths: &[PathBuf]) -> Option<TraceFooter> {
    if readers.len() == 1 {
        return readers[0].footer().cloned();
    }
    let mut total: Option<TraceFooter> = None;
    for f in readers.iter().filter_map(TraceReader::footer) {
        let t = total.get_or_insert_with(TraceFooter::default);
        t.events_produced += f.events_produced;
        t.events_written += f.events_written;
        t.events_lost += f.events_lost;
        t.collector_events += f.collector_events;
        add_per_cpu(&mut t.produced_per_cpu, &f.produced_per_cpu);
        add_per_cpu(&mut t.lost_per_cpu, &f.lost_per_cpu);
    }
    let t = total.as_mut()?;
    match readers.last().and_then(TraceReader::footer) {
        Some(last) => {
            t.end_reason = last.end_reason.clone();
            t.end_ts_ns = last.end_ts_ns;
            t.cost = last.cost.clone();
        }
        None => {
            let name = paths
                .last()
                .map_or_else(String::new, |p| p.display().to_string());
            t.end_reason = format!("recording cut: the last file, {name}, has no footer");
        }
    }
    Some(total.expect("set above"))
}

#[cfg(test)]
mod tests {
    use common::event::{EVENT_FLAG_EXIT, EventKind};
    use trace_format::{SeriesMember, TraceWriter, member_path};

    use crate::{
        ingest::{NoProgress, load},
        synthetic::{SYNTH_CHUNK_BYTES, SynthSpec, generate, synth_header, write_trace},
    };

    /// Writes `spec`'s records as a series of `base` cut after every `every`-th decode
    /// exit (each member with its footer unless it is the last and `cut` is set).
    fn write_series(base: &std::path::Path, spec: &SynthSpec, every: usize, cut: bool) -> usize {
        let mut members: Vec<Vec<Vec<u8>>> = vec![Vec::new()];
        let mut exits = 0;
        generate(spec, |rec| {
            members.last_mut().expect("one").push(rec.to_vec());
            let kind = u32::from_le_bytes(rec[..4].try_into().expect("kind"));
            let flags = u32::from_le_bytes(rec[4..8].try_into().expect("flags"));
            if kind == EventKind::Decode as u32 && flags & EVENT_FLAG_EXIT != 0 {
                exits += 1;
                if exits % every == 0 {
                    members.push(Vec::new());
                }
            }
        });
        members.retain(|m| !m.is_empty());
        let n = members.len();
        for (i, records) in members.iter().enumerate() {
            let mut header = synth_header();
            let mut settings = header.recording_settings();
            settings.series = Some(SeriesMember {
                index: i as u32 + 1,
                head_records: 0,
            });
            header.set_recording_settings(&settings);
            let path = member_path(base, i as u32 + 1);
            let mut w = TraceWriter::create(&path, &header).expect("create");
            w.set_chunk_bytes(SYNTH_CHUNK_BYTES);
            for r in records {
                w.push_raw(r).expect("push");
            }
            if cut && i + 1 == n {
                w.flush_chunk().expect("flush");
                drop(w);
                continue;
            }
            let count = w.records();
            w.finish(&trace_format::TraceFooter {
                events_produced: count + 1,
                events_written: count,
                events_lost: 1,
                lost_per_cpu: vec![0, 1],
                end_reason: format!("member {}", i + 1),
                ..Default::default()
            })
            .expect("finish");
        }
        n
    }

    #[test]
    fn a_series_reads_as_the_one_file_it_was_cut_from() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spec = SynthSpec::sized(9, 40, 2);
        let whole = dir.path().join("whole.pftrace");
        write_trace(&whole, &spec).expect("write");
        let base = dir.path().join("run.pftrace");
        let n = write_series(&base, &spec, 3, false);
        // Cut after tokens 3, 6 and 9: the last member holds the last token's sampling.
        assert_eq!(n, 4, "9 tokens cut every 3");
        let (one, _, _) = load(&whole, &NoProgress).expect("whole loads");
        let (series, files, info) = load(&base, &NoProgress).expect("series loads");
        assert_eq!(files.paths().len(), 4);
        assert_eq!(info.read_error, None);
        assert_eq!(series.tokens().len(), one.tokens().len());
        assert_eq!(series.tokens().len(), 9);
        assert_eq!(series.counts(), one.counts());
        let footer = files.footer().expect("combined footer");
        assert_eq!(footer.events_written, spec.event_count());
        assert_eq!(footer.events_lost, 4, "one per member");
        assert_eq!(footer.lost_per_cpu, vec![0, 4]);
        assert_eq!(footer.end_reason, "member 4", "the last member's end");
    }

    #[test]
    fn a_series_whose_last_file_was_cut_says_so_and_keeps_what_it_holds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spec = SynthSpec::sized(9, 40, 2);
        let base = dir.path().join("run.pftrace");
        write_series(&base, &spec, 3, true);
        let (series, files, _) = load(&base, &NoProgress).expect("series loads");
        let footer = files.footer().expect("earlier members' footers");
        assert!(
            footer
                .end_reason
                .starts_with("recording cut: the last file"),
            "{}",
            footer.end_reason
        );
        assert!(
            footer.end_reason.contains("run.004.pftrace"),
            "{}",
            footer.end_reason
        );
        assert_eq!(
            series.tokens().len(),
            9,
            "the cut file's whole chunks are read"
        );
    }
}
