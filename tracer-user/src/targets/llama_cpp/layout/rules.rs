//! The derivation's rules: for each field the probes read, the accessor that names its
//! offset and what in that accessor's accesses is the offset ([`RULES`]).

use super::access::{Access, AccessKind, Origin};

/// The fields derived by the rules, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Field {
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
    /// `struct.field`, as in ggml's headers.
    pub(super) fn name(self) -> &'static str {
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
pub(super) type Pick = fn(&[Access]) -> Option<i64>;

/// The rules: field, accessor, what in its accesses names the offset.
pub(super) const RULES: [(Field, &str, Pick); 12] = [
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::llama_cpp::layout::{a64::a64_accesses, access::Access, x86::x86_accesses};

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
}
