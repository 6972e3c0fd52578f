//! Flame graph of where time goes: folded stacks (`flame.folded`, Brendan Gregg's format,
//! for any flame-graph tool) and an SVG drawn by `inferno`.
//!
//! A stack is `phase;graph;layer;op type;node class` for operator time (node spans) and
//! `phase;phase kind` for the token phases around the graphs (embedding, logits, sampling),
//! weighted by time in ns, or by a counter's sum.

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::model::{PMC_MISSING, TraceModel};

/// What a stack's width measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlameWeight {
    /// Wall time of node spans and phases, ns.
    Time,
    /// Sum of the counter with this index (node spans only; phases carry no counters).
    Counter(usize),
}

/// Folded stacks of `model`: one line per distinct stack, `frames weight`, sorted.
pub fn folded(model: &TraceModel, weight: FlameWeight) -> Vec<String> {
    let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
    let tokens = model.tokens();
    let graphs = model.graphs();
    let nodes = model.nodes();
    let classes = model.classes();
    let phase_of = |token: Option<u32>| {
        token
            .and_then(|t| tokens.get(t as usize))
            .map_or("outside decode calls", |t| t.phase.name())
    };
    for span in model.node_spans() {
        let w = match weight {
            FlameWeight::Time => span.dur_ns(),
            FlameWeight::Counter(i) => match span.pmc.get(i) {
                Some(&v) if v != PMC_MISSING => v,
                _ => continue,
            },
        };
        if w == 0 {
            continue;
        }
        let graph = graphs.get(span.graph as usize);
        let node = &nodes[span.node as usize];
        let layer = if node.layer >= 0 {
            format!("layer {}", node.layer)
        } else {
            "other".to_owned()
        };
        let class = classes
            .get(node.class as usize)
            .map_or(node.name.as_str(), String::as_str);
        let stack = format!(
            "{};{} graph;{layer};{};{}",
            phase_of(graph.and_then(|g| g.token)),
            graph.map_or_else(|| "cpu".to_owned(), |g| g.backend_name()),
            node.op_name(),
            frame(class)
        );
        *stacks.entry(stack).or_default() += w;
    }
    if weight == FlameWeight::Time {
        for p in model.phases() {
            let w = p.end_ns.saturating_sub(p.start_ns);
            if w > 0 {
                let stack = format!("{};{}", phase_of(p.token), p.kind.name());
                *stacks.entry(stack).or_default() += w;
            }
        }
    }
    stacks
        .into_iter()
        .map(|(s, w)| format!("{s} {w}"))
        .collect()
}

/// A frame name without the folded format's separators.
fn frame(s: &str) -> String {
    s.replace([';', ' '], "_")
}

/// Writes folded stacks, one per line.
pub fn write_folded(lines: &[String], mut w: impl Write) -> io::Result<()> {
    for l in lines {
        writeln!(w, "{l}")?;
    }
    Ok(())
}

/// Draws the flame graph of folded `lines` as SVG; `unit` names the weight (`ns`,
/// `cycles`).
pub fn write_svg(lines: &[String], title: &str, unit: &str, w: impl Write) -> io::Result<()> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_owned();
    opts.count_name = unit.to_owned();
    opts.name_type = "Frame:".to_owned();
    opts.deterministic = true;
    opts.hash = true;
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), w)
        .map_err(|e| io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{self, SynthSpec};

    #[test]
    fn stacks_add_up_to_the_operator_and_phase_time() {
        let model = synthetic::model(&SynthSpec::sized(4, 6, 2), None);
        let lines = folded(&model, FlameWeight::Time);
        let total: u64 = lines
            .iter()
            .map(|l| {
                l.rsplit_once(' ')
                    .expect("weight")
                    .1
                    .parse::<u64>()
                    .expect("number")
            })
            .sum();
        let ops: u64 = model.node_spans().iter().map(|s| s.dur_ns()).sum();
        let phases: u64 = model
            .phases()
            .iter()
            .map(|p| p.end_ns.saturating_sub(p.start_ns))
            .sum();
        assert_eq!(total, ops + phases);
        assert!(lines.iter().any(|l| l.starts_with("prefill;cpu graph;")));
        assert!(lines.iter().any(|l| l.starts_with("decode;cpu graph;")));
        let mut svg = Vec::new();
        write_svg(&lines, "test", "ns", &mut svg).expect("svg");
        let svg = String::from_utf8(svg).expect("UTF-8");
        assert!(
            svg.starts_with("<?xml") && svg.contains("decode"),
            "{}",
            &svg[..200]
        );
    }
}
