//! Token level: one [`TokenSpan`] per `engine_decode` call (a prefill chunk or a decode
//! step), and the phases (`engine_phase_*`) around it.

use serde::Serialize;

/// Whether a decode call is part of the prompt (prefill) or generates one token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenPhase {
    /// A prefill chunk: `n_tokens > 1`, or the first position of the context.
    Prefill,
    /// A decode step: one token at `pos > 0`.
    Decode,
}

impl TokenPhase {
    /// The phase of a decode call of `n_tokens` tokens from `pos` carrying `n_seqs`
    /// sequences (0 = not recorded, taken as one): a decode step gives each of its
    /// sequences one token (llama-server decodes its generating slots together, one
    /// token each), anything more is prompt work (a prompt, or decode steps batched
    /// with another sequence's prompt: `docs/views.md#sequences`).
    pub fn of(n_tokens: u32, pos: u32, n_seqs: u8) -> TokenPhase {
        if n_tokens > u32::from(n_seqs.max(1)) || pos == 0 {
            TokenPhase::Prefill
        } else {
            TokenPhase::Decode
        }
    }

    /// `prefill` or `decode`.
    pub fn name(self) -> &'static str {
        match self {
            TokenPhase::Prefill => "prefill",
            TokenPhase::Decode => "decode",
        }
    }
}

/// One `engine_decode` call.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TokenSpan {
    /// Position of this call among all decode calls (0-based).
    pub index: u32,
    /// Thread that called it (the engine's main thread).
    pub tid: u32,
    /// Tokens in the batch.
    pub n_tokens: u32,
    /// Position of the batch's first token.
    pub pos: u32,
    /// The [`super::SequenceRun`] it belongs to (0 for every call of a one-sequence
    /// trace).
    pub run: u32,
    /// Prefill or decode.
    pub phase: TokenPhase,
    /// For a prefill call, its chunk number within its prompt (0-based: a prompt longer
    /// than the batch size is prefilled in several calls, seed 001's chunked prefill).
    pub chunk: Option<u32>,
    /// Entry time, ns (trace clock).
    pub start_ns: u64,
    /// Exit time, ns; `None` while open or if the exit was never seen.
    pub end_ns: Option<u64>,
    /// Return value.
    pub ret: i32,
    /// The sequences its batch carries ([`SeqCount`]).
    pub seqs: SeqCount,
    /// End of the `engine_phase_sample` that followed this call, if any: when its token
    /// was produced.
    pub sampled_ns: Option<u64>,
    /// Time of its node spans (first thread's entry to last thread's exit, summed), ns:
    /// 0 when no operator was recorded inside it.
    pub op_ns: u64,
}

/// How many sequences one decode call's batch carries (llama.cpp batches the slots of
/// llama-server into one `llama_decode`), as the probe counted them
/// (`common::event::DecodeEvent::n_seqs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SeqCount {
    /// Distinct sequences; 0 = not recorded (a trace from before sequences were read).
    pub n: u8,
    /// Whether `n` is only a lower bound (a batch longer than the probe reads, sequence
    /// ids out of the range it tells apart, or an unreadable id).
    pub lower_bound: bool,
    /// Bit `s`: sequence `s` (0..8) has tokens in the batch.
    pub mask: u8,
    /// Bit `s`: sequence `s` has more than one token in the batch (prompt work).
    pub multi: u8,
}

impl SeqCount {
    /// From a decode record.
    pub fn of(e: &common::event::DecodeEvent) -> SeqCount {
        SeqCount {
            n: e.n_seqs,
            lower_bound: e.seq_flags != 0,
            mask: e.seq_mask,
            multi: e.seq_multi,
        }
    }

    /// Whether the count was recorded.
    pub fn known(&self) -> bool {
        self.n > 0
    }

    /// The sequence ids (0..8) the masks say are in the batch.
    pub fn ids(&self) -> impl Iterator<Item = u8> + '_ {
        (0..8u8).filter(|s| self.mask & (1 << s) != 0)
    }

    /// `2`, `2+` (a lower bound), `–` (not recorded).
    pub fn text(&self) -> String {
        match (self.n, self.lower_bound) {
            (0, _) => "–".to_owned(),
            (n, false) => n.to_string(),
            (n, true) => format!("{n}+"),
        }
    }
}

impl TokenSpan {
    /// The call's name in timelines: `prefill chunk 2: 32 tokens @64`, `decode @80`;
    /// a call of several sequences says how many (`decode 2 seqs @80`, `prefill 40
    /// tokens, 2 seqs @0`).
    pub fn label(&self) -> String {
        let seqs = (self.seqs.n > 1).then(|| format!("{} seqs", self.seqs.text()));
        match (self.phase, self.chunk, seqs) {
            (TokenPhase::Prefill, Some(c), None) => {
                format!("prefill chunk {c}: {} tokens @{}", self.n_tokens, self.pos)
            }
            (TokenPhase::Prefill, Some(c), Some(s)) => {
                format!(
                    "prefill chunk {c}: {} tokens, {s} @{}",
                    self.n_tokens, self.pos
                )
            }
            (TokenPhase::Prefill, None, None) => {
                format!("prefill {} tokens @{}", self.n_tokens, self.pos)
            }
            (TokenPhase::Prefill, None, Some(s)) => {
                format!("prefill {} tokens, {s} @{}", self.n_tokens, self.pos)
            }
            (TokenPhase::Decode, _, None) => format!("decode @{}", self.pos),
            (TokenPhase::Decode, _, Some(s)) => format!("decode {s} @{}", self.pos),
        }
    }

    /// Duration, ns (0 while open).
    pub fn dur_ns(&self) -> u64 {
        self.end_ns.map_or(0, |e| e.saturating_sub(self.start_ns))
    }

    /// When this call's token was available: the end of its sampling, or its exit.
    pub fn produced_ns(&self) -> Option<u64> {
        self.sampled_ns.or(self.end_ns)
    }
}

/// Which `engine_phase_*` entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseKind {
    /// Embedding lookup.
    Embed,
    /// Logits copied out of the graph.
    CopyLogits,
    /// Softmax over the vocabulary.
    Softmax,
    /// Sampling.
    Sample,
    /// KV budget: a chunk quantized before it is written out (`arg` = bytes).
    KvCompress,
    /// KV budget: a chunk written to its swap file (`arg` = bytes).
    KvSwapOut,
    /// KV budget: a chunk read back (`arg` = bytes).
    KvSwapIn,
    /// KV budget: a chunk dequantized after it is read back (`arg` = bytes).
    KvDecompress,
}

impl PhaseKind {
    /// Number of phase kinds.
    pub const COUNT: usize = 8;

    /// The KV budget's phases (I/O and (de)compression of swapped chunks).
    pub const KV: [PhaseKind; 4] = [
        PhaseKind::KvCompress,
        PhaseKind::KvSwapOut,
        PhaseKind::KvSwapIn,
        PhaseKind::KvDecompress,
    ];

    /// Whether the phase moves KV-cache data (its `arg` is bytes).
    pub fn is_kv(self) -> bool {
        Self::KV.contains(&self)
    }

    /// The kind for an event kind, if it is a phase.
    pub fn from_event_kind(kind: common::event::EventKind) -> Option<PhaseKind> {
        use common::event::EventKind as K;
        match kind {
            K::PhaseEmbed => Some(PhaseKind::Embed),
            K::PhaseCopyLogits => Some(PhaseKind::CopyLogits),
            K::PhaseSoftmax => Some(PhaseKind::Softmax),
            K::PhaseSample => Some(PhaseKind::Sample),
            K::PhaseKvCompress => Some(PhaseKind::KvCompress),
            K::PhaseKvSwapOut => Some(PhaseKind::KvSwapOut),
            K::PhaseKvSwapIn => Some(PhaseKind::KvSwapIn),
            K::PhaseKvDecompress => Some(PhaseKind::KvDecompress),
            _ => None,
        }
    }

    /// Short name (`embed`, `copy_logits`, `softmax`, `sample`, `kv_swap_out`, ...).
    pub fn name(self) -> &'static str {
        match self {
            PhaseKind::Embed => "embed",
            PhaseKind::CopyLogits => "copy_logits",
            PhaseKind::Softmax => "softmax",
            PhaseKind::Sample => "sample",
            PhaseKind::KvCompress => "kv_compress",
            PhaseKind::KvSwapOut => "kv_swap_out",
            PhaseKind::KvSwapIn => "kv_swap_in",
            PhaseKind::KvDecompress => "kv_decompress",
        }
    }
}

/// One phase call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PhaseSpan {
    /// Which phase.
    pub kind: PhaseKind,
    /// Calling thread.
    pub tid: u32,
    /// Entry, ns.
    pub start_ns: u64,
    /// Exit, ns.
    pub end_ns: u64,
    /// Size argument at entry.
    pub arg: u32,
    /// Return value (the sampled token for `sample`).
    pub ret: i32,
    /// The decode call it belongs to (inside it, or the last one before it).
    pub token: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_rule_matches_the_probe_abi() {
        assert_eq!(TokenPhase::of(7, 0, 0), TokenPhase::Prefill);
        assert_eq!(TokenPhase::of(1, 0, 0), TokenPhase::Prefill);
        assert_eq!(TokenPhase::of(512, 512, 0), TokenPhase::Prefill);
        assert_eq!(TokenPhase::of(1, 9, 0), TokenPhase::Decode);
        assert_eq!(TokenPhase::of(1, 9, 1), TokenPhase::Decode);
        // llama-server: two slots' decode steps in one call, one token each.
        assert_eq!(TokenPhase::of(2, 9, 2), TokenPhase::Decode);
        // One slot's step batched with the other's prompt: prompt work.
        assert_eq!(TokenPhase::of(7, 9, 2), TokenPhase::Prefill);
        assert_eq!(TokenPhase::of(2, 9, 1), TokenPhase::Prefill);
    }

    #[test]
    fn prefill_calls_of_a_prompt_are_numbered_as_chunks() {
        use common::event::{DecodeEvent, EventHeader, EventKind};
        use trace_format::{Event, TraceHeader};
        let mut m = crate::TraceModel::new(&TraceHeader::default());
        let mut ts = 0;
        // A 70-token prompt in chunks of 32, two decode steps, then a second prompt.
        for (n, pos) in [(32, 0), (32, 32), (6, 64), (1, 70), (1, 71), (8, 72)] {
            for exit in [false, true] {
                ts += 10;
                let flags = if exit {
                    common::event::EVENT_FLAG_EXIT
                } else {
                    0
                };
                m.apply(&Event::Decode(DecodeEvent {
                    header: EventHeader {
                        kind: EventKind::Decode as u32,
                        flags,
                        ts_ns: ts,
                        pid: 1,
                        tid: 1,
                        ..EventHeader::default()
                    },
                    n_tokens: n,
                    pos,
                    ..DecodeEvent::default()
                }));
            }
        }
        let chunks: Vec<Option<u32>> = m.tokens().iter().map(|t| t.chunk).collect();
        assert_eq!(chunks, [Some(0), Some(1), Some(2), None, None, Some(0)]);
        assert_eq!(m.tokens()[1].label(), "prefill chunk 1: 32 tokens @32");
        assert_eq!(m.tokens()[3].label(), "decode @70");
    }
}
