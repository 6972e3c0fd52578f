//! Quantized weights repacked for the CPU backend: groups of [`PACK_ROWS`] rows
//! interleaved block by block, so one SIMD load feeds several output rows and the eight
//! block scales of a group convert with one instruction (the idea of llama.cpp's
//! `block_q4_0x8` "extra buffer type"; the byte layout is this crate's own).
//!
//! `Q4_K` matrices (rows in groups of 8, `k` a multiple of 256) have their own group
//! layout and kernels, multiplied with `Q8_K` activations: see [`q4_k`]. The rest of this
//! page is about Q4_0 and Q8_0.
//!
//! # Layout
//! A Q4_0 or Q8_0 matrix of `n` rows (a multiple of 8) and `k` elements per row (a
//! multiple of 32) becomes `n / 8` groups; group `g` holds rows `8g..8g + 8` as `k / 32`
//! consecutive *group blocks*. Group block `b` of group `g` starts at byte
//! `(g * k / 32 + b) * group_block_bytes` and holds:
//!
//! - the 8 block scales (f16), row `8g + r` at half `r`;
//! - 4 chunks of quants, chunk `c` pairing row `c` with row `c + 4` of the group:
//!   - Q4_0 (32 bytes): the 16 packed bytes of row `c`'s block, then row `c + 4`'s
//!     (ggml's nibble order: low nibble = element `j`, high nibble = element `j + 16`);
//!   - Q8_0 (64 bytes): elements 0..16 of row `c`, 0..16 of row `c + 4`, 16..32 of row
//!     `c`, 16..32 of row `c + 4`.
//!
//! Pairing row `c` with `c + 4` makes the AVX2 reduction (three `hadd`s) leave row `r`'s
//! sum in lane `r`, so eight outputs are accumulated in one register and stored at once.
//!
//! # Rounding
//! For every output and block the integer dot product of the quants is exact; it is then
//! converted to f32 and accumulated as `acc = fma(isum, d_w * d_x, acc)` block after
//! block (the product of two f16 scales is exact in f32). That is how llama.cpp's
//! repacked `gemv/gemm_q4_0_8x8_q8_0` round; the portable implementation here does the
//! same operations and matches the AVX2 one bit for bit.

#[cfg(target_arch = "aarch64")]
mod aarch64;
mod layout;
pub mod q4_k;
#[cfg(target_arch = "x86_64")]
mod q4_k_x86;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::ops::Range;

use common::engine_abi::DType;

use crate::backend::Backend;
use crate::error::KernelError;
use crate::f16::read_f16;
use crate::legacy::block32::QK;
use crate::matmul::args::MatMulArgs;
use crate::shape::check_matrix;
pub use layout::PACK_ROWS;
use layout::{Q4_0_GROUP_BLOCK_BYTES, Q8_0_GROUP_BLOCK_BYTES, SCALES_BYTES};

/// Bytes of one group block (8 rows × 32 elements) of `dtype`, or `None` if `dtype` is not
/// packable.
pub const fn group_block_bytes(dtype: DType) -> Option<usize> {
    match dtype {
        DType::Q4_0 => Some(Q4_0_GROUP_BLOCK_BYTES),
        DType::Q8_0 => Some(Q8_0_GROUP_BLOCK_BYTES),
        DType::Q4_K => Some(q4_k::GROUP_BLOCK_BYTES),
        _ => None,
    }
}

/// Elements per row of one block of a packable `dtype` (32, or 256 for `Q4_K`).
const fn block_elems(dtype: DType) -> usize {
    match dtype {
        DType::Q4_K => crate::k_quants::QK_K,
        _ => QK,
    }
}

/// Whether a `k × n` matrix of `dtype` can be packed: Q4_0/Q8_0/Q4_K, `n` a non-zero
/// multiple of [`PACK_ROWS`].
pub const fn can_pack(dtype: DType, k: usize, n: usize) -> bool {
    group_block_bytes(dtype).is_some()
        && k > 0
        && k.is_multiple_of(block_elems(dtype))
        && n > 0
        && n.is_multiple_of(PACK_ROWS)
}

/// Whether llama.cpp's CPU backend repacks matrices of `dtype` on this architecture
/// (`ggml_repack_get_optimal_repack_type` in ggml-cpu/repack.cpp, llama-cpp-python
/// 0.3.36): on x86-64 (AVX2) Q4_0 and Q4_K, never Q8_0 (its Q8_0 layouts are for NEON);
/// on AArch64 Q4_0, Q4_K and Q8_0. The engine repacks the same types, so that its products
/// take the paths llama.cpp takes and round alike: a repacked Q8_0 product here sums
/// whole blocks, while llama.cpp's AVX2 `vec_dot`/tinyBLAS keep 8 partial sums per
/// output, which differed by up to 1e-2 of the largest logit (issue 25).
pub const fn llama_cpp_repacks(dtype: DType) -> bool {
    match dtype {
        DType::Q4_0 | DType::Q4_K => true,
        DType::Q8_0 => cfg!(target_arch = "aarch64"),
        _ => false,
    }
}

/// Size in bytes of the packed form of `n` rows of `k` elements of `dtype`.
pub fn packed_len(dtype: DType, k: usize, n: usize) -> Result<usize, KernelError> {
    if !can_pack(dtype, k, n) {
        return Err(KernelError::NotPackable { dtype, k, n });
    }
    let gb = group_block_bytes(dtype).unwrap_or(0);
    Ok(n / PACK_ROWS * (k / block_elems(dtype)) * gb)
}

/// Byte ranges, inside one plain block and inside one packed chunk, of the quants of the
/// chunk's first row (`second = false`) or second row.
fn quant_moves(dtype: DType, second: bool) -> [(Range<usize>, Range<usize>); 2] {
    match (dtype, second) {
        (DType::Q4_0, false) => [(2..18, 0..16), (0..0, 0..0)],
        (DType::Q4_0, true) => [(2..18, 16..32), (0..0, 0..0)],
        (_, false) => [(2..18, 0..16), (18..34, 32..48)],
        (_, true) => [(2..18, 16..32), (18..34, 48..64)],
    }
}

/// Packs `n` rows of `k` elements of `dtype` (row `i` at byte `i * stride` of `src`) into
/// `dst`, which must be exactly [`packed_len`] bytes.
pub fn pack(
    dtype: DType,
    k: usize,
    n: usize,
    src: &[u8],
    stride: usize,
    dst: &mut [u8],
) -> Result<(), KernelError> {
    let len = packed_len(dtype, k, n)?;
    check_matrix("rows to pack", dtype, k, src, stride, n)?;
    if dst.len() != len {
        return Err(KernelError::BufferTooSmall {
            what: "packed weights",
            required: len,
            actual: dst.len(),
        });
    }
    let nb = k / block_elems(dtype);
    let bb = dtype.block_bytes();
    let gb = group_block_bytes(dtype).unwrap_or(0);
    if dtype == DType::Q4_K {
        for (g, group) in dst.chunks_exact_mut(nb * gb).enumerate() {
            q4_k::pack_group(nb, &src[g * PACK_ROWS * stride..], stride, group);
        }
        return Ok(());
    }
    let chunk = (gb - SCALES_BYTES) / 4;
    for (g, group) in dst.chunks_exact_mut(nb * gb).enumerate() {
        for (b, out) in group.chunks_exact_mut(gb).enumerate() {
            for r in 0..PACK_ROWS {
                let blk = &src[(g * PACK_ROWS + r) * stride + b * bb..][..bb];
                out[2 * r..2 * r + 2].copy_from_slice(&blk[..2]);
                let (c, second) = (r % 4, r >= 4);
                let quants = &mut out[SCALES_BYTES + c * chunk..][..chunk];
                for (from, to) in quant_moves(dtype, second) {
                    quants[to].copy_from_slice(&blk[from]);
                }
            }
        }
    }
    Ok(())
}

/// Restores row `row` of a packed matrix into plain ggml blocks (`dst` holds one row).
pub fn unpack_row(
    dtype: DType,
    k: usize,
    packed: &[u8],
    row: usize,
    dst: &mut [u8],
) -> Result<(), KernelError> {
    let gb = group_block_bytes(dtype).ok_or(KernelError::NotPackable { dtype, k, n: 0 })?;
    if !k.is_multiple_of(block_elems(dtype)) {
        return Err(KernelError::RowNotBlockAligned { dtype, k });
    }
    let nb = k / block_elems(dtype);
    let (g, r) = (row / PACK_ROWS, row % PACK_ROWS);
    let bb = dtype.block_bytes();
    if dst.len() != nb * bb || packed.len() < (g + 1) * nb * gb {
        return Err(KernelError::BufferTooSmall {
            what: "packed row",
            required: (g + 1) * nb * gb,
            actual: packed.len(),
        });
    }
    if dtype == DType::Q4_K {
        q4_k::unpack_group_row(nb, &packed[g * nb * gb..], r, dst);
        return Ok(());
    }
    let chunk = (gb - SCALES_BYTES) / 4;
    for (b, blk) in dst.chunks_exact_mut(bb).enumerate() {
        let gblk = &packed[(g * nb + b) * gb..][..gb];
        blk[..2].copy_from_slice(&gblk[2 * r..2 * r + 2]);
        let quants = &gblk[SCALES_BYTES + (r % 4) * chunk..][..chunk];
        for (from, to) in quant_moves(dtype, r >= 4) {
            blk[from].copy_from_slice(&quants[to]);
        }
    }
    Ok(())
}

/// `y[i * y_stride + n] = dot(row n, x row i)` for `n` in `n_range` and `i` in `0..m`,
/// for weights packed by [`pack`] (`args.w`, rows of `args.k` elements; `args.w_stride`
/// is not read), with the detected backend.
///
/// `args.x` holds `m` rows of activations of [`crate::vec_dot_type`]`(wtype)` (Q8_0, or
/// Q8_K for Q4_K; [`crate::convert_activations`]), row `i` at byte `i * x_stride`.
/// `n_range` must start and end on multiples of [`PACK_ROWS`].
///
/// # Safety
/// As [`crate::matmul`]: `args.y` is valid for writes at every index above, and no other
/// thread reads or writes those indices during the call.
pub unsafe fn matmul_packed(
    args: MatMulArgs<'_>,
    n_range: Range<usize>,
) -> Result<(), KernelError> {
    // SAFETY: forwarded caller contract.
    unsafe { matmul_packed_with(Backend::detect(), args, n_range) }
}

/// [`matmul_packed`] with an explicit backend (an unsupported one falls back to
/// [`Backend::Generic`]).
///
/// # Safety
/// As [`matmul_packed`].
pub unsafe fn matmul_packed_with(
    backend: Backend,
    args: MatMulArgs<'_>,
    n_range: Range<usize>,
) -> Result<(), KernelError> {
    if n_range.is_empty() || args.m == 0 {
        return Ok(());
    }
    check(&args, &n_range)?;
    let backend = backend.supported_or_generic();
    let groups = n_range.start / PACK_ROWS..n_range.end / PACK_ROWS;
    // SAFETY: the operands passed `check`; the outputs are the caller's (forwarded
    // contract).
    unsafe {
        if args.wtype == DType::Q4_K {
            q4_k_groups(&args, backend, groups);
        } else {
            legacy_groups(&args, backend, groups);
        }
    }
    Ok(())
}

/// Checks the operands of [`matmul_packed_with`] for output rows `n_range`: packable rows
/// up to its end, a start on a group, packed weights of that size, `m` activation rows.
fn check(args: &MatMulArgs<'_>, n_range: &Range<usize>) -> Result<(), KernelError> {
    let (wtype, k) = (args.wtype, args.k);
    if !can_pack(wtype, k, n_range.end) || !n_range.start.is_multiple_of(PACK_ROWS) {
        return Err(KernelError::NotPackable {
            dtype: wtype,
            k,
            n: n_range.end,
        });
    }
    let needed = packed_len(wtype, k, n_range.end)?;
    if args.w.len() < needed {
        return Err(KernelError::BufferTooSmall {
            what: "packed weights",
            required: needed,
            actual: args.w.len(),
        });
    }
    args.check_activations()
}

/// Blocks per row of the packed product `args`.
fn nb(args: &MatMulArgs<'_>) -> usize {
    args.k / block_elems(args.wtype)
}

/// The product of group `g` alone: its packed weights (`nb` group blocks) and its first
/// output, the rest as in `args`.
fn group<'a>(args: &MatMulArgs<'a>, g: usize) -> MatMulArgs<'a> {
    let (nb, gb) = (nb(args), group_block_bytes(args.wtype).unwrap_or(0));
    MatMulArgs {
        w: &args.w[g * nb * gb..(g + 1) * nb * gb],
        y: args.y.wrapping_add(g * PACK_ROWS),
        ..*args
    }
}

/// Q4_K groups `groups` of `args` on `backend` (a supported one).
///
/// # Safety
/// The operands passed [`check`]; outputs of rows `8g..8g+8` for every `i < m` and every
/// group are writable and the caller's.
unsafe fn q4_k_groups(args: &MatMulArgs<'_>, backend: Backend, groups: Range<usize>) {
    // llama.cpp's repacked MUL_MAT: gemm for the first m − m % 4 rows, gemv for the
    // rest (`forward_mul_mat_one_chunk` in ggml-cpu/repack.cpp).
    #[cfg(not(target_arch = "aarch64"))]
    let gemm_rows = args.m - args.m % 4;
    for g in groups {
        let group = group(args, g);
        match backend {
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => {
                // SAFETY: AVX2 supported; group and activation rows checked (`check`);
                // outputs of rows 8g..8g+8 for every i are the caller's.
                unsafe { q4_k_x86::group_rows(&group, gemm_rows) }
            }
            #[cfg(target_arch = "aarch64")]
            Backend::Neon | Backend::NeonDotprod | Backend::NeonI8mm => {
                // SAFETY: NEON (and dotprod, i8mm for the backends that have them) supported;
                // as above.
                unsafe {
                    if backend == Backend::NeonI8mm && group.m >= 2 {
                        aarch64::q4_k_group_rows_i8mm(&group)
                    } else if backend.has_dotprod() {
                        aarch64::q4_k_group_rows::<true>(&group)
                    } else {
                        aarch64::q4_k_group_rows::<false>(&group)
                    }
                }
            }
            _ => {
                // The AArch64 kernels keep one order (llama.cpp's NEON kernels are
                // not matched here); the portable one follows the AVX2 ones.
                #[cfg(target_arch = "aarch64")]
                let gemm_rows = 0;
                // SAFETY: as above.
                unsafe { q4_k::group_rows_generic(&group, gemm_rows) }
            }
        }
    }
}

/// Q4_0 or Q8_0 groups `groups` of `args` on `backend` (a supported one).
///
/// # Safety
/// As [`q4_k_groups`].
unsafe fn legacy_groups(args: &MatMulArgs<'_>, backend: Backend, groups: Range<usize>) {
    #[cfg(target_arch = "x86_64")]
    let MatMulArgs {
        wtype,
        x,
        x_stride,
        m,
        y_stride,
        ..
    } = *args;
    #[cfg(target_arch = "x86_64")]
    let nb = nb(args);
    #[cfg(target_arch = "x86_64")]
    let bias = if backend == Backend::Avx2 && wtype == DType::Q4_0 {
        nibble_bias(x, x_stride, m, nb)
    } else {
        Vec::new()
    };
    #[cfg(target_arch = "x86_64")]
    let acts = x86::Activations {
        rows: x.as_ptr(),
        stride: x_stride,
        bias: bias.as_ptr(),
    };
    for g in groups {
        let group = group(args, g);
        match backend {
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => {
                let (wg, yg) = (group.w.as_ptr(), group.y);
                // SAFETY: AVX2 supported; group and activation rows checked (`check`),
                // biases of every row and block computed above; outputs of rows 8g..8g+8
                // for every i are the caller's.
                unsafe { x86::group_rows(wtype, nb, wg, &acts, m, yg, y_stride) }
            }
            #[cfg(target_arch = "aarch64")]
            Backend::Neon | Backend::NeonDotprod | Backend::NeonI8mm => {
                type Group = unsafe fn(&MatMulArgs<'_>);
                let i8mm = backend == Backend::NeonI8mm && group.m >= 2;
                let f: Group = match (group.wtype == DType::Q4_0, backend.has_dotprod()) {
                    (true, _) if i8mm => aarch64::legacy_group_rows_i8mm::<true>,
                    (false, _) if i8mm => aarch64::legacy_group_rows_i8mm::<false>,
                    (true, true) => aarch64::legacy_group_rows::<true, true>,
                    (true, false) => aarch64::legacy_group_rows::<true, false>,
                    (false, true) => aarch64::legacy_group_rows::<false, true>,
                    (false, false) => aarch64::legacy_group_rows::<false, false>,
                };
                // SAFETY: NEON (and dotprod, i8mm for the backends that have them)
                // supported; group and activation rows checked (`check`); outputs of rows
                // 8g..8g+8 are the caller's.
                unsafe { f(&group) }
            }
            _ => {
                // SAFETY: as above.
                unsafe { group_rows_generic(&group) }
            }
        }
    }
}

/// `8 · Σ quants` of every block of `m` Q8_0 activation rows (`nb` blocks each), row-major:
/// what Q4_0's offset of 8 takes off the unsigned-nibble sums, once per product.
#[cfg(target_arch = "x86_64")]
fn nibble_bias(x: &[u8], x_stride: usize, m: usize, nb: usize) -> Vec<i32> {
    let mut out = Vec::with_capacity(m * nb);
    for i in 0..m {
        for blk in x[i * x_stride..][..nb * 34].chunks_exact(34) {
            out.push(8 * blk[2..].iter().map(|&q| i32::from(q as i8)).sum::<i32>());
        }
    }
    out
}

/// Portable product of one group (8 rows, the product [`group`] gives) with `m`
/// activation rows, in the AVX2 order.
///
/// # Safety
/// `y + i * y_stride + r` writable for `i < m`, `r < 8`; slices checked by the caller.
unsafe fn group_rows_generic(group: &MatMulArgs<'_>) {
    let MatMulArgs {
        wtype,
        w: wg,
        x,
        x_stride,
        m,
        y,
        y_stride,
        ..
    } = *group;
    let nb = nb(group);
    let gb = group_block_bytes(wtype).unwrap_or(0);
    let chunk = (gb - SCALES_BYTES) / 4;
    for i in 0..m {
        let xr = &x[i * x_stride..];
        let mut acc = [0f32; PACK_ROWS];
        for b in 0..nb {
            let gblk = &wg[b * gb..][..gb];
            let xb = &xr[b * 34..][..34];
            let dx = read_f16(xb, 0);
            let xq = |e: usize| i32::from(xb[2 + e] as i8);
            for (r, a) in acc.iter_mut().enumerate() {
                let dw = read_f16(gblk, 2 * r);
                let q = &gblk[SCALES_BYTES + (r % 4) * chunk..][..chunk];
                let half = if r >= 4 { 16 } else { 0 };
                let mut isum = 0i32;
                for e in 0..16 {
                    let (lo, hi) = if wtype == DType::Q4_0 {
                        let byte = q[half + e];
                        (i32::from(byte & 0x0f) - 8, i32::from(byte >> 4) - 8)
                    } else {
                        (
                            i32::from(q[half + e] as i8),
                            i32::from(q[32 + half + e] as i8),
                        )
                    };
                    isum += lo * xq(e) + hi * xq(e + 16);
                }
                *a = (isum as f32).mul_add(dw * dx, *a);
            }
        }
        for (r, a) in acc.iter().enumerate() {
            // SAFETY: output (i, r) is the caller's.
            unsafe { *y.add(i * y_stride + r) = *a };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::quantize_row;

    fn random_rows(dtype: DType, k: usize, n: usize, seed: u32) -> Vec<u8> {
        let row = dtype.row_bytes(k).unwrap();
        let mut state = seed.max(1);
        let mut out = vec![0u8; n * row];
        let mut vals = vec![0f32; k];
        for r in 0..n {
            for v in vals.iter_mut() {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                *v = (state as f32 / u32::MAX as f32) * 2.0 - 1.0;
            }
            quantize_row(dtype, &vals, &mut out[r * row..(r + 1) * row]).unwrap();
        }
        out
    }

    #[test]
    fn pack_then_unpack_restores_every_row() {
        for (dtype, k) in [(DType::Q4_0, 96), (DType::Q8_0, 96), (DType::Q4_K, 512)] {
            let n = 24;
            let src = random_rows(dtype, k, n, 7);
            let row = dtype.row_bytes(k).unwrap();
            let mut packed = vec![0u8; packed_len(dtype, k, n).unwrap()];
            pack(dtype, k, n, &src, row, &mut packed).unwrap();
            let mut back = vec![0u8; row];
            for r in 0..n {
                unpack_row(dtype, k, &packed, r, &mut back).unwrap();
                assert_eq!(back, src[r * row..(r + 1) * row], "{dtype:?} row {r}");
            }
        }
    }

    #[test]
    fn refuses_unpackable_shapes() {
        assert!(!can_pack(DType::F16, 64, 8));
        assert!(!can_pack(DType::Q4_0, 64, 12));
        assert!(!can_pack(DType::Q8_0, 48, 8));
        assert!(matches!(
            packed_len(DType::Q4_0, 64, 4),
            Err(KernelError::NotPackable { .. })
        ));
        let src = vec![0u8; 18 * 2 * 8];
        let mut dst = vec![0u8; 10];
        assert!(pack(DType::Q4_0, 64, 8, &src, 36, &mut dst).is_err());
    }
}
