//! llama.cpp's code by function name, for `--sample`: ggml-cpu computes each operator in
//! `ggml_compute_forward_<op>` (and its type-specific `_f32`/`_q8_0`/`_one_chunk`
//! helpers), the matrix products in the `vec_dot`/`gemv`/`gemm` kernels (ggml's and
//! llamafile's tinyBLAS), and its threads wait in `ggml_barrier` and the graph-compute
//! loop. Release builds keep the symbol table but no frame pointers: the sampled
//! instruction's own function is what names most samples.

use common::op_catalog::op_id;

use crate::samples::{Frame, Named};

/// Functions where ggml's threads wait for work or for each other.
const WAITS: [&str; 8] = [
    "ggml_barrier",
    "ggml_graph_compute_thread",
    "ggml_graph_compute_secondary_thread",
    "ggml_graph_compute_poll_for_work",
    "ggml_graph_compute_check_for_work",
    "ggml_graph_compute_thread_sync",
    "sched_yield",
    "pthread_cond_wait",
];

/// Kernels only matrix products call.
const MATMUL_KERNELS: [&str; 6] = [
    "ggml_vec_dot_",
    "ggml_gemv_",
    "ggml_gemm_",
    "quantize_row_q8",
    "tinyBLAS",
    "llamafile_sgemm",
];

/// The operator (or `SAMPLE_OP_WAIT`) of the functions at one address (a symbol, or
/// DWARF's inline chain in a debug build), innermost first. Code of the OpenMP runtime
/// (ggml's thread pool when built with OpenMP, the default) is the pool's waiting: its
/// barrier and spin functions are hidden symbols.
pub fn classify(frames: &[Frame]) -> Option<Named> {
    if frames.iter().any(|f| f.object.starts_with("libgomp")) {
        return Some(Named::Wait);
    }
    frames.iter().find_map(|f| classify_function(&f.function))
}

/// What `function` is: an operator's code, a wait, or a kernel some operators call
/// (`ggml_vec_dot_f16` serves matrix products and flash attention alike: a kernel, so
/// the operator that called it decides when its return address is on the stack);
/// `None` for code of no operator (or of several: `ggml_vec_add_f32`).
fn classify_function(function: &str) -> Option<Named> {
    let id = |name: &str| op_id(name).map(|id| id as u16);
    if let Some(op) = function.strip_prefix("ggml_compute_forward_") {
        return longest_op_prefix(op).map(Named::Op);
    }
    if WAITS.iter().any(|w| function.starts_with(w)) || function.contains("futex") {
        return Some(Named::Wait);
    }
    if MATMUL_KERNELS.iter().any(|k| function.contains(k)) {
        return id("MUL_MAT").map(Named::Kernel);
    }
    match function {
        f if f.starts_with("ggml_vec_soft_max") => id("SOFT_MAX").map(Named::Kernel),
        f if f.starts_with("ggml_vec_swiglu") => id("GLU").map(Named::Kernel),
        _ => None,
    }
}

/// The op whose lower-case name is the longest `_`-separated prefix of `op`
/// (`mul_mat_one_chunk` → `MUL_MAT`, `rms_norm_f32` → `RMS_NORM`).
fn longest_op_prefix(op: &str) -> Option<u16> {
    let upper = op.to_ascii_uppercase();
    let mut end = upper.len();
    loop {
        if let Some(id) = op_id(&upper[..end]) {
            return Some(id as u16);
        }
        end = upper[..end].rfind('_')?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::op_catalog::op_name;

    fn named(f: &str) -> Option<&'static str> {
        classify_function(f).map(|n| match n {
            Named::Wait => "wait",
            Named::Op(id) => op_name(u32::from(id)).unwrap_or("?"),
            Named::Kernel(id) if op_name(u32::from(id)) == Some("MUL_MAT") => "kernel:MUL_MAT",
            Named::Kernel(_) => "kernel:?",
        })
    }

    #[test]
    fn ggml_functions_name_their_operators() {
        assert_eq!(named("ggml_compute_forward_mul_mat"), Some("MUL_MAT"));
        assert_eq!(
            named("ggml_compute_forward_mul_mat_one_chunk"),
            Some("MUL_MAT")
        );
        assert_eq!(named("ggml_compute_forward_rms_norm_f32"), Some("RMS_NORM"));
        assert_eq!(named("ggml_compute_forward_soft_max_f32"), Some("SOFT_MAX"));
        assert_eq!(
            named("ggml_compute_forward_get_rows_q4_0"),
            Some("GET_ROWS")
        );
        assert_eq!(named("ggml_compute_forward_glu"), Some("GLU"));
        assert_eq!(named("ggml_vec_dot_q4_0_q8_0"), Some("kernel:MUL_MAT"));
        assert_eq!(named("ggml_gemv_q4_0_8x8_q8_0"), Some("kernel:MUL_MAT"));
        assert_eq!(named("ggml_barrier"), Some("wait"));
        assert_eq!(named("ggml_vec_add_f32"), None);
        assert_eq!(named("llama_sampler_sample"), None);
        let omp = Frame {
            object: "libgomp.so.1".into(),
            ..Frame::default()
        };
        assert_eq!(classify(&[omp]), Some(Named::Wait));
    }
}
