//! The engine's code by source file, for `--sample`. The engine's release build keeps
//! line tables with inlining, so every function inlined at a sampled address is known
//! with its file, though not its namespace: an operator is a file of `engine/src/ops/`
//! (`rms_norm.rs`; the element-wise pair ops are the functions `add`, `mul`, `div` of
//! `binary.rs`), the matrix kernels files of the `kernels` crate, the thread pool's
//! waits `engine/src/sync/` and `engine/src/backend/pool.rs`. A wait inside an operator
//! (a barrier within a matrix product) counts as the operator's, as its span does in a
//! full recording.

use common::op_catalog::op_id;

use crate::samples::{Frame, Named};

/// Kernel-crate folders and files whose code only matrix products run.
const MATMUL_KERNELS: [&str; 6] = [
    "dot/",
    "matmul/",
    "packed/",
    "legacy/",
    "k_quants/",
    "quant.rs",
];
/// The same as module paths (the symbol table's names of the kernels' functions).
const MATMUL_MODULES: [&str; 6] = [
    "dot::",
    "matmul::",
    "packed::",
    "legacy::",
    "k_quants::",
    "quant::",
];

/// What the functions at one address, innermost first, are: an operator's code, the
/// pool's waiting, or a kernel (the matrix kernels and the vector kernels each operator
/// calls); `None` for code of no operator (the dispatcher, the sampler, the tokenizer).
pub fn classify(frames: &[Frame]) -> Option<Named> {
    let id = |name: &str| op_id(&name.to_ascii_uppercase()).map(|id| id as u16);
    let after = |f: &Frame, dir: &str| f.file.split_once(dir).map(|(_, rest)| rest.to_owned());
    let op = frames.iter().find_map(|f| {
        let (module, function) = match after(f, "engine/src/ops/") {
            Some(file) => (file.strip_suffix(".rs")?.to_owned(), f.function.as_str()),
            // A symbol: `engine::ops::rms_norm::compute`.
            None => {
                let path = f.function.strip_prefix("engine::ops::")?;
                let (module, function) = path.split_once("::")?;
                (module.to_owned(), function)
            }
        };
        match module.as_str() {
            "mod" | "params" => None,
            "binary" => id(function.split('<').next()?),
            module => id(module),
        }
    });
    if let Some(op) = op {
        return Some(Named::Op(op));
    }
    let waits = frames.iter().any(|f| {
        f.file.contains("engine/src/sync/")
            || f.file.ends_with("engine/src/backend/pool.rs")
            || f.function.starts_with("engine::sync::")
            || f.function.starts_with("engine::backend::pool::")
    });
    if waits {
        return Some(Named::Wait);
    }
    let matmul = frames.iter().any(|f| {
        after(f, "engine/crates/kernels/src/")
            .is_some_and(|k| MATMUL_KERNELS.iter().any(|m| k.starts_with(m)))
            || f.function
                .strip_prefix("engine_kernels::")
                .is_some_and(|k| MATMUL_MODULES.iter().any(|m| k.starts_with(m)))
    });
    if matmul {
        return id("MUL_MAT").map(Named::Kernel);
    }
    // The vector kernels each operator calls by name (`engine_kernels::vec::swiglu_span`).
    frames.iter().find_map(|f| {
        let name = f.function.rsplit("::").next()?;
        let in_vec = f.file.contains("engine/crates/kernels/src/vec")
            || f.function.starts_with("engine_kernels::vec::");
        VEC_KERNELS
            .iter()
            .find(|(prefix, _)| in_vec && name.starts_with(prefix))
            .and_then(|&(_, op)| id(op))
            .map(Named::Kernel)
    })
}

/// Vector kernels by name prefix, and the operator that calls them.
const VEC_KERNELS: [(&str, &str); 5] = [
    ("swiglu", "SWIGLU"),
    ("geglu", "GEGLU"),
    ("exp_sum_masked_row", "SOFT_MAX"),
    ("rms_norm", "RMS_NORM"),
    ("rope", "ROPE"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use common::op_catalog::op_name;

    /// A kernel's operator, marked as a kernel's guess.
    fn kernel_name(id: u16) -> &'static str {
        match op_name(u32::from(id)) {
            Some("MUL_MAT") => "kernel:MUL_MAT",
            Some("SWIGLU") => "kernel:SWIGLU",
            _ => "kernel:?",
        }
    }

    fn named(chain: &[(&str, &str)]) -> Option<&'static str> {
        let frames: Vec<Frame> = chain
            .iter()
            .map(|&(function, file)| Frame {
                function: function.into(),
                file: format!("/src/profinfer/{file}"),
                object: "engine".into(),
            })
            .collect();
        classify(&frames).map(|n| match n {
            Named::Wait => "wait",
            Named::Op(id) => op_name(u32::from(id)).unwrap_or("?"),
            Named::Kernel(id) => kernel_name(id),
        })
    }

    #[test]
    fn engine_frames_name_their_operators() {
        let entry = ("op_compute_entry", "engine/src/ops/mod.rs");
        let norm = ("compute", "engine/src/ops/rms_norm.rs");
        let sum = (
            "sum<f32>",
            "/rustc/abc/library/core/src/iter/traits/iterator.rs",
        );
        assert_eq!(
            named(&[sum, norm, ("compute", "engine/src/ops/mod.rs"), entry]),
            Some("RMS_NORM")
        );
        assert_eq!(
            named(&[("mul", "engine/src/ops/binary.rs"), entry]),
            Some("MUL")
        );
        assert_eq!(
            named(&[
                ("compute<f32>", "engine/src/ops/binary.rs"),
                ("add", "engine/src/ops/binary.rs")
            ]),
            Some("ADD")
        );
        let barrier = ("wait", "engine/src/sync/barrier.rs");
        assert_eq!(
            named(&[barrier, ("compute", "engine/src/ops/mul_mat.rs"), entry]),
            Some("MUL_MAT")
        );
        assert_eq!(
            named(&[barrier, ("compute_thread", "engine/src/backend/pool.rs")]),
            Some("wait")
        );
        assert_eq!(
            named(&[(
                "tile_block<Q4_1>",
                "engine/crates/kernels/src/matmul/x86.rs"
            )]),
            Some("kernel:MUL_MAT")
        );
        assert_eq!(
            named(&[("expf_vector", "engine/crates/kernels/src/vec.rs")]),
            None
        );
        assert_eq!(
            named(&[("swiglu_span_body", "engine/crates/kernels/src/vec.rs")]),
            Some("kernel:SWIGLU")
        );
        let symbol = |f| (f, "");
        assert_eq!(
            named(&[symbol("engine_kernels::matmul::x86::tile_block_table")]),
            Some("kernel:MUL_MAT")
        );
        assert_eq!(
            named(&[symbol("engine::ops::soft_max::compute")]),
            Some("SOFT_MAX")
        );
        assert_eq!(
            named(&[symbol("engine::backend::pool::worker_loop")]),
            Some("wait")
        );
        assert_eq!(named(&[("softmax", "engine/src/sampler.rs")]), None);
        assert_eq!(named(&[]), None);
    }
}
