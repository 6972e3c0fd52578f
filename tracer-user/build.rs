//! Builds the eBPF object (`tracer-ebpf`, target bpfel-unknown-none, nightly +
//! bpf-linker) into `OUT_DIR/tracer-ebpf` with aya-build.
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
    aya_build::build_ebpf([package], aya_build::Toolchain::default())
}
