//! Statistics computed in one pass in bounded memory, for recordings too long to keep
//! every value: [`Quantiles`] (exact up to [`EXACT_VALUES`] values, then a DDSketch
//! whose quantiles are within [`SKETCH_RELATIVE_ERROR`] of the true ones) and
//! [`Moments`] (count, mean and standard deviation by Welford's method, exact).

use sketches_ddsketch::{Config, DDSketch};

/// Values a [`Quantiles`] keeps exactly; past this it moves them into a sketch.
pub const EXACT_VALUES: usize = 1024;
/// The relative error of a sketched quantile: the value returned is within this
/// fraction of a value whose rank is the one asked for (DDSketch's α).
pub const SKETCH_RELATIVE_ERROR: f64 = 0.01;
/// Most bins of a sketch (2048 × 8 B + overhead: ~17 kB at most, whatever the count;
/// at α = 1 % they span ratios up to e^(2048·0.02) ≈ 6·10^17 before the lowest merge).
const SKETCH_BINS: u32 = 2048;

/// Quantiles of a stream of non-negative values.
#[derive(Clone, Default)]
pub struct Quantiles {
    exact: Vec<u64>,
    sketch: Option<DDSketch>,
}

impl std::fmt::Debug for Quantiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quantiles")
            .field("count", &self.count())
            .field("exact", &self.is_exact())
            .finish()
    }
}

impl Quantiles {
    /// Adds one value.
    pub fn add(&mut self, v: u64) {
        if let Some(s) = &mut self.sketch {
            s.add(v as f64);
            return;
        }
        self.exact.push(v);
        if self.exact.len() > EXACT_VALUES {
            let mut s = DDSketch::new(Config::new(SKETCH_RELATIVE_ERROR, SKETCH_BINS, 1.0));
            for &x in &self.exact {
                s.add(x as f64);
            }
            self.exact = Vec::new();
            self.sketch = Some(s);
        }
    }

    /// Values added.
    pub fn count(&self) -> usize {
        self.sketch
            .as_ref()
            .map_or(self.exact.len(), DDSketch::count)
    }

    /// Whether quantiles are exact (nearest rank); else within
    /// [`SKETCH_RELATIVE_ERROR`].
    pub fn is_exact(&self) -> bool {
        self.sketch.is_none()
    }

    /// The `p`-th percentile (`p` in 0..=100): nearest rank while exact, the sketch's
    /// estimate after; `None` without values.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        if let Some(s) = &self.sketch {
            return s.quantile(p / 100.0).ok().flatten();
        }
        let mut sorted = self.exact.clone();
        sorted.sort_unstable();
        let sorted: Vec<f64> = sorted.into_iter().map(|v| v as f64).collect();
        crate::stats::percentile(&sorted, p)
    }
}

/// Count, mean and sample standard deviation of a stream, by Welford's method.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Moments {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Moments {
    /// Adds one value.
    pub fn add(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// Values added.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Mean (0 without values).
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Sample standard deviation (0 with fewer than two values).
    pub fn sd(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.m2 / (self.n - 1) as f64).sqrt()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_of_hand_values() {
        let mut m = Moments::default();
        assert_eq!((m.mean(), m.sd()), (0.0, 0.0));
        m.add(3.0);
        assert_eq!((m.mean(), m.sd()), (3.0, 0.0));
        let mut m = Moments::default();
        for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
            m.add(x);
        }
        assert_eq!(m.count(), 8);
        assert!((m.mean() - 5.0).abs() < 1e-12);
        assert!((m.sd() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn few_values_give_exact_nearest_rank_quantiles() {
        let mut q = Quantiles::default();
        assert_eq!(q.percentile(50.0), None);
        for v in [5, 1, 4, 2, 3] {
            q.add(v);
        }
        assert!(q.is_exact());
        assert_eq!(q.percentile(50.0), Some(3.0));
        assert_eq!(q.percentile(99.0), Some(5.0));
        assert_eq!(q.percentile(0.0), Some(1.0));
    }

    #[test]
    fn many_values_stay_within_the_sketch_error() {
        // A skewed stream (durations are): 200 000 values from 1 µs to ~1 s.
        let mut q = Quantiles::default();
        let mut all = Vec::new();
        let mut x = 12345u64;
        for _ in 0..200_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = 1000 + (((x >> 33) as f64 / (1u64 << 31) as f64).powi(6) * 1e9) as u64;
            q.add(v);
            all.push(v as f64);
        }
        assert!(!q.is_exact());
        assert_eq!(q.count(), 200_000);
        all.sort_by(f64::total_cmp);
        for p in [1.0, 50.0, 90.0, 99.0, 99.9] {
            let got = q.percentile(p).unwrap();
            // The sketch's rank is q·(n−1); nearest rank is ⌈q·n⌉: compare with both
            // neighbours' bound.
            let lo = crate::stats::percentile(&all, p - 0.01).unwrap();
            let hi = crate::stats::percentile(&all, p + 0.01).unwrap();
            assert!(
                got >= lo * (1.0 - SKETCH_RELATIVE_ERROR)
                    && got <= hi * (1.0 + SKETCH_RELATIVE_ERROR),
                "p{p}: {got} not within 1 % of [{lo}, {hi}]"
            );
        }
    }
}
