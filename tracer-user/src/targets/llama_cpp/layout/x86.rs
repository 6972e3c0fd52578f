//! The x86-64 instruction reader: an accessor's memory accesses from a straight-line walk
//! of its first instructions, decoded with iced-x86.

use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, InstructionInfoFactory, MemorySize, OpAccess,
    OpKind, Register,
};

use super::access::{Access, AccessKind, MAX_INSTRUCTIONS, Origin};

/// x86-64 System V: arguments in rdi, rsi, rdx, rcx, r8, r9; rax returns.
pub fn x86_accesses(code: &[u8], ip: u64) -> Vec<Access> {
    const ARGS: [Register; 6] = crate::probe_points::ARG_REGISTERS;
    const CALLER_SAVED: [Register; 9] = [
        Register::RAX,
        Register::RCX,
        Register::RDX,
        Register::RSI,
        Register::RDI,
        Register::R8,
        Register::R9,
        Register::R10,
        Register::R11,
    ];
    let mut regs: std::collections::HashMap<Register, Origin> = ARGS
        .iter()
        .enumerate()
        .map(|(i, &r)| (r, Origin::Arg(i as u8)))
        .collect();
    let origin = |regs: &std::collections::HashMap<Register, Origin>, r: Register| {
        regs.get(&r.full_register())
            .copied()
            .unwrap_or(Origin::Other)
    };
    let mut out = Vec::new();
    let mut info = InstructionInfoFactory::new();
    let mut called = false;
    for ins in Decoder::with_ip(64, code, ip, DecoderOptions::NONE)
        .iter()
        .take(MAX_INSTRUCTIONS)
    {
        if ins.is_invalid() {
            break;
        }
        let used = info.info(&ins);
        // `lea` computes an address: iced lists no memory use for it.
        if ins.mnemonic() == iced_x86::Mnemonic::Lea && ins.memory_index() == Register::None {
            out.push(Access {
                kind: AccessKind::Address,
                base: origin(&regs, ins.memory_base()),
                disp: ins.memory_displacement64() as i64,
                size: 0,
            });
        }
        for m in used.used_memory() {
            if m.base() == Register::RIP
                || m.index() != Register::None && m.base() == Register::None
            {
                continue;
            }
            let base = origin(&regs, m.base());
            let kind = match m.access() {
                OpAccess::NoMemAccess => AccessKind::Address,
                OpAccess::Write | OpAccess::CondWrite => AccessKind::Write {
                    value: if ins.op_count() > 1 && ins.op1_kind() == OpKind::Register {
                        origin(&regs, ins.op1_register())
                    } else {
                        Origin::Other
                    },
                },
                _ => AccessKind::Read,
            };
            let size = if kind == AccessKind::Address {
                0
            } else {
                memory_bytes(m.memory_size())
            };
            out.push(Access {
                kind,
                base,
                disp: m.displacement() as i64,
                size,
            });
        }
        // Register effects, for the next instructions.
        if ins.flow_control() == FlowControl::Call {
            for r in CALLER_SAVED {
                regs.insert(r, Origin::Other);
            }
            if !called {
                regs.insert(Register::RAX, Origin::Returned);
                called = true;
            }
            continue;
        }
        if matches!(
            ins.flow_control(),
            FlowControl::Return | FlowControl::UnconditionalBranch
        ) {
            break;
        }
        let moved = match ins.code() {
            Code::Mov_r64_rm64 | Code::Mov_rm64_r64 if ins.op1_kind() == OpKind::Register => {
                Some(origin(&regs, ins.op1_register()))
            }
            Code::Mov_r64_rm64 => ins
                .memory_base()
                .full_register()
                .ne(&Register::RIP)
                .then(|| match origin(&regs, ins.memory_base()) {
                    Origin::Arg(a) if ins.memory_index() == Register::None => {
                        Origin::Field(a, ins.memory_displacement64() as i64)
                    }
                    _ => Origin::Other,
                }),
            _ => None,
        };
        for r in used.used_registers() {
            if matches!(
                r.access(),
                OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite
            ) {
                regs.insert(r.register().full_register(), Origin::Other);
            }
        }
        if let Some(o) = moved
            && ins.op0_kind() == OpKind::Register
        {
            regs.insert(ins.op0_register().full_register(), o);
        }
    }
    out
}

fn memory_bytes(size: MemorySize) -> u8 {
    u8::try_from(size.size()).unwrap_or(0)
}
