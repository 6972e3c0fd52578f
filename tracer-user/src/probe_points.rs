//! Probe points of a target binary: where a probed function is, what its first
//! instruction is, how expensive a uprobe there will be, and where to attach to avoid
//! single-stepping (`shared/reference.md`: a nop or push is emulated for ~0.35-0.7 µs, any
//! other first instruction is single-stepped for ~6 µs).

use std::path::{Path, PathBuf};

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

/// The bytes of the ELF file at `path` (at most [`MAX_BINARY_BYTES`]).
///
/// # Errors
/// [`ProbePointError`]: the file cannot be read or is too large.
pub fn read_binary(path: &Path) -> Result<Vec<u8>, ProbePointError> {
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
    std::fs::read(path).map_err(read)
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
pub fn point_of<'d>(
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
