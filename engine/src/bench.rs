//! `engine bench`: prefill and decode throughput measured the way llama-bench does —
//! prefill is one batch of `n_prompt` tokens into an empty cache; decode is `n_gen`
//! single-token steps from an empty cache; token ids are random and nothing is sampled;
//! [`WARMUP_PASSES`] unmeasured passes come first.
//!
//! With a list of prefill chunk sizes, the prefill test runs once per size and
//! repetition, sizes interleaved (so a slow phase of the machine hits all of them):
//! seed 001's trade-off between chunk size, per-chunk latency and prefill throughput.

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::context::Context;
use crate::error::EngineError;
use crate::generate::{per_s, prefill};

/// Unmeasured passes of each test before the measured ones: the first touches of the
/// memory-mapped weights and thread start-up are not what the benchmark is about.
/// The llama.cpp oracle's bench uses the same number.
pub const WARMUP_PASSES: usize = 2;

/// Settings of a benchmark run.
#[derive(Clone, Debug)]
pub struct BenchParams {
    /// Prompt tokens of the prefill test (0 skips it).
    pub n_prompt: usize,
    /// Decode steps of the generation test (0 skips it).
    pub n_gen: usize,
    /// Repetitions of each test (after one warm-up).
    pub reps: usize,
    /// Prefill chunk sizes to compare (empty: the context's batch size only).
    pub prefill_chunks: Vec<usize>,
}

/// The prefill test at one chunk size.
#[derive(Clone, Debug, Serialize)]
pub struct ChunkResult {
    /// Tokens per chunk (the last chunk may be shorter).
    pub chunk: usize,
    /// Chunks per prefill.
    pub n_chunks: usize,
    /// Mean prefill tokens/s.
    pub prefill_tokens_per_s: f64,
    /// Standard deviation of prefill tokens/s.
    pub prefill_stddev: f64,
    /// Mean latency of one chunk (one graph computation), ms.
    pub chunk_ms: f64,
    /// Mean latency of the longest chunk, ms.
    pub max_chunk_ms: f64,
}

/// Results: means and standard deviations over the repetitions.
#[derive(Clone, Debug, Serialize)]
pub struct BenchResult {
    /// Prompt tokens per prefill test.
    pub n_prompt: usize,
    /// Steps per decode test.
    pub n_gen: usize,
    /// Threads.
    pub threads: u32,
    /// Repetitions.
    pub reps: usize,
    /// Mean prefill tokens/s.
    pub prefill_tokens_per_s: f64,
    /// Standard deviation of prefill tokens/s.
    pub prefill_stddev: f64,
    /// Mean decode tokens/s.
    pub decode_tokens_per_s: f64,
    /// Standard deviation of decode tokens/s.
    pub decode_stddev: f64,
    /// The prefill test per chunk size (with `prefill_chunks`).
    pub chunks: Vec<ChunkResult>,
    /// Weight bytes one decode step reads ([`Weights::decode_ranges`]); times decode
    /// tokens/s, the GB/s decode streams.
    ///
    /// [`Weights::decode_ranges`]: crate::model::Weights::decode_ranges
    pub decode_weight_bytes: u64,
    /// The fastest of the repetitions of merely reading those bytes with the same
    /// threads, GB/s ([`read_ceiling`]): what decode would reach if it were bound by
    /// memory alone (0 without a decode test).
    pub weight_read_gb_per_s: f64,
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64;
    (m, var.sqrt())
}

/// Runs the benchmark on `ctx`.
pub fn run(ctx: &mut Context, p: &BenchParams) -> Result<BenchResult, EngineError> {
    let n_vocab = ctx.model().config.n_vocab as i32;
    let mut rng = ChaCha8Rng::seed_from_u64(1234);
    let mut random_tokens = |n: usize| {
        (0..n)
            .map(|_| rng.random_range(0..n_vocab))
            .collect::<Vec<i32>>()
    };
    let mut pp = Vec::new();
    let mut tg = Vec::new();
    let default_batch = ctx.n_batch();
    // Per chunk size: (tokens/s, mean chunk ms, max chunk ms) of each measured rep.
    let mut per_chunk: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); p.prefill_chunks.len()];
    for rep in 0..p.reps + WARMUP_PASSES {
        for (i, &chunk) in p.prefill_chunks.iter().enumerate() {
            if p.n_prompt == 0 {
                break;
            }
            let tokens = random_tokens(p.n_prompt);
            ctx.clear();
            ctx.set_n_batch(chunk);
            let t = Instant::now();
            let mut chunk_ms = Vec::new();
            for c in tokens.chunks(chunk.max(1)) {
                let tc = Instant::now();
                ctx.decode(c)?;
                chunk_ms.push(tc.elapsed().as_secs_f64() * 1e3);
            }
            let total_ms = t.elapsed().as_secs_f64() * 1e3;
            if rep >= WARMUP_PASSES {
                let mean = chunk_ms.iter().sum::<f64>() / chunk_ms.len() as f64;
                let max = chunk_ms.iter().fold(0f64, |m, &x| m.max(x));
                per_chunk[i].push((per_s(p.n_prompt, total_ms), mean, max));
            }
        }
        ctx.set_n_batch(default_batch);
        if p.n_prompt > 0 && p.prefill_chunks.is_empty() {
            let tokens = random_tokens(p.n_prompt);
            ctx.clear();
            let t = Instant::now();
            prefill(ctx, &tokens)?;
            if rep >= WARMUP_PASSES {
                pp.push(per_s(p.n_prompt, t.elapsed().as_secs_f64() * 1e3));
            }
        }
        if p.n_gen > 0 {
            let tokens = random_tokens(p.n_gen);
            ctx.clear();
            let t = Instant::now();
            for &tok in &tokens {
                ctx.decode(&[tok])?;
            }
            if rep >= WARMUP_PASSES {
                tg.push(per_s(p.n_gen, t.elapsed().as_secs_f64() * 1e3));
            }
        }
    }
    let chunks = p
        .prefill_chunks
        .iter()
        .zip(&per_chunk)
        .map(|(&chunk, runs)| {
            let tps: Vec<f64> = runs.iter().map(|r| r.0).collect();
            let (m, sd) = mean_sd(&tps);
            let n = runs.len().max(1) as f64;
            ChunkResult {
                chunk,
                n_chunks: p.n_prompt.div_ceil(chunk.max(1)),
                prefill_tokens_per_s: m,
                prefill_stddev: sd,
                chunk_ms: runs.iter().map(|r| r.1).sum::<f64>() / n,
                max_chunk_ms: runs.iter().map(|r| r.2).sum::<f64>() / n,
            }
        })
        .collect();
    let (pp_m, pp_sd) = mean_sd(&pp);
    let (tg_m, tg_sd) = mean_sd(&tg);
    let model = ctx.model();
    let experts = model.config.experts.map(|e| (e.n_used, e.n_expert));
    let ranges = model.weights.decode_ranges(experts);
    let decode_weight_bytes: u64 = ranges.iter().map(|r| r.1 as u64).sum();
    let weight_read_gb_per_s = if p.n_gen > 0 {
        (0..p.reps.max(1))
            .map(|_| read_ceiling(&ranges, ctx.n_threads() as usize))
            .fold(0f64, f64::max)
    } else {
        0.0
    };
    Ok(BenchResult {
        n_prompt: p.n_prompt,
        n_gen: p.n_gen,
        threads: ctx.n_threads(),
        reps: p.reps,
        prefill_tokens_per_s: pp_m,
        prefill_stddev: pp_sd,
        decode_tokens_per_s: tg_m,
        decode_stddev: tg_sd,
        chunks,
        decode_weight_bytes,
        weight_read_gb_per_s,
    })
}

/// Reads every byte of `ranges` once with `threads` threads (each range split evenly
/// between them, summed as 64-bit words) and returns the rate in
/// GB/s: the memory bandwidth a decode step streaming these weights could reach at best.
pub fn read_ceiling(ranges: &[(usize, usize)], threads: usize) -> f64 {
    let threads = threads.max(1);
    let total: usize = ranges.iter().map(|r| r.1).sum();
    let t = Instant::now();
    std::thread::scope(|s| {
        for ith in 0..threads {
            s.spawn(move || {
                let mut acc = 0u64;
                for &(addr, len) in ranges {
                    let words = len / 8;
                    let start = words * ith / threads;
                    let end = words * (ith + 1) / threads;
                    // SAFETY: `addr..addr + len` is a weight tensor's data, mapped or
                    // owned by the model for as long as the caller holds it; it is only
                    // read, and `start..end` stays within its `len / 8` whole words.
                    let bytes = unsafe {
                        std::slice::from_raw_parts(
                            (addr + start * 8) as *const u8,
                            (end - start) * 8,
                        )
                    };
                    acc = bytes.chunks_exact(8).fold(acc, |a, w| {
                        a.wrapping_add(u64::from_ne_bytes(w.try_into().expect("8 bytes")))
                    });
                }
                std::hint::black_box(acc);
            });
        }
    });
    total as f64 / t.elapsed().as_secs_f64().max(1e-9) / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Model, Repack};
    use crate::presets::{WeightFormat, preset, write_model};
    use common::DType;

    /// The bytes decode reads, from the file's own tensor list: everything but the
    /// embedding table (unless it is also the output), a used share of each expert tensor.
    fn expected_decode_bytes(model: &Model) -> u64 {
        let file = model.gguf();
        let tied = file.tensor("output.weight").is_none();
        let experts = model.config.experts;
        file.tensors()
            .iter()
            .filter(|t| tied || t.name != "token_embd.weight")
            .map(|t| match experts {
                Some(e) if t.name.ends_with("_exps.weight") => {
                    t.n_bytes / e.n_expert as u64 * e.n_used as u64
                }
                _ => t.n_bytes,
            })
            .sum()
    }

    #[test]
    fn decode_ranges_count_each_tensor_a_step_reads_once() {
        let dir = std::env::temp_dir().join(format!("decode-bytes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["tiny-llama", "tiny-llama3", "tiny-mixtral", "tiny-moe"] {
            let path = dir.join(format!("{name}.gguf"));
            let p = preset(name).unwrap();
            write_model(p, WeightFormat::Pure(DType::Q8_0), 3, &path, false).unwrap();
            for repack in [Repack::On, Repack::Off] {
                let model = Model::load_with(&path, repack).unwrap();
                let experts = model.config.experts.map(|e| (e.n_used, e.n_expert));
                let ranges = model.weights.decode_ranges(experts);
                let bytes: usize = ranges.iter().map(|r| r.1).sum();
                assert_eq!(
                    bytes as u64,
                    expected_decode_bytes(&model),
                    "{name} {repack:?}"
                );
                let all: u64 = model.gguf().tensors().iter().map(|t| t.n_bytes).sum();
                if !p.tied_embeddings || p.experts.is_some() {
                    assert!(
                        (bytes as u64) < all,
                        "{name} {repack:?}: the lookup table is read"
                    );
                }
                assert!(read_ceiling(&ranges, 2) > 0.0);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
