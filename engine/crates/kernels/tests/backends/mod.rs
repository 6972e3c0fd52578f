//! The backends the agreement tests compare: the portable one first, then every SIMD
//! backend of this build's target that the CPU has (AVX2 on x86-64; NEON, NEON + dotprod
//! and NEON + i8mm on AArch64), through [`Backend::simd_to_compare`]: a SIMD backend the
//! CPU lacks is reported loudly on stderr instead of being compared with itself, and is a
//! failure with `PROFINFER_REQUIRE_SIMD=1`. `cargo xtask test` sets it on a host that has
//! every SIMD backend of its target and otherwise runs the kernels' tests once more under
//! `qemu-<arch>-static -cpu max` with it set, so no host passes after comparing the
//! portable path with itself.

use engine_kernels::Backend;

/// The SIMD backends to compare with [`Backend::Generic`] ([`Backend::simd_to_compare`]).
pub fn simd() -> Vec<Backend> {
    Backend::simd_to_compare()
}

/// [`Backend::Generic`] followed by [`simd`].
pub fn all() -> Vec<Backend> {
    let mut out = vec![Backend::Generic];
    out.extend(simd());
    out
}
