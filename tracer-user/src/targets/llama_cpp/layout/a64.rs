//! The AArch64 instruction reader: an accessor's memory accesses from a straight-line
//! walk of its first instructions, decoded with yaxpeax-arm. AAPCS64: arguments in
//! x0..x7; x0 returns; x0..x18 caller-saved.

use yaxpeax_arch::{Decoder as _, U8Reader};
use yaxpeax_arm::armv8::a64::{InstDecoder, Instruction, Opcode, Operand, SizeCode};

use super::access::{Access, AccessKind, MAX_INSTRUCTIONS, Origin};

/// Where the values of x0..x30 came from (index 31, the stack pointer or the zero
/// register, is never an argument).
type Regs = [Origin; 32];

/// What one instruction did to the registers: those it overwrote and, where known, the
/// origin one of them now holds.
#[derive(Default)]
struct Effect {
    written: Vec<u16>,
    set: Option<(u16, Origin)>,
}

/// The register operand `o` (its size and number), if it is one.
fn reg_of(o: &Operand) -> Option<(SizeCode, u16)> {
    match *o {
        Operand::Register(size, r) | Operand::RegisterOrSP(size, r) => Some((size, r)),
        _ => None,
    }
}

/// The base register and displacement of the memory operand `o`, if it is one.
fn mem_of(o: &Operand) -> Option<(u16, i64)> {
    match *o {
        Operand::RegPreIndex(r, off, _) => Some((r, i64::from(off))),
        Operand::RegPostIndex(r, _) => Some((r, 0)),
        _ => None,
    }
}

/// Bytes of a register of size `s`.
fn bytes(s: SizeCode) -> u8 {
    if s == SizeCode::X { 8 } else { 4 }
}

/// The origin of register `r`'s value.
fn origin_of(regs: &Regs, r: u16) -> Origin {
    if r < 31 {
        regs[r as usize]
    } else {
        Origin::Other
    }
}

/// The registers a load or store pair (`pair`) or single transfers, and its memory
/// operand.
fn transfer_operands(ins: &Instruction, pair: bool) -> (Vec<Operand>, &Operand) {
    let ops = &ins.operands;
    if pair {
        (vec![ops[0], ops[1]], &ops[2])
    } else {
        (vec![ops[0]], &ops[1])
    }
}

/// `ldr`, `ldur`, `ldrsw`, `ldp`: reads; a pointer loaded from an argument is that
/// argument's field.
fn load(ins: &Instruction, regs: &Regs, out: &mut Vec<Access>) -> Effect {
    let mut effect = Effect::default();
    let (dsts, mem) = transfer_operands(ins, ins.opcode == Opcode::LDP);
    let Some((base, disp)) = mem_of(mem) else {
        return effect;
    };
    let b = origin_of(regs, base);
    for (i, d) in dsts.iter().enumerate() {
        let Some((size, r)) = reg_of(d) else { continue };
        let size = if ins.opcode == Opcode::LDRSW {
            4
        } else {
            bytes(size)
        };
        let disp = disp + i as i64 * i64::from(size);
        out.push(Access {
            kind: AccessKind::Read,
            base: b,
            disp,
            size,
        });
        effect.written.push(r);
        if let (Origin::Arg(a), 8) = (b, size) {
            effect.set = Some((r, Origin::Field(a, disp)));
        }
    }
    effect
}

/// `str`, `stur`, `stp` (not to the stack): writes of the stored registers' origins.
fn store(ins: &Instruction, regs: &Regs, out: &mut Vec<Access>) {
    let (srcs, mem) = transfer_operands(ins, ins.opcode == Opcode::STP);
    let Some((base, disp)) = mem_of(mem).filter(|&(base, _)| base != 31) else {
        return;
    };
    let b = origin_of(regs, base);
    for (i, s) in srcs.iter().enumerate() {
        let Some((size, r)) = reg_of(s) else { continue };
        let size = bytes(size);
        out.push(Access {
            kind: AccessKind::Write {
                value: origin_of(regs, r),
            },
            base: b,
            disp: disp + i as i64 * i64::from(size),
            size,
        });
    }
}

/// `add xd, xn, #imm`: an address computed from `xn`.
fn add(ins: &Instruction, regs: &Regs, out: &mut Vec<Access>) -> Effect {
    let ops = &ins.operands;
    let mut effect = Effect::default();
    if let (Some((_, rd)), Some((_, rn))) = (reg_of(&ops[0]), reg_of(&ops[1])) {
        let imm = match ops[2] {
            Operand::Immediate(v) => Some(i64::from(v)),
            Operand::ImmShift(v, s) => Some(i64::from(v) << s),
            _ => None,
        };
        if let Some(imm) = imm {
            out.push(Access {
                kind: AccessKind::Address,
                base: origin_of(regs, rn),
                disp: imm,
                size: 0,
            });
        }
        effect.written.push(rd);
    }
    effect
}

/// `orr`, and `mov xd, xn` (an alias of `orr xd, xzr, xn`), which moves an origin.
fn orr(ins: &Instruction, regs: &Regs) -> Effect {
    let ops = &ins.operands;
    let mut effect = Effect::default();
    if let Some((_, rd)) = reg_of(&ops[0]) {
        effect.written.push(rd);
        let src = match (reg_of(&ops[1]), ops[2]) {
            (Some((_, 31)), Operand::RegShift(_, 0, _, rn)) => Some((SizeCode::X, rn)),
            (Some((_, 31)), o) => reg_of(&o),
            _ => None,
        };
        if let Some((_, rn)) = src {
            effect.set = Some((rd, origin_of(regs, rn)));
        }
    }
    effect
}

/// The memory accesses of the AArch64 function `code` (from its entry), relative to its
/// arguments, up to its first return or unconditional branch.
pub fn a64_accesses(code: &[u8]) -> Vec<Access> {
    let mut regs: Regs = [Origin::Other; 32];
    for (i, r) in regs.iter_mut().enumerate().take(8) {
        *r = Origin::Arg(i as u8);
    }
    let decoder = InstDecoder::default();
    let mut out = Vec::new();
    let mut called = false;
    for word in code.chunks_exact(4).take(MAX_INSTRUCTIONS) {
        let mut reader = U8Reader::new(word);
        let Ok(ins) = decoder.decode(&mut reader) else {
            break;
        };
        let effect = match ins.opcode {
            Opcode::LDR | Opcode::LDUR | Opcode::LDRSW | Opcode::LDP => load(&ins, &regs, &mut out),
            Opcode::STR | Opcode::STUR | Opcode::STP => {
                store(&ins, &regs, &mut out);
                Effect::default()
            }
            Opcode::ADD => add(&ins, &regs, &mut out),
            Opcode::ORR => orr(&ins, &regs),
            Opcode::BL | Opcode::BLR => {
                for r in regs.iter_mut().take(19) {
                    *r = Origin::Other;
                }
                if !called {
                    regs[0] = Origin::Returned;
                    called = true;
                }
                continue;
            }
            Opcode::RET | Opcode::B | Opcode::BR => break,
            // Read their first register, write none.
            Opcode::CBZ
            | Opcode::CBNZ
            | Opcode::TBZ
            | Opcode::TBNZ
            | Opcode::Bcc(_)
            | Opcode::CCMP
            | Opcode::CCMN
            | Opcode::PRFM => Effect::default(),
            _ => Effect {
                written: reg_of(&ins.operands[0])
                    .map(|(_, rd)| rd)
                    .into_iter()
                    .collect(),
                set: None,
            },
        };
        for r in effect.written {
            if r < 31 {
                regs[r as usize] = Origin::Other;
            }
        }
        if let Some((r, o)) = effect.set
            && r < 31
        {
            regs[r as usize] = o;
        }
    }
    out
}
