//! A llama.cpp library's image read by virtual address, as the loader lays it out: the
//! strings ggml's version functions return (`ggml_version()`, `ggml_commit()`) and its
//! op-name table (`GGML_OP_NAME`), found without debug information.

use std::collections::{BTreeSet, HashMap};

use iced_x86::{Decoder, DecoderOptions, Mnemonic};
use object::{Object, ObjectSection, ObjectSymbol, RelocationFlags};

/// Reads the image of a loaded ELF by virtual address: section data, with the targets of
/// relative relocations where the loader will write them.
struct Image<'d, 'f> {
    file: &'f object::File<'d>,
    relative: HashMap<u64, u64>,
}

impl<'d, 'f> Image<'d, 'f> {
    fn new(file: &'f object::File<'d>) -> Image<'d, 'f> {
        let relative = file
            .dynamic_relocations()
            .into_iter()
            .flatten()
            .filter(|(_, r)| {
                matches!(
                    r.flags(),
                    RelocationFlags::Elf { r_type }
                        if r_type == object::elf::R_X86_64_RELATIVE
                            || r_type == object::elf::R_AARCH64_RELATIVE
                )
            })
            .map(|(offset, r)| (offset, r.addend() as u64))
            .collect();
        Image { file, relative }
    }

    /// `len` bytes at virtual address `addr`, if a section with data holds them.
    fn bytes(&self, addr: u64, len: usize) -> Option<&'d [u8]> {
        self.file.sections().find_map(|sec| {
            let off = addr.checked_sub(sec.address())?;
            if off >= sec.size() {
                return None;
            }
            let data = sec.data().ok()?;
            let off = usize::try_from(off).ok()?;
            data.get(off..off.checked_add(len)?)
        })
    }

    /// The pointer the loader leaves in the 8-byte slot at `addr`: a relative
    /// relocation's target, or the slot's own content (RELR, non-PIE).
    fn pointer(&self, addr: u64) -> Option<u64> {
        if let Some(&t) = self.relative.get(&addr) {
            return Some(t);
        }
        let b = self.bytes(addr, 8)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }

    /// The NUL-terminated string at `addr` (at most 256 bytes, UTF-8).
    fn c_str(&self, addr: u64) -> Option<&'d str> {
        let sec = self
            .file
            .sections()
            .find(|sec| addr >= sec.address() && addr < sec.address().saturating_add(sec.size()))?;
        let data = sec.data().ok()?;
        let start = usize::try_from(addr - sec.address()).ok()?;
        let rest = data.get(start..)?;
        let end = rest.iter().take(256).position(|&b| b == 0)?;
        std::str::from_utf8(&rest[..end]).ok()
    }
}

/// The string a `const char *f(void)` returns, from its first instructions: x86-64
/// `lea rax, [rip + s]`, AArch64 `adrp x0, page; add x0, x0, off`.
pub fn string_returned_by(file: &object::File<'_>, function: &str) -> Option<String> {
    let sym = file
        .dynamic_symbols()
        .chain(file.symbols())
        .find(|s| s.is_definition() && s.name() == Ok(function))?;
    let image = Image::new(file);
    let code = image.bytes(sym.address(), 32)?;
    let target = match file.architecture() {
        object::Architecture::X86_64 => {
            let mut decoder = Decoder::with_ip(64, code, sym.address(), DecoderOptions::NONE);
            decoder
                .iter()
                .take(6)
                .find(|i| i.mnemonic() == Mnemonic::Lea && i.is_ip_rel_memory_operand())
                .map(|i| i.ip_rel_memory_address())?
        }
        object::Architecture::Aarch64 => aarch64_adrp_add(code, sym.address())?,
        _ => return None,
    };
    image.c_str(target).map(str::to_owned)
}

/// The address an `adrp xN, page; add xN, xN, #off` pair at the start of `code` makes.
fn aarch64_adrp_add(code: &[u8], pc: u64) -> Option<u64> {
    let word = |i: usize| -> Option<u32> {
        Some(u32::from_le_bytes(
            code.get(i * 4..i * 4 + 4)?.try_into().ok()?,
        ))
    };
    for i in 0..4 {
        let adrp = word(i)?;
        if adrp & 0x9f00_0000 != 0x9000_0000 {
            continue;
        }
        let rd = adrp & 0x1f;
        let immlo = u64::from((adrp >> 29) & 0x3);
        let immhi = u64::from((adrp >> 5) & 0x7_ffff);
        let imm = ((immhi << 2 | immlo) << 12) as i64;
        let imm = (imm << 31) >> 31; // sign-extend 33 bits
        let page = ((pc + 4 * i as u64) & !0xfff).wrapping_add(imm as u64);
        let add = word(i + 1)?;
        // ADD (immediate), 64-bit, no shift, Rn = Rd = the adrp's register.
        if add & 0xffc0_0000 == 0x9100_0000 && (add >> 5) & 0x1f == rd {
            return Some(page + u64::from((add >> 10) & 0xfff));
        }
    }
    None
}

/// ggml's `GGML_OP_NAME` table: the run of pointers to upper-case names starting
/// `"NONE", "DUP", "ADD"`, up to the first entry that is not an op name.
pub fn op_name_table(file: &object::File<'_>) -> Option<Vec<String>> {
    let image = Image::new(file);
    let is_op_name = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    };
    let starts_table = |slot: u64| {
        ["NONE", "DUP", "ADD"].iter().enumerate().all(|(i, want)| {
            image
                .pointer(slot + 8 * i as u64)
                .and_then(|p| image.c_str(p))
                == Some(want)
        })
    };
    // Candidate slots: relocated pointers (PIC) or, without relocations, every aligned
    // word of the data sections.
    let mut candidates: BTreeSet<u64> = image.relative.keys().copied().collect();
    if candidates.is_empty() {
        for sec in file.sections() {
            let name = sec.name().unwrap_or("");
            if name.starts_with(".data") || name.starts_with(".rodata") {
                candidates.extend((sec.address()..sec.address() + sec.size()).step_by(8));
            }
        }
    }
    let start = candidates.into_iter().find(|&slot| starts_table(slot))?;
    let mut names = Vec::new();
    for i in 0..common::ggml_abi::MAX_GGML_OPS as u64 {
        match image.pointer(start + 8 * i).and_then(|p| image.c_str(p)) {
            Some(s) if is_op_name(s) => names.push(s.to_owned()),
            _ => break,
        }
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adrp_add_pairs_are_decoded() {
        // adrp x0, #0x1000 (from pc 0x10_0000) ; add x0, x0, #0x234 ; ret
        let pc = 0x10_0000u64;
        let adrp: u32 = 0x9000_0000 | (1 << 29); // immlo = 1 → one page
        let add: u32 = 0x9100_0000 | (0x234 << 10);
        let ret: u32 = 0xd65f_03c0;
        let code: Vec<u8> = [adrp, add, ret]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        assert_eq!(aarch64_adrp_add(&code, pc), Some(0x10_1234));
        assert_eq!(aarch64_adrp_add(&ret.to_le_bytes(), pc), None);
    }
}
