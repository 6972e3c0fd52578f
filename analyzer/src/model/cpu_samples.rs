//! CPU-clock samples of a `--sample` recording: the collector's per-interval histograms
//! ([`SampleCountsEvent`]) summed per phase and operator and per thread, and the share
//! of each operator with its sampling error.

use std::collections::BTreeMap;

use common::{
    event::{
        SAMPLE_OP_OTHER, SAMPLE_OP_WAIT, SAMPLE_PHASE_DECODE, SAMPLE_PHASE_IDLE,
        SAMPLE_PHASE_PREFILL, SampleCountsEvent,
    },
    op_catalog,
};
use serde::Serialize;

/// The samples of a recording, summed.
#[derive(Clone, Debug, Default)]
pub struct CpuSamples {
    hz: u32,
    /// (phase, operator) → samples.
    by_phase_op: BTreeMap<(u16, u16), u64>,
    /// (thread, operator) → samples.
    by_thread_op: BTreeMap<(u32, u16), u64>,
    total: u64,
    records: u64,
}

/// One operator's share of a phase's samples.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SampledShare {
    /// Operator name (`MUL_MAT`), `(thread-pool wait)` or `(no operator)`.
    pub op: String,
    /// Samples in it.
    pub samples: u64,
    /// Its fraction of the phase's samples.
    pub share: f64,
    /// Standard error of `share`: `sqrt(share (1 - share) / n)`, the binomial error of a
    /// fraction estimated from `n` samples.
    pub stderr: f64,
    /// CPU time it stands for, `samples / hz`, in ms.
    pub cpu_ms: f64,
}

/// The name of a sampled operator id.
pub fn sampled_op_name(op: u16) -> String {
    match op {
        SAMPLE_OP_WAIT => "(thread-pool wait)".to_owned(),
        SAMPLE_OP_OTHER => "(no operator)".to_owned(),
        id => op_catalog::op_name(u32::from(id)).map_or_else(|| format!("op {id}"), str::to_owned),
    }
}

/// Operator shares of a sampled recording, per phase (`report`, `summary.json`,
/// `index.html`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SampledReport {
    /// Sampling frequency, Hz.
    pub hz: u32,
    /// Samples of the target's threads in all.
    pub samples: u64,
    /// Shares of the samples inside single-token decode calls.
    pub decode: Vec<SampledShare>,
    /// Shares of the samples inside prefill calls.
    pub prefill: Vec<SampledShare>,
    /// Samples outside decode calls (loading, tokenizer, sampler between calls).
    pub outside: u64,
}

impl CpuSamples {
    /// The shares per phase, if the recording was sampled.
    pub fn report(&self) -> Option<SampledReport> {
        (!self.is_empty()).then(|| SampledReport {
            hz: self.hz,
            samples: self.total,
            decode: self.shares(Some(SAMPLE_PHASE_DECODE)),
            prefill: self.shares(Some(SAMPLE_PHASE_PREFILL)),
            outside: self.phase_total(Some(SAMPLE_PHASE_IDLE)),
        })
    }

    /// Adds one histogram record.
    pub fn add(&mut self, e: &SampleCountsEvent) {
        self.hz = e.hz;
        self.records += 1;
        for (op, n) in e.entries() {
            let n = u64::from(n);
            *self.by_phase_op.entry((e.phase, op)).or_insert(0) += n;
            *self.by_thread_op.entry((e.header.tid, op)).or_insert(0) += n;
            self.total += n;
        }
    }

    /// Whether the recording was sampled (it has histograms).
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// The sampling frequency, Hz.
    pub fn hz(&self) -> u32 {
        self.hz
    }

    /// Samples in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Samples of `phase` (a `SAMPLE_PHASE_*`; `None`: every phase).
    pub fn phase_total(&self, phase: Option<u16>) -> u64 {
        self.by_phase_op
            .iter()
            .filter(|((p, _), _)| phase.is_none_or(|ph| ph == *p))
            .map(|(_, &n)| n)
            .sum()
    }

    /// Each operator's share of `phase`'s samples, largest first.
    pub fn shares(&self, phase: Option<u16>) -> Vec<SampledShare> {
        let mut per_op: BTreeMap<u16, u64> = BTreeMap::new();
        for (&(p, op), &n) in &self.by_phase_op {
            if phase.is_none_or(|ph| ph == p) {
                *per_op.entry(op).or_insert(0) += n;
            }
        }
        let total = per_op.values().sum::<u64>().max(1) as f64;
        let hz = f64::from(self.hz.max(1));
        let mut out: Vec<SampledShare> = per_op
            .into_iter()
            .map(|(op, n)| {
                let share = n as f64 / total;
                SampledShare {
                    op: sampled_op_name(op),
                    samples: n,
                    share,
                    stderr: (share * (1.0 - share) / total).sqrt(),
                    cpu_ms: n as f64 / hz * 1e3,
                }
            })
            .collect();
        out.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.op.cmp(&b.op)));
        out
    }

    /// Samples per thread, in all.
    pub fn per_thread(&self) -> BTreeMap<u32, u64> {
        let mut out = BTreeMap::new();
        for (&(tid, _), &n) in &self.by_thread_op {
            *out.entry(tid).or_insert(0) += n;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::event::EventHeader;

    fn counts(tid: u32, phase: u16, entries: &[(u16, u32)]) -> SampleCountsEvent {
        let mut e = SampleCountsEvent {
            header: EventHeader {
                tid,
                ..EventHeader::ZERO
            },
            hz: 1000,
            phase,
            n: entries.len() as u16,
            ..SampleCountsEvent::default()
        };
        for (i, &(op, n)) in entries.iter().enumerate() {
            e.ops[i] = op;
            e.counts[i] = n;
        }
        e
    }

    #[test]
    fn shares_sum_per_phase_with_binomial_errors() {
        let mut s = CpuSamples::default();
        let mul_mat = op_catalog::op_id("MUL_MAT").expect("known") as u16;
        s.add(&counts(
            1,
            SAMPLE_PHASE_DECODE,
            &[(mul_mat, 600), (SAMPLE_OP_WAIT, 200)],
        ));
        s.add(&counts(2, SAMPLE_PHASE_DECODE, &[(mul_mat, 200)]));
        s.add(&counts(1, SAMPLE_PHASE_IDLE, &[(SAMPLE_OP_OTHER, 50)]));
        let decode = s.shares(Some(SAMPLE_PHASE_DECODE));
        assert_eq!(decode[0].op, "MUL_MAT");
        assert_eq!(decode[0].samples, 800);
        assert!((decode[0].share - 0.8).abs() < 1e-12);
        assert!((decode[0].stderr - (0.8f64 * 0.2 / 1000.0).sqrt()).abs() < 1e-12);
        assert!((decode[0].cpu_ms - 800.0).abs() < 1e-9);
        assert_eq!(decode[1].op, "(thread-pool wait)");
        assert_eq!(s.phase_total(None), 1050);
        assert_eq!(s.per_thread().get(&1), Some(&850));
        assert!(!s.is_empty() && s.hz() == 1000);
    }
}
