//! ggml's struct layout read from a build's own machine code.
//!
//! The probes read `ggml_tensor`, `ggml_cgraph` and `llama_batch` fields at offsets that
//! belong to somebody else's build. Instead of trusting a table keyed by version, the
//! offsets are derived from the small accessors every build exports, which compile to a
//! few instructions naming the offset: `ggml_get_name` is `lea rax, [rdi + name]`
//! (`add x0, x0, #name`), `ggml_graph_n_nodes` loads `[rdi + n_nodes]`, `ggml_dup` stores
//! its argument into `result->src[0]`, and so on ([`rules::RULES`]). Each function is
//! decoded with a maintained disassembler (iced-x86, yaxpeax-arm) into the memory
//! accesses it makes relative to its arguments ([`access::Access`]); the rules pick
//! offsets from those.
//!
//! A field that cannot be derived falls back to the table of the build's version, if it
//! has one; the fields no accessor reads (`ggml_compute_params.ith`, `llama_batch`'s)
//! come from that table or, for a build without one, from the layout of every build
//! tested (Nov 2024 to 2026) — the attach-time check (`super::layout_check`) catches a
//! wrong one. The derived offsets are checked against each other (`ne` then `nb` four
//! words later, `op_params` right after `op`, …) before anything is attached.
//!
//! By concept: [`access`] (what a walk records), [`x86`] and [`a64`] (the instruction
//! readers), [`rules`] (which access names which field), [`offsets`] (the table of
//! offsets and their sources, and the checks that they hold together).

pub mod a64;
pub mod access;
pub mod offsets;
pub mod rules;
pub mod x86;

use common::ggml_abi::GgmlLayout;
use object::{Object, ObjectSymbol};

use self::access::Access;
use self::offsets::{DerivedLayout, GivenOffset, LayoutError, OffsetSource, from_found};
use self::rules::{Field, RULES};

/// The layout of the build whose core library is `file`, from its accessors, with
/// `table` (the known layout of its ggml version, if any) for what cannot be derived.
///
/// # Errors
/// [`LayoutError`]: a needed field is neither derivable nor in a table, or the derived
/// offsets contradict each other.
pub fn derive(
    file: &object::File<'_>,
    table: Option<(&str, GgmlLayout)>,
    given: &[GivenOffset],
) -> Result<DerivedLayout, LayoutError> {
    let mut found: Vec<(Field, i64, OffsetSource)> = Vec::new();
    let mut why = Vec::new();
    for (field, function, pick) in RULES {
        if let Some(g) = given.iter().find(|g| g.field == field) {
            found.push((field, i64::from(g.offset), OffsetSource::Given));
            continue;
        }
        match function_accesses(file, function) {
            Some(accesses) => match pick(&accesses) {
                Some(off) => found.push((field, off, OffsetSource::Derived(function))),
                None => why.push(format!("{}: {function} has no such access", field.name())),
            },
            None => why.push(format!("{}: no {function}", field.name())),
        }
    }
    from_found(&found, why, table)
}

/// The memory accesses of the exported function `name` in `file`, relative to its
/// arguments, from a straight-line walk of its first instructions.
pub fn function_accesses(file: &object::File<'_>, name: &str) -> Option<Vec<Access>> {
    let sym = file
        .dynamic_symbols()
        .chain(file.symbols())
        .find(|s| s.is_definition() && s.name() == Ok(name))?;
    let code = crate::probe_points::function_bytes(file, &sym)?;
    match file.architecture() {
        object::Architecture::X86_64 => Some(x86::x86_accesses(code, sym.address())),
        object::Architecture::Aarch64 => Some(a64::a64_accesses(code)),
        _ => None,
    }
}
