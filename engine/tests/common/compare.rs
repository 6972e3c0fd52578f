//! Comparisons of the engine with llama.cpp on one model file: last-position logits
//! within a tolerance, and greedy continuations identical up to near-ties (after which
//! the engine is fed llama.cpp's token and the comparison goes on).

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

/// Checks one forward pass over `tokens`: logits within `tol` of llama.cpp's, finite, and
/// the same argmax unless llama.cpp's own top two are closer than the tolerance.
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
    let tokens = token_arg(tokens);
    let theirs = run_json(oracle("logits").arg("--model").arg(model).args([
        "--tokens",
        &tokens,
        "--threads",
        threads,
    ]));
    let theirs = floats_of(&theirs["logits"], "llama.cpp logits");
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
    let (ours_best, theirs_best) = (argmax(&ours), argmax(&theirs));
    let tie = theirs[theirs_best] - theirs[ours_best] <= bound;
    assert!(
        ours_best == theirs_best || tie,
        "{label}: argmax {ours_best} differs from llama.cpp's {theirs_best}"
    );
}

/// Checks that `n` greedy tokens after `tokens` are llama.cpp's; a divergence is accepted
/// only where llama.cpp's best and second-best logits are closer than the tolerance
/// (both choices are then correct), and the comparison goes on after it: the engine is
/// run again on the prompt plus llama.cpp's tokens up to and including the tie, and its
/// continuation must again be llama.cpp's (up to the next near-tie), to the last token.
pub fn check_greedy(
    label: &str,
    model: &Path,
    tokens: &[u32],
    n: usize,
    threads: &str,
    tol: Tolerance,
) {
    check_greedy_with(label, model, tokens, n, threads, tol, &[]);
}

/// [`check_greedy`] with extra engine options (a graph split, say).
pub fn check_greedy_with(
    label: &str,
    model: &Path,
    tokens: &[u32],
    n: usize,
    threads: &str,
    tol: Tolerance,
    engine_args: &[&str],
) {
    let prompt = token_arg(tokens);
    let n_arg = n.to_string();
    let theirs = run_json(oracle("greedy").arg("--model").arg(model).args([
        "--tokens",
        &prompt,
        "-n",
        &n_arg,
        "--threads",
        threads,
    ]));
    let margins = floats_of(&theirs["margins"], "llama.cpp margins");
    let scales = floats_of(&theirs["max_abs_logits"], "llama.cpp max_abs_logits");
    let theirs = tokens_of(&theirs["generated_tokens"], "llama.cpp generated_tokens");
    assert_eq!(
        theirs.len(),
        n,
        "the oracle generated the wrong number of tokens"
    );
    // Steps before `start` are checked; the engine continues from the prompt followed by
    // llama.cpp's first `start` tokens.
    let mut start = 0;
    let mut ties = Vec::new();
    while start < n {
        let mut prefix = tokens.to_vec();
        prefix.extend_from_slice(&theirs[..start]);
        let ours = engine_greedy(model, &prefix, n - start, threads, engine_args);
        assert_eq!(ours.len(), n - start, "{label}: engine generated {ours:?}");
        let Some(offset) = ours.iter().zip(&theirs[start..]).position(|(a, b)| a != b) else {
            break;
        };
        let step = start + offset;
        let bound = tol.bound(scales[step]);
        assert!(
            margins[step] <= bound,
            "{label}: greedy continuation diverges from llama.cpp at step {step} \
             (ours {}, llama.cpp {}, llama.cpp's top-2 margin {} > tolerance {bound})\n\
             ours (from step {start}): {ours:?}\nllama.cpp: {theirs:?}",
            ours[offset],
            theirs[step],
            margins[step]
        );
        ties.push(step);
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
