//! ggml's struct layout read from a build's own machine code.
//!
//! The probes read `ggml_tensor`, `ggml_cgraph` and `llama_batch` fields at offsets that
//! belong to somebody else's build. Instead of trusting a table keyed by version, the
//! offsets are derived from the small accessors every build exports, which compile to a
//! few instructions naming the offset: `ggml_get_name` is `lea rax, [rdi + name]`
//! (`add x0, x0, #name`), `ggml_graph_n_nodes` loads `[rdi + n_nodes]`, `ggml_dup` stores
//! its argument into `result->src[0]`, and so on ([`RULES`]). Each function is decoded
//! with a maintained disassembler (iced-x86, yaxpeax-arm) into the memory accesses it
//! makes relative to its arguments ([`Access`]); the rules pick offsets from those.
//!
//! A field that cannot be derived falls back to the table of the build's version, if it
//! has one; the fields no accessor reads (`ggml_compute_params.ith`, `llama_batch`'s)
//! come from that table or, for a build without one, from the layout of every build
//! tested (Nov 2024 to 2026) — the attach-time check (`record::layout_check`) catches a
//! wrong one. The
//! derived offsets are checked against each other (`ne` then `nb` four words later,
//! `op_params` right after `op`, …) before anything is attached.

use common::ggml_abi::GgmlLayout;
use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, InstructionInfoFactory, MemorySize, OpAccess,
    OpKind, Register,
};
use object::{Object, ObjectSymbol};

/// Instructions decoded per accessor (they are a handful; the rest is assert paths).
const MAX_INSTRUCTIONS: usize = 40;

/// Where a value in a register came from, as far as a straight-line walk can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The function's n-th integer argument, unchanged.
    Arg(u8),
    /// The return value of the (first) call the function made.
    Returned,
    /// A pointer loaded from `[argument + offset]`.
    Field(u8, i64),
    /// Anything else.
    Other,
}

/// What an instruction did with memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    /// Read (a load, a compare, an arithmetic source).
    Read,
    /// Written; `value` is where the stored register came from.
    Write {
        /// The stored register's origin (`Other` for an immediate).
        value: Origin,
    },
    /// Only the address was computed (`lea`, `add xd, xn, #imm`).
    Address,
}

/// One memory access of a function, relative to a register's origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// Read, written or only addressed.
    pub kind: AccessKind,
    /// The base register's origin.
    pub base: Origin,
    /// The displacement.
    pub disp: i64,
    /// Bytes accessed (0 for an address).
    pub size: u8,
}

/// Where one offset came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OffsetSource {
    /// Read from this function's machine code.
    Derived(&'static str),
    /// From the known-layout table for this ggml version.
    Table(String),
    /// The layout of every build tested, Nov 2024 to 2026 (no accessor reads the field
    /// and the build's version has no table entry).
    Shared,
    /// Given by the user (`--ggml-offset`).
    Given,
}

impl std::fmt::Display for OffsetSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OffsetSource::Derived(function) => write!(f, "derived from {function}"),
            OffsetSource::Table(version) => write!(f, "table (ggml {version})"),
            OffsetSource::Shared => f.write_str("as in every build tested (2024-2026)"),
            OffsetSource::Given => f.write_str("given (--ggml-offset)"),
        }
    }
}

/// One field's offset and its source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldOffset {
    /// `struct.field`, as in ggml's headers.
    pub field: &'static str,
    /// Bytes from the struct's start.
    pub offset: u32,
    /// Where the offset came from.
    pub source: OffsetSource,
}

/// An offset the user gives for a build whose code does not name it
/// (`--ggml-offset ggml_tensor.name=256`, from `offsetof` against the build's headers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GivenOffset {
    field: Field,
    offset: u32,
}

impl std::str::FromStr for GivenOffset {
    type Err = String;

    fn from_str(s: &str) -> Result<GivenOffset, String> {
        let (name, offset) = s
            .split_once('=')
            .ok_or_else(|| format!("`{s}`: expected FIELD=BYTES"))?;
        let field = RULES
            .iter()
            .map(|(f, ..)| *f)
            .find(|f| f.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = RULES.iter().map(|(f, ..)| f.name()).collect();
                format!(
                    "`{name}` is not a field profinfer reads (fields: {})",
                    known.join(", ")
                )
            })?;
        let offset = offset
            .trim()
            .parse()
            .map_err(|_| format!("`{offset}`: expected a byte offset"))?;
        Ok(GivenOffset { field, offset })
    }
}

/// Why a layout could not be established.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// Fields neither derivable nor in a table.
    #[error(
        "cannot derive ggml's struct layout: {} not readable from this build's code ({}) and its ggml version has no table entry; give it with --ggml-offset FIELD=BYTES (offsetof in the build's ggml.h)",
        missing.join(", "),
        why.join("; ")
    )]
    Underived {
        /// The fields.
        missing: Vec<&'static str>,
        /// Per field, what was looked for.
        why: Vec<String>,
    },
    /// Derived offsets that contradict each other.
    #[error("ggml's struct layout read from this build's code does not hold together: {0}")]
    Inconsistent(String),
}

/// The fields derived by the rules, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Type,
    Buffer,
    Ne,
    Nb,
    Op,
    OpParams,
    Src,
    ViewSrc,
    Data,
    Name,
    CgraphNNodes,
    CgraphNodes,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Type => "ggml_tensor.type",
            Field::Buffer => "ggml_tensor.buffer",
            Field::Ne => "ggml_tensor.ne",
            Field::Nb => "ggml_tensor.nb",
            Field::Op => "ggml_tensor.op",
            Field::OpParams => "ggml_tensor.op_params",
            Field::Src => "ggml_tensor.src",
            Field::ViewSrc => "ggml_tensor.view_src",
            Field::Data => "ggml_tensor.data",
            Field::Name => "ggml_tensor.name",
            Field::CgraphNNodes => "ggml_cgraph.n_nodes",
            Field::CgraphNodes => "ggml_cgraph.nodes",
        }
    }
}

/// How a field is read from an accessor's accesses.
type Pick = fn(&[Access]) -> Option<i64>;

/// The rules: field, accessor, what in its accesses names the offset.
const RULES: [(Field, &str, Pick); 12] = [
    // `ggml_type_size(tensor->type)`: the first 4-byte read of the tensor.
    (Field::Type, "ggml_element_size", |a| {
        first(a, |x| {
            x.kind == AccessKind::Read && x.base == Origin::Arg(0) && x.size == 4
        })
    }),
    // `view_src ? view_src->buffer : tensor->buffer`: the read through view_src.
    (Field::Buffer, "ggml_backend_tensor_set", |a| {
        let view_src = first(a, |x| is_read(x, Origin::Arg(0), 8))?;
        first(a, |x| is_read(x, Origin::Field(0, view_src), 8))
    }),
    // `ne[0] * ne[1] * ne[2] * ne[3]`: the lowest of four 8-byte reads.
    (Field::Ne, "ggml_nelements", |a| {
        lowest_of_run(a, Origin::Arg(0), 4)
    }),
    // `nb[0] > nb[1]`: the lower of two 8-byte reads.
    (Field::Nb, "ggml_is_transposed", |a| {
        lowest_of_run(a, Origin::Arg(0), 2)
    }),
    // `GGML_ASSERT(tensor->op == GGML_OP_UNARY); return op_params[0]`: the first read.
    (Field::Op, "ggml_get_unary_op", |a| {
        first(a, |x| is_read(x, Origin::Arg(0), 4))
    }),
    // ... and the second.
    (Field::OpParams, "ggml_get_unary_op", |a| {
        let op = first(a, |x| is_read(x, Origin::Arg(0), 4))?;
        first(a, |x| is_read(x, Origin::Arg(0), 4) && x.disp != op)
    }),
    // `result = ggml_dup_tensor(ctx, a); result->src[0] = a`: the store of the argument
    // into the returned tensor.
    (Field::Src, "ggml_dup", |a| {
        first(a, |x| {
            x.kind
                == AccessKind::Write {
                    value: Origin::Arg(1),
                }
                && x.base == Origin::Returned
                && x.size == 8
        })
    }),
    // `tensor->view_src ? …`: the first pointer read of the tensor.
    (Field::ViewSrc, "ggml_backend_tensor_set", |a| {
        first(a, |x| is_read(x, Origin::Arg(0), 8))
    }),
    (Field::Data, "ggml_get_data", |a| {
        first(a, |x| is_read(x, Origin::Arg(0), 8))
    }),
    (Field::Name, "ggml_get_name", |a| {
        first(a, |x| {
            x.kind == AccessKind::Address && x.base == Origin::Arg(0)
        })
    }),
    (Field::CgraphNNodes, "ggml_graph_n_nodes", |a| {
        first(a, |x| is_read(x, Origin::Arg(0), 4))
    }),
    // `cgraph->nodes[i]` after a bounds check on `n_nodes`: the pointer read.
    (Field::CgraphNodes, "ggml_graph_node", |a| {
        first(a, |x| is_read(x, Origin::Arg(0), 8))
    }),
];

fn is_read(x: &Access, base: Origin, size: u8) -> bool {
    x.kind == AccessKind::Read && x.base == base && x.size == size
}

fn first(a: &[Access], f: impl Fn(&Access) -> bool) -> Option<i64> {
    a.iter().find(|x| f(x)).map(|x| x.disp)
}

/// The lowest displacement of `n` 8-byte reads of `base` at consecutive words.
fn lowest_of_run(a: &[Access], base: Origin, n: i64) -> Option<i64> {
    let disps: Vec<i64> = a
        .iter()
        .filter(|x| is_read(x, base, 8))
        .map(|x| x.disp)
        .collect();
    let low = *disps.iter().min()?;
    (0..n)
        .all(|i| disps.contains(&(low + 8 * i)))
        .then_some(low)
}

/// A build's layout and, per field, where its offset came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedLayout {
    /// What the probes read.
    pub layout: GgmlLayout,
    /// Every field the probes use, with its source.
    pub fields: Vec<FieldOffset>,
    /// `ggml_cgraph.nodes`, when derived (the attach-time check reads the first node).
    pub cgraph_nodes: Option<u32>,
}

impl DerivedLayout {
    /// How many fields were read from the build's code.
    pub fn derived_count(&self) -> usize {
        self.fields
            .iter()
            .filter(|f| matches!(f.source, OffsetSource::Derived(_)))
            .count()
    }
}

/// The layout of the build whose core library is `file`, from its accessors, with
/// `table` (the known layout of its ggml version, if any) for what cannot be derived.
///
/// # Errors
/// [`LayoutError`]: a needed field is neither derivable nor in a table, or the derived
/// offsets contradict each other.
pub fn derive(
    file: &object::File<'_>,
    table: Option<(&str, GgmlLayout)>,
    given: &[GivenOffset],
) -> Result<DerivedLayout, LayoutError> {
    let mut found: Vec<(Field, i64, OffsetSource)> = Vec::new();
    let mut why = Vec::new();
    for (field, function, pick) in RULES {
        if let Some(g) = given.iter().find(|g| g.field == field) {
            found.push((field, i64::from(g.offset), OffsetSource::Given));
            continue;
        }
        match function_accesses(file, function) {
            Some(accesses) => match pick(&accesses) {
                Some(off) => found.push((field, off, OffsetSource::Derived(function))),
                None => why.push(format!("{}: {function} has no such access", field.name())),
            },
            None => why.push(format!("{}: no {function}", field.name())),
        }
    }
    from_found(&found, why, table)
}

/// Combines derived offsets with the table.
fn from_found(
    found: &[(Field, i64, OffsetSource)],
    why: Vec<String>,
    table: Option<(&str, GgmlLayout)>,
) -> Result<DerivedLayout, LayoutError> {
    let get = |f: Field| {
        found
            .iter()
            .find(|(g, ..)| *g == f)
            .map(|(_, o, source)| (*o, source.clone()))
    };
    let table_of = |f: Field, l: &GgmlLayout| -> Option<u32> {
        Some(match f {
            Field::Type => l.tensor_type,
            Field::Ne => l.tensor_ne,
            Field::Nb => l.tensor_nb,
            Field::Op => l.tensor_op,
            Field::OpParams => l.tensor_op_params,
            Field::Src => l.tensor_src,
            Field::ViewSrc => l.tensor_view_src,
            Field::Name => l.tensor_name,
            Field::CgraphNNodes => l.cgraph_n_nodes,
            // The buffer word follows the type in the table layout.
            Field::Data => l.tensor_data,
            Field::Buffer => 8,
            Field::CgraphNodes => return None,
        })
    };
    let mut fields = Vec::new();
    let mut missing = Vec::new();
    let mut off = |f: Field| -> Option<u32> {
        if let Some((o, source)) = get(f)
            && let Ok(o) = u32::try_from(o)
        {
            fields.push(FieldOffset {
                field: f.name(),
                offset: o,
                source,
            });
            return Some(o);
        }
        if let Some((version, l)) = &table
            && let Some(o) = table_of(f, l)
        {
            fields.push(FieldOffset {
                field: f.name(),
                offset: o,
                source: OffsetSource::Table(version.to_string()),
            });
            return Some(o);
        }
        if f != Field::CgraphNodes {
            missing.push(f.name());
        }
        None
    };
    let ty = off(Field::Type);
    let buffer = off(Field::Buffer);
    let ne = off(Field::Ne);
    let nb = off(Field::Nb);
    let op = off(Field::Op);
    let op_params = off(Field::OpParams);
    let src = off(Field::Src);
    let view_src = off(Field::ViewSrc);
    let data = off(Field::Data);
    let name = off(Field::Name);
    let n_nodes = off(Field::CgraphNNodes);
    let nodes = off(Field::CgraphNodes);
    let (
        Some(ty),
        Some(buffer),
        Some(ne),
        Some(nb),
        Some(op),
        Some(op_params),
        Some(src),
        Some(view_src),
        Some(data),
        Some(name),
        Some(n_nodes),
    ) = (
        ty, buffer, ne, nb, op, op_params, src, view_src, data, name, n_nodes,
    )
    else {
        let why = why
            .into_iter()
            .filter(|w| missing.iter().any(|m| w.starts_with(m)))
            .collect();
        return Err(LayoutError::Underived { missing, why });
    };
    check_consistent(&[
        ("type < buffer", ty < buffer),
        ("buffer < ne", buffer < ne),
        ("nb = ne + 4 words", nb == ne + 32),
        ("op after nb", op >= nb + 32),
        ("op_params right after op", op_params == op + 4),
        ("src after op_params", src > op_params),
        ("view_src after 1 to 16 src pointers", {
            view_src > src && view_src - src <= 128 && (view_src - src) % 8 == 0
        }),
        ("data = view_src + 2 words", data == view_src + 16),
        ("name after data", name >= data + 8),
        ("n_nodes within the graph's header", n_nodes < 64),
        (
            "nodes after n_nodes",
            nodes.is_none_or(|n| n > n_nodes && n % 8 == 0),
        ),
    ])?;
    // The fields no accessor reads: the version's table, or what every build shares.
    let base = table.map(|(_, l)| l).unwrap_or(GgmlLayout::GGML_0_25_64BIT);
    let shared_source = match &table {
        Some((v, _)) => OffsetSource::Table(v.to_string()),
        None => OffsetSource::Shared,
    };
    for (field, offset) in [
        ("ggml_compute_params.ith", base.params_ith),
        ("llama_batch.n_tokens", base.batch_n_tokens),
        ("llama_batch.pos", base.batch_pos),
    ] {
        fields.push(FieldOffset {
            field,
            offset,
            source: shared_source.clone(),
        });
    }
    let words = |o: u32| 1u64 << (o / 8);
    let skip = words(buffer) | words(view_src) | words(view_src + 8) | words(data);
    let layout = GgmlLayout {
        tensor_type: ty,
        tensor_ne: ne,
        tensor_nb: nb,
        tensor_op: op,
        tensor_op_params: op_params,
        tensor_src: src,
        tensor_name: name,
        cgraph_n_nodes: n_nodes,
        tensor_view_src: view_src,
        tensor_read_len: name + 64,
        tensor_skip_lo: skip as u32,
        tensor_skip_hi: (skip >> 32) as u32,
        tensor_data: data,
        ..base
    };
    Ok(DerivedLayout {
        layout,
        fields,
        cgraph_nodes: nodes,
    })
}

fn check_consistent(checks: &[(&str, bool)]) -> Result<(), LayoutError> {
    match checks.iter().find(|(_, ok)| !ok) {
        Some((what, _)) => Err(LayoutError::Inconsistent(format!("expected {what}"))),
        None => Ok(()),
    }
}

/// The memory accesses of the exported function `name` in `file`, relative to its
/// arguments, from a straight-line walk of its first instructions.
pub fn function_accesses(file: &object::File<'_>, name: &str) -> Option<Vec<Access>> {
    let sym = file
        .dynamic_symbols()
        .chain(file.symbols())
        .find(|s| s.is_definition() && s.name() == Ok(name))?;
    let code = crate::probe_points::function_bytes(file, &sym)?;
    match file.architecture() {
        object::Architecture::X86_64 => Some(x86_accesses(code, sym.address())),
        object::Architecture::Aarch64 => Some(a64_accesses(code)),
        _ => None,
    }
}

/// x86-64 System V: arguments in rdi, rsi, rdx, rcx, r8, r9; rax returns.
fn x86_accesses(code: &[u8], ip: u64) -> Vec<Access> {
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

/// AArch64 AAPCS64: arguments in x0..x7; x0 returns; x0..x18 caller-saved.
fn a64_accesses(code: &[u8]) -> Vec<Access> {
    use yaxpeax_arch::{Decoder as _, U8Reader};
    use yaxpeax_arm::armv8::a64::{InstDecoder, Opcode, Operand, SizeCode};

    let mut regs = [Origin::Other; 32];
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
        let ops = ins.operands;
        let reg_of = |o: &Operand| match *o {
            Operand::Register(size, r) | Operand::RegisterOrSP(size, r) => Some((size, r)),
            _ => None,
        };
        let mem_of = |o: &Operand| match *o {
            Operand::RegPreIndex(r, off, _) => Some((r, i64::from(off))),
            Operand::RegPostIndex(r, _) => Some((r, 0)),
            _ => None,
        };
        let bytes = |s: SizeCode| if s == SizeCode::X { 8u8 } else { 4 };
        let origin_of = |regs: &[Origin; 32], r: u16| {
            if r < 31 {
                regs[r as usize]
            } else {
                Origin::Other
            }
        };
        let mut written: Vec<u16> = Vec::new();
        let mut set: Option<(u16, Origin)> = None;
        match ins.opcode {
            Opcode::LDR | Opcode::LDUR | Opcode::LDRSW | Opcode::LDP => {
                let pair = ins.opcode == Opcode::LDP;
                let mem = if pair { &ops[2] } else { &ops[1] };
                if let Some((base, disp)) = mem_of(mem) {
                    let b = origin_of(&regs, base);
                    let dsts: Vec<_> = if pair {
                        vec![ops[0], ops[1]]
                    } else {
                        vec![ops[0]]
                    };
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
                        written.push(r);
                        if let (Origin::Arg(a), 8) = (b, size) {
                            set = Some((r, Origin::Field(a, disp)));
                        }
                    }
                }
            }
            Opcode::STR | Opcode::STUR | Opcode::STP => {
                let pair = ins.opcode == Opcode::STP;
                let mem = if pair { &ops[2] } else { &ops[1] };
                if let Some((base, disp)) = mem_of(mem)
                    && base != 31
                {
                    let b = origin_of(&regs, base);
                    let srcs: Vec<_> = if pair {
                        vec![ops[0], ops[1]]
                    } else {
                        vec![ops[0]]
                    };
                    for (i, s) in srcs.iter().enumerate() {
                        let Some((size, r)) = reg_of(s) else { continue };
                        let size = bytes(size);
                        out.push(Access {
                            kind: AccessKind::Write {
                                value: origin_of(&regs, r),
                            },
                            base: b,
                            disp: disp + i as i64 * i64::from(size),
                            size,
                        });
                    }
                }
            }
            Opcode::ADD => {
                if let (Some((_, rd)), Some((_, rn))) = (reg_of(&ops[0]), reg_of(&ops[1])) {
                    let imm = match ops[2] {
                        Operand::Immediate(v) => Some(i64::from(v)),
                        Operand::ImmShift(v, s) => Some(i64::from(v) << s),
                        _ => None,
                    };
                    if let Some(imm) = imm {
                        out.push(Access {
                            kind: AccessKind::Address,
                            base: origin_of(&regs, rn),
                            disp: imm,
                            size: 0,
                        });
                    }
                    written.push(rd);
                }
            }
            Opcode::ORR => {
                // `mov xd, xn` (an alias of `orr xd, xzr, xn`).
                if let Some((_, rd)) = reg_of(&ops[0]) {
                    written.push(rd);
                    let src = match (reg_of(&ops[1]), ops[2]) {
                        (Some((_, 31)), Operand::RegShift(_, 0, _, rn)) => Some((SizeCode::X, rn)),
                        (Some((_, 31)), o) => reg_of(&o),
                        _ => None,
                    };
                    if let Some((_, rn)) = src {
                        set = Some((rd, origin_of(&regs, rn)));
                    }
                }
            }
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
            | Opcode::PRFM => {}
            _ => {
                if let Some((_, rd)) = reg_of(&ops[0]) {
                    written.push(rd);
                }
            }
        }
        for r in written {
            if r < 31 {
                regs[r as usize] = Origin::Other;
            }
        }
        if let Some((r, o)) = set
            && r < 31
        {
            regs[r as usize] = o;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x86(bytes: &[u8]) -> Vec<Access> {
        x86_accesses(bytes, 0x1000)
    }

    fn a64(words: &[u32]) -> Vec<Access> {
        let code: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        a64_accesses(&code)
    }

    fn pick(field: Field, accesses: &[Access]) -> Option<i64> {
        RULES
            .iter()
            .find(|(f, ..)| *f == field)
            .and_then(|(_, _, p)| p(accesses))
    }

    #[test]
    fn x86_accessors_name_their_offsets() {
        // ggml_get_name: lea rax, [rdi+0x108]; ret
        let a = x86(&[0x48, 0x8d, 0x87, 0x08, 0x01, 0, 0, 0xc3]);
        assert_eq!(pick(Field::Name, &a), Some(0x108));
        // ggml_dup: push rbx; mov rbx, rsi; call rel32; mov dword [rax+0x50], 1;
        // mov [rax+0xa0], rbx; pop rbx; ret
        let a = x86(&[
            0x53, 0x48, 0x89, 0xf3, 0xe8, 0, 0, 0, 0, 0xc7, 0x40, 0x50, 1, 0, 0, 0, 0x48, 0x89,
            0x98, 0xa0, 0, 0, 0, 0x5b, 0xc3,
        ]);
        assert_eq!(pick(Field::Src, &a), Some(0xa0));
        // ggml_get_unary_op: cmp dword [rdi+0x50], 0x45; jne +4; mov eax, [rdi+0x54]; ret
        let a = x86(&[0x83, 0x7f, 0x50, 0x45, 0x75, 0x04, 0x8b, 0x47, 0x54, 0xc3]);
        assert_eq!(pick(Field::Op, &a), Some(0x50));
        assert_eq!(pick(Field::OpParams, &a), Some(0x54));
        // ggml_nelements: mov rax,[rdi+0x10]; imul rax,[rdi+0x18]; imul rax,[rdi+0x20];
        // imul rax,[rdi+0x28]; ret
        let a = x86(&[
            0x48, 0x8b, 0x47, 0x10, 0x48, 0x0f, 0xaf, 0x47, 0x18, 0x48, 0x0f, 0xaf, 0x47, 0x20,
            0x48, 0x0f, 0xaf, 0x47, 0x28, 0xc3,
        ]);
        assert_eq!(pick(Field::Ne, &a), Some(0x10));
        // Three reads are not ne: ggml_nrows would give ne[1].
        assert_eq!(pick(Field::Ne, &a[1..]), None);
    }

    #[test]
    fn a64_accessors_name_their_offsets() {
        // ggml_get_name: add x0, x0, #0x100; ret
        assert_eq!(
            pick(Field::Name, &a64(&[0x9104_0000, 0xd65f_03c0])),
            Some(0x100)
        );
        // ggml_get_unary_op: ldr w1, [x0, #80]; cmp w1, #0x5b; b.ne; ldr w0, [x0, #84]; ret
        let a = a64(&[
            0xb940_5001,
            0x7101_6c3f,
            0x5400_0061,
            0xb940_5400,
            0xd65f_03c0,
        ]);
        assert_eq!(pick(Field::Op, &a), Some(80));
        assert_eq!(pick(Field::OpParams, &a), Some(84));
        // ggml_dup: stp x29, x30, [sp,#-32]!; mov x29, sp; str x19, [sp,#16];
        // mov x19, x1; bl; str x19, [x0,#152]; mov w1, #1; str w1, [x0,#80]; ...
        let a = a64(&[
            0xa9be_7bfd,
            0x9100_03fd,
            0xf900_0bf3,
            0xaa01_03f3,
            0x9400_0000,
            0xf900_4c13,
            0x5280_0021,
            0xb900_5001,
            0xd65f_03c0,
        ]);
        assert_eq!(pick(Field::Src, &a), Some(152));
        // ggml_backend_tensor_set: cbz x0; mov x19, x0; ldr x0, [x0, #232]; ...;
        // cbz x0; ldr x23, [x0, #8]
        let a = a64(&[
            0xb400_0580,
            0xaa00_03f3,
            0xf940_7400,
            0xaa01_03f6,
            0xb400_0380,
            0xf940_0417,
            0xd65f_03c0,
        ]);
        assert_eq!(pick(Field::ViewSrc, &a), Some(232));
        assert_eq!(pick(Field::Buffer, &a), Some(8));
        // ggml_nelements: ldp x1, x2, [x0, #16]; ldr x3, [x0, #32]; mul; ldr x2, [x0, #40]
        let a = a64(&[
            0xa941_0801,
            0xf940_1003,
            0x9b02_7c21,
            0xf940_1402,
            0xd65f_03c0,
        ]);
        assert_eq!(pick(Field::Ne, &a), Some(16));
    }

    fn found_0_25() -> Vec<(Field, i64, OffsetSource)> {
        [
            (Field::Type, 0, "ggml_element_size"),
            (Field::Buffer, 8, "ggml_backend_tensor_set"),
            (Field::Ne, 16, "ggml_nelements"),
            (Field::Nb, 48, "ggml_is_transposed"),
            (Field::Op, 80, "ggml_get_unary_op"),
            (Field::OpParams, 84, "ggml_get_unary_op"),
            (Field::Src, 152, "ggml_dup"),
            (Field::ViewSrc, 232, "ggml_backend_tensor_set"),
            (Field::Data, 248, "ggml_get_data"),
            (Field::Name, 256, "ggml_get_name"),
            (Field::CgraphNNodes, 4, "ggml_graph_n_nodes"),
            (Field::CgraphNodes, 16, "ggml_graph_node"),
        ]
        .into_iter()
        .map(|(f, o, func)| (f, o, OffsetSource::Derived(func)))
        .collect()
    }

    #[test]
    fn given_offsets_name_a_known_field() {
        let g: GivenOffset = "ggml_tensor.name=264".parse().expect("valid");
        assert_eq!((g.field, g.offset), (Field::Name, 264));
        let e = "ggml_tensor.nmae=264".parse::<GivenOffset>().unwrap_err();
        assert!(e.contains("ggml_tensor.name") && e.contains("nmae"), "{e}");
        assert!("ggml_tensor.name".parse::<GivenOffset>().is_err());
        assert!("ggml_tensor.name=-1".parse::<GivenOffset>().is_err());
    }

    #[test]
    fn derived_offsets_of_ggml_0_25_give_the_table_layout() {
        let d = from_found(&found_0_25(), Vec::new(), None).expect("consistent");
        assert_eq!(d.layout, GgmlLayout::GGML_0_25_64BIT);
        assert_eq!(d.derived_count(), 12);
        assert_eq!(d.cgraph_nodes, Some(16));
    }

    #[test]
    fn contradicting_offsets_are_refused() {
        let mut found = found_0_25();
        found[3].1 = 56; // nb not four words after ne
        let e = from_found(&found, Vec::new(), None).expect_err("inconsistent");
        assert!(e.to_string().contains("nb = ne + 4 words"), "{e}");
    }

    #[test]
    fn a_missing_field_falls_back_to_the_table_or_is_named() {
        let found: Vec<_> = found_0_25()
            .into_iter()
            .filter(|(f, ..)| *f != Field::Src)
            .collect();
        let why = vec!["ggml_tensor.src: no ggml_dup".to_owned()];
        let d = from_found(
            &found,
            why.clone(),
            Some(("0.25.3", GgmlLayout::GGML_0_25_64BIT)),
        )
        .expect("table");
        let src = d
            .fields
            .iter()
            .find(|f| f.field == "ggml_tensor.src")
            .unwrap();
        assert_eq!(src.source, OffsetSource::Table("0.25.3".into()));
        let e = from_found(&found, why, None).expect_err("no table");
        let line = e.to_string();
        assert!(
            line.contains("ggml_tensor.src") && line.contains("no ggml_dup"),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }
}
