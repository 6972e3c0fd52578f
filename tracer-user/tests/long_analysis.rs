//! A recording of ≥ 50 M events — a long session's size, written by the analyzer's
//! synthetic generator in seconds — read by `profinfer report` and `profinfer diff`
//! within the memory bound (`docs/performance.md`), with its peak RSS printed. Needs no
//! privileges; needs ~1.7 GB of temporary disk.

mod support;

use analyzer::synthetic::{SynthRecords, SynthSpec, write_trace};
use support::{peak_rss_kib, profinfer};

/// The bound `report` and `diff` keep to, whatever the recording's length.
const BOUND_KIB: u64 = 512 * 1024;

/// Decode calls giving just over 50 M events at 100 nodes × 2 threads, ends probed
/// (208 events per call).
const CALLS: u32 = 240_500;

#[test]
fn fifty_million_events_are_reported_and_diffed_within_512_mib() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("long.pftrace");
    let spec = SynthSpec::sized(CALLS, 100, 2).with_records(SynthRecords::Ends);
    let events = write_trace(&trace, &spec).expect("synthetic trace");
    assert!(events >= 50_000_000, "{events} events");

    let mut report = profinfer();
    report.arg("report").arg(&trace).arg("--json");
    let report_kib = peak_rss_kib(&mut report);
    let out = profinfer()
        .arg("report")
        .arg(&trace)
        .args(["--json", "--by", "node", "-n", "1000"])
        .output()
        .expect("report runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("report json");
    let tokens = &r["summary"]["tokens"];
    assert_eq!(
        tokens["decode"].as_u64(),
        Some(u64::from(CALLS) - 1),
        "{tokens}"
    );
    assert_eq!(tokens["prefill_calls"].as_u64(), Some(1), "{tokens}");
    let top = r["top"].as_array().expect("groups");
    assert_eq!(top.len(), 100, "one group per node");
    for g in top {
        // Every node ran once per call; its durations are too many to keep: sketched.
        assert_eq!(g["count"].as_u64(), Some(u64::from(CALLS)), "{g}");
        assert_eq!(g["tokens"].as_u64(), Some(u64::from(CALLS)), "{g}");
        assert_eq!(g["quantiles_exact"].as_bool(), Some(false), "{g}");
        let (mean, p50) = (
            g["mean_us"].as_f64().unwrap(),
            g["p50_us"].as_f64().unwrap(),
        );
        assert!((p50 - mean).abs() <= 0.011 * mean, "{g}");
    }

    let mut diff = profinfer();
    diff.arg("diff").arg(&trace).arg(&trace).arg("--json");
    let diff_kib = peak_rss_kib(&mut diff);
    println!(
        "{events} events ({:.2} GB): report peaks at {} MiB, diff of two at {} MiB (bound {} MiB)",
        std::fs::metadata(&trace).map_or(0, |m| m.len()) as f64 / 1e9,
        report_kib / 1024,
        diff_kib / 1024,
        BOUND_KIB / 1024
    );
    assert!(report_kib <= BOUND_KIB, "report: {report_kib} KiB");
    assert!(diff_kib <= BOUND_KIB, "diff: {diff_kib} KiB");
}
