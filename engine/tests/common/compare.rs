//! Comparisons of the engine with llama.cpp on one model file: last-position logits
//! within a tolerance, and greedy continuations identical up to near-ties checked both
//! ways ([`tie_bound`]: [`TIE_REL`] on the oracle's instruction set, at most
//! [`MAX_TIES`]; after one the engine is fed llama.cpp's token and the comparison goes
//! on).

use std::path::Path;

use super::{engine, floats_of, oracle, run_json, token_arg, tokens_of};

/// Allowed difference between our logits and llama.cpp's:
/// `max_i |ours_i - theirs_i| <= abs + rel * max_i |theirs_i|`.
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    /// Absolute part (guards logits that are all close to zero).
    pub abs: f32,
    /// Part relative to the largest reference logit.
    pub rel: f32,
}

impl Tolerance {
    /// The allowed maximum absolute difference for logits whose largest magnitude is `scale`.
    pub fn bound(self, scale: f32) -> f32 {
        self.abs + self.rel * scale
    }
}

/// Index of the largest value (the first one among equal maxima, like `np.argmax`).
pub fn argmax(values: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best
}

/// The best and the second-best index (each the first among equal values, like the
/// oracle's `np.argmax` with the best masked out).
pub fn top2(values: &[f32]) -> (usize, usize) {
    let best = argmax(values);
    let mut second = usize::from(best == 0);
    for (i, &v) in values.iter().enumerate() {
        if i != best && v > values[second] {
            second = i;
        }
    }
    (best, second)
}

/// Largest gap between the two best logits, relative to the largest |logit|, at which
/// the engine and llama.cpp may pick different tokens. The engine computes llama.cpp's
/// logits to 1e-5 of the largest one (tests/oracle_exact.rs), so two logits can swap
/// order only when their gap is below twice that; 1e-4 leaves a factor of five for the
/// paths that test does not sample (a graph split, a long decode's KV cache).
pub const TIE_REL: f32 = 1e-4;

/// Most near-ties one greedy comparison may pass through: with [`TIE_REL`] a tie is rare
/// (a gap of 1e-4 of the largest logit between the two best of thousands of tokens), so
/// a run with more of them is a wrong engine that happens to stay close.
pub const MAX_TIES: usize = 2;

/// Whether the engine runs the kernels of the oracle's instruction set. llama.cpp's
/// oracle is the x86-64 wheel; an engine built for another architecture (aarch64 under
/// qemu-user in CI) sums its dot products in NEON's order, not AVX2's, and is not
/// 1e-5-exact to it: on the chaotic tiny models its logits drift from llama.cpp's; the
/// one divergence seen was tiny-mixtral q8_0 at greedy step 28 (the 20-token prompt plus
/// 28 generated), 7.06e-3 of the largest logit apart, within the dtype's logits tolerance
/// (`cargo test --release --target aarch64-unknown-linux-musl -p engine --test oracle --
/// greedy` with `qemu-aarch64-static -cpu max` as runner, as `cargo xtask test` runs it;
/// the test prints the drift at every near-tie).
const SAME_ISA_AS_ORACLE: bool = cfg!(target_arch = "x86_64");

/// Largest top-2 gap accepted as a near-tie for logits whose largest |logit| is `scale`,
/// where the engine's and llama.cpp's logits for the same tokens differ by at most
/// `drift`: [`TIE_REL`] of `scale` on the oracle's instruction set; elsewhere two logits
/// can also swap by what the two sides measurably differ there, so twice `drift` is added
/// (the drift is measured at that very position and printed).
fn tie_bound(scale: f32, drift: f32) -> f32 {
    if SAME_ISA_AS_ORACLE {
        TIE_REL * scale
    } else {
        TIE_REL * scale + 2.0 * drift
    }
}

/// Largest |a_i - b_i| of two logit rows.
fn max_drift(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max)
}

/// Checks that where the engine's best token `ours` differs from llama.cpp's `theirs`,
/// it is a near-tie both ways: the engine's token is llama.cpp's runner-up and
/// llama.cpp's token the engine's, and both gaps are within [`TIE_REL`]. Panics naming
/// what does not hold.
fn assert_tie_both_ways(label: &str, ours_logits: &[f32], theirs_logits: &[f32]) {
    let (ours, ours_second) = top2(ours_logits);
    let (theirs, theirs_second) = top2(theirs_logits);
    let scale = theirs_logits.iter().fold(0f32, |m, x| m.max(x.abs()));
    let bound = tie_bound(scale, max_drift(ours_logits, theirs_logits));
    let their_gap = theirs_logits[theirs] - theirs_logits[theirs_second];
    let our_gap = ours_logits[ours] - ours_logits[ours_second];
    assert!(
        ours_second == theirs && theirs_second == ours,
        "{label}: the engine picks {ours} (runner-up {ours_second}), llama.cpp {theirs} \
         (runner-up {theirs_second}): not the same two tokens swapped"
    );
    assert!(
        their_gap.abs() <= bound && our_gap.abs() <= bound,
        "{label}: the engine picks {ours}, llama.cpp {theirs}, with gaps {our_gap:.3e} \
         (engine) and {their_gap:.3e} (llama.cpp), more than the tie bound {bound:.3e} \
         ({TIE_REL:e} of the largest |logit| {scale:.3})"
    );
    eprintln!(
        "!! {label}: near-tie, the engine picks {ours}, llama.cpp {theirs}, gaps \
         {:.2e} / {:.2e} of the largest |logit|",
        our_gap / scale,
        their_gap / scale
    );
}

/// Checks one forward pass over `tokens`: logits within `tol` of llama.cpp's, finite, and
/// the same argmax unless both sides' top two are the same two tokens swapped, within
/// [`TIE_REL`] of each other.
pub fn check_logits(label: &str, model: &Path, tokens: &[u32], threads: &str, tol: Tolerance) {
    check_logits_with(label, model, tokens, threads, tol, &[]);
}

/// The engine's last-position logits over `tokens` (`engine eval`, with `engine_args`).
pub fn engine_logits(
    model: &Path,
    tokens: &[u32],
    threads: &str,
    engine_args: &[&str],
) -> Vec<f32> {
    let tokens = token_arg(tokens);
    let ours = run_json(
        engine("eval")
            .arg("-m")
            .arg(model)
            .args(["--tokens", &tokens, "-t", threads, "--json"])
            .args(engine_args),
    );
    floats_of(&ours["logits"], "engine logits")
}

/// llama.cpp's last-position logits over `tokens` (the oracle's `logits`).
fn oracle_logits(model: &Path, tokens: &[u32], threads: &str) -> Vec<f32> {
    let tokens = token_arg(tokens);
    let theirs = run_json(oracle("logits").arg("--model").arg(model).args([
        "--tokens",
        &tokens,
        "--threads",
        threads,
    ]));
    floats_of(&theirs["logits"], "llama.cpp logits")
}

/// [`check_logits`] with extra engine options (a graph split, say).
pub fn check_logits_with(
    label: &str,
    model: &Path,
    tokens: &[u32],
    threads: &str,
    tol: Tolerance,
    engine_args: &[&str],
) {
    let ours = engine_logits(model, tokens, threads, engine_args);
    let theirs = oracle_logits(model, tokens, threads);
    assert_eq!(ours.len(), theirs.len(), "{label}: vocabulary sizes differ");
    assert!(
        ours.iter().all(|x| x.is_finite()),
        "{label}: non-finite engine logits"
    );
    let scale = theirs.iter().fold(0f32, |m, x| m.max(x.abs()));
    let (worst, max_diff) = ours
        .iter()
        .zip(&theirs)
        .map(|(a, b)| (a - b).abs())
        .enumerate()
        .fold((0, 0f32), |w, (i, d)| if d > w.1 { (i, d) } else { w });
    let bound = tol.bound(scale);
    eprintln!(
        "{label}: max |Δlogit| = {max_diff:.3e} (token {worst}), max |logit| = {scale:.3}, \
         bound = {bound:.3e}"
    );
    assert!(
        max_diff <= bound,
        "{label}: logits differ from llama.cpp by {max_diff} at token {worst} \
         (ours {}, llama.cpp {}), more than {bound} = {} + {} * {scale}",
        ours[worst],
        theirs[worst],
        tol.abs,
        tol.rel
    );
    if argmax(&ours) != argmax(&theirs) {
        assert_tie_both_ways(label, &ours, &theirs);
    }
}

/// Checks that `n` greedy tokens after `tokens` are llama.cpp's; a divergence is accepted
/// only at a near-tie checked both ways ([`tie_bound`]): the engine's token is llama.cpp's
/// runner-up with llama.cpp's top-2 gap within the bound, and the engine's own logits at
/// that position have the same two tokens on top, as close. The comparison goes on after
/// it: the engine is run again on the prompt plus llama.cpp's tokens up to and including
/// the tie, and its continuation must again be llama.cpp's, to the last token. More than
/// [`MAX_TIES`] ties fail the run.
pub fn check_greedy(label: &str, model: &Path, tokens: &[u32], n: usize, threads: &str) {
    check_greedy_with(label, model, tokens, n, threads, &[]);
}

/// llama.cpp's greedy continuation with, per step, its runner-up token, the gap between
/// the two and the largest |logit|.
struct OracleGreedy {
    tokens: Vec<u32>,
    runner_ups: Vec<u32>,
    margins: Vec<f32>,
    scales: Vec<f32>,
}

fn oracle_greedy(model: &Path, tokens: &[u32], n: usize, threads: &str) -> OracleGreedy {
    let out = run_json(oracle("greedy").arg("--model").arg(model).args([
        "--tokens",
        &token_arg(tokens),
        "-n",
        &n.to_string(),
        "--threads",
        threads,
    ]));
    let g = OracleGreedy {
        tokens: tokens_of(&out["generated_tokens"], "llama.cpp generated_tokens"),
        runner_ups: tokens_of(&out["runner_up_tokens"], "llama.cpp runner_up_tokens"),
        margins: floats_of(&out["margins"], "llama.cpp margins"),
        scales: floats_of(&out["max_abs_logits"], "llama.cpp max_abs_logits"),
    };
    for (what, len) in [
        ("tokens", g.tokens.len()),
        ("runner-ups", g.runner_ups.len()),
        ("margins", g.margins.len()),
        ("scales", g.scales.len()),
    ] {
        assert_eq!(len, n, "the oracle gave {len} {what} for {n} steps");
    }
    g
}

/// [`check_greedy`] with extra engine options (a graph split, say).
pub fn check_greedy_with(
    label: &str,
    model: &Path,
    tokens: &[u32],
    n: usize,
    threads: &str,
    engine_args: &[&str],
) {
    let theirs = oracle_greedy(model, tokens, n, threads);
    // Steps before `start` are checked; the engine continues from the prompt followed by
    // llama.cpp's first `start` tokens.
    let mut start = 0;
    let mut ties = Vec::new();
    while start < n {
        let mut prefix = tokens.to_vec();
        prefix.extend_from_slice(&theirs.tokens[..start]);
        let ours = engine_greedy(model, &prefix, n - start, threads, engine_args);
        assert_eq!(ours.len(), n - start, "{label}: engine generated {ours:?}");
        let Some(offset) = ours
            .iter()
            .zip(&theirs.tokens[start..])
            .position(|(a, b)| a != b)
        else {
            break;
        };
        let step = start + offset;
        let (our_token, their_token) = (ours[offset], theirs.tokens[step]);
        let context = format!(
            "{label}: greedy continuation diverges from llama.cpp at step {step} (ours \
             {our_token}, llama.cpp {their_token})\nours (from step {start}): {ours:?}\n\
             llama.cpp: {:?}",
            theirs.tokens
        );
        // Both sides' logits at that position (prefills of the same tokens): the same
        // two tokens on top (either order: a prefill of the prefix is not the decode step
        // that chose, and the gap is within both paths' rounding), and how far apart the
        // two rows are there (the drift [`tie_bound`] allows off the oracle's ISA).
        prefix.extend_from_slice(&theirs.tokens[start..step]);
        let logits = engine_logits(model, &prefix, threads, engine_args);
        let oracle_logits = oracle_logits(model, &prefix, threads);
        let drift = max_drift(&logits, &oracle_logits);
        let pair = [our_token as usize, their_token as usize];
        for (side, row) in [("engine", &logits), ("llama.cpp", &oracle_logits)] {
            let (best, second) = top2(row);
            assert!(
                [best, second] == pair || [second, best] == pair,
                "{context}\nthe {side}'s own top two there are {best} and {second}"
            );
        }
        // llama.cpp's side, from its own greedy run: the engine's token is its second,
        // and close.
        assert_eq!(
            theirs.runner_ups[step], our_token,
            "{context}\nthe engine's token is not llama.cpp's runner-up ({})",
            theirs.runner_ups[step]
        );
        let their_bound = tie_bound(theirs.scales[step], drift);
        assert!(
            theirs.margins[step].abs() <= their_bound,
            "{context}\nllama.cpp's top-2 gap {:.3e} > the tie bound {their_bound:.3e} \
             ({TIE_REL:e} of its largest |logit| {}, drift {drift:.3e})",
            theirs.margins[step],
            theirs.scales[step]
        );
        // The engine's side, from its logits at the same position, as close.
        let (best, second) = top2(&logits);
        let scale = logits.iter().fold(0f32, |m, x| m.max(x.abs()));
        let gap = logits[best] - logits[second];
        let bound = tie_bound(scale, drift);
        assert!(
            gap.abs() <= bound,
            "{context}\nthe engine's top-2 gap {gap:.3e} > the tie bound {bound:.3e} \
             ({TIE_REL:e} of its largest |logit| {scale}, drift {drift:.3e})"
        );
        eprintln!(
            "!! {label}: near-tie at step {step}: gaps {:.2e} (llama.cpp) and {:.2e} \
             (engine) of the largest |logit|, the two rows {:.2e} apart",
            theirs.margins[step] / theirs.scales[step],
            gap / scale,
            drift / scale
        );
        ties.push(step);
        assert!(
            ties.len() <= MAX_TIES,
            "{label}: {} near-ties (steps {ties:?}) in {n} tokens, more than {MAX_TIES}",
            ties.len()
        );
        start = step + 1;
    }
    if !ties.is_empty() {
        eprintln!(
            "!! {label}: llama.cpp's tokens at near-ties (steps {ties:?}) were fed to the \
             engine; every other of the {n} tokens is llama.cpp's"
        );
    }
}

/// The engine's greedy continuation of `n` tokens after `tokens` (`engine run`).
fn engine_greedy(
    model: &Path,
    tokens: &[u32],
    n: usize,
    threads: &str,
    engine_args: &[&str],
) -> Vec<u32> {
    let ours = run_json(
        engine("run")
            .arg("-m")
            .arg(model)
            .args([
                "--tokens",
                &token_arg(tokens),
                "-n",
                &n.to_string(),
                "-t",
                threads,
                "--temp",
                "0",
                "--ignore-eos",
                "--json",
            ])
            .args(engine_args),
    );
    tokens_of(&ours["generated_tokens"], "engine generated_tokens")
}
