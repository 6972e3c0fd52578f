//! End to end: synthetic traces written, exported, and read back as Parquet.

use std::fs::File;
use std::path::Path;

use analyzer::synthetic::{SynthSpec, write_trace};
use arrow_array::{Array, StringArray, UInt32Array};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Every batch of one Parquet file.
fn read(path: &Path) -> Vec<arrow_array::RecordBatch> {
    ParquetRecordBatchReaderBuilder::try_new(File::open(path).expect("file"))
        .expect("parquet")
        .build()
        .expect("reader")
        .map(|b| b.expect("batch"))
        .collect()
}

/// A synthetic trace whose header names another target pid.
fn write_with_pid(path: &Path, spec: &SynthSpec, pid: u32) {
    let mut header = analyzer::synthetic::synth_header();
    header.target.pid = pid;
    let mut w = trace_format::TraceWriter::create(path, &header).unwrap();
    analyzer::synthetic::generate(spec, |rec| w.push_raw(rec).unwrap());
    let n = w.records();
    w.finish(&trace_format::TraceFooter {
        events_produced: n,
        events_written: n,
        ..trace_format::TraceFooter::default()
    })
    .unwrap();
}

fn rows(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .expect("table dir")
        .map(|e| {
            read(&e.expect("entry").path())
                .iter()
                .map(|b| b.num_rows())
                .sum::<usize>()
        })
        .sum()
}

#[test]
fn a_trace_becomes_one_file_per_table_keyed_by_run() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("a.pftrace");
    // 5 calls, 4 nodes per graph, 2 threads.
    write_trace(&trace, &SynthSpec::sized(5, 4, 2)).unwrap();
    let out = dir.path().join("runs");
    let run = run_tables::export_quietly(&trace, &out, "lab/synthetic").unwrap();
    let count = |t: &str| run.rows.iter().find(|(n, _)| *n == t).unwrap().1;
    assert_eq!(count("runs"), 1);
    assert_eq!(count("tokens"), 5);
    assert_eq!(count("graphs"), 5);
    assert_eq!(
        count("operators"),
        5 * 4 * 2,
        "one row per node, thread and graph"
    );
    assert_eq!(count("experts"), 0, "a dense model routes no experts");
    for table in run_tables::TABLES {
        let file = out.join(table).join(format!("{}.parquet", run.run_id));
        for b in read(&file) {
            let ids = b
                .column_by_name("run_id")
                .unwrap()
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            assert!(
                ids.iter().all(|v| v == Some(run.run_id.as_str())),
                "{table}"
            );
        }
    }
    let runs = read(&out.join("runs").join(format!("{}.parquet", run.run_id)));
    let label = runs[0]
        .column_by_name("label")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap()
        .value(0)
        .to_owned();
    assert_eq!(label, "lab/synthetic");
    // The operators carry the node index and thread of each span.
    let ops = read(
        &out.join("operators")
            .join(format!("{}.parquet", run.run_id)),
    );
    let tids = ops[0]
        .column_by_name("tid")
        .unwrap()
        .as_any()
        .downcast_ref::<UInt32Array>()
        .unwrap();
    let mut distinct: Vec<u32> = tids.values().to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 2, "both threads");
    assert_eq!(tids.null_count(), 0);
}

#[test]
fn exports_append_and_a_second_export_of_a_trace_rewrites_its_own_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let a = dir.path().join("a.pftrace");
    write_trace(&a, &SynthSpec::sized(3, 2, 1)).unwrap();
    let first = run_tables::export_quietly(&a, &out, "a").unwrap();
    let again = run_tables::export_quietly(&a, &out, "a").unwrap();
    assert_eq!(
        first.run_id, again.run_id,
        "the key is the trace's, not the export's"
    );
    assert_eq!(rows(&out.join("tokens")), 3, "rewritten, not doubled");
    // Another recording (another target pid in its header) adds its own files.
    let b = dir.path().join("b.pftrace");
    write_with_pid(&b, &SynthSpec::sized(4, 2, 1), 4242);
    let other = run_tables::export_quietly(&b, &out, "b").unwrap();
    assert_ne!(other.run_id, first.run_id);
    assert_eq!(rows(&out.join("tokens")), 3 + 4);
    assert_eq!(rows(&out.join("runs")), 2);
}

#[test]
fn a_file_that_is_not_a_trace_is_one_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.pftrace");
    std::fs::write(&bad, b"not a trace").unwrap();
    let e = run_tables::export_quietly(&bad, &dir.path().join("runs"), "").unwrap_err();
    assert!(e.to_string().contains("bad.pftrace"), "{e}");
    assert!(!dir.path().join("runs").exists(), "nothing written");
}
