//! Exports the probe entry points (`engine_*`) in the `engine` binary's dynamic symbol
//! table, so a tracer resolves them with the same lookup it uses for shared libraries.

fn main() {
    // GNU ld and lld both accept a glob here (binutils >= 2.35).
    println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol=engine_*");
    println!("cargo:rerun-if-changed=build.rs");
}
