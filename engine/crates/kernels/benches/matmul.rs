//! Matrix-product throughput per weight type: decode-shaped (m = 1) and prefill-shaped
//! (m = 512) products on one thread, the AVX2 tiles against the portable code (decode) and
//! against one AVX2 `vec_dot` per output (prefill), and for the packable types (Q4_0,
//! Q8_0, Q4_K) the packed layout against the rows as stored (`packed` vs `avx2`).
//! Throughput is in FLOP (2·m·n·k).

#![expect(
    missing_docs,
    reason = "criterion_group! generates an undocumented pub fn"
)]

use std::hint::black_box;
use std::time::Duration;

use common::engine_abi::DType;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use engine_kernels::{
    Backend, MatMulArgs, convert_activations, matmul_with, packed, quant, vec_dot_type,
    vec_dot_with,
};

const K: usize = 2048;

fn matrix(dtype: DType, rows: usize, weights: bool, seed: u32) -> Vec<u8> {
    let row = dtype.row_bytes(K).expect("K is block aligned");
    let mut out = vec![0u8; rows * row];
    let mut state = seed.wrapping_mul(2_654_435_761).max(1);
    let mut vals = vec![0f32; K];
    for r in 0..rows {
        for v in vals.iter_mut() {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            *v = (state as f32 / u32::MAX as f32) * 2.0 - 1.0;
        }
        let dst = &mut out[r * row..(r + 1) * row];
        if weights {
            quant::quantize_row(dtype, &vals, dst).expect("row size matches");
        } else {
            convert_activations(dtype, &vals, dst).expect("row size matches");
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let shapes = [
        ("decode", 1usize, 2048usize),
        ("decode", 1, 8192),
        ("prefill", 512, 2048),
    ];
    for wtype in [
        DType::F16,
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4_K,
        DType::Q6_K,
        DType::Q2_K,
        DType::Q5_K,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::BF16,
    ] {
        let mut group = c.benchmark_group(format!("matmul_{}", wtype.name()));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3));
        for (kind, m, n) in shapes {
            let w = matrix(wtype, n, true, 1);
            let xt = vec_dot_type(wtype);
            let x = matrix(xt, m, false, 2);
            let (ws, xs) = (
                wtype.row_bytes(K).unwrap_or(0),
                xt.row_bytes(K).unwrap_or(0),
            );
            let mut y = vec![0f32; m * n];
            // The output pointer is taken anew in every iteration.
            let args = MatMulArgs {
                wtype,
                w: &w,
                w_stride: ws,
                k: K,
                x: &x,
                x_stride: xs,
                m,
                y: std::ptr::null_mut(),
                y_stride: n,
            };
            group.throughput(Throughput::Elements((2 * m * n * K) as u64));
            let label = format!("{kind}_m{m}_n{n}_k{K}");
            for backend in Backend::supported() {
                if backend == Backend::Generic && m > 1 {
                    continue; // minutes per iteration; the decode shape compares it
                }
                group.bench_function(BenchmarkId::new(backend.name(), &label), |b| {
                    b.iter(|| {
                        let args = MatMulArgs {
                            y: y.as_mut_ptr(),
                            ..args
                        };
                        // SAFETY: y holds m * n outputs; this is the only writer.
                        unsafe { matmul_with(backend, args, 0..n).expect("shapes are consistent") };
                        black_box(&y);
                    })
                });
            }
            if packed::can_pack(wtype, K, n) {
                let mut wp = vec![0u8; packed::packed_len(wtype, K, n).expect("packable")];
                packed::pack(wtype, K, n, &w, ws, &mut wp).expect("shapes are consistent");
                group.bench_function(BenchmarkId::new("packed", &label), |b| {
                    b.iter(|| {
                        let args = MatMulArgs {
                            w: &wp,
                            y: y.as_mut_ptr(),
                            ..args
                        };
                        // SAFETY: y holds m * n outputs; this is the only writer.
                        unsafe {
                            packed::matmul_packed(args, 0..n).expect("shapes are consistent")
                        };
                        black_box(&y);
                    })
                });
            }
            if m > 1 {
                let backend = Backend::detect();
                group.bench_function(BenchmarkId::new("vec_dot_per_output", &label), |b| {
                    b.iter(|| {
                        for i in 0..m {
                            for j in 0..n {
                                y[i * n + j] = vec_dot_with(
                                    backend,
                                    wtype,
                                    K,
                                    &w[j * ws..(j + 1) * ws],
                                    &x[i * xs..(i + 1) * xs],
                                )
                                .expect("shapes are consistent");
                            }
                        }
                        black_box(&y);
                    })
                });
            }
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
