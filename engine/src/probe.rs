//! The probe ABI's mechanism: `probe_entry!` makes the exported `extern "C"` entry
//! points, one per level (token, graph, operator, phase), that the engine really calls
//! to do its work. A tracer attaches uprobes/uretprobes to these symbols; see
//! `docs/probe-abi.md`. Each entry point is declared beside the body it marks:
//! `engine_decode` and `engine_phase_embed` in [`crate::context`], `engine_graph_compute`
//! in [`crate::backend`], `engine_op_compute` in [`crate::ops`],
//! `engine_accel_op_compute` in [`crate::backend::accel`], `engine_op_done` and
//! `engine_graph_thread` in [`crate::backend::pool`], `engine_op_times` in
//! [`crate::backend::node_ends`], the sampling phases in [`crate::sampler`] and the KV
//! swap phases in [`crate::kv_cache::swap`].
//!
//! # Cheap to probe
//! A uprobe on a function whose first instruction the kernel must single-step costs
//! ~6 µs per hit; one on a 5-byte `nop` ~0.35 µs (`shared/reference.md`). Compilers put
//! whatever prologue they like first, so every entry point is a *naked* trampoline
//! whose first instruction is a 5-byte `nop` (x86-64: `0f 1f 44 00 00`, the same
//! instruction `-fpatchable-function-entry` emits) followed by a tail jump to the real
//! body. The tail jump keeps uretprobes exact: the return address they hook at entry is
//! the one the body returns through.

/// Emits a naked trampoline `$name` with the given C signature that starts with a 5-byte
/// nop and tail-jumps to `$imp`.
macro_rules! probe_entry {
    ($(#[$meta:meta])* fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $imp:path) => {
        $(#[$meta])*
        ///
        /// # Safety
        /// Pointer arguments must be valid for what the body reads and writes, as
        /// `docs/probe-abi.md` describes; null context/graph/model pointers are refused.
        #[unsafe(no_mangle)]
        #[unsafe(naked)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!(
                ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00", // nopl 0x0(%rax,%rax,1)
                "jmp {imp}",
                imp = sym $imp,
            );
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!(
                "nop",
                "b {imp}",
                imp = sym $imp,
            );
        }
    };
}
pub(crate) use probe_entry;

/// Reference point for the probe-cost benchmark: starts with the same 5-byte nop and
/// does nothing.
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn engine_probe_ref_nop() {
    #[cfg(target_arch = "x86_64")]
    core::arch::naked_asm!(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00", "ret");
    #[cfg(target_arch = "aarch64")]
    core::arch::naked_asm!("nop", "ret");
}

/// Reference point for the probe-cost benchmark: starts with an instruction the kernel
/// must single-step (`lea`), the cost a compiler-generated prologue would have.
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn engine_probe_ref_singlestep() {
    #[cfg(target_arch = "x86_64")]
    core::arch::naked_asm!("lea rax, [rip]", "ret");
    #[cfg(target_arch = "aarch64")]
    core::arch::naked_asm!("adr x9, .", "ret");
}

#[cfg(test)]
mod tests {
    // x86-64 only: its entry points begin with the 5-byte nop the kernel optimizes.
    /// The first bytes of every entry point are the 5-byte nop.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn entry_points_start_with_a_five_byte_nop() {
        use crate::backend::{accel, node_ends, pool};
        use crate::kv_cache::swap;
        use crate::{backend, context, ops, probe, sampler};

        // (symbol name, first byte) of `module::symbol`.
        macro_rules! entry {
            ($module:ident :: $name:ident) => {
                (stringify!($name), $module::$name as *const u8)
            };
        }
        let entries: [(&str, *const u8); 16] = [
            entry!(pool::engine_op_done),
            entry!(node_ends::engine_op_times),
            entry!(pool::engine_graph_thread),
            entry!(context::engine_decode),
            entry!(backend::engine_graph_compute),
            entry!(ops::engine_op_compute),
            entry!(accel::engine_accel_op_compute),
            entry!(context::engine_phase_embed),
            entry!(sampler::engine_phase_copy_logits),
            entry!(sampler::engine_phase_softmax),
            entry!(sampler::engine_phase_sample),
            entry!(probe::engine_probe_ref_nop),
            entry!(swap::engine_phase_kv_compress),
            entry!(swap::engine_phase_kv_swap_out),
            entry!(swap::engine_phase_kv_swap_in),
            entry!(swap::engine_phase_kv_decompress),
        ];
        for (name, p) in entries {
            // SAFETY: reading the first 5 bytes of a function's machine code, which is
            // mapped readable in this process.
            let head = unsafe { core::slice::from_raw_parts(p, 5) };
            assert_eq!(head, &[0x0f, 0x1f, 0x44, 0x00, 0x00], "{name}");
        }
    }
}
