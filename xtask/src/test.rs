//! `cargo xtask test`: set-up (with the oracle), the real-model fixture (SmolLM2), every
//! test of the workspace in release mode with the oracle required, the engine's and kernels'
//! unit tests in debug (so `debug_assert!` runs), then a short fuzzing
//! smoke run of the GGUF parser. The arm64 board kit (`board`) is prepared before the
//! tests, so `tracer-user/tests/board.rs` boots real arm64 kernels.

use anyhow::{Result, bail};

use crate::apt;
use crate::board;
use crate::cross::{self, Arch};
use crate::paths;
use crate::process;
use crate::real_model::{SMOLLM2, SMOLLM2_ENV};
use crate::setup;
use crate::steps::Steps;

/// Seconds the fuzz smoke run lasts.
pub const FUZZ_SECONDS: u32 = 60;
/// The GGUF parser's fuzz target.
pub const FUZZ_TARGET: &str = "gguf_parse";

/// `cargo`'s override of the release profile's `lto` setting.
const RELEASE_LTO_ENV: &str = "CARGO_PROFILE_RELEASE_LTO";

/// Makes every cargo that `cargo xtask test` starts (the host's test build, the tests' own
/// `cargo build --release`, the evaluation's builds, the static aarch64 builds and the
/// tests under QEMU) use the release profile without LTO, by setting [`RELEASE_LTO_ENV`]
/// to `false` in this process's environment, which they all inherit. With thin LTO each
/// of the workspace's ~45 test binaries is link-time optimised on its own, dependencies
/// included: a clean clone's test build took over 35 minutes of a CI run that must
/// finish in 90, and a new machine's board kit (the static aarch64 build) 800 s. The programs users
/// build (`cargo xtask demo`, `cargo xtask dist`, `cargo build --release`) keep the
/// profile's LTO; the tests check results and bounds that do not depend on it (no test
/// asserts a speed).
pub fn build_tests_without_lto() {
    // SAFETY: called by `main` before any thread is started, so nothing reads or writes
    // the environment at the same time.
    unsafe { std::env::set_var(RELEASE_LTO_ENV, "false") };
}

/// Runs the set-up, the tests and the fuzz smoke run; all test steps run even if an
/// earlier one failed, and the result is an error if any failed.
pub fn run(steps: &mut Steps) -> Result<()> {
    setup::install(steps, setup::TEST)?;
    let smollm2 = steps.run(
        &format!("real-model fixture ({})", SMOLLM2.description),
        || SMOLLM2.ensure(),
    )?;
    // The arm64 board: its absence fails the board tests (PROFINFER_REQUIRE_BOARD).
    let board = steps.run(
        "arm64 board kit (static aarch64 build, Debian kernels)",
        board::prepare,
    );
    let board_env = match &board {
        Ok(kit) => kit.env()?,
        Err(_) => vec![("PROFINFER_REQUIRE_BOARD", "1".into())],
    };
    if board.is_ok() {
        // The NEON kernels against the portable ones, bit for bit, on an emulated CPU with
        // dotprod and i8mm (every SIMD backend required) and on a Cortex-A53 (plain NEON).
        let _ = steps.run("aarch64 kernels under qemu-aarch64 (-cpu max)", || {
            cross::test_under_qemu(
                Arch::Aarch64,
                &["-p", "engine-kernels"],
                "max",
                &[
                    ("PROFINFER_REQUIRE_SIMD", "1"),
                    ("PROFINFER_EXPECT_BACKEND", "neon-i8mm"),
                ],
            )
        });
        let _ = steps.run(
            "aarch64 kernels under qemu-aarch64 (-cpu cortex-a53)",
            || {
                cross::test_under_qemu(
                    Arch::Aarch64,
                    &["-p", "engine-kernels"],
                    "cortex-a53",
                    &[("PROFINFER_EXPECT_BACKEND", "neon")],
                )
            },
        );
        // The aarch64 engine's greedy tokens on the generated models of every type and
        // architecture against llama.cpp's (the oracle runs natively); SmolLM2's tokens
        // on arm64 are the board test's.
        let _ = steps.run("aarch64 engine greedy tests under qemu-aarch64", || {
            cross::test_under_qemu(
                Arch::Aarch64,
                &["-p", "engine", "--test", "oracle", "--", "greedy"],
                "max",
                &[("PROFINFER_REQUIRE_ORACLE", "1")],
            )
        });
    }
    let root = paths::repo_root();
    // tracer-ebpf targets bpfel-unknown-none and cannot be built for the host.
    let _ = steps.run(
        "cargo test (release, root, oracle and browser required)",
        || {
            process::run_tests(
                process::in_dir("cargo", &root)
                    .args([
                        "test",
                        "--workspace",
                        "--exclude",
                        "tracer-ebpf",
                        "--release",
                        // Every failing test binary reported, not only the first.
                        "--no-fail-fast",
                    ])
                    .env("PROFINFER_REQUIRE_ORACLE", "1")
                    // The eBPF tests skip when not root; here that is a failure.
                    .env("PROFINFER_REQUIRE_ROOT", "1")
                    // A host with every SIMD backend of its target must compare them
                    // all with the portable kernels; on one without, the native run
                    // skips what it lacks loudly and the step below emulates it.
                    .envs(host_has_every_simd().then_some(("PROFINFER_REQUIRE_SIMD", "1")))
                    // Chromium was installed above: the report page's browser check must run.
                    .env("PROFINFER_REQUIRE_BROWSER", "1")
                    .env(SMOLLM2_ENV, &smollm2)
                    .envs(board_env.iter().map(|(k, v)| (k, v))),
            )
        },
    );
    if !host_has_every_simd() {
        let _ = steps.run(
            "kernels under qemu -cpu max (this CPU lacks a SIMD backend of its target)",
            simd_under_qemu,
        );
    }
    // CI's other builds are release builds, where `debug_assert!` (the bounds of the
    // engine's ops and kernels) compiles to nothing: their unit tests run once more in the
    // dev profile. The analyzer's are left out for CI time: with it this step took 706 s
    // (mostly its dependencies compiled again), and CI must stay within 90 minutes.
    let _ = steps.run("unit tests in debug (engine, kernels)", || {
        process::run(process::in_dir("cargo", &root).args([
            "test",
            "--no-fail-fast",
            "-p",
            "engine",
            "-p",
            "engine-kernels",
            "--lib",
        ]))
    });
    // The evaluation's pipeline end to end at CI size: recordings exported as Parquet run
    // tables, the cost pairs (also under a CPU quota), every DuckDB query with rows.
    let _ = steps.run("cargo xtask eval --quick", || {
        crate::eval::run(
            &mut crate::steps::Steps::new("eval"),
            crate::eval::EvalConfig { quick: true },
        )
    });
    let fuzz_dir = root.join("engine/crates/gguf/fuzz");
    if fuzz_dir.join("Cargo.toml").is_file() {
        let _ = steps.run(
            &format!("fuzz {FUZZ_TARGET} for {FUZZ_SECONDS}s"),
            fuzz_smoke,
        );
    } else {
        steps.skip(
            "fuzz smoke run",
            &format!("{} does not exist yet", fuzz_dir.display()),
        );
    }
    if steps.all_ok() {
        Ok(())
    } else {
        bail!("some test steps failed")
    }
}

/// Whether this host runs every SIMD backend of the kernels for its architecture (AVX2
/// with FMA and F16C on x86-64, as `engine_kernels::Backend::Avx2` requires; NEON with
/// dotprod and i8mm on AArch64): then the native agreement tests must not skip any
/// (`PROFINFER_REQUIRE_SIMD=1`); otherwise [`simd_under_qemu`] runs them on an emulated
/// CPU that has them all, so no host passes `cargo xtask test` without comparing every
/// SIMD kernel with the portable one.
fn host_has_every_simd() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
    }
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("neon")
            && std::arch::is_aarch64_feature_detected!("dotprod")
            && std::arch::is_aarch64_feature_detected!("i8mm")
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        true
    }
}

/// The kernels' tests (unit and agreement) for this host's own target, run by
/// `qemu-<arch>-static -cpu max` (QEMU 7.2 emulates AVX2, FMA and F16C, and AArch64's
/// dotprod and i8mm) with every SIMD backend required.
fn simd_under_qemu() -> Result<()> {
    apt::install(&["qemu-user-static"])?;
    let arch = std::env::consts::ARCH;
    let triple = format!("{arch}-unknown-linux-gnu");
    let var = triple.to_uppercase().replace('-', "_");
    process::run(
        process::in_dir("cargo", &paths::repo_root())
            .args([
                "test",
                "--release",
                "--target",
                &triple,
                "-p",
                "engine-kernels",
            ])
            .env(
                format!("CARGO_TARGET_{var}_RUNNER"),
                format!("qemu-{arch}-static -cpu max"),
            )
            .env("PROFINFER_REQUIRE_SIMD", "1"),
    )
}

/// Fuzzes the GGUF parser for [`FUZZ_SECONDS`], starting from the committed corpus; new
/// inputs go to a scratch corpus under `target/` so the committed one stays unchanged.
fn fuzz_smoke() -> Result<()> {
    let root = paths::repo_root();
    let crate_dir = root.join("engine/crates/gguf");
    let seeds = crate_dir.join("fuzz/corpus").join(FUZZ_TARGET);
    let scratch = paths::target_dir().join("fuzz-scratch").join(FUZZ_TARGET);
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)?;
    }
    paths::create_dir(&scratch)?;
    let mut cmd = process::in_dir("cargo", &crate_dir);
    cmd.args(["+nightly", "fuzz", "run", FUZZ_TARGET])
        .arg(&scratch);
    if seeds.is_dir() {
        cmd.arg(&seeds);
    }
    cmd.arg("--").arg(format!("-max_total_time={FUZZ_SECONDS}"));
    // Let rustup pick the nightly toolchain for the nested cargo calls.
    cmd.env_remove("RUSTUP_TOOLCHAIN");
    process::run(&mut cmd)
}
