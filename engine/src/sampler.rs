//! Sampling: softmax over the vocabulary, then greedy, or top-k → top-p → a seeded draw.
//! The three sampling phases are probe points: copying the logits out of the graph,
//! the softmax, and the draw.

use core::ffi::c_void;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::probe::probe_entry;
use crate::self_profile::Span;

/// Sampling settings.
#[derive(Clone, Debug)]
pub struct SamplerParams {
    /// Temperature; ≤ 0 means greedy.
    pub temp: f32,
    /// Keep the `top_k` most likely tokens (0 = all).
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches `top_p` (1 = all).
    pub top_p: f32,
    /// Seed of the random draw.
    pub seed: u64,
}

impl Default for SamplerParams {
    fn default() -> Self {
        SamplerParams {
            temp: 0.0,
            top_k: 40,
            top_p: 0.95,
            seed: 0,
        }
    }
}

/// A seeded sampler.
pub struct Sampler {
    params: SamplerParams,
    rng: ChaCha8Rng,
    probs: Vec<f32>,
    candidates: Vec<(f32, u32)>,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler")
            .field("params", &self.params)
            .finish()
    }
}

impl Sampler {
    /// A sampler with `params`.
    pub fn new(params: SamplerParams) -> Sampler {
        let rng = ChaCha8Rng::seed_from_u64(params.seed);
        Sampler {
            params,
            rng,
            probs: Vec::new(),
            candidates: Vec::new(),
        }
    }

    /// Picks the next token from `logits`, through the softmax and sample probe points.
    pub fn sample(&mut self, logits: &[f32]) -> i32 {
        self.probs.resize(logits.len(), 0.0);
        let temp = if self.params.temp > 0.0 {
            self.params.temp
        } else {
            1.0
        };
        // SAFETY: both buffers hold `len` floats.
        unsafe {
            engine_phase_softmax(
                logits.as_ptr(),
                self.probs.as_mut_ptr(),
                logits.len() as u32,
                temp,
            )
        };
        let probs = std::mem::take(&mut self.probs);
        // SAFETY: `self` is live for the call and `probs` holds `len` floats.
        let token = unsafe {
            engine_phase_sample(
                self as *mut Sampler as *mut c_void,
                probs.as_ptr(),
                probs.len() as u32,
            )
        };
        self.probs = probs;
        token
    }

    fn draw(&mut self, probs: &[f32]) -> i32 {
        if self.params.temp <= 0.0 {
            return argmax(probs) as i32;
        }
        self.candidates.clear();
        self.candidates
            .extend(probs.iter().enumerate().map(|(i, &p)| (p, i as u32)));
        let by_prob = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0);
        let k = self.params.top_k;
        if k > 0 && k < self.candidates.len() {
            self.candidates.select_nth_unstable_by(k - 1, by_prob);
            self.candidates.truncate(k);
        }
        self.candidates.sort_unstable_by(by_prob);
        if self.params.top_p < 1.0 {
            let mut cum = 0.0;
            let mut keep = self.candidates.len();
            for (i, (p, _)) in self.candidates.iter().enumerate() {
                cum += p;
                if cum >= self.params.top_p {
                    keep = i + 1;
                    break;
                }
            }
            self.candidates.truncate(keep.max(1));
        }
        let total: f32 = self.candidates.iter().map(|c| c.0).sum();
        let mut r = self.rng.random::<f32>() * total;
        for &(p, id) in &self.candidates {
            if r < p {
                return id as i32;
            }
            r -= p;
        }
        self.candidates.last().map_or(0, |c| c.1 as i32)
    }
}

/// Index of the largest value (the first on ties).
pub fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}

/// `probs = softmax(logits / temp)`.
pub fn softmax(logits: &[f32], probs: &mut [f32], temp: f32) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f64;
    for (p, &l) in probs.iter_mut().zip(logits) {
        *p = ((l - max) / temp).exp();
        sum += f64::from(*p);
    }
    let inv = (1.0 / sum) as f32;
    for p in probs.iter_mut() {
        *p *= inv;
    }
}

probe_entry! {
    /// Phase: copy `n` logits out of the graph's output tensor.
    fn engine_phase_copy_logits(dst: *mut f32, src: *const f32, n: u32)
        => copy_logits_entry
}

/// Body of `engine_phase_copy_logits`.
pub(crate) extern "C" fn copy_logits_entry(dst: *mut f32, src: *const f32, n: u32) {
    let _span = Span::phase("copy_logits");
    // SAFETY: the context passes two distinct buffers of n floats.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n as usize) };
}

probe_entry! {
    /// Phase: `probs = softmax(logits / temp)` over the vocabulary.
    fn engine_phase_softmax(logits: *const f32, probs: *mut f32, n_vocab: u32, temp: f32)
        => softmax_entry
}

/// Body of `engine_phase_softmax`.
pub(crate) extern "C" fn softmax_entry(
    logits: *const f32,
    probs: *mut f32,
    n_vocab: u32,
    temp: f32,
) {
    let _span = Span::phase("softmax");
    // SAFETY: the sampler passes two distinct buffers of n_vocab floats.
    let (logits, probs) = unsafe {
        (
            std::slice::from_raw_parts(logits, n_vocab as usize),
            std::slice::from_raw_parts_mut(probs, n_vocab as usize),
        )
    };
    softmax(logits, probs, temp);
}

probe_entry! {
    /// Phase: draw the next token from `probs` with `sampler`. Returns the token id.
    fn engine_phase_sample(sampler: *mut c_void, probs: *const f32, n_vocab: u32) -> i32
        => sample_entry
}

/// Body of `engine_phase_sample`.
pub(crate) extern "C" fn sample_entry(
    sampler: *mut c_void,
    probs: *const f32,
    n_vocab: u32,
) -> i32 {
    let _span = Span::phase("sample");
    if sampler.is_null() {
        return -1;
    }
    // SAFETY: `Sampler::sample` passes itself and its probability buffer.
    let (sampler, probs) = unsafe {
        (
            &mut *(sampler as *mut Sampler),
            std::slice::from_raw_parts(probs, n_vocab as usize),
        )
    };
    sampler.draw(probs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_picks_the_largest_logit() {
        let mut s = Sampler::new(SamplerParams {
            temp: 0.0,
            ..SamplerParams::default()
        });
        assert_eq!(s.sample(&[0.1, 3.0, -1.0, 2.9]), 1);
    }

    #[test]
    fn softmax_sums_to_one_and_orders_like_logits() {
        let logits = [1.0, 2.0, 3.0, -50.0];
        let mut p = [0.0; 4];
        softmax(&logits, &mut p, 1.0);
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(p[2] > p[1] && p[1] > p[0] && p[0] > p[3]);
        // Against the formula: p2/p1 = e.
        assert!((p[2] / p[1] - std::f32::consts::E).abs() < 1e-4);
    }

    #[test]
    fn seeded_sampling_is_reproducible_and_respects_top_k() {
        let logits: Vec<f32> = (0..100).map(|i| (i % 7) as f32).collect();
        let params = SamplerParams {
            temp: 1.0,
            top_k: 3,
            top_p: 1.0,
            seed: 42,
        };
        let draws = |p: &SamplerParams| {
            let mut s = Sampler::new(p.clone());
            (0..50).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        let a = draws(&params);
        assert_eq!(a, draws(&params));
        // Top-3 of logits with value 6: ids ≡ 6 (mod 7); only three of them may appear.
        let mut distinct: Vec<_> = a.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(
            distinct.len() <= 3 && a.iter().all(|&t| t % 7 == 6),
            "{distinct:?}"
        );
    }
}
