//! Latency queries over the decode calls: time to first token and the intervals between
//! consecutive tokens (TPOT samples), with the rules of `summary.json` (`docs/views.md`),
//! for views that poll the model while it grows (the live view).

use super::{TokenPhase, TraceModel};

impl TraceModel {
    /// Time to first token, ns: first prefill entry → availability (end of sampling, else
    /// exit) of the last prefill chunk before the first decode step. `None` when the
    /// model does not start with a prefill or that chunk has not produced its token yet.
    pub fn ttft_ns(&self) -> Option<u64> {
        let tokens = self.tokens();
        let first = tokens.first()?;
        if first.phase != TokenPhase::Prefill {
            return None;
        }
        let first_decode = tokens
            .iter()
            .position(|t| t.phase == TokenPhase::Decode)
            .unwrap_or(tokens.len());
        let last_prefill = tokens[..first_decode]
            .iter()
            .rev()
            .find(|t| t.phase == TokenPhase::Prefill)?;
        Some(last_prefill.produced_ns()?.saturating_sub(first.start_ns))
    }

    /// Intervals between consecutive tokens' availability, ns, as `(decode call index,
    /// interval)`: the first decode step's interval starts at the last prefill chunk; a
    /// later prefill (a new prompt) restarts the chain. These are the TPOT samples.
    pub fn token_intervals_ns(&self) -> Vec<(u32, u64)> {
        let tokens = self.tokens();
        let first_decode = tokens
            .iter()
            .position(|t| t.phase == TokenPhase::Decode)
            .unwrap_or(tokens.len());
        let mut prev = tokens[..first_decode]
            .iter()
            .rev()
            .find(|t| t.phase == TokenPhase::Prefill)
            .and_then(|t| t.produced_ns());
        let mut out = Vec::new();
        for t in &tokens[first_decode..] {
            if t.phase != TokenPhase::Decode {
                prev = None;
                continue;
            }
            let p = t.produced_ns();
            if let (Some(a), Some(b)) = (prev, p) {
                out.push((t.index, b.saturating_sub(a)));
            }
            prev = p;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::{
        export::summary::summarize,
        ingest::IngestInfo,
        synthetic::{self, SynthSpec, synth_header},
    };

    use super::*;

    fn model_of(spec: &SynthSpec, upto: Option<usize>) -> TraceModel {
        synthetic::model(spec, upto)
    }

    /// Same numbers as `summary.json`'s `ttft_ms` / `tpot_ms` (an independent copy of the
    /// rules, in the summary exporter).
    #[test]
    fn agrees_with_the_summary() {
        let spec = SynthSpec::sized(6, 4, 2);
        let m = model_of(&spec, None);
        let s = summarize(
            &m,
            &synth_header(),
            None,
            &IngestInfo::default(),
            Vec::new(),
        );
        let ttft = m.ttft_ns().expect("prefill sampled") as f64 / 1e6;
        assert!((ttft - s.ttft_ms.expect("summary ttft")).abs() < 1e-9);
        let iv = m.token_intervals_ns();
        assert_eq!(iv.len(), 5, "5 decode steps after the prefill");
        let mean_ms = iv.iter().map(|&(_, ns)| ns as f64).sum::<f64>() / iv.len() as f64 / 1e6;
        let tpot = s.tpot_ms.expect("summary tpot");
        assert!((mean_ms - tpot.mean).abs() < 1e-9, "{mean_ms} vs {tpot:?}");
        assert_eq!(
            iv.iter().map(|&(i, _)| i).collect::<Vec<_>>(),
            vec![1, 2, 3, 4, 5]
        );
    }

    /// Hand-computed from the synthetic layout: the prefill's sample phase ends
    /// 100 + 100 + nodes·(op_ns + 200) + 100 + 100 + 500 ns after its entry.
    #[test]
    fn ttft_of_the_synthetic_prefill() {
        let spec = SynthSpec::sized(2, 3, 1);
        let m = model_of(&spec, None);
        let expect = 100 + 100 + 3 * (spec.op_ns + 200) + 100 + 100 + 500;
        assert_eq!(m.ttft_ns(), Some(expect));
    }

    #[test]
    fn nothing_before_the_first_token_is_produced() {
        let spec = SynthSpec::sized(3, 2, 1);
        // Only the first few records: the prefill's decode entry and graph entry.
        let m = model_of(&spec, Some(2));
        assert_eq!(m.ttft_ns(), None);
        assert!(m.token_intervals_ns().is_empty());
    }
}
