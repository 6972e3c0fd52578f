//! Which instruction-set implementation runs the kernels, detected once per process.

use std::sync::OnceLock;

/// An implementation of the dot products and matrix products.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Portable scalar code that reproduces the SIMD code's rounding exactly (slow).
    Generic,
    /// x86-64 AVX2 + FMA + F16C.
    Avx2,
}

impl Backend {
    /// The fastest backend this CPU supports (detected on first call, then cached).
    pub fn detect() -> Backend {
        static DETECTED: OnceLock<Backend> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            if Backend::Avx2.is_supported() {
                Backend::Avx2
            } else {
                Backend::Generic
            }
        })
    }

    /// Whether this CPU can run the backend.
    pub fn is_supported(self) -> bool {
        match self {
            Backend::Generic => true,
            Backend::Avx2 => avx2_supported(),
        }
    }

    /// Every backend this CPU can run, slowest first.
    pub fn supported() -> Vec<Backend> {
        [Backend::Generic, Backend::Avx2]
            .into_iter()
            .filter(|b| b.is_supported())
            .collect()
    }

    /// Short lower-case name (`generic`, `avx2`).
    pub const fn name(self) -> &'static str {
        match self {
            Backend::Generic => "generic",
            Backend::Avx2 => "avx2",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detected_backend_is_supported() {
        assert!(Backend::detect().is_supported());
        assert!(Backend::supported().contains(&Backend::Generic));
        assert!(Backend::supported().contains(&Backend::detect()));
    }
}
