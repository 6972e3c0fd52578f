//! llama.cpp's operators as traced, against llama.cpp's own measurement of the same op:
//! `test-export-graph-ops` writes SmolLM2's graph ops (type, shape, op params, sources,
//! the first node's name), `test-backend-ops perf --test-file` times each alone on the
//! CPU backend, and `profinfer record` traces unmodified `llama-bench` running the same
//! model with the same thread count: a prefill as long as the exported context (its
//! attention spans the same cells as the export's prompt graph) and a decode. No ground truth exists inside llama.cpp, so this is
//! a comparison of two measurements in different cache states, not accuracy.

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, Result};

use super::recordings::Recorder;
use crate::process;

/// The run's label in the run tables.
pub const LABEL: &str = "llama-ops/smollm2";

/// Where `test-backend-ops perf`'s results go, under the runs directory: its `--output
/// sql` statements (CREATE TABLE `test_backend_ops` and one INSERT per op), which the
/// evaluation's DuckDB loads before its queries.
pub const PERF_SQL: &str = "llama_ops/test_backend_ops.sql";

/// Context of the exported graphs (their attention ops span this many KV cells), and
/// the traced prefill's length (one batch of it fills the same cells).
pub const CONTEXT: u32 = 512;

/// The commands that made the comparison, for the document.
#[derive(Clone, Debug, Default)]
pub struct LlamaOps {
    /// The export of the model's graph ops.
    pub export: String,
    /// llama.cpp's own benchmark of them.
    pub perf: String,
    /// The traced llama-bench run.
    pub record: String,
    /// Threads of both.
    pub threads: usize,
}

/// Threads `test-backend-ops` gives the CPU backend: half the hardware threads, at least
/// one (its `N_THREADS / 2`).
fn perf_threads() -> usize {
    (process::available_cores() / 2).max(1)
}

/// Runs the comparison's three programs; `tests` holds llama.cpp's test programs.
pub fn run(
    recorder: &Recorder<'_>,
    tests: &Path,
    llama_bench: &Path,
    model: &Path,
    tokens: u32,
) -> Result<LlamaOps> {
    let threads = perf_threads();
    let ops = recorder.scratch.join("smollm2-graph-ops.txt");
    process::run(
        Command::new(tests.join("test-export-graph-ops"))
            .arg("-m")
            .arg(model)
            .args(["-c", &CONTEXT.to_string()])
            .arg("-o")
            .arg(&ops),
    )?;
    let printed = process::stdout(
        Command::new(tests.join("test-backend-ops"))
            .args(["perf", "-b", "CPU", "--output", "sql", "--test-file"])
            .arg(&ops),
    )?;
    let out = recorder.runs.join(PERF_SQL);
    crate::paths::create_dir(out.parent().context("the results' directory")?)?;
    std::fs::write(&out, sql_statements(&printed))
        .with_context(|| format!("writing {}", out.display()))?;
    // A prefill of the export's context (one ubatch into an empty cache: the export's
    // prompt graph, attention over the same cells) and the decode test.
    let args = crate::bench::overhead::llama_bench_args(
        &model.display().to_string(),
        threads,
        CONTEXT,
        tokens,
    );
    recorder.record_program(LABEL, &[], llama_bench, &args)?;
    let file = model.file_name().map_or_else(
        || model.display().to_string(),
        |f| f.to_string_lossy().into_owned(),
    );
    Ok(LlamaOps {
        export: format!("test-export-graph-ops -m {file} -c {CONTEXT} -o OPS.txt"),
        perf: "test-backend-ops perf -b CPU --output sql --test-file OPS.txt".into(),
        record: format!(
            "profinfer record -o T.pftrace -- llama-bench -m {file} -t {threads} -p {CONTEXT} \
             -n {tokens} -r 1 -o json && profinfer export T.pftrace --parquet RUNS --label {LABEL}"
        ),
        threads,
    })
}

/// The SQL statements of `test-backend-ops --output sql`'s standard output (the CREATE
/// TABLE, through its closing `);`, and every INSERT), without the progress lines it
/// prints between them.
fn sql_statements(printed: &str) -> String {
    let mut out = String::new();
    let mut in_create = false;
    for line in printed.lines() {
        if line.starts_with("CREATE TABLE") {
            in_create = true;
        }
        if in_create || line.starts_with("INSERT INTO") {
            out.push_str(line);
            out.push('\n');
        }
        if in_create && line.trim_end().ends_with(");") {
            in_create = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_statements_are_kept() {
        let printed = "Testing 1 devices\n\nCREATE TABLE IF NOT EXISTS t (\n  a TEXT,\n  b REAL\n);\n\n\
                       Backend 1/1: CPU\nINSERT INTO t (a, b) VALUES ('x', '1.5');\n  1/1 backends passed\n";
        assert_eq!(
            sql_statements(printed),
            "CREATE TABLE IF NOT EXISTS t (\n  a TEXT,\n  b REAL\n);\nINSERT INTO t (a, b) VALUES ('x', '1.5');\n"
        );
    }
}
