//! Property test of issue 25: the engine computes what llama.cpp computes, at every
//! position of a batch, at every batch size.
//!
//! Each case evaluates random tokens from an empty cache with the logits of every
//! position (`engine eval --all-logits`, llama.cpp's `logits_all`) on both sides and
//! requires, at every position, `max |ours − llama.cpp| ≤ 1e-5 · max |llama.cpp|`.
//! The grid: every architecture preset (llama, qwen2, qwen2moe, Mixtral-style llama,
//! gemma2, tied and untied), every weight type (`gen-model --dtype`) and llama-quantize
//! mix (`--ftype`), batches of 1 to 64 tokens and prompts longer than the batch (chunked,
//! down to one token per batch: decode steps), weights repacked (the default on both
//! sides) and not (`engine --no-repack` against llama.cpp with
//! `use_extra_bufts = false`), 1 and 2 threads.
//!
//! The full product is thousands of runs, so the cases are sampled with a fixed seed
//! (`PROFINFER_EXACT_SEED` picks another) under coverage rules that reach every product
//! path of llama.cpp's CPU backend at least once (docs/exactness.md):
//! every (format, batch class) pair, for repackable formats with repacking on and off,
//! over presets taken in turn, and every (preset, format) pair at least once. The batch
//! classes follow where llama.cpp changes path: 1 row (vec_dot, repacked gemv), 2–3
//! (tinyBLAS, gemv), 4–7 (repacked gemm), 8–16 (tiled K-quants, narrow), 17–64 (tiled
//! standard, gemm with a gemv tail), chunked. The test prints the grid it covered.
//!
//! Without the oracle venv it prints a banner and passes, unless
//! `PROFINFER_REQUIRE_ORACLE=1`. Run it alone with
//! `cargo test --release -p engine --test oracle_exact -- --nocapture`.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use common::{engine, floats_of, model_with, oracle, oracle_ready, run_json, token_arg};

/// Allowed difference at one position, relative to the largest llama.cpp logit there.
const REL_TOL: f32 = 1e-5;

/// Seed of the sampled grid unless `PROFINFER_EXACT_SEED` gives one.
const DEFAULT_SEED: u64 = 25;

/// Environment variable choosing another sample of the grid.
const SEED_ENV: &str = "PROFINFER_EXACT_SEED";

/// Token ids are drawn below this (the smallest vocabulary of the tiny presets).
const MIN_VOCAB: u32 = 512;

/// The tiny presets: name, and whether its widths take K-quant super-blocks (256).
const PRESETS: [(&str, bool); 8] = [
    ("tiny-llama", false),
    ("tiny-llama3", false),
    ("tiny-qwen2", false),
    ("tiny-kq", true),
    ("tiny-kq-tied", true),
    ("tiny-moe", true),
    ("tiny-mixtral", true),
    ("tiny-gemma2", true),
];

/// `gen-model --dtype` types with 32-element blocks (or none): every preset.
const BLOCK32_TYPES: [&str; 8] = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"];

/// `gen-model --dtype` K-quant types: the presets with 256-wide rows.
const K_TYPES: [&str; 5] = ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K"];

/// `gen-model --ftype` llama-quantize mixes: every preset (narrow rows fall back).
const MIXES: [&str; 10] = [
    "Q2_K", "Q2_K_S", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K",
];

/// A weight format: one type for every matrix, or a mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Format {
    Dtype(&'static str),
    Mix(&'static str),
}

impl Format {
    fn name(self) -> String {
        match self {
            Format::Dtype(t) => t.to_owned(),
            Format::Mix(m) => format!("mix {m}"),
        }
    }

    /// Whether a repacking choice changes a path on either side (llama.cpp repacks
    /// Q4_0/Q4_K on AVX2, the engine Q4_0/Q8_0/Q4_K; mixes hold Q4_K).
    fn repackable(self) -> bool {
        matches!(
            self,
            Format::Dtype("q4_0" | "q8_0" | "q4_K") | Format::Mix(_)
        )
    }

    /// The presets this format applies to.
    fn presets(self) -> Vec<&'static str> {
        let k = matches!(self, Format::Dtype(t) if K_TYPES.contains(&t));
        PRESETS
            .iter()
            .filter(|(_, wide)| *wide || !k)
            .map(|(p, _)| *p)
            .collect()
    }

    fn all() -> Vec<Format> {
        BLOCK32_TYPES
            .iter()
            .chain(&K_TYPES)
            .map(|t| Format::Dtype(t))
            .chain(MIXES.iter().map(|m| Format::Mix(m)))
            .collect()
    }
}

/// Where llama.cpp's CPU backend changes product path with the rows of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    /// 1 row: vec_dot, repacked gemv.
    One,
    /// 2–3 rows: tinyBLAS (float and legacy types), gemv.
    Few,
    /// 4–7 rows: repacked gemm (with a gemv tail).
    Quad,
    /// 8–16 rows: tiled K-quant product, narrow path; MoE experts reach 8 rows.
    Narrow,
    /// 17–64 rows: tiled standard path, gemm plus gemv tail.
    Wide,
    /// A prompt longer than the batch: several batches, the last one partial (batches
    /// of one token are decode steps).
    Chunked,
}

impl Class {
    const ALL: [Class; 6] = [
        Class::One,
        Class::Few,
        Class::Quad,
        Class::Narrow,
        Class::Wide,
        Class::Chunked,
    ];

    fn label(self) -> &'static str {
        match self {
            Class::One => "1",
            Class::Few => "2-3",
            Class::Quad => "4-7",
            Class::Narrow => "8-16",
            Class::Wide => "17-64",
            Class::Chunked => "chunked",
        }
    }

    /// A prompt length and batch size of this class.
    fn shape(self, rng: &mut ChaCha8Rng) -> (usize, usize) {
        let one = |len: usize| (len, len);
        match self {
            Class::One => one(1),
            Class::Few => one(rng.random_range(2..=3)),
            Class::Quad => one(rng.random_range(4..=7)),
            Class::Narrow => one(rng.random_range(8..=16)),
            Class::Wide => one(rng.random_range(17..=64)),
            Class::Chunked => {
                let batch = rng.random_range(1..=24);
                let len = rng.random_range(batch + 1..=(2 * batch + 16).min(72));
                (len, batch)
            }
        }
    }
}

/// One run of both implementations.
#[derive(Clone, Debug)]
struct Case {
    preset: &'static str,
    format: Format,
    class: Class,
    tokens: Vec<u32>,
    batch: usize,
    repack: bool,
    threads: u32,
}

impl Case {
    fn model(&self) -> PathBuf {
        match self.format {
            Format::Dtype(t) => model_with(self.preset, "--dtype", t),
            Format::Mix(m) => model_with(self.preset, "--ftype", m),
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} {} tokens={} batch={} {} t={}",
            self.preset,
            self.format.name(),
            self.tokens.len(),
            self.batch,
            if self.repack { "repack" } else { "no-repack" },
            self.threads
        )
    }
}

/// The sampled grid: every (format, class[, repack]) once over presets in turn, then
/// every (preset, format) pair not yet used once more with a random class.
fn sample_grid(seed: u64) -> Vec<Case> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut cases = Vec::new();
    let make = |rng: &mut ChaCha8Rng, preset, format, class: Class, repack| {
        let (len, batch) = class.shape(rng);
        Case {
            preset,
            format,
            class,
            tokens: (0..len).map(|_| rng.random_range(0..MIN_VOCAB)).collect(),
            batch,
            repack,
            threads: rng.random_range(1..=2),
        }
    };
    for format in Format::all() {
        let presets = format.presets();
        let mut turn = rng.random_range(0..presets.len());
        let repacks: &[bool] = if format.repackable() {
            &[true, false]
        } else {
            &[true]
        };
        for class in Class::ALL {
            for &repack in repacks {
                let repack = if format.repackable() {
                    repack
                } else {
                    rng.random_bool(0.5)
                };
                cases.push(make(
                    &mut rng,
                    presets[turn % presets.len()],
                    format,
                    class,
                    repack,
                ));
                turn += 1;
            }
        }
        for preset in presets {
            if !cases
                .iter()
                .any(|c| c.preset == preset && c.format == format)
            {
                let class = Class::ALL[rng.random_range(0..Class::ALL.len())];
                let repack = rng.random_bool(0.5);
                cases.push(make(&mut rng, preset, format, class, repack));
            }
        }
    }
    cases
}

/// What the grid covers, as a table: format rows, class columns, `cases (repacked/not)`.
fn grid_table(cases: &[Case]) -> String {
    let mut cells: BTreeMap<(Format, Class), (usize, usize)> = BTreeMap::new();
    for c in cases {
        let cell = cells.entry((c.format, c.class)).or_default();
        if c.repack {
            cell.0 += 1;
        } else {
            cell.1 += 1;
        }
    }
    let mut out = format!("{:<12}", "format");
    for class in Class::ALL {
        let _ = write!(out, " {:>8}", class.label());
    }
    out.push_str("   presets\n");
    for format in Format::all() {
        let _ = write!(out, "{:<12}", format.name());
        for class in Class::ALL {
            let (on, off) = cells.get(&(format, class)).copied().unwrap_or_default();
            let _ = write!(out, " {:>8}", format!("{on}/{off}"));
        }
        let mut presets: Vec<&str> = cases
            .iter()
            .filter(|c| c.format == format)
            .map(|c| c.preset)
            .collect();
        presets.sort_unstable();
        presets.dedup();
        let _ = writeln!(out, "   {}", presets.join(" "));
    }
    let threads = |t| cases.iter().filter(|c| c.threads == t).count();
    let _ = writeln!(
        out,
        "cells: repacked/not-repacked cases; {} cases, {} on 1 thread, {} on 2",
        cases.len(),
        threads(1),
        threads(2)
    );
    out
}

/// llama.cpp's logits of every case, from one oracle process: `[len][n_vocab]` each,
/// with the vocabulary size the oracle reported; a file that is not exactly `rows ×
/// n_vocab` floats fails here (a short last row would otherwise pass as a row).
fn oracle_logits(cases: &[Case], dir: &Path) -> Vec<(usize, Vec<Vec<f32>>)> {
    let jobs: Vec<serde_json::Value> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            serde_json::json!({
                "model": c.model(),
                "tokens": c.tokens,
                "threads": c.threads,
                "batch": c.batch,
                "repack": c.repack,
                "out": dir.join(format!("case{i}.f32")),
            })
        })
        .collect();
    let jobs_path = dir.join("jobs.json");
    std::fs::write(
        &jobs_path,
        serde_json::to_vec(&jobs).expect("jobs serialize"),
    )
    .expect("write the oracle's jobs");
    let done = run_json(oracle("logits-all").arg("--jobs-json").arg(&jobs_path));
    let done = done["jobs"].as_array().expect("oracle jobs array").clone();
    assert_eq!(done.len(), cases.len(), "the oracle ran every job");
    done.iter()
        .zip(cases)
        .map(|(job, c)| {
            let n_vocab = job["n_vocab"].as_u64().expect("n_vocab") as usize;
            assert!(
                n_vocab > 0,
                "{}: llama.cpp's vocabulary is empty",
                c.describe()
            );
            let bytes = std::fs::read(job["out"].as_str().expect("out path"))
                .expect("read the oracle's logits");
            assert_eq!(
                bytes.len(),
                c.tokens.len() * n_vocab * 4,
                "{}: llama.cpp's logits file holds {} bytes, not {} rows of {n_vocab} f32",
                c.describe(),
                bytes.len(),
                c.tokens.len()
            );
            let floats: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            (
                n_vocab,
                floats.chunks(n_vocab).map(<[f32]>::to_vec).collect(),
            )
        })
        .collect()
}

/// The engine's logits of every position of one case.
fn engine_logits(c: &Case) -> Vec<Vec<f32>> {
    let mut cmd = engine("eval");
    cmd.arg("-m").arg(c.model()).args([
        "--tokens",
        &token_arg(&c.tokens),
        "-t",
        &c.threads.to_string(),
        "-b",
        &c.batch.to_string(),
        "--json",
        "--all-logits",
    ]);
    if !c.repack {
        cmd.arg("--no-repack");
    }
    let out = run_json(&mut cmd);
    out["logits_all"]
        .as_array()
        .expect("logits_all array")
        .iter()
        .map(|row| floats_of(row, "engine logits"))
        .collect()
}

/// How one case's rows compare: the worst position's relative difference, or why the
/// rows cannot be compared at all.
#[derive(Debug, PartialEq)]
enum RowsCompared {
    /// (position, max |Δ| / max |llama.cpp|) of the worst position.
    Worst(usize, f32),
    /// A row count, a row length or a non-finite value that makes the case fail whatever
    /// the tolerance.
    Broken(String),
}

/// Compares every position: both sides must have `rows` rows of exactly `n_vocab`
/// finite values (a row is never zipped short, and a NaN or infinity on either side is
/// named, since a NaN difference never compares greater than the worst so far).
fn compare_rows(
    ours: &[Vec<f32>],
    theirs: &[Vec<f32>],
    rows: usize,
    n_vocab: usize,
) -> RowsCompared {
    for (side, m) in [("engine", ours), ("llama.cpp", theirs)] {
        if m.len() != rows {
            return RowsCompared::Broken(format!("{side}: {} rows, not {rows}", m.len()));
        }
        for (pos, row) in m.iter().enumerate() {
            if row.len() != n_vocab {
                return RowsCompared::Broken(format!(
                    "{side}: position {pos} has {} logits, not the vocabulary's {n_vocab}",
                    row.len()
                ));
            }
            if let Some(i) = row.iter().position(|x| !x.is_finite()) {
                return RowsCompared::Broken(format!(
                    "{side}: position {pos}, token {i}: non-finite logit {}",
                    row[i]
                ));
            }
        }
    }
    let mut worst = (0, 0f32);
    for (pos, (a, b)) in ours.iter().zip(theirs).enumerate() {
        let scale = b
            .iter()
            .fold(0f32, |m, x| m.max(x.abs()))
            .max(f32::MIN_POSITIVE);
        let diff = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        let rel = diff / scale;
        if rel > worst.1 {
            worst = (pos, rel);
        }
    }
    RowsCompared::Worst(worst.0, worst.1)
}

#[test]
fn broken_rows_are_named_not_compared() {
    let row = |v: &[f32]| v.to_vec();
    let good = vec![row(&[1.0, 2.0, 3.0]), row(&[0.5, 0.0, -1.0])];
    assert_eq!(
        compare_rows(&good, &good, 2, 3),
        RowsCompared::Worst(0, 0.0)
    );
    let near = vec![row(&[1.0, 2.0, 3.0]), row(&[0.5, 0.0, -1.1])];
    assert!(
        matches!(compare_rows(&near, &good, 2, 3), RowsCompared::Worst(1, r) if (r - 0.1).abs() < 1e-6)
    );
    // Short or empty engine rows, a missing row, and non-finite values on either side.
    let short = vec![row(&[1.0, 2.0]), row(&[0.5, 0.0, -1.0])];
    let empty = vec![row(&[]), row(&[])];
    let inf = vec![row(&[1.0, f32::INFINITY, 3.0]), row(&[0.5, 0.0, -1.0])];
    let nan = vec![row(&[1.0, 2.0, 3.0]), row(&[0.5, f32::NAN, -1.0])];
    for (ours, theirs, what) in [
        (&short, &good, "engine: position 0 has 2 logits"),
        (&empty, &good, "engine: position 0 has 0 logits"),
        (&good[..1].to_vec(), &good, "engine: 1 rows"),
        (&good, &inf, "llama.cpp: position 0, token 1: non-finite"),
        (&nan, &good, "engine: position 1, token 1: non-finite"),
    ] {
        match compare_rows(ours, theirs, 2, 3) {
            RowsCompared::Broken(why) => assert!(why.starts_with(what), "{why}"),
            w => panic!("{what}: compared as {w:?}"),
        }
    }
}

#[test]
fn logits_at_every_position_match_llama_cpp_over_the_sampled_grid() {
    let seed = std::env::var(SEED_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    let cases = sample_grid(seed);
    eprintln!(
        "oracle_exact: {} cases (seed {seed}, {SEED_ENV} for another sample):\n{}",
        cases.len(),
        grid_table(&cases)
    );
    if !oracle_ready() {
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("oracle-exact");
    std::fs::create_dir_all(&dir).expect("create the oracle_exact directory");
    for c in &cases {
        c.model();
    }
    let theirs = oracle_logits(&cases, &dir);
    let mut failures = Vec::new();
    let mut worst_by_cell: BTreeMap<(Format, Class), f32> = BTreeMap::new();
    for (c, (n_vocab, theirs)) in cases.iter().zip(&theirs) {
        let ours = engine_logits(c);
        match compare_rows(&ours, theirs, c.tokens.len(), *n_vocab) {
            RowsCompared::Broken(why) => failures.push(format!("{}: {why}", c.describe())),
            RowsCompared::Worst(pos, rel) => {
                let cell = worst_by_cell.entry((c.format, c.class)).or_default();
                *cell = cell.max(rel);
                if rel > REL_TOL {
                    failures.push(format!(
                        "{}: position {pos}: max |Δ| / max |logit| = {rel:.3e}",
                        c.describe()
                    ));
                }
            }
        }
    }
    let mut summary = String::from("worst relative difference per format and batch class:\n");
    for format in Format::all() {
        let _ = write!(summary, "{:<12}", format.name());
        for class in Class::ALL {
            let w = worst_by_cell.get(&(format, class)).copied().unwrap_or(0.0);
            let _ = write!(summary, " {w:>9.1e}");
        }
        summary.push('\n');
    }
    eprintln!("{summary}");
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from llama.cpp by more than {REL_TOL:e} relative:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
