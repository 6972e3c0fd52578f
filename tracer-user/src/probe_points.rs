//! Probe points of a target binary: where each engine probe symbol is, what its first
//! instruction is, how expensive a uprobe there will be, and where to attach to avoid
//! single-stepping (`shared/reference.md`: a nop or push is emulated for ~0.35-0.7 µs, any
//! other first instruction is single-stepped for ~6 µs).

use std::path::{Path, PathBuf};

use common::engine_abi::symbols;
use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, Formatter, InstructionInfoFactory, IntelFormatter,
    Mnemonic, OpAccess, OpKind, Register,
};
use object::{Object, ObjectSection, ObjectSymbol};

/// Largest executable this tool will read (untrusted input limit).
pub const MAX_BINARY_BYTES: u64 = 2 << 30;
/// Bytes decoded at a probe point.
const DECODE_WINDOW: usize = 32;

/// Why probe points could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ProbePointError {
    /// The binary could not be read.
    #[error("cannot read target binary `{path}`")]
    Read {
        /// The binary.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The binary is too large.
    #[error("target binary `{path}` is larger than {MAX_BINARY_BYTES} bytes")]
    TooLarge {
        /// The binary.
        path: PathBuf,
    },
    /// The file is not an ELF object this tool understands.
    #[error("target `{path}` is not a readable ELF executable")]
    NotElf {
        /// The binary.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: object::Error,
    },
    /// None of the engine's probe symbols are exported.
    #[error(
        "target binary `{path}` has no engine probe symbols (engine_decode, engine_op_compute, ...): is it the profinfer engine?"
    )]
    NoProbeSymbols {
        /// The binary.
        path: PathBuf,
    },
}

pub use crate::uprobe_cost_class::CostClass;

/// One resolved probe point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbePoint {
    /// Symbol name.
    pub symbol: String,
    /// Virtual address of the symbol.
    pub address: u64,
    /// First instruction at the symbol.
    pub first_insn: String,
    /// Cost class of probing the symbol's first instruction.
    pub entry_cost: CostClass,
    /// Offset from the symbol to attach at (0, or past an `endbr64`).
    pub attach_offset: u64,
    /// Instruction at the attach point.
    pub attach_insn: String,
    /// Cost class at the attach point.
    pub attach_cost: CostClass,
}

/// The resolved probe points of one binary.
#[derive(Clone, Debug)]
pub struct ProbePoints {
    /// The binary.
    pub path: PathBuf,
    /// GNU build-id (hex), if present.
    pub build_id: Option<String>,
    /// The engine probe symbols found, in `symbols::ALL` order.
    pub points: Vec<ProbePoint>,
}

impl ProbePoints {
    /// The point for `symbol`, if resolved.
    pub fn get(&self, symbol: &str) -> Option<&ProbePoint> {
        self.points.iter().find(|p| p.symbol == symbol)
    }
}

/// Classifies one decoded x86-64 instruction: what the kernel's x86 uprobes do with a
/// breakpoint on it (`arch/x86/kernel/uprobes.c`: nops are skipped, `push reg` and
/// relative jumps, calls and conditional branches are emulated; anything else is
/// single-stepped out of line).
fn classify(insn: &iced_x86::Instruction) -> CostClass {
    match insn.mnemonic() {
        Mnemonic::Nop => CostClass::Nop,
        Mnemonic::Push if insn.op0_kind() == OpKind::Register => CostClass::Emulated,
        _ if is_relative_branch(insn) => CostClass::Emulated,
        _ => CostClass::SingleStep,
    }
}

/// A `jmp`, `call` or `jcc` to an immediate (relative) target.
fn is_relative_branch(insn: &iced_x86::Instruction) -> bool {
    matches!(
        insn.flow_control(),
        FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch | FlowControl::Call
    ) && matches!(
        insn.op0_kind(),
        OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
    )
}

/// Which of a function's arguments its probe reads, so which instructions the attach
/// point may be moved past.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgUse {
    /// Arguments on the stack (a struct passed by value): only the entry, or just past
    /// an `endbr64`, keeps them where the probe looks.
    Stack,
    /// The first `n` integer argument registers (`rdi, rsi, rdx, rcx, r8, r9`): any
    /// instruction of the function's straight-line start that none of those before it
    /// overwrite.
    Registers(usize),
}

/// The System V x86-64 integer argument registers, in order.
pub const ARG_REGISTERS: [Register; 6] = [
    Register::RDI,
    Register::RSI,
    Register::RDX,
    Register::RCX,
    Register::R8,
    Register::R9,
];

/// Instructions looked at from a function's entry for a cheaper attach point.
const ATTACH_SCAN: usize = 16;

/// Decodes the instruction at `bytes[0..]` (address `ip`): text, cost class, length.
fn decode_one(bytes: &[u8], ip: u64) -> (String, CostClass, usize, Code) {
    let mut decoder = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    let insn = decoder.decode();
    if insn.is_invalid() {
        return ("(invalid)".into(), CostClass::SingleStep, 0, insn.code());
    }
    let mut text = String::new();
    IntelFormatter::new().format(&insn, &mut text);
    // VEX (C4/C5) and EVEX (62) encodings, which legacy prefixes cannot precede.
    let cost = if matches!(bytes.first(), Some(0xc4 | 0xc5 | 0x62)) {
        CostClass::Unsupported
    } else {
        classify(&insn)
    };
    (text, cost, insn.len(), insn.code())
}

/// Resolves the probe points of the ELF file at `path`.
pub fn resolve(path: &Path) -> Result<ProbePoints, ProbePointError> {
    let read = |source| ProbePointError::Read {
        path: path.to_path_buf(),
        source,
    };
    let len = std::fs::metadata(path).map_err(read)?.len();
    if len > MAX_BINARY_BYTES {
        return Err(ProbePointError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    let data = std::fs::read(path).map_err(read)?;
    resolve_bytes(path, &data)
}

/// Resolves probe points from an ELF image already in memory.
pub fn resolve_bytes(path: &Path, data: &[u8]) -> Result<ProbePoints, ProbePointError> {
    let file = parse(path, data)?;
    let points: Vec<ProbePoint> = symbols::ALL
        .iter()
        .filter_map(|name| {
            file.dynamic_symbols()
                .chain(file.symbols())
                .find(|s| s.name() == Ok(name) && s.is_definition())
                .map(|sym| point_of(&file, name, &sym, ArgUse::Registers(ARG_REGISTERS.len())))
        })
        .collect();
    if points.is_empty() {
        return Err(ProbePointError::NoProbeSymbols {
            path: path.to_path_buf(),
        });
    }
    Ok(ProbePoints {
        path: path.to_path_buf(),
        build_id: build_id(&file),
        points,
    })
}

/// Parses `data` as an object file, or says which file is not one.
pub fn parse<'d>(path: &Path, data: &'d [u8]) -> Result<object::File<'d>, ProbePointError> {
    object::File::parse(data).map_err(|source| ProbePointError::NotElf {
        path: path.to_path_buf(),
        source,
    })
}

/// The GNU build-id of `file` in hex, if it has one.
pub fn build_id(file: &object::File<'_>) -> Option<String> {
    file.build_id()
        .ok()
        .flatten()
        .map(|id| id.iter().map(|b| format!("{b:02x}")).collect())
}

/// The probe points of every defined function of `file` whose name `wanted` accepts
/// (with how its probe reads its arguments), dynamic symbols first (stripped libraries
/// have only those), each name once.
pub fn points_matching(
    file: &object::File<'_>,
    wanted: impl Fn(&str) -> Option<ArgUse>,
) -> Vec<ProbePoint> {
    let mut seen = std::collections::BTreeSet::new();
    file.dynamic_symbols()
        .chain(file.symbols())
        .filter(|s| s.is_definition() && s.kind() == object::SymbolKind::Text)
        .filter_map(|s| {
            let name = s.name().ok()?;
            let uses = wanted(name)?;
            seen.insert(name.to_owned())
                .then(|| point_of(file, name, &s, uses))
        })
        .collect()
}

/// The code of function `sym`: its bytes (at least a decode window's worth, for a
/// symbol without a size), from the section that holds it.
pub fn function_bytes<'d>(
    file: &object::File<'d>,
    sym: &impl ObjectSymbol<'d>,
) -> Option<&'d [u8]> {
    let address = sym.address();
    let size = sym.size().min(MAX_FUNCTION_SCAN);
    let sec = file.section_by_index(sym.section_index()?).ok()?;
    let data = sec.data().ok()?;
    let start = usize::try_from(address.checked_sub(sec.address())?).ok()?;
    let end = (start + (size as usize).max(DECODE_WINDOW)).min(data.len());
    data.get(start..end)
}

/// Most bytes of one function decoded to look for branches into its start.
const MAX_FUNCTION_SCAN: u64 = 1 << 20;

/// The probe point at symbol `sym` (named `name`): its first instruction and, where that
/// one would be single-stepped, the first cheap one of the function's straight-line start
/// that its probe can use instead ([`cheap_attach`]).
fn point_of<'d>(
    file: &object::File<'d>,
    name: &str,
    sym: &impl ObjectSymbol<'d>,
    uses: ArgUse,
) -> ProbePoint {
    let address = sym.address();
    let size = sym.size().min(MAX_FUNCTION_SCAN);
    let bytes = function_bytes(file, sym)
        .map(<[u8]>::to_vec)
        .unwrap_or_default();
    let (first_insn, entry_cost, attach) = match file.architecture() {
        object::Architecture::Aarch64 => {
            // Every arm64 uprobe hit traps: no cheaper point to move to.
            let (text, cost, _) = crate::a64_uprobe::decode_one(&bytes);
            (text, cost, None)
        }
        _ => {
            let (text, cost, _, _) = decode_one(&bytes, address);
            (text, cost, cheap_attach(&bytes, address, size, uses))
        }
    };
    let (attach_offset, attach_insn, attach_cost) =
        attach.unwrap_or((0, first_insn.clone(), entry_cost));
    ProbePoint {
        symbol: name.to_owned(),
        address,
        first_insn,
        entry_cost,
        attach_offset,
        attach_insn,
        attach_cost,
    }
}

/// Where to attach in a function whose first instruction is not a nop: the first
/// instruction of its straight-line start (the instructions every call runs before the
/// first branch, that branch included) that the kernel emulates (a `push reg`, a
/// relative branch) or skips (a nop), provided the instructions before it leave the
/// arguments the probe reads (`uses`) where they were, and no branch of the function
/// lands between its entry and that instruction (which would run it more than once per
/// call). `code` holds the function's `size` bytes from `address` (0: size unknown, only
/// the entry and a leading `endbr64` are considered). Returns (offset, instruction,
/// cost), or `None` to keep the entry.
fn cheap_attach(
    code: &[u8],
    address: u64,
    size: u64,
    uses: ArgUse,
) -> Option<(u64, String, CostClass)> {
    let mut decoder = Decoder::with_ip(64, code, address, DecoderOptions::NONE);
    let mut info = InstructionInfoFactory::new();
    let mut clobbered = false;
    let mut only_endbr = true;
    for _ in 0..ATTACH_SCAN {
        if !decoder.can_decode() {
            return None;
        }
        let at = decoder.position();
        let insn = decoder.decode();
        if insn.is_invalid() {
            return None;
        }
        let offset = insn.ip() - address;
        let (text, cost, _, _) = decode_one(&code[at..], insn.ip());
        let usable = match uses {
            ArgUse::Stack => only_endbr,
            ArgUse::Registers(_) => !clobbered,
        } && (offset == 0
            || (size > 0 && !branches_into(code, address, size, offset)));
        if matches!(cost, CostClass::Nop | CostClass::Emulated) && usable {
            return (offset > 0).then_some((offset, text, cost));
        }
        if insn.flow_control() != FlowControl::Next || (size == 0 && !only_endbr) {
            return None;
        }
        only_endbr &= insn.code() == Code::Endbr64;
        if let ArgUse::Registers(n) = uses {
            let used = info.info(&insn);
            clobbered |= used.used_registers().iter().any(|r| {
                ARG_REGISTERS[..n.min(ARG_REGISTERS.len())].contains(&r.register().full_register())
                    && matches!(
                        r.access(),
                        OpAccess::Write
                            | OpAccess::CondWrite
                            | OpAccess::ReadWrite
                            | OpAccess::ReadCondWrite
                    )
            });
        }
    }
    None
}

/// Whether any relative branch of the function (`size` bytes at `address`) lands at an
/// offset in `1..=upto`.
fn branches_into(code: &[u8], address: u64, size: u64, upto: u64) -> bool {
    let end = (size as usize).min(code.len());
    let mut decoder = Decoder::with_ip(64, &code[..end], address, DecoderOptions::NONE);
    while decoder.can_decode() {
        let insn = decoder.decode();
        if is_relative_branch(&insn) {
            let target = insn.near_branch_target();
            if target > address && target <= address + upto {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::write::{Object as WObject, StandardSection, Symbol, SymbolSection};
    use object::{Architecture, BinaryFormat, Endianness, SymbolFlags, SymbolKind, SymbolScope};

    /// An ELF with the given functions (name, machine code) in `.text`.
    fn elf(funcs: &[(&str, &[u8])]) -> Vec<u8> {
        let mut obj = WObject::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let text = obj.section_id(StandardSection::Text);
        for (name, code) in funcs {
            let off = obj.append_section_data(text, code, 16);
            obj.add_symbol(Symbol {
                name: name.as_bytes().to_vec(),
                value: off,
                size: code.len() as u64,
                kind: SymbolKind::Text,
                scope: SymbolScope::Dynamic,
                weak: false,
                section: SymbolSection::Section(text),
                flags: SymbolFlags::None,
            });
        }
        obj.write().expect("write elf")
    }

    #[test]
    fn classifies_nop_push_endbr_and_single_step() {
        let nop5: &[u8] = &[0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3];
        let endbr_push: &[u8] = &[0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0xc3]; // endbr64; push rbp
        let endbr_lea: &[u8] = &[0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x8d, 0x05, 0, 0, 0, 0, 0xc3];
        let push: &[u8] = &[0x55, 0xc3];
        let vex: &[u8] = &[0xc5, 0xfa, 0x6f, 0x46, 0x54, 0xc3]; // vmovdqu xmm0,[rsi+54h]
        let data = elf(&[
            ("engine_phase_sample", vex),
            ("engine_decode", nop5),
            ("engine_graph_compute", endbr_push),
            ("engine_op_compute", endbr_lea),
            ("engine_phase_embed", push),
        ]);
        let pts = resolve_bytes(Path::new("t"), &data).expect("resolves");
        let p = pts.get("engine_decode").expect("decode");
        assert_eq!((p.entry_cost, p.attach_offset), (CostClass::Nop, 0));
        let p = pts.get("engine_graph_compute").expect("graph");
        assert_eq!(p.entry_cost, CostClass::SingleStep);
        assert_eq!((p.attach_offset, p.attach_cost), (4, CostClass::Emulated));
        assert!(p.first_insn.contains("endbr64"), "{}", p.first_insn);
        let p = pts.get("engine_op_compute").expect("op");
        assert_eq!((p.attach_offset, p.attach_cost), (0, CostClass::SingleStep));
        let p = pts.get("engine_phase_embed").expect("embed");
        assert_eq!(p.entry_cost, CostClass::Emulated);
        let p = pts.get("engine_phase_sample").expect("sample");
        assert_eq!(p.attach_cost, CostClass::Unsupported, "{}", p.first_insn);
    }

    #[test]
    fn binary_without_symbols_is_refused() {
        let data = elf(&[("main", &[0xc3])]);
        assert!(matches!(
            resolve_bytes(Path::new("t"), &data),
            Err(ProbePointError::NoProbeSymbols { .. })
        ));
    }
}
