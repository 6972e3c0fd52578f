//! Builds the eBPF object (`tracer-ebpf`, target bpfel-unknown-none, nightly +
//! bpf-linker) into `OUT_DIR/tracer-ebpf` with aya-build.
//!
//! aya-build relays every line the inner cargo prints to stderr as a `cargo:warning`, so
//! its `Compiling ...` status lines would flood the terminal as hundreds of
//! `warning: tracer-user@0.1.0: Compiling ...` lines; the inner cargo runs with
//! `CARGO_TERM_QUIET=true`, which keeps its errors and compiler diagnostics only.
//!
//! Set `AYA_BUILD_SKIP=1` to skip (the binary then cannot load probes; for `cargo doc`
//! or lints on machines without the BPF toolchain).

use std::path::Path;

fn main() -> anyhow::Result<()> {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR")?;
    let ebpf_dir = Path::new(&manifest_dir).join("../tracer-ebpf");
    let ebpf_dir = ebpf_dir
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("non-UTF-8 path {}", ebpf_dir.display()))?;
    // Shared ABI changes must rebuild the probes too.
    println!("cargo:rerun-if-changed={manifest_dir}/../common/src");
    let package = aya_build::Package {
        name: "tracer-ebpf",
        root_dir: ebpf_dir,
        ..Default::default()
    };
    // SAFETY: the build script is single-threaded here (aya-build starts its reader
    // threads later), so no other thread reads the environment while it changes.
    unsafe { std::env::set_var("CARGO_TERM_QUIET", "true") };
    aya_build::build_ebpf([package], aya_build::Toolchain::default()).map_err(|e| {
        e.context(
            "building the eBPF probes (tracer-ebpf) needs the nightly toolchain with rust-src \
             and bpf-linker 0.10.4: `cargo xtask setup` installs both",
        )
    })
}
