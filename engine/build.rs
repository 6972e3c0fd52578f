//! Exports the probe entry points (`engine_*`) in the `engine` binary's dynamic symbol
//! table, so a tracer resolves them with the same lookup it uses for shared libraries.
//!
//! Static builds (the `*-linux-musl` targets of `cargo xtask dist`, linked by rust-lld
//! directly) have no dynamic symbol table to export to: their probe points are found in
//! the static symbol table (`.symtab`), which the tracer reads as well, so nothing is
//! passed there (`-Wl,` is a compiler-driver spelling a bare linker refuses).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("musl") {
        return;
    }
    // GNU ld and lld both accept a glob here (binutils >= 2.35).
    println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol=engine_*");
}
