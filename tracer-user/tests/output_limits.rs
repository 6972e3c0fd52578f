//! Root-only end-to-end tests of a recording's output bounds (issue 43):
//! `--switch-output` series (each file readable alone, the series read as one),
//! `--max-size` on one file and on a series, and a disk that fills mid-series.
//! Not root → each test prints a loud banner and returns.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use analyzer::{NoProgress, ingest::load};
use trace_format::{TraceReader, members};

#[macro_use]
mod support;

use support::{
    assert_success, assert_target_completes, become_subreaper, profinfer, record_unchecked,
    trace_path,
};

/// Decode steps of the recordings: ~1.8 MB of records on the tiny model at operator level.
const TOKENS: u32 = 400;

/// `profinfer record -o out flags -- engine run (tiny model, TOKENS tokens, 2 threads)`,
/// without asserting how it ended.
fn record_with(out: &Path, flags: &[&str]) -> Output {
    record_unchecked(out, flags, TOKENS)
}

/// `profinfer record -o out flags -- engine bench` on the tiny model for seconds (20 ×
/// 256 decode steps): a target still running when an output bound stops the recording.
fn record_long(out: &Path, flags: &[&str]) -> Output {
    let (engine, model) = support::engine_and_model();
    let output = profinfer()
        .arg("record")
        .arg("-o")
        .arg(out)
        .args(flags)
        .arg("--")
        .arg(engine)
        .args(["bench", "-m"])
        .arg(model)
        .args(["-p", "16", "-n", "256", "-r", "20", "-t", "2"])
        .stdout(std::process::Stdio::null())
        .output()
        .expect("profinfer runs");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    output
}

/// The series members of `base` on disk, in order.
fn series(base: &Path) -> Vec<(u32, PathBuf)> {
    members(base).expect("folder lists")
}

/// Every member of a finished series: a complete trace with its place in the series, its
/// footer and records that pair up when it is read alone.
fn check_members_alone(files: &[(u32, PathBuf)]) -> (u64, usize) {
    let (mut written, mut tokens) = (0, 0);
    let last = files.len() - 1;
    for (i, (index, path)) in files.iter().enumerate() {
        let r = TraceReader::open(path).expect("member opens alone");
        assert_eq!(r.truncated_at(), None, "{} complete", path.display());
        let place = r
            .header()
            .recording_settings()
            .series
            .expect("series member");
        assert_eq!(place.index, *index);
        if *index > 1 {
            assert!(
                place.head_records > 0,
                "a later member starts with state records"
            );
        }
        let f = r.footer().expect("each member has its footer").clone();
        if i < last {
            assert!(
                f.end_reason.starts_with("continued in "),
                "{}",
                f.end_reason
            );
        }
        assert_eq!(f.events_produced, f.events_written + f.events_lost);
        written += f.events_written;
        let (model, _, info) = load(path, &NoProgress).expect("member analyzes alone");
        assert_eq!(info.read_error, None);
        assert_eq!(
            model.unpaired().total(),
            0,
            "{}: cut between tokens",
            path.display()
        );
        // A member was cut once it reached its size, at a token's end: it holds tokens
        // and their operators (the last one may hold only what followed the last token).
        if i < last {
            assert!(
                !model.tokens().is_empty(),
                "{} holds tokens",
                path.display()
            );
            assert!(!model.slices().is_empty(), "{}: operators", path.display());
        }
        let c = model.counts();
        assert_eq!(
            (c.undescribed_spans, c.ops_outside_graph),
            (0, 0),
            "{}: its head describes every node its spans name",
            path.display()
        );
        tokens += model.tokens().len();
    }
    (written, tokens)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn switch_output_writes_a_series_of_files_that_read_alone_and_as_one() {
    require_root!();
    let single = trace_path("whole");
    assert_success(&record_with(&single, &[]));
    let (whole, _, _) = load(&single, &NoProgress).expect("single file loads");

    let base = trace_path("series");
    // An old file of the name is replaced, as a single recording replaces it.
    std::fs::write(&base, b"old").expect("old file");
    let out = record_with(&base, &["--switch-output", "256K"]);
    assert_success(&out);
    assert!(!base.exists(), "the base name is not a file of the series");
    let files = series(&base);
    assert!(files.len() >= 3, "256K members of ~2.5 MB: {files:?}");
    let numbers: Vec<u32> = files.iter().map(|f| f.0).collect();
    assert_eq!(numbers, (1..=files.len() as u32).collect::<Vec<_>>());
    assert!(
        stderr(&out).contains(&format!("series of {} files", files.len())),
        "the summary names the series"
    );
    let (written, tokens) = check_members_alone(&files);
    assert_eq!(
        tokens,
        whole.tokens().len(),
        "members' tokens add up to the run's"
    );

    // Read as one: the same run as the single file.
    let (model, trace, info) = load(&base, &NoProgress).expect("series loads");
    assert_eq!(info.read_error, None);
    assert_eq!(trace.paths().len(), files.len());
    assert_eq!(model.tokens().len(), whole.tokens().len());
    assert_eq!(model.unpaired().total(), 0, "no pair split at a seam");
    assert_eq!(model.slices().len(), whole.slices().len());
    let f = trace.footer().expect("series footer");
    assert_eq!(f.events_written, written);
    assert_eq!(f.events_lost, 0);
    assert!(f.end_reason.contains("target exited"), "{}", f.end_reason);
    assert!(
        stderr(&out).contains(&format!("{written} written")),
        "the summary's count is the members' sum ({written})"
    );
    // The CLI reads the series by its base name.
    let report = profinfer()
        .arg("report")
        .arg(&base)
        .output()
        .expect("report runs");
    assert_success(&report);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains(&format!("(a series of {} files, read as one)", files.len())),
        "{text}"
    );
    // Exported as one run, once however often it is exported.
    let dataset = tempfile::tempdir().expect("tempdir");
    for _ in 0..2 {
        let export = profinfer()
            .arg("export")
            .arg(&base)
            .arg("--parquet")
            .arg(dataset.path())
            .output()
            .expect("export runs");
        assert_success(&export);
        let line = String::from_utf8_lossy(&export.stderr);
        assert!(
            line.contains(&format!("tokens {}", whole.tokens().len())),
            "the series' tokens: {line}"
        );
    }
    let runs = std::fs::read_dir(dataset.path().join("runs"))
        .expect("runs table")
        .count();
    assert_eq!(runs, 1, "one run for the series, exported twice");
    for (_, p) in files {
        std::fs::remove_file(p).ok();
    }
    std::fs::remove_file(&single).ok();
}

#[test]
fn max_size_stops_one_file_at_its_size_and_leaves_the_target_running() {
    require_root!();
    become_subreaper();
    let out = trace_path("capped");
    let rec = record_long(&out, &["--max-size", "256K"]);
    assert_success(&rec);
    let size = std::fs::metadata(&out).expect("trace").len();
    assert!(size <= 256 << 10, "{size} bytes within --max-size 256K");
    let r = TraceReader::open(&out).expect("capped trace opens");
    assert_eq!(r.truncated_at(), None);
    let f = r
        .footer()
        .expect("a capped file ends with its footer")
        .clone();
    assert!(
        f.end_reason.contains("--max-size 256 KiB reached"),
        "{}",
        f.end_reason
    );
    let lines: Vec<String> = stderr(&rec)
        .lines()
        .filter(|l| l.contains("--max-size"))
        .map(str::to_owned)
        .collect();
    assert!(
        lines.iter().any(|l| l.contains("not written")),
        "one line says what was not written: {lines:?}"
    );
    let (model, _, _) = load(&out, &NoProgress).expect("capped trace loads");
    assert!(model.tokens().len() < 20 * 257, "the cap cut the run");
    assert_target_completes(r.header().target.pid);
    std::fs::remove_file(&out).ok();
}

#[test]
fn a_series_within_max_size_keeps_its_newest_files() {
    require_root!();
    let base = trace_path("flight");
    let rec = record_with(&base, &["--switch-output", "128K", "--max-size", "512K"]);
    assert_success(&rec);
    let files = series(&base);
    let total: u64 = files
        .iter()
        .map(|(_, p)| std::fs::metadata(p).expect("member").len())
        .sum();
    assert!(
        total <= 512 << 10,
        "{total} bytes on disk within --max-size 512K"
    );
    let first = files.first().expect("files kept").0;
    assert!(first > 1, "the oldest members were removed: {files:?}");
    let numbers: Vec<u32> = files.iter().map(|f| f.0).collect();
    assert_eq!(
        numbers,
        (first..first + files.len() as u32).collect::<Vec<_>>(),
        "the newest members, consecutive"
    );
    assert!(
        stderr(&rec).contains(&format!("{} oldest removed", first - 1)),
        "the summary says what was removed"
    );
    check_members_alone(&files);
    let (model, trace, _) = load(&base, &NoProgress).expect("kept series loads");
    assert_eq!(model.unpaired().total(), 0);
    assert!(
        trace
            .footer()
            .expect("footer")
            .end_reason
            .contains("target exited"),
        "the last member has the recording's end"
    );
    for (_, p) in files {
        std::fs::remove_file(p).ok();
    }
}

/// A tmpfs of `bytes` mounted at a new folder, unmounted on drop.
struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    fn mount(bytes: u64) -> SmallDisk {
        let dir = std::env::temp_dir().join(format!("profinfer-full-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(&dir)
            .status()
            .expect("mount runs");
        assert!(status.success(), "mounting a tmpfs needs root");
        SmallDisk { dir }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[test]
fn a_disk_that_fills_mid_series_loses_only_the_file_being_written() {
    require_root!();
    become_subreaper();
    let disk = SmallDisk::mount(1 << 20);
    let base = disk.dir.join("run.pftrace");
    let rec = record_long(&base, &["--switch-output", "256K"]);
    assert_eq!(
        rec.status.code(),
        Some(1),
        "a full disk fails the recording"
    );
    let err = stderr(&rec);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("failed")).collect();
    assert_eq!(lines.len(), 1, "one line says it: {err}");
    assert!(lines[0].contains("No space left on device"), "{}", lines[0]);
    assert!(lines[0].contains("target left running"), "{}", lines[0]);
    let files = series(&base);
    assert!(
        files.len() >= 3,
        "1 MiB holds three 256K members: {files:?}"
    );
    let (last, complete) = files.split_last().expect("members");
    check_members_alone(complete);
    assert!(
        lines[0].contains(&last.1.display().to_string()),
        "names the file"
    );
    // The file being written is readable up to its last whole chunk.
    let cut = TraceReader::open(&last.1).expect("the cut file's header and chunks read");
    assert!(cut.footer().is_none(), "the cut file has no footer");
    let (model, trace, _) = load(&base, &NoProgress).expect("the series loads");
    assert!(model.tokens().len() > 1);
    let end = &trace
        .footer()
        .expect("the complete members' footers")
        .end_reason;
    assert!(end.starts_with("recording cut: the last file"), "{end}");
    let pid = cut.header().target.pid;
    drop(cut);
    assert_target_completes(pid);
    drop(disk);
}
