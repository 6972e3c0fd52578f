//! The backends the agreement tests compare: the portable one first, then every SIMD
//! backend of this build's target that the CPU has (AVX2 on x86-64; NEON and
//! NEON + dotprod on AArch64). A SIMD backend the CPU lacks is reported loudly on stderr
//! (once per test binary) instead of being compared with itself, and is a failure with
//! `PROFINFER_REQUIRE_SIMD=1`. `cargo xtask test` sets it on a host with AVX2 (so CI on
//! such a host cannot pass after comparing the portable path with itself) and for the
//! aarch64 run under `qemu-aarch64 -cpu max`; on a host without AVX2 the skip is loud and
//! the tests pass. Every test comparing backends goes through here, never through
//! `Backend::supported()`, which leaves out what the CPU lacks without a word.

use std::sync::Once;

use engine_kernels::Backend;

/// The SIMD backends to compare with [`Backend::Generic`].
pub fn simd() -> Vec<Backend> {
    let require = std::env::var("PROFINFER_REQUIRE_SIMD").is_ok_and(|v| v == "1");
    let mut out = Vec::new();
    for &b in Backend::simd_for_target() {
        if b.is_supported() {
            out.push(b);
            continue;
        }
        let msg = format!(
            "SKIPPED: this CPU lacks the {} backend: its kernels were NOT compared with the portable path",
            b.name()
        );
        assert!(!require, "{msg} (PROFINFER_REQUIRE_SIMD=1)");
        static REPORTED: Once = Once::new();
        REPORTED.call_once(|| eprintln!("{msg}"));
    }
    out
}

/// [`Backend::Generic`] followed by [`simd`].
pub fn all() -> Vec<Backend> {
    let mut out = vec![Backend::Generic];
    out.extend(simd());
    out
}
