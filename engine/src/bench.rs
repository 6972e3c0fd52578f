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
    })
}
