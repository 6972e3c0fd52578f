//! Runs: the sequences a process decodes one after another. A [`SequenceRun`] is the
//! decode calls from a batch at position 0 up to the next such batch.
//!
//! One process can decode several independent sequences: `llama-bench` runs a warm-up
//! and then each test (`pp512`: one 512-token batch; `tg128`: 128 single-token calls)
//! `-r` times, and before each it clears the KV cache and starts again at position 0.
//! Time to first token, prefill and decode rates only mean something within one
//! sequence, so the token view measures them per run. The engine decodes one sequence
//! per process: its trace is one run.
//!
//! The rule (`docs/views.md#runs`): a decode call whose batch starts at position 0 starts
//! a new run when the current run already has calls. Position 0 is where a sequence
//! begins; a second batch there means the cache was cleared (or a new sequence begun).
//! A batch that only goes back to a later position (a context shift, a rejected
//! speculative draft, a server reusing a cached prefix) continues its run, and so does
//! every call of unknown position (`u32::MAX`: llama.cpp's `llama_batch_get_one` leaves
//! the position to the KV cache, and the probe records none).

use std::ops::Range;

use serde::Serialize;

use super::{TokenSpan, TraceModel};

/// One sequence: consecutive decode calls, the first at position 0 (or the trace's first
/// call, wherever it starts: a recording attached to a running process).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SequenceRun {
    /// 0-based, in trace order.
    pub index: u32,
    /// Its decode calls: indices into [`TraceModel::tokens`].
    pub calls: Range<u32>,
}

impl SequenceRun {
    /// Whether a decode call of a batch starting at `pos` starts a new run after a run
    /// that already has calls.
    pub fn starts_new(pos: u32) -> bool {
        pos == 0
    }

    /// Number of decode calls.
    pub fn len(&self) -> u32 {
        self.calls.end - self.calls.start
    }

    /// Whether it has no calls (never, for a run of a model).
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }
}

/// The runs of a trace, grown one decode call at a time.
#[derive(Clone, Debug, Default)]
pub(crate) struct Runs {
    runs: Vec<SequenceRun>,
}

impl Runs {
    /// Takes decode call `index` (the next one) whose batch starts at `pos`; returns the
    /// index of its run and whether the call starts it.
    pub(crate) fn push_call(&mut self, index: u32, pos: u32) -> (u32, bool) {
        match self.runs.last_mut() {
            Some(run) if !SequenceRun::starts_new(pos) => {
                run.calls.end = index + 1;
                (run.index, false)
            }
            _ => {
                let run = self.runs.len() as u32;
                self.runs.push(SequenceRun {
                    index: run,
                    calls: index..index + 1,
                });
                (run, true)
            }
        }
    }

    pub(crate) fn as_slice(&self) -> &[SequenceRun] {
        &self.runs
    }
}

impl TraceModel {
    /// The runs (sequences from position 0), in order; one for a trace of one generation.
    pub fn runs(&self) -> &[SequenceRun] {
        self.runs.as_slice()
    }

    /// The decode calls of one run.
    pub fn run_tokens(&self, run: &SequenceRun) -> &[TokenSpan] {
        let tokens = self.tokens();
        let end = (run.calls.end as usize).min(tokens.len());
        &tokens[(run.calls.start as usize).min(end)..end]
    }
}

#[cfg(test)]
mod tests {
    use crate::synthetic::records::{self, llama_bench_calls};

    use super::*;

    /// Run index of every decode call of a model built from `(n_tokens, pos)` calls.
    fn run_of_each(calls: &[(u32, u32)]) -> Vec<u32> {
        let m = records::build(&records::decode_calls(calls, 1_000, 100));
        assert_eq!(m.tokens().len(), calls.len());
        m.tokens().iter().map(|t| t.run).collect()
    }

    #[test]
    fn one_generation_is_one_run() {
        // The engine: a prompt in chunks, decode steps, a second prompt continuing it.
        let calls = [
            (32, 0),
            (32, 32),
            (6, 64),
            (1, 70),
            (1, 71),
            (8, 72),
            (1, 80),
        ];
        assert_eq!(run_of_each(&calls), [0; 7]);
        let m = records::build(&records::decode_calls(&calls, 1_000, 100));
        assert_eq!(
            m.runs(),
            [SequenceRun {
                index: 0,
                calls: 0..7
            }]
        );
        assert_eq!(m.run_tokens(&m.runs()[0]).len(), 7);
    }

    #[test]
    fn llama_bench_tests_are_runs() {
        // `llama-bench -p 512 -n 128 -r 2`: pp512's warm-up and two repetitions, one
        // 512-token batch each; tg128's warm-up (one token) and two repetitions of 128
        // single-token calls from position 0.
        let calls = llama_bench_calls(512, 128, 2);
        assert_eq!(calls.len(), 3 + 1 + 2 * 128);
        let m = records::build(&records::decode_calls(&calls, 1_000, 100));
        let runs: Vec<Range<u32>> = m.runs().iter().map(|r| r.calls.clone()).collect();
        assert_eq!(runs, [0..1, 1..2, 2..3, 3..4, 4..132, 132..260]);
        assert!(
            m.runs()
                .iter()
                .enumerate()
                .all(|(i, r)| r.index == i as u32)
        );
        // Each run's first call is the one at position 0.
        for r in m.runs() {
            let t = m.run_tokens(r);
            assert_eq!(t[0].pos, 0);
            assert!(t[1..].iter().all(|t| t.pos > 0), "run {}", r.index);
        }
    }

    #[test]
    fn a_batch_at_position_0_starts_a_run_even_after_one_at_0() {
        // Two warm-up-sized prompts back to back: the second overwrote the first.
        assert_eq!(run_of_each(&[(8, 0), (8, 0), (1, 8)]), [0, 1, 1]);
        // A single token at 0 twice (tg warm-up, then the test).
        assert_eq!(run_of_each(&[(1, 0), (1, 0), (1, 1)]), [0, 1, 1]);
    }

    #[test]
    fn going_back_to_a_later_position_continues_the_run() {
        // A context shift or a rejected draft: positions go back, not to 0.
        assert_eq!(
            run_of_each(&[(4, 0), (1, 4), (1, 5), (1, 3), (4, 2)]),
            [0; 5]
        );
    }

    #[test]
    fn unknown_positions_never_split() {
        // `llama_batch_get_one` through `llama_decode`: the probe records no position.
        let u = u32::MAX;
        assert_eq!(
            run_of_each(&[(7, u), (1, u), (1, u), (7, u), (1, u)]),
            [0; 5]
        );
    }

    #[test]
    fn a_trace_that_starts_mid_sequence_has_its_first_run_there() {
        assert_eq!(
            run_of_each(&[(1, 40), (1, 41), (5, 0), (1, 5)]),
            [0, 0, 1, 1]
        );
    }

    #[test]
    fn chunks_are_numbered_within_their_run() {
        let m = records::build(&records::decode_calls(
            &[(16, 0), (16, 16), (16, 0), (16, 16)],
            1_000,
            100,
        ));
        let chunks: Vec<Option<u32>> = m.tokens().iter().map(|t| t.chunk).collect();
        assert_eq!(chunks, [Some(0), Some(1), Some(0), Some(1)]);
    }
}
