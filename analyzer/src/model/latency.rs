//! Latency queries over the decode calls: time to first token and the intervals between
//! consecutive tokens (TPOT samples), with the rules of `summary.json` (`docs/views.md`),
//! measured within each [`SequenceRun`], for the summary, the per-run table and views
//! that poll the model while it grows (the live view).

use super::{SequenceRun, TokenPhase, TokenSpan, TraceModel};

/// The index of a run's first decode step (its length when it has none).
fn first_decode(tokens: &[TokenSpan]) -> usize {
    tokens
        .iter()
        .position(|t| t.phase == TokenPhase::Decode)
        .unwrap_or(tokens.len())
}

/// The prefill call that produced a run's first token: the last one before its first
/// decode step.
fn last_prefill(tokens: &[TokenSpan]) -> Option<&TokenSpan> {
    tokens[..first_decode(tokens)]
        .iter()
        .rev()
        .find(|t| t.phase == TokenPhase::Prefill)
}

/// Time to first token of one run's calls, ns (see [`TraceModel::run_ttft_ns`]).
fn ttft_of(tokens: &[TokenSpan]) -> Option<u64> {
    let first = tokens.first()?;
    if first.phase != TokenPhase::Prefill {
        return None;
    }
    Some(
        last_prefill(tokens)?
            .produced_ns()?
            .saturating_sub(first.start_ns),
    )
}

/// Appends one run's token intervals (see [`TraceModel::token_intervals_ns`]).
fn intervals_of(tokens: &[TokenSpan], out: &mut Vec<(u32, u64)>) {
    let mut prev = last_prefill(tokens).and_then(|t| t.produced_ns());
    for t in &tokens[first_decode(tokens)..] {
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
}

impl TraceModel {
    /// Time to first token of a run, ns: its first prefill entry → availability (end of
    /// sampling, else exit) of the last prefill chunk before its first decode step.
    /// `None` when the run does not start with a prefill or that chunk has not produced
    /// its token yet.
    pub fn run_ttft_ns(&self, run: &SequenceRun) -> Option<u64> {
        ttft_of(self.run_tokens(run))
    }

    /// Time to first token of the latest run that has produced one, ns (for a trace of
    /// one generation, its run's; for the live view of a process that decodes sequence
    /// after sequence, the current one's once it has its first token).
    pub fn ttft_ns(&self) -> Option<u64> {
        self.runs().iter().rev().find_map(|r| self.run_ttft_ns(r))
    }

    /// Intervals between consecutive tokens' availability in one run, ns, as `(decode
    /// call index, interval)`: the first decode step's interval starts at the last
    /// prefill chunk; a later prefill (a new prompt in the same sequence) restarts the
    /// chain.
    pub fn run_token_intervals_ns(&self, run: &SequenceRun) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        intervals_of(self.run_tokens(run), &mut out);
        out
    }

    /// Every run's [`TraceModel::run_token_intervals_ns`], in order: the TPOT samples.
    /// No interval spans two runs.
    pub fn token_intervals_ns(&self) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        for r in self.runs() {
            intervals_of(self.run_tokens(r), &mut out);
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

    /// Same numbers as `summary.json`'s `ttft_ms` / `tpot_ms`, from the values by hand.
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

    /// `llama-bench -p 64 -n 16 -r 2` with every call 1 ms and 0.5 ms between calls:
    /// each test's TTFT is its own first call, and no interval spans two tests.
    #[test]
    fn each_run_has_its_own_first_token_and_intervals() {
        use crate::synthetic::records::{self, llama_bench_calls};
        let calls = llama_bench_calls(64, 16, 2);
        let m = records::build(&records::decode_calls(&calls, 1_000_000, 500_000));
        assert_eq!(m.runs().len(), 6);
        let ttft: Vec<Option<u64>> = m.runs().iter().map(|r| m.run_ttft_ns(r)).collect();
        assert_eq!(ttft, [Some(1_000_000); 6]);
        // The latest run's: the last tg repetition's first token.
        assert_eq!(m.ttft_ns(), Some(1_000_000));
        let iv = m.token_intervals_ns();
        // 15 steps in each of the two tg repetitions, each 1.5 ms after the token before.
        assert_eq!(iv.len(), 2 * 15);
        assert!(iv.iter().all(|&(_, ns)| ns == 1_500_000), "{iv:?}");
        // The second repetition's first step (call 3 + 1 + 16 + 1) counts from its own
        // token at position 0.
        assert_eq!(iv[15].0, 21);
        let last = m.runs().last().expect("runs");
        assert_eq!(m.run_token_intervals_ns(last), iv[15..]);
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
