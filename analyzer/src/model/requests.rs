//! Requests: the decode calls of one sequence id when one call carries several
//! sequences (llama-server's slots, `docs/views.md#sequences`).
//!
//! llama.cpp's server decodes the slots it serves in one `llama_decode` per step: each
//! generating slot's next token, and the prompt (or a chunk of it) of any slot that got a
//! request, in one batch. A call then belongs to several requests, and the runs of
//! [`super::SequenceRun`] (calls from a batch at position 0) no longer say when one
//! request's first token came. The probe records which sequence ids (0..8) have tokens in
//! each call, and which have more than one ([`super::SeqCount`]); from these the model
//! follows each sequence id through the trace:
//!
//! - a request of sequence `s` is the consecutive calls that carry `s`. A server decodes
//!   every slot it serves at every step, so a call without `s` ends its request; a call
//!   where `s` has several tokens after calls where it had one begins a new request (a
//!   new prompt in the slot without an idle step between);
//! - its prefill is its first call and the calls right after it in which `s` has
//!   several tokens (a prompt longer than the batch, in chunks); its first token is
//!   produced by the last of them: TTFT is that call's availability (end of sampling,
//!   else exit) minus its first call's entry. When `s` is already in the trace's first
//!   call with a single token, the request began before the recording: no TTFT;
//! - its decode steps are the calls after its prefill; its TPOT samples are the intervals
//!   between their availabilities (the first from the prefill's).
//!
//! A trace whose calls all carry one sequence (the engine, llama-completion, llama-bench)
//! has no requests: its runs say it all.

use serde::Serialize;

use super::{TokenSpan, TraceModel};

/// One request: the calls of one sequence id from its prompt to its last token.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeqRequest {
    /// 0-based, in order of first call.
    pub index: u32,
    /// The sequence id (llama-server's slot).
    pub seq: u8,
    /// Its decode calls, indices into [`TraceModel::tokens`], in order.
    pub calls: Vec<u32>,
    /// How many of them (from the first) prefill its prompt.
    pub prefill_calls: u32,
    /// Whether it was already under way when the recording began (no TTFT).
    pub started_before: bool,
}

impl SeqRequest {
    /// Decode steps (calls after the prefill: one token of this sequence each).
    pub fn decode_steps(&self) -> u32 {
        self.calls.len() as u32 - self.prefill_calls
    }
}

/// Whether a trace's calls carry several sequences (some call has two or more).
pub fn is_batched(tokens: &[TokenSpan]) -> bool {
    tokens.iter().any(|t| t.seqs.n > 1)
}

/// The requests of a batched trace, by first call (none for a trace of one sequence).
pub fn requests(tokens: &[TokenSpan]) -> Vec<SeqRequest> {
    if !is_batched(tokens) {
        return Vec::new();
    }
    // The open request of each sequence id, and whether its last call had one token of
    // it (it was at its decode steps).
    let mut open: [Option<(SeqRequest, bool)>; 8] = Default::default();
    let mut done: Vec<SeqRequest> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        for s in 0..8u8 {
            let bit = 1u8 << s;
            let here = t.seqs.mask & bit != 0;
            let multi = t.seqs.multi & bit != 0;
            let slot = &mut open[s as usize];
            if !here {
                if let Some((r, _)) = slot.take() {
                    done.push(r);
                }
                continue;
            }
            if let Some((r, stepping)) = slot.as_mut() {
                if !(multi && *stepping) {
                    // Still its prompt (several tokens right after its prefill calls) or
                    // a decode step.
                    if multi && r.prefill_calls == r.calls.len() as u32 {
                        r.prefill_calls += 1;
                    }
                    *stepping = !multi;
                    r.calls.push(i as u32);
                    continue;
                }
                // A prompt after decode steps: a new request in the slot.
                if let Some((r, _)) = slot.take() {
                    done.push(r);
                }
            }
            *slot = Some((
                SeqRequest {
                    index: 0,
                    seq: s,
                    calls: vec![i as u32],
                    prefill_calls: 1,
                    started_before: i == 0 && !multi,
                },
                !multi,
            ));
        }
    }
    done.extend(open.into_iter().flatten().map(|(r, _)| r));
    done.sort_by_key(|r| (r.calls[0], r.seq));
    for (i, r) in done.iter_mut().enumerate() {
        r.index = i as u32;
    }
    done
}

impl TraceModel {
    /// The requests of a trace whose calls carry several sequences ([`requests`]).
    pub fn requests(&self) -> Vec<SeqRequest> {
        requests(self.tokens())
    }

    /// Time to first token of a request, ns: its first call's entry → availability of
    /// its last prefill call; `None` if it began before the recording or that call never
    /// ended.
    pub fn request_ttft_ns(&self, r: &SeqRequest) -> Option<u64> {
        if r.started_before {
            return None;
        }
        let tokens = self.tokens();
        let first = tokens.get(*r.calls.first()? as usize)?;
        let last = tokens.get(r.calls[r.prefill_calls as usize - 1] as usize)?;
        Some(last.produced_ns()?.saturating_sub(first.start_ns))
    }

    /// Intervals between a request's consecutive tokens' availability, ns, as `(decode
    /// call index, interval)` (the first from its last prefill call).
    pub fn request_token_intervals_ns(&self, r: &SeqRequest) -> Vec<(u32, u64)> {
        let tokens = self.tokens();
        let at = |i: u32| tokens.get(i as usize).and_then(TokenSpan::produced_ns);
        let mut prev = at(r.calls[r.prefill_calls as usize - 1]);
        let mut out = Vec::new();
        for &c in &r.calls[r.prefill_calls as usize..] {
            let p = at(c);
            if let (Some(a), Some(b)) = (prev, p) {
                out.push((c, b.saturating_sub(a)));
            }
            prev = p;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::synthetic::records;

    use super::*;

    /// A model of calls `(n_tokens, pos, n_seqs, mask, multi)`, each 1 ms, 0.5 ms apart.
    fn model(calls: &[(u32, u32, u8, u8, u8)]) -> TraceModel {
        records::build(&records::decode_calls_with_seqs(calls, 1_000_000, 500_000))
    }

    fn shape(m: &TraceModel) -> Vec<(u8, Vec<u32>, u32, bool)> {
        m.requests()
            .into_iter()
            .map(|r| (r.seq, r.calls, r.prefill_calls, r.started_before))
            .collect()
    }

    #[test]
    fn one_sequence_traces_have_no_requests() {
        let m = model(&[(8, 0, 1, 1, 1), (1, 8, 1, 1, 0), (1, 9, 1, 1, 0)]);
        assert!(m.requests().is_empty());
        // Nor do traces from before sequences were recorded.
        let m = model(&[(8, 0, 0, 0, 0), (1, 8, 0, 0, 0)]);
        assert!(m.requests().is_empty());
    }

    #[test]
    fn two_prompts_in_one_call_then_steps_together() {
        // llama-server -np 2, two requests at once: both prompts (5 + 7 tokens) in one
        // call, then two steps of both, then slot 1 alone (slot 0 stopped).
        let m = model(&[
            (12, 0, 2, 0b11, 0b11),
            (2, 5, 2, 0b11, 0),
            (2, 6, 2, 0b11, 0),
            (1, 9, 1, 0b10, 0),
        ]);
        assert_eq!(
            shape(&m),
            [
                (0, vec![0, 1, 2], 1, false),
                (1, vec![0, 1, 2, 3], 1, false)
            ]
        );
        assert_eq!(m.tokens()[1].phase, crate::model::TokenPhase::Decode);
        let rs = m.requests();
        // Both first tokens come with the first call's exit.
        assert_eq!(m.request_ttft_ns(&rs[0]), Some(1_000_000));
        assert_eq!(m.request_ttft_ns(&rs[1]), Some(1_000_000));
        assert_eq!(
            m.request_token_intervals_ns(&rs[1]),
            [(1, 1_500_000), (2, 1_500_000), (3, 1_500_000)]
        );
    }

    #[test]
    fn a_prompt_batched_with_the_other_slots_steps() {
        // Slot 0's prompt alone, then slot 0's step with slot 1's 6-token prompt, then
        // both step.
        let m = model(&[
            (4, 0, 1, 0b01, 0b01),
            (7, 4, 2, 0b11, 0b10),
            (2, 5, 2, 0b11, 0),
        ]);
        assert_eq!(
            shape(&m),
            [(0, vec![0, 1, 2], 1, false), (1, vec![1, 2], 1, false)]
        );
        let rs = m.requests();
        // Slot 1's first token: from its call's entry (1.5 ms) to that call's exit.
        assert_eq!(m.request_ttft_ns(&rs[1]), Some(1_000_000));
    }

    #[test]
    fn a_long_prompt_in_chunks_is_one_prefill() {
        let m = model(&[
            (6, 0, 2, 0b11, 0b11),
            (9, 2, 2, 0b11, 0b10),
            (9, 10, 2, 0b11, 0b10),
            (2, 18, 2, 0b11, 0),
        ]);
        let rs = m.requests();
        assert_eq!(rs[1].prefill_calls, 3);
        assert_eq!(rs[1].decode_steps(), 1);
        // From call 0's entry to call 2's exit.
        assert_eq!(m.request_ttft_ns(&rs[1]), Some(4_000_000));
        assert_eq!(rs[0].prefill_calls, 1);
    }

    #[test]
    fn a_slot_gap_or_a_new_prompt_starts_a_new_request() {
        let m = model(&[
            (5, 0, 2, 0b11, 0b11),
            (2, 3, 2, 0b11, 0),
            // Slot 0 gets a new prompt right after its last step.
            (7, 0, 2, 0b11, 0b01),
            (1, 4, 1, 0b10, 0),
            // Slot 1 gets a new prompt after its steps (and slot 0's request ended
            // with the call before: a call without it).
            (3, 0, 1, 0b10, 0b10),
        ]);
        assert_eq!(
            shape(&m),
            [
                (0, vec![0, 1], 1, false),
                (1, vec![0, 1, 2, 3], 1, false),
                (0, vec![2], 1, false),
                (1, vec![4], 1, false)
            ]
        );
    }

    #[test]
    fn a_request_under_way_at_the_first_call_has_no_ttft() {
        let m = model(&[(2, 40, 2, 0b11, 0), (2, 41, 2, 0b11, 0)]);
        let rs = m.requests();
        assert!(rs.iter().all(|r| r.started_before));
        assert_eq!(m.request_ttft_ns(&rs[0]), None);
    }
}
