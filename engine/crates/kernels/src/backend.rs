//! Which instruction-set implementation runs the kernels, detected once per process.

use std::sync::OnceLock;

/// An implementation of the dot products and matrix products.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Portable scalar code that reproduces the SIMD code's rounding exactly (slow).
    Generic,
    /// x86-64 AVX2 + FMA + F16C.
    Avx2,
    /// AArch64 Advanced SIMD (NEON), integer products with `smull`/`sadalp`.
    Neon,
    /// AArch64 NEON with the `dotprod` extension (`sdot`, Armv8.2+: Cortex-A55/A76 and
    /// later).
    NeonDotprod,
    /// AArch64 NEON with `dotprod` and `i8mm` (`smmla`, Armv8.6+: Cortex-A510/A710/X2 and
    /// later): the dotprod kernels, plus `smmla` where a product has two or more
    /// activation rows and exact integer sums per output.
    NeonI8mm,
}

/// The switch that makes a SIMD backend the CPU lacks a test failure instead of a loud
/// skip ([`Backend::simd_to_compare`]); `cargo xtask test` sets it.
pub const REQUIRE_SIMD_ENV: &str = "PROFINFER_REQUIRE_SIMD";

impl Backend {
    /// Every backend, slowest first on its architecture.
    const ALL: [Backend; 5] = [
        Backend::Generic,
        Backend::Avx2,
        Backend::Neon,
        Backend::NeonDotprod,
        Backend::NeonI8mm,
    ];

    /// The fastest backend this CPU supports (detected on first call, then cached).
    pub fn detect() -> Backend {
        static DETECTED: OnceLock<Backend> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            Backend::supported()
                .last()
                .copied()
                .unwrap_or(Backend::Generic)
        })
    }

    /// Whether this CPU can run the backend.
    pub fn is_supported(self) -> bool {
        match self {
            Backend::Generic => true,
            Backend::Avx2 => avx2_supported(),
            Backend::Neon => neon_supported(),
            Backend::NeonDotprod => neon_supported() && dotprod_supported(),
            Backend::NeonI8mm => neon_supported() && dotprod_supported() && i8mm_supported(),
        }
    }

    /// This backend if the CPU can run it, else [`Backend::Generic`]: what every `*_with`
    /// entry point runs when handed a backend.
    pub(crate) fn supported_or_generic(self) -> Backend {
        if self.is_supported() {
            self
        } else {
            Backend::Generic
        }
    }

    /// Whether the backend runs the `sdot` kernels.
    #[cfg(target_arch = "aarch64")]
    pub(crate) const fn has_dotprod(self) -> bool {
        matches!(self, Backend::NeonDotprod | Backend::NeonI8mm)
    }

    /// Every backend this CPU can run, slowest first.
    pub fn supported() -> Vec<Backend> {
        Backend::ALL
            .into_iter()
            .filter(|b| b.is_supported())
            .collect()
    }

    /// The SIMD backends of this build's architecture that this CPU has, for tests that
    /// compare each with [`Backend::Generic`]: a backend of the target the CPU lacks is
    /// reported on stderr (once per process) instead of being compared with itself, and
    /// panics when `PROFINFER_REQUIRE_SIMD=1` ([`REQUIRE_SIMD_ENV`]). Every test comparing
    /// backends goes through here, never through [`Backend::supported`], which leaves out
    /// what the CPU lacks without a word.
    pub fn simd_to_compare() -> Vec<Backend> {
        let require = std::env::var(REQUIRE_SIMD_ENV).is_ok_and(|v| v == "1");
        let mut out = Vec::new();
        for &b in Backend::simd_for_target() {
            if b.is_supported() {
                out.push(b);
                continue;
            }
            let msg = format!(
                "SKIPPED: this CPU lacks the {} backend: its kernels were NOT compared with \
                 the portable path",
                b.name()
            );
            assert!(!require, "{msg} ({REQUIRE_SIMD_ENV}=1)");
            static REPORTED: std::sync::Once = std::sync::Once::new();
            REPORTED.call_once(|| eprintln!("{msg}"));
        }
        out
    }

    /// The SIMD backends of this build's architecture (whether or not this CPU has them):
    /// what agreement tests must cover, and report as skipped when the CPU lacks one.
    pub fn simd_for_target() -> &'static [Backend] {
        if cfg!(target_arch = "x86_64") {
            &[Backend::Avx2]
        } else if cfg!(target_arch = "aarch64") {
            &[Backend::Neon, Backend::NeonDotprod, Backend::NeonI8mm]
        } else {
            &[]
        }
    }

    /// Short lower-case name (`generic`, `avx2`, `neon`, `neon-dotprod`, `neon-i8mm`).
    pub const fn name(self) -> &'static str {
        match self {
            Backend::Generic => "generic",
            Backend::Avx2 => "avx2",
            Backend::Neon => "neon",
            Backend::NeonDotprod => "neon-dotprod",
            Backend::NeonI8mm => "neon-i8mm",
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn avx2_supported() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

#[cfg(not(target_arch = "x86_64"))]
fn avx2_supported() -> bool {
    false
}

#[cfg(target_arch = "aarch64")]
fn neon_supported() -> bool {
    std::arch::is_aarch64_feature_detected!("neon")
}

#[cfg(not(target_arch = "aarch64"))]
fn neon_supported() -> bool {
    false
}

#[cfg(target_arch = "aarch64")]
fn dotprod_supported() -> bool {
    std::arch::is_aarch64_feature_detected!("dotprod")
}

#[cfg(not(target_arch = "aarch64"))]
fn dotprod_supported() -> bool {
    false
}

#[cfg(target_arch = "aarch64")]
fn i8mm_supported() -> bool {
    std::arch::is_aarch64_feature_detected!("i8mm")
}

#[cfg(not(target_arch = "aarch64"))]
fn i8mm_supported() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detected_backend_is_supported() {
        assert!(Backend::detect().is_supported());
        assert!(Backend::supported().contains(&Backend::Generic));
        assert!(Backend::supported().contains(&Backend::detect()));
    }

    #[test]
    fn detect_picks_the_fastest_supported() {
        let supported = Backend::supported();
        assert_eq!(Some(&Backend::detect()), supported.last());
        // Each NEON level includes the one below, so the simpler kernels are always
        // tested alongside.
        if supported.contains(&Backend::NeonI8mm) {
            assert!(supported.contains(&Backend::NeonDotprod));
        }
        if supported.contains(&Backend::NeonDotprod) {
            assert!(supported.contains(&Backend::Neon));
        }
        eprintln!("backends: {supported:?}, detected {:?}", Backend::detect());
        // Lets a test run on a known (e.g. emulated) CPU check what detection picks.
        if let Ok(want) = std::env::var("PROFINFER_EXPECT_BACKEND") {
            assert_eq!(Backend::detect().name(), want, "detected {supported:?}");
        }
    }
}
