//! The token view per run: one [`RunTimings`] row per [`SequenceRun`] (time to first
//! token, prefill and decode tokens per second) and the [`RunGroup`]s of runs of the same
//! shape with their medians, for `summary.json`, `profinfer report` and `index.html`
//! (`docs/views.md#runs`). A trace of one generation has one run, and the views then show
//! the token timings as one line, as before runs existed.
//!
//! A trace whose calls carry several sequences (llama-server's slots) also gets one
//! [`RequestTimings`] row per request ([`crate::model::SeqRequest`],
//! `docs/views.md#sequences`): there a run's first token is no one request's, so a run
//! that holds such calls has no TTFT of its own.

use serde::Serialize;

use crate::model::{SeqRequest, SequenceRun, TokenPhase, TraceModel};

/// One request's token timings (a trace whose calls carry several sequences).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestTimings {
    /// Request index (0-based, by first call).
    pub index: u32,
    /// Its sequence id (llama-server's slot).
    pub seq: u8,
    /// Its first decode call (the `index` column of `iterations.csv`).
    pub first_call: u32,
    /// Entry of its first call after the trace's first event, ms.
    pub start_ms: f64,
    /// Calls that prefilled its prompt (with other sequences' tokens, maybe).
    pub prefill_calls: u32,
    /// Its decode steps (one token of it each).
    pub decode_steps: u32,
    /// Most sequences one of its calls carried.
    pub max_seqs_per_call: u8,
    /// Whether it was under way when the recording began.
    pub started_before: bool,
    /// Time to first token: its first call's entry to its last prefill call's
    /// availability, ms; `None` if it started before the recording.
    pub ttft_ms: Option<f64>,
    /// Mean time per output token of this request, ms.
    pub tpot_ms: Option<f64>,
    /// Its decode tokens per second: 1 / mean TPOT.
    pub decode_tokens_per_s: Option<f64>,
}

/// Every request's timings, by first call (none for a trace of one sequence).
pub fn request_timings(model: &TraceModel) -> Vec<RequestTimings> {
    let first_ns = model.first_ns().unwrap_or(0);
    let tokens = model.tokens();
    model
        .requests()
        .iter()
        .map(|r: &SeqRequest| {
            let intervals = model.request_token_intervals_ns(r);
            let tpot_ms = (!intervals.is_empty()).then(|| {
                intervals.iter().map(|&(_, ns)| ms(ns)).sum::<f64>() / intervals.len() as f64
            });
            RequestTimings {
                index: r.index,
                seq: r.seq,
                first_call: r.calls[0],
                start_ms: ms(tokens
                    .get(r.calls[0] as usize)
                    .map_or(0, |t| t.start_ns.saturating_sub(first_ns))),
                prefill_calls: r.prefill_calls,
                decode_steps: r.decode_steps(),
                max_seqs_per_call: r
                    .calls
                    .iter()
                    .filter_map(|&c| tokens.get(c as usize))
                    .map(|t| t.seqs.n)
                    .max()
                    .unwrap_or(0),
                started_before: r.started_before,
                ttft_ms: model.request_ttft_ns(r).map(ms),
                tpot_ms,
                decode_tokens_per_s: tpot_ms.filter(|&t| t > 0.0).map(|t| 1e3 / t),
            }
        })
        .collect()
}

/// Decode calls by the number of sequences they carry: `(sequences, calls)` in
/// increasing order, `0` for calls whose count was not recorded.
pub fn calls_by_sequences(model: &TraceModel) -> Vec<(u8, u32)> {
    let mut by = [0u32; 256];
    for t in model.tokens() {
        by[t.seqs.n as usize] += 1;
    }
    by.iter()
        .enumerate()
        .filter(|&(_, &c)| c > 0)
        .map(|(n, &c)| (n as u8, c))
        .collect()
}

/// One run's token timings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunTimings {
    /// Run index (0-based, in trace order).
    pub index: u32,
    /// Its first decode call (the `index` column of `iterations.csv`).
    pub first_call: u32,
    /// Its decode calls.
    pub calls: u32,
    /// Entry of its first call after the trace's first event, ms.
    pub start_ms: f64,
    /// What it decoded; runs of one shape form a [`RunGroup`].
    #[serde(flatten)]
    pub shape: RunShape,
    /// Time to first token (`summary.json`'s rule within the run), ms.
    pub ttft_ms: Option<f64>,
    /// A warm-up: the first of several runs, a prompt with no decode step after it
    /// (llama.cpp's tools decode BOS and EOS once and clear the cache before the real
    /// prompt; llama-bench warms up before its first test). See [`generation_ttft_ms`].
    pub warm_up: bool,
    /// Prompt tokens per second of prefill time: its prefill calls' tokens over their
    /// summed entry-to-exit time.
    pub prefill_tokens_per_s: Option<f64>,
    /// Mean time per output token within the run, ms.
    pub tpot_ms: Option<f64>,
    /// Decode tokens per second: 1 / mean TPOT.
    pub decode_tokens_per_s: Option<f64>,
}

/// What a run decoded: the key that groups identical runs (the repetitions of one
/// `llama-bench` test).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct RunShape {
    /// Tokens of its prefill calls.
    pub prompt_tokens: u64,
    /// Its prefill calls (chunks).
    pub prefill_calls: u32,
    /// Its decode steps (one token each).
    pub decode_steps: u32,
    /// Most threads that ran one of its nodes; `None` when no operators were recorded
    /// in it.
    pub threads: Option<u32>,
}

impl RunShape {
    /// `prompt 512`, `prompt 512 in 4 calls`, `prompt 1 + 127 steps`, `127 steps`.
    pub fn label(&self) -> String {
        let plural = |n: u32, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
        let prompt = match self.prefill_calls {
            0 => None,
            1 => Some(format!("prompt {}", self.prompt_tokens)),
            n => Some(format!("prompt {} in {n} calls", self.prompt_tokens)),
        };
        match (prompt, self.decode_steps) {
            (Some(p), 0) => p,
            (Some(p), n) => format!("{p} + {}", plural(n, "step")),
            (None, n) => plural(n, "step"),
        }
    }
}

/// Runs of one shape and their medians.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunGroup {
    /// What each of them decoded.
    #[serde(flatten)]
    pub shape: RunShape,
    /// Its runs' indices, in order.
    pub runs: Vec<u32>,
    /// Median of the runs' TTFT, ms.
    pub ttft_ms: Option<f64>,
    /// Median of the runs' prefill tokens per second.
    pub prefill_tokens_per_s: Option<f64>,
    /// Median of the runs' decode tokens per second.
    pub decode_tokens_per_s: Option<f64>,
}

impl RunGroup {
    /// Its runs' indices as ranges: `0–2, 5, 7–9`.
    pub fn runs_text(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut i = 0;
        while i < self.runs.len() {
            let mut j = i;
            while j + 1 < self.runs.len() && self.runs[j + 1] == self.runs[j] + 1 {
                j += 1;
            }
            parts.push(if j == i {
                self.runs[i].to_string()
            } else {
                format!("{}–{}", self.runs[i], self.runs[j])
            });
            i = j + 1;
        }
        parts.join(", ")
    }
}

/// The median of the values present (the mean of the middle two for an even count).
fn median(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let mut v: Vec<f64> = values.flatten().filter(|v| v.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Every run's timings, in order (one row for a trace of one generation; none without
/// decode calls).
pub fn run_timings(model: &TraceModel) -> Vec<RunTimings> {
    let runs = model.runs();
    // Threads per run, from the node spans of the graphs inside its calls.
    let mut threads: Vec<Option<u32>> = vec![None; runs.len()];
    for g in model.graphs() {
        let Some(tok) = g.token.and_then(|t| model.tokens().get(t as usize)) else {
            continue;
        };
        if let Some(most) = model.graph_node_spans(g).iter().map(|s| s.n_threads).max() {
            let slot = &mut threads[tok.run as usize];
            *slot = Some(slot.map_or(most, |t| t.max(most)));
        }
    }
    let first_ns = model.first_ns().unwrap_or(0);
    let mut rows: Vec<RunTimings> = runs
        .iter()
        .map(|r| one(model, r, first_ns, threads[r.index as usize]))
        .collect();
    let several = rows.len() > 1;
    if let Some(first) = rows.first_mut() {
        first.warm_up = several && first.shape.decode_steps == 0;
    }
    rows
}

/// The one time to first token of a trace's runs: that of its only run, or of its only
/// run after a warm-up (`llama-completion`); `None` for several runs (`llama-bench`),
/// which have one each.
pub fn generation_ttft_ms(runs: &[RunTimings]) -> Option<f64> {
    match runs {
        [one] => one.ttft_ms,
        [warm_up, one] if warm_up.warm_up => one.ttft_ms,
        _ => None,
    }
}

fn one(model: &TraceModel, run: &SequenceRun, first_ns: u64, threads: Option<u32>) -> RunTimings {
    let tokens = model.run_tokens(run);
    let prefill = || tokens.iter().filter(|t| t.phase == TokenPhase::Prefill);
    let prompt_tokens = prefill().map(|t| u64::from(t.n_tokens)).sum();
    let prefill_ns: u64 = prefill()
        .filter(|t| t.end_ns.is_some())
        .map(|t| t.dur_ns())
        .sum();
    let prefill_done: u64 = prefill()
        .filter(|t| t.end_ns.is_some())
        .map(|t| u64::from(t.n_tokens))
        .sum();
    let intervals = model.run_token_intervals_ns(run);
    let tpot_ms = (!intervals.is_empty())
        .then(|| intervals.iter().map(|&(_, ns)| ms(ns)).sum::<f64>() / intervals.len() as f64);
    RunTimings {
        index: run.index,
        first_call: run.calls.start,
        calls: run.len(),
        start_ms: ms(tokens
            .first()
            .map_or(0, |t| t.start_ns.saturating_sub(first_ns))),
        shape: RunShape {
            prompt_tokens,
            prefill_calls: prefill().count() as u32,
            decode_steps: tokens
                .iter()
                .filter(|t| t.phase == TokenPhase::Decode)
                .count() as u32,
            threads,
        },
        // A run of batched sequences has no first token of its own (its requests have).
        ttft_ms: model
            .run_ttft_ns(run)
            .filter(|_| !crate::model::is_batched(tokens))
            .map(ms),
        warm_up: false,
        prefill_tokens_per_s: (prefill_ns > 0)
            .then(|| prefill_done as f64 * 1e9 / prefill_ns as f64),
        tpot_ms,
        decode_tokens_per_s: tpot_ms.filter(|&t| t > 0.0).map(|t| 1e3 / t),
    }
}

/// The runs grouped by shape, groups in the order of their first run, with the medians
/// of their runs (a group of one run has that run's numbers).
pub fn group(runs: &[RunTimings]) -> Vec<RunGroup> {
    let mut groups: Vec<(RunShape, Vec<&RunTimings>)> = Vec::new();
    for r in runs {
        match groups.iter_mut().find(|(s, _)| *s == r.shape) {
            Some((_, members)) => members.push(r),
            None => groups.push((r.shape, vec![r])),
        }
    }
    groups
        .into_iter()
        .map(|(shape, members)| RunGroup {
            shape,
            runs: members.iter().map(|r| r.index).collect(),
            ttft_ms: median(members.iter().map(|r| r.ttft_ms)),
            prefill_tokens_per_s: median(members.iter().map(|r| r.prefill_tokens_per_s)),
            decode_tokens_per_s: median(members.iter().map(|r| r.decode_tokens_per_s)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::synthetic::{
        self, SynthSpec,
        records::{self, llama_bench_calls},
    };

    use super::*;

    /// `llama-bench -p 512 -n 128 -r 2`'s calls: every 512-token batch 51.2 ms (10 k
    /// tokens/s), the single-token calls 5 ms, one token every 5 ms + 1 ms gap (the
    /// warm-ups slower: 80 ms and 9 ms), so each number is known.
    fn bench() -> TraceModel {
        let calls = llama_bench_calls(512, 128, 2);
        let mut seen_pp = false;
        let mut seen_tg = false;
        let timed: Vec<(u32, u32, u64)> = calls
            .iter()
            .map(|&(n, pos)| {
                let dur = match (n, pos) {
                    (512, _) if !seen_pp => {
                        seen_pp = true;
                        80_000_000
                    }
                    (512, _) => 51_200_000,
                    (1, 0) if !seen_tg => {
                        seen_tg = true;
                        9_000_000
                    }
                    _ => 5_000_000,
                };
                (n, pos, dur)
            })
            .collect();
        records::build(&records::decode_calls_timed(&timed, 1_000_000))
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-6 * b.abs().max(1.0))
    }

    #[test]
    fn each_llama_bench_test_is_measured_on_its_own() {
        let rows = run_timings(&bench());
        assert_eq!(rows.len(), 6);
        let pp = &rows[1];
        assert_eq!(pp.shape.label(), "prompt 512");
        assert_eq!((pp.first_call, pp.calls), (1, 1));
        assert!(close(pp.ttft_ms, 51.2), "{pp:?}");
        assert!(close(pp.prefill_tokens_per_s, 10_000.0), "{pp:?}");
        assert_eq!((pp.tpot_ms, pp.decode_tokens_per_s), (None, None));
        assert!(close(rows[0].ttft_ms, 80.0), "the warm-up: {:?}", rows[0]);
        let warm_tg = &rows[3];
        assert_eq!(warm_tg.shape.label(), "prompt 1");
        assert!(close(warm_tg.ttft_ms, 9.0));
        for tg in &rows[4..] {
            assert_eq!(tg.shape.label(), "prompt 1 + 127 steps");
            // TTFT: the single token at position 0, not the whole run from the warm-up.
            assert!(close(tg.ttft_ms, 5.0), "{tg:?}");
            assert!(close(tg.tpot_ms, 6.0), "{tg:?}");
            assert!(close(tg.decode_tokens_per_s, 1e3 / 6.0), "{tg:?}");
            assert!(close(tg.prefill_tokens_per_s, 200.0), "{tg:?}");
        }
        // Starts: after the first event (the warm-up's entry).
        assert_eq!(rows[0].start_ms, 0.0);
        assert!(close(Some(rows[1].start_ms), 81.0));
    }

    #[test]
    fn identical_runs_are_grouped_with_their_medians() {
        let groups = group(&run_timings(&bench()));
        let summary: Vec<(String, Vec<u32>)> = groups
            .iter()
            .map(|g| (g.shape.label(), g.runs.clone()))
            .collect();
        assert_eq!(
            summary,
            [
                ("prompt 512".to_owned(), vec![0, 1, 2]),
                ("prompt 1".to_owned(), vec![3]),
                ("prompt 1 + 127 steps".to_owned(), vec![4, 5]),
            ]
        );
        // The median of 80, 51.2 and 51.2 ms: the slow warm-up does not move it.
        assert!(close(groups[0].ttft_ms, 51.2));
        assert!(close(groups[0].prefill_tokens_per_s, 10_000.0));
        assert!(close(groups[2].decode_tokens_per_s, 1e3 / 6.0));
        assert_eq!(groups[0].runs_text(), "0–2");
    }

    #[test]
    fn a_warm_up_before_one_generation_leaves_its_ttft_the_traces() {
        // llama-completion: BOS + EOS at 0 (the warm-up), then a 5-token prompt and
        // three steps, every call 2 ms, 1 ms apart.
        let m = records::build(&records::decode_calls(
            &[(2, 0), (5, 0), (1, 5), (1, 6), (1, 7)],
            2_000_000,
            1_000_000,
        ));
        let rows = run_timings(&m);
        assert_eq!(
            rows.iter().map(|r| r.warm_up).collect::<Vec<_>>(),
            [true, false]
        );
        assert!(close(generation_ttft_ms(&rows), 2.0), "{rows:?}");
        // llama-bench: six runs, the first a warm-up; no one TTFT.
        let bench = run_timings(&bench());
        assert!(bench[0].warm_up && !bench[1..].iter().any(|r| r.warm_up));
        assert_eq!(generation_ttft_ms(&bench), None);
        // One run alone: its own.
        assert!(close(generation_ttft_ms(&rows[1..]), 2.0));
    }

    #[test]
    fn runs_text_names_ranges() {
        let g = RunGroup {
            shape: RunShape {
                prompt_tokens: 1,
                prefill_calls: 1,
                decode_steps: 0,
                threads: None,
            },
            runs: vec![0, 1, 2, 5, 7, 8],
            ttft_ms: None,
            prefill_tokens_per_s: None,
            decode_tokens_per_s: None,
        };
        assert_eq!(g.runs_text(), "0–2, 5, 7–8");
    }

    #[test]
    fn medians() {
        assert_eq!(
            median([Some(3.0), None, Some(1.0), Some(2.0)].into_iter()),
            Some(2.0)
        );
        assert_eq!(median([Some(4.0), Some(1.0)].into_iter()), Some(2.5));
        assert_eq!(median([None].into_iter()), None);
    }

    #[test]
    fn shapes_are_labelled() {
        let s = |prompt_tokens, prefill_calls, decode_steps| {
            RunShape {
                prompt_tokens,
                prefill_calls,
                decode_steps,
                threads: None,
            }
            .label()
        };
        assert_eq!(s(512, 4, 0), "prompt 512 in 4 calls");
        assert_eq!(s(1, 1, 1), "prompt 1 + 1 step");
        assert_eq!(s(0, 0, 9), "9 steps");
    }

    #[test]
    fn one_generation_is_one_row_with_the_summary_numbers() {
        let m = synthetic::model(&SynthSpec::sized(6, 4, 2), None);
        let rows = run_timings(&m);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(r.shape.threads, Some(2));
        assert_eq!((r.shape.prompt_tokens, r.shape.decode_steps), (4, 5));
        assert_eq!(r.ttft_ms, m.ttft_ns().map(ms));
        let iv = m.token_intervals_ns();
        let mean = iv.iter().map(|&(_, ns)| ms(ns)).sum::<f64>() / iv.len() as f64;
        assert!(close(r.tpot_ms, mean));
    }

    #[test]
    fn threads_come_from_the_operators() {
        // A prefill whose graph ran on 2 threads; a trace of the token level only.
        let m = synthetic::model(&SynthSpec::sized(1, 2, 2), None);
        let rows = run_timings(&m);
        assert_eq!(rows[0].shape.threads, Some(2));
        let tokens_only = records::build(&records::decode_calls(&[(4, 0)], 10, 1));
        assert_eq!(run_timings(&tokens_only)[0].shape.threads, None);
    }
}
