//! Shared helpers of the engine's integration tests: running the `engine` binary and the
//! llama.cpp oracle (`scripts/oracle/llama_oracle.py` in the project venv), and generating
//! the tiny test models once per test run.
// Each test binary uses a different subset of these helpers.
#![allow(
    dead_code,
    reason = "shared by several test binaries, each using a subset"
)]

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

pub mod compare;

/// Environment variable that turns a missing oracle into a test failure (set by
/// `cargo xtask test`).
pub const REQUIRE_ORACLE_ENV: &str = "PROFINFER_REQUIRE_ORACLE";

/// The repository root.
pub fn repo_root() -> PathBuf {
    let engine_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    engine_dir
        .parent()
        .expect("the engine crate lives in the repository root")
        .to_path_buf()
}

/// The `engine` binary built for this test run.
pub fn engine_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_engine"))
}

/// The project venv's Python interpreter.
pub fn oracle_python() -> PathBuf {
    repo_root().join(".venv/bin/python")
}

/// The oracle script.
pub fn oracle_script() -> PathBuf {
    repo_root().join("scripts/oracle/llama_oracle.py")
}

/// Why the oracle cannot run, or `None` if it can.
fn oracle_problem() -> Option<String> {
    let python = oracle_python();
    if !python.exists() {
        return Some(format!("{} does not exist", python.display()));
    }
    if !oracle_script().exists() {
        return Some(format!("{} does not exist", oracle_script().display()));
    }
    match Command::new(&python)
        .args(["-c", "import llama_cpp, gguf"])
        .output()
    {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "`{} -c 'import llama_cpp, gguf'` failed: {}",
            python.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("cannot run {}: {e}", python.display())),
    }
}

/// Whether the oracle tests should run. Without the oracle this prints a loud banner and
/// returns `false`, unless [`REQUIRE_ORACLE_ENV`]`=1`, in which case it panics.
pub fn oracle_ready() -> bool {
    static PROBLEM: OnceLock<Option<String>> = OnceLock::new();
    static BANNER: OnceLock<()> = OnceLock::new();
    let Some(problem) = PROBLEM.get_or_init(oracle_problem) else {
        return true;
    };
    if std::env::var(REQUIRE_ORACLE_ENV).is_ok_and(|v| v == "1") {
        panic!(
            "the llama.cpp oracle is required ({REQUIRE_ORACLE_ENV}=1) but unavailable: {problem}\n\
             run `cargo xtask setup --oracle`"
        );
    }
    BANNER.get_or_init(|| {
        // Written to the stderr handle directly: the test harness captures `eprintln!`
        // of passing tests, and this message must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "\n{bar}\n!! SKIPPING llama.cpp ORACLE TESTS: {problem}\n\
             !! run `cargo xtask setup --oracle` (or `cargo xtask test`) to enable them\n{bar}\n",
            bar = "!".repeat(78)
        );
    });
    false
}

/// Renders a command for messages.
pub fn display(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        s.push(' ');
        let a = arg.to_string_lossy();
        if a.contains(|c: char| c.is_whitespace() || c == '\'') || a.is_empty() {
            s.push_str(&format!("{a:?}"));
        } else {
            s.push_str(&a);
        }
    }
    s
}

/// Runs `cmd` and parses its stdout as JSON; panics with the command and its stderr on
/// any failure.
pub fn run_json(cmd: &mut Command) -> Value {
    let shown = display(cmd);
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{shown}`: {e}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "`{shown}` failed with {}:\n{stderr}",
        output.status
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("`{shown}` printed invalid JSON ({e}):\n{stdout}\n{stderr}"))
}

/// A command running the oracle's `subcommand`.
pub fn oracle(subcommand: &str) -> Command {
    let mut cmd = Command::new(oracle_python());
    cmd.arg(oracle_script()).arg(subcommand);
    cmd
}

/// A command running the engine binary's `subcommand`. With `PROFINFER_ENGINE_RUNNER`
/// set (e.g. `qemu-aarch64-static -cpu max`, when the tests themselves run under user-mode
/// emulation and the kernel has no binfmt handler for the target), the binary is started
/// through that runner.
pub fn engine(subcommand: &str) -> Command {
    let runner = std::env::var("PROFINFER_ENGINE_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    let mut cmd = match words.next() {
        Some(program) => {
            let mut cmd = Command::new(program);
            cmd.args(words).arg(engine_bin());
            cmd
        }
        None => Command::new(engine_bin()),
    };
    cmd.arg(subcommand);
    cmd
}

/// Seed of every generated test model.
pub const MODEL_SEED: u64 = 42;

/// Path of a generated test model; generated with `engine gen-model` on first use in this
/// test run (each run regenerates, so models never go stale when the engine changes).
pub fn model(preset: &str, dtype: &str) -> PathBuf {
    model_with(preset, "--dtype", dtype)
}

/// [`model`] with the weight format given as `flag value` (`--dtype q4_K`, `--ftype
/// Q4_K_M`).
pub fn model_with(preset: &str, flag: &str, value: &str) -> PathBuf {
    static MODELS: ModelFiles = OnceLock::new();
    let key = if flag == "--dtype" {
        format!("{preset}-{value}")
    } else {
        format!("{preset}-{}{value}", flag.trim_start_matches('-'))
    };
    made_once(&MODELS, &key, || {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("oracle-models");
        std::fs::create_dir_all(&dir).expect("create the test model directory");
        let path = dir.join(format!("{key}-seed{MODEL_SEED}.gguf"));
        let partial = dir.join(format!(
            "{key}-seed{MODEL_SEED}.gguf.{}.partial",
            std::process::id()
        ));
        let mut cmd = engine("gen-model");
        cmd.args([
            "--preset",
            preset,
            flag,
            value,
            "--seed",
            &MODEL_SEED.to_string(),
            "-o",
        ])
        .arg(&partial);
        let shown = display(&cmd);
        let output = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run `{shown}`: {e}"));
        assert!(
            output.status.success(),
            "`{shown}` failed with {}:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::rename(&partial, &path).expect("move the generated model into place");
        path
    })
}

/// Model files made in this test run, by key: each made once, while other keys are made
/// in parallel.
type ModelFiles = OnceLock<Mutex<HashMap<String, Arc<OnceLock<PathBuf>>>>>;

/// The file of `key` in `files`, made by `make` on first use.
fn made_once(files: &'static ModelFiles, key: &str, make: impl FnOnce() -> PathBuf) -> PathBuf {
    let slot = {
        let mut map = files
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(map.entry(key.to_owned()).or_default())
    };
    slot.get_or_init(make).clone()
}

/// Path of `preset`'s gen-model f32 file ([`model`]) quantized by llama.cpp's own quantizer
/// (the oracle's `quantize`, i.e. `llama_model_quantize`) with the `llama-quantize` preset
/// `ftype` (`Q4_1`, `Q5_K_M`, `BF16`, ...); made once per test run. llama.cpp picks other
/// types for some tensors (e.g. Q8_0 for a token embedding or an output matrix whose rows
/// do not fit its preferred type), so these files are mixes, as downloaded files are.
pub fn llama_quantized_model(preset: &str, ftype: &str) -> PathBuf {
    static MODELS: ModelFiles = OnceLock::new();
    let key = format!("{preset}-llama-{ftype}");
    made_once(&MODELS, &key, || {
        let source = model(preset, "f32");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("oracle-models");
        let path = dir.join(format!("{key}-seed{MODEL_SEED}.gguf"));
        let partial = dir.join(format!(
            "{key}-seed{MODEL_SEED}.{}.partial.gguf",
            std::process::id()
        ));
        run_json(
            oracle("quantize")
                .arg("--model")
                .arg(&source)
                .arg("--out")
                .arg(&partial)
                .args(["--ftype", ftype]),
        );
        std::fs::rename(&partial, &path).expect("move the quantized model into place");
        path
    })
}

/// Formats token ids as the `--tokens` argument (`1,2,3`).
pub fn token_arg(tokens: &[u32]) -> String {
    tokens
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A JSON array of non-negative integers as token ids.
pub fn tokens_of(value: &Value, what: &str) -> Vec<u32> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("{what} is not an array: {value}"))
        .iter()
        .map(|v| {
            v.as_u64()
                .and_then(|t| u32::try_from(t).ok())
                .unwrap_or_else(|| panic!("{what} holds a non-token value {v}"))
        })
        .collect()
}

/// A JSON array of numbers as `f32`.
pub fn floats_of(value: &Value, what: &str) -> Vec<f32> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("{what} is not an array: {value}"))
        .iter()
        .map(|v| {
            v.as_f64()
                .unwrap_or_else(|| panic!("{what} holds a non-number {v}")) as f32
        })
        .collect()
}

/// Environment variable naming the real-model fixture, SmolLM2-135M-Instruct Q4_1
/// (`cargo xtask test` fetches it into the model cache and sets the variable).
pub const SMOLLM2_ENV: &str = "PROFINFER_SMOLLM2";

/// The SmolLM2 file, or `None` after a loud banner when [`SMOLLM2_ENV`] is unset; with
/// [`REQUIRE_ORACLE_ENV`]`=1` a missing fixture is a failure, not a skip.
pub fn smollm2() -> Option<PathBuf> {
    static BANNER: OnceLock<()> = OnceLock::new();
    if let Some(path) = std::env::var_os(SMOLLM2_ENV).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "{SMOLLM2_ENV}={} is not a file",
            path.display()
        );
        return Some(path);
    }
    if std::env::var(REQUIRE_ORACLE_ENV).is_ok_and(|v| v == "1") {
        panic!(
            "{SMOLLM2_ENV} is unset but {REQUIRE_ORACLE_ENV}=1: run `cargo xtask test`, \
             which fetches SmolLM2 and sets it"
        );
    }
    BANNER.get_or_init(|| {
        let _ = writeln!(
            std::io::stderr(),
            "\n{bar}\n!! SKIPPING SmolLM2 (real-model) TESTS: {SMOLLM2_ENV} is unset\n\
             !! `cargo xtask test` fetches the model and sets it\n{bar}\n",
            bar = "!".repeat(78)
        );
    });
    None
}
