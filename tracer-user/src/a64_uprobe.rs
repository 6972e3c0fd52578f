//! What Linux's arm64 uprobes do with the instruction under a breakpoint
//! (`arch/arm64/kernel/probes/decode-insn.c`): branches, `adr`/`adrp` and literal loads
//! are simulated in the kernel; exclusive loads and stores, `msr`/`mrs`, exception
//! instructions, other literal loads and unlisted hints are refused; anything else is
//! single-stepped out of line. arm64 has no optimized (jump-instead-of-trap) uprobes,
//! so every hit traps either way: the classes differ by the out-of-line step only.
//!
//! The instruction's text comes from yaxpeax-arm; the class from the encodings the
//! kernel itself tests (`asm/insn.h`'s mask/value pairs).

use yaxpeax_arch::{Decoder, U8Reader};
use yaxpeax_arm::armv8::a64::InstDecoder;

use crate::uprobe_cost_class::CostClass;

/// `(mask, value)` encodings the kernel simulates.
const SIMULATED: [(u32, u32); 11] = [
    (0xFC00_0000, 0x1400_0000), // b
    (0xFC00_0000, 0x9400_0000), // bl
    (0x7E00_0000, 0x3400_0000), // cbz, cbnz
    (0x7E00_0000, 0x3600_0000), // tbz, tbnz
    (0xFF00_0010, 0x5400_0000), // b.cond
    (0xFFFF_FC1F, 0xD61F_0000), // br
    (0xFFFF_FC1F, 0xD63F_0000), // blr
    (0xFFFF_FC1F, 0xD65F_0000), // ret
    (0x1F00_0000, 0x1000_0000), // adr, adrp
    (0xBF00_0000, 0x1800_0000), // ldr (literal)
    (0xFF00_0000, 0x9800_0000), // ldrsw (literal)
];

/// `(mask, value)` encodings the kernel refuses to step.
const REFUSED: [(u32, u32); 7] = [
    (0x3F80_0000, 0x0800_0000), // load/store exclusive
    (0xFFF8_F01F, 0xD500_401F), // msr (immediate)
    (0xFFF0_0000, 0xD510_0000), // msr (register)
    (0xFFF0_0000, 0xD530_0000), // mrs
    (0xFF00_0000, 0xD400_0000), // exception generation (svc, brk, ...)
    (0xFF00_0000, 0xD800_0000), // prfm (literal)
    (0x3B00_0000, 0x1800_0000), // other literal loads (SIMD&FP)
];

/// The hints the kernel steps (`aarch64_insn_is_steppable_hint`): `nop`, `xpaclri`, the
/// `paci*` pointer-authentication hints and `bti` — what compilers put at function
/// entries.
fn steppable_hint(word: u32) -> bool {
    let op = (word >> 5) & 0x7F;
    matches!(
        op,
        0 | 0x07 | 0x08 | 0x0A | 0x18 | 0x19 | 0x1A | 0x1B | 0x20 | 0x22 | 0x24 | 0x26
    )
}

/// The class of a breakpoint on `word`.
pub fn classify(word: u32) -> CostClass {
    const NOP: u32 = 0xD503_201F;
    const HINT: (u32, u32) = (0xFFFF_F01F, 0xD503_201F);
    if word == NOP {
        return CostClass::Nop;
    }
    let is = |(mask, value): (u32, u32)| word & mask == value;
    if SIMULATED.into_iter().any(is) {
        return CostClass::Emulated;
    }
    if is(HINT) {
        return if steppable_hint(word) {
            CostClass::SingleStep
        } else {
            CostClass::Unsupported
        };
    }
    // SIMD&FP literal loads share bits with the simulated `ldr (literal)`: tested after.
    if REFUSED.into_iter().any(is) {
        return CostClass::Unsupported;
    }
    CostClass::SingleStep
}

/// The instruction at `bytes[0..4]`: text, class and length (4; 0 when unreadable).
pub fn decode_one(bytes: &[u8]) -> (String, CostClass, usize) {
    let Some(word) = bytes
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    else {
        return ("(invalid)".into(), CostClass::SingleStep, 0);
    };
    let mut reader = U8Reader::new(&bytes[..4]);
    let text = match InstDecoder::default().decode(&mut reader) {
        Ok(insn) => insn.to_string(),
        Err(_) => format!(".word {word:#010x}"),
    };
    (text, classify(word), 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_compilers_emit_are_classed_as_the_kernel_does() {
        // stp x29, x30, [sp, #-16]!: stepped out of line.
        assert_eq!(classify(0xA9BF_7BFD), CostClass::SingleStep);
        assert_eq!(classify(0xD503_201F), CostClass::Nop);
        // paciasp and bti c: steppable hints.
        assert_eq!(classify(0xD503_233F), CostClass::SingleStep);
        assert_eq!(classify(0xD503_245F), CostClass::SingleStep);
        // adrp x0, ...; b ...; ret; cbz w0, ...: simulated.
        for w in [0x9000_0000, 0x1400_0010, 0xD65F_03C0, 0x3400_0040] {
            assert_eq!(classify(w), CostClass::Emulated, "{w:#x}");
        }
        // ldxr x0, [x1]; mrs x0, tpidr_el0; svc #0: refused.
        for w in [0xC85F_7C20, 0xD53B_D040, 0xD400_0001] {
            assert_eq!(classify(w), CostClass::Unsupported, "{w:#x}");
        }
    }

    #[test]
    fn the_text_is_the_disassembly() {
        let (text, cost, len) = decode_one(&0xA9BF_7BFDu32.to_le_bytes());
        assert!(text.starts_with("stp x29, x30"), "{text}");
        assert_eq!((cost, len), (CostClass::SingleStep, 4));
        assert_eq!(decode_one(&[1, 2]).2, 0);
    }
}
