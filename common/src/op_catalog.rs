//! Every operator name profinfer records, numbered once and for all: an event's `op`
//! is an index into [`OP_NAMES`], whichever program was traced.
//!
//! Ids 0 to 10 are the engine's first [`crate::OpType`] values; after them come the op
//! names of ggml (`GGML_OP_NAME` of ggml 0.26, in its order, minus those the engine
//! already has), so a llama.cpp build's own op numbers are translated by name
//! (`tracer-user/src/targets/llama_cpp/plan.rs` writes the translation into the probes'
//! op map)
//! and its ops keep their ggml names; then names the engine added. Every later engine op
//! takes the id of its name here. New names are only ever appended.

/// Operator names by profinfer op id.
pub const OP_NAMES: &[&str] = &[
    "NONE",
    "GET_ROWS",
    "RMS_NORM",
    "MUL",
    "ADD",
    "MUL_MAT",
    "ROPE",
    "CPY",
    "SOFT_MAX",
    "SWIGLU",
    "VIEW",
    "DUP",
    "ADD_ID",
    "ADD1",
    "ACC",
    "SUB",
    "DIV",
    "SQR",
    "SQRT",
    "LOG",
    "SIN",
    "COS",
    "SUM",
    "SUM_ROWS",
    "CUMSUM",
    "MEAN",
    "ARGMAX",
    "COUNT_EQUAL",
    "REPEAT",
    "REPEAT_BACK",
    "CONCAT",
    "SILU_BACK",
    "NORM",
    "RMS_NORM_BACK",
    "GROUP_NORM",
    "L2_NORM",
    "MUL_MAT_ID",
    "OUT_PROD",
    "SCALE",
    "SET",
    "CONT",
    "RESHAPE",
    "PERMUTE",
    "TRANSPOSE",
    "GET_ROWS_BACK",
    "SET_ROWS",
    "DIAG",
    "DIAG_MASK_INF",
    "DIAG_MASK_ZERO",
    "SOFT_MAX_BACK",
    "ROPE_BACK",
    "CLAMP",
    "CONV_TRANSPOSE_1D",
    "IM2COL",
    "IM2COL_BACK",
    "IM2COL_3D",
    "COL2IM_1D",
    "CONV_2D",
    "CONV_3D",
    "CONV_2D_DW",
    "CONV_TRANSPOSE_2D",
    "POOL_1D",
    "POOL_2D",
    "POOL_2D_BACK",
    "UPSCALE",
    "PAD",
    "PAD_REFLECT_1D",
    "ROLL",
    "ARANGE",
    "TIMESTEP_EMBEDDING",
    "ARGSORT",
    "TOP_K",
    "LEAKY_RELU",
    "TRI",
    "FILL",
    "FLASH_ATTN_EXT",
    "FLASH_ATTN_BACK",
    "SSM_CONV",
    "SSM_SCAN",
    "WIN_PART",
    "WIN_UNPART",
    "GET_REL_POS",
    "ADD_REL_POS",
    "RWKV_WKV6",
    "GATED_LINEAR_ATTN",
    "RWKV_WKV7",
    "SOLVE_TRI",
    "GATED_DELTA_NET",
    "LIGHTNING_INDEXER",
    "DSV4_HC_COMB",
    "DSV4_HC_PRE",
    "DSV4_HC_POST",
    "UNARY",
    "MAP_CUSTOM1",
    "MAP_CUSTOM2",
    "MAP_CUSTOM3",
    "CUSTOM",
    "CROSS_ENTROPY_LOSS",
    "CROSS_ENTROPY_LOSS_BACK",
    "OPT_STEP_ADAMW",
    "OPT_STEP_SGD",
    "GLU",
    // Appended for the engine: ggml's unary ops (one `UNARY` op there) by name, and
    // the engine's own ops.
    "SILU",
    "MOE_SUM",
    "TANH",
    "GEGLU",
    "BACKEND_COPY",
    "BACKEND_SYNC",
    "KV_FETCH",
];

/// An op the recorded build has but [`OP_NAMES`] does not is recorded as this plus the
/// build's own op number (the analyzer names it `GGML_OP_<n>`): its events are kept and
/// never given a wrong name.
pub const OP_UNKNOWN_BASE: u32 = 0x8000_0000;

/// The name of op id `id`, if it is one of [`OP_NAMES`].
pub fn op_name(id: u32) -> Option<&'static str> {
    OP_NAMES.get(id as usize).copied()
}

/// The id of the op named `name` (exact, upper case), if known.
pub fn op_id(name: &str) -> Option<u32> {
    OP_NAMES.iter().position(|&n| n == name).map(|i| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OpType;

    #[test]
    fn the_engines_ops_keep_their_ids_and_names() {
        for &op in OpType::ALL {
            assert_eq!(op_name(op as u32), Some(op.name()), "{op:?}");
        }
    }

    #[test]
    fn names_are_unique_and_ggml_ops_are_found() {
        for (i, a) in OP_NAMES.iter().enumerate() {
            assert_eq!(op_id(a), Some(i as u32), "{a} twice");
        }
        assert_eq!(op_id("MUL_MAT"), Some(OpType::MulMat as u32));
        assert!(op_id("FLASH_ATTN_EXT").is_some() && op_id("GLU").is_some());
        assert_eq!(op_id("NOT_AN_OP"), None);
    }
}
