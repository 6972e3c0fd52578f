//! ProfDAG as Graphviz DOT (rendered to SVG with `dot -Tsvg` when Graphviz is
//! installed): nodes coloured by a chosen metric (seed 002 Figs 3-4), and the
//! per-layer view with repeated transformer blocks collapsed.

use std::io::{self, Write};

use petgraph::visit::EdgeRef;

use crate::dag::{DagNode, LayerDag, ProfDag};

/// What colours the DAG's nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ColorBy {
    /// Node time.
    #[default]
    Time,
    /// Bytes written and read from computed sources per second of node time.
    BytesPerSec,
    /// A recorded counter's sum over threads (by counter name).
    Counter(String),
}

impl std::str::FromStr for ColorBy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "time" => Ok(ColorBy::Time),
            "bandwidth" | "bytes-per-sec" | "bytes_per_s" => Ok(ColorBy::BytesPerSec),
            c if !c.is_empty() => Ok(ColorBy::Counter(
                c.strip_prefix("counter:").unwrap_or(c).to_owned(),
            )),
            _ => Err("empty metric".to_owned()),
        }
    }
}

impl ColorBy {
    /// The metric's value for a node (`None` for leaves or when not recorded).
    pub fn value(&self, n: &DagNode) -> Option<f64> {
        if n.is_leaf() {
            return None;
        }
        match self {
            ColorBy::Time => Some(n.time_ns as f64),
            ColorBy::BytesPerSec => n
                .bytes
                .filter(|_| n.time_ns > 0)
                .map(|b| b as f64 * 1e9 / n.time_ns as f64),
            ColorBy::Counter(c) => n.counters.get(c).map(|&v| v as f64),
        }
    }

    /// Label of the metric.
    pub fn label(&self) -> String {
        match self {
            ColorBy::Time => "time".to_owned(),
            ColorBy::BytesPerSec => "bytes/s".to_owned(),
            ColorBy::Counter(c) => c.clone(),
        }
    }
}

/// A white → red colour for `t` in 0..=1 (`YlOrRd`-like).
pub fn heat(t: f64) -> String {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let lerp = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        lerp(255.0, 215.0),
        lerp(255.0, 48.0),
        lerp(230.0, 39.0)
    )
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A duration for labels (`12.3 µs`).
pub fn fmt_ns(ns: u64) -> String {
    if ns >= 1_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else {
        format!("{:.1} µs", ns as f64 / 1e3)
    }
}

/// Writes the DAG as DOT.
///
/// # Errors
/// I/O errors of `w`.
pub fn write_dag(p: &ProfDag, color: &ColorBy, mut w: impl Write) -> io::Result<()> {
    let values: Vec<f64> = p
        .dag
        .node_weights()
        .filter_map(|n| color.value(n))
        .collect();
    let max = values.iter().copied().fold(0.0f64, f64::max);
    // A pass split between backends: each split is a cluster, accel nodes have a blue
    // border, syncs are octagons, copy edges are orange,
    // edges from a store to what reads the stored tensor are dashed.
    let split = p
        .dag
        .node_weights()
        .any(|n| !n.is_leaf() && !n.backend.is_empty() && n.backend != "cpu");
    writeln!(w, "digraph profdag {{")?;
    let key = if split {
        "\\nclusters: graph splits; blue border: accel backend; octagon: CPU waits for the accel; orange edges: copies between backends"
    } else {
        ""
    };
    writeln!(
        w,
        "  label=\"ProfDAG: decode call {} ({} @{}), coloured by {}{key}\"; labelloc=t;",
        p.token,
        p.phase.name(),
        p.pos,
        esc(&color.label())
    )?;
    writeln!(
        w,
        "  node [shape=box, style=filled, fontname=Helvetica, fontsize=10];"
    )?;
    let mut cluster_nodes: Vec<(String, String)> = Vec::new();
    for idx in p.dag.node_indices() {
        let n = &p.dag[idx];
        if n.is_leaf() {
            // Recorded leaves (trace format 2) also show their type, and weights their
            // shape.
            let detail = match (&n.dtype, n.shape.as_str()) {
                (Some(t), "?") => format!("\\n{}", esc(t)),
                (Some(t), shape) => format!("\\n{} {}", esc(t), esc(shape)),
                (None, _) => String::new(),
            };
            writeln!(
                w,
                "  n{} [label=\"{}{detail}\", style=dashed, color=gray, fontcolor=gray];",
                idx.index(),
                esc(&n.name)
            )?;
            continue;
        }
        let v = color.value(n);
        let fill = v.map_or_else(
            || "#eeeeee".to_owned(),
            |v| heat(if max > 0.0 { v / max } else { 0.0 }),
        );
        let metric = match (color, v) {
            (ColorBy::Time, _) | (_, None) => String::new(),
            (ColorBy::BytesPerSec, Some(v)) => format!("\\n{:.2} GB/s", v / 1e9),
            (ColorBy::Counter(c), Some(v)) => format!("\\n{}: {v}", esc(c)),
        };
        let mut look = String::new();
        if split {
            if n.backend != "cpu" {
                look.push_str(", color=\"#4e79a7\", penwidth=3");
            }
            if n.op == "BACKEND_SYNC" {
                look.push_str(", shape=octagon");
            }
        }
        let node = format!(
            "n{} [label=\"#{} {}\\n{} {}\\n{}{}\", fillcolor=\"{fill}\"{look}];",
            idx.index(),
            n.order.unwrap_or(0),
            esc(&n.name),
            n.op,
            n.shape,
            fmt_ns(n.time_ns),
            metric
        );
        if split {
            cluster_nodes.push((n.backend.clone(), node));
        } else {
            writeln!(w, "  {node}")?;
        }
    }
    // Consecutive computed nodes of one backend: one graph split.
    let mut runs: Vec<(String, Vec<String>)> = Vec::new();
    for (backend, node) in cluster_nodes {
        match runs.last_mut() {
            Some((b, nodes)) if *b == backend => nodes.push(node),
            _ => runs.push((backend, vec![node])),
        }
    }
    for (i, (backend, nodes)) in runs.iter().enumerate() {
        writeln!(w, "  subgraph cluster_split{i} {{")?;
        writeln!(
            w,
            "    label=\"split {i} ({backend})\"; style=rounded; color=\"{}\";",
            if backend == "cpu" {
                "gray50"
            } else {
                "#4e79a7"
            }
        )?;
        for n in nodes {
            writeln!(w, "    {n}")?;
        }
        writeln!(w, "  }}")?;
    }
    for e in p.dag.edge_references() {
        // A store's edge to the reader of what it stored (the KV cache) is dashed.
        let look = if e.weight().copy {
            ", color=\"#f28e2b\", penwidth=2.5"
        } else if e.weight().stored {
            ", style=dashed"
        } else {
            ""
        };
        writeln!(
            w,
            "  n{} -> n{} [label=\"{}\", fontsize=8{look}];",
            e.source().index(),
            e.target().index(),
            e.weight().slot
        )?;
    }
    writeln!(w, "}}")
}

/// Writes the per-layer view as DOT: block nodes inside one cluster labelled `× L`.
///
/// # Errors
/// I/O errors of `w`.
pub fn write_layers(l: &LayerDag, mut w: impl Write) -> io::Result<()> {
    let max = l.dag.node_weights().map(|n| n.time_ns).max().unwrap_or(0);
    writeln!(w, "digraph layers {{")?;
    writeln!(
        w,
        "  node [shape=box, style=filled, fontname=Helvetica, fontsize=10];"
    )?;
    let node = |w: &mut dyn Write, i: usize, n: &crate::dag::LayerNode| {
        let fill = heat(if max > 0 {
            n.time_ns as f64 / max as f64
        } else {
            0.0
        });
        writeln!(
            w,
            "    n{i} [label=\"{}\\n{}\\n{}{}\", fillcolor=\"{fill}\"];",
            esc(&n.class),
            n.op,
            fmt_ns(n.time_ns),
            if n.in_block {
                format!(" over {} layers", n.layers)
            } else {
                String::new()
            }
        )
    };
    writeln!(w, "  subgraph cluster_block {{")?;
    writeln!(
        w,
        "    label=\"transformer block × {}\"; style=rounded;",
        l.n_layers
    )?;
    for idx in l.dag.node_indices() {
        if l.dag[idx].in_block {
            node(&mut w, idx.index(), &l.dag[idx])?;
        }
    }
    writeln!(w, "  }}")?;
    for idx in l.dag.node_indices() {
        if !l.dag[idx].in_block {
            node(&mut w, idx.index(), &l.dag[idx])?;
        }
    }
    for e in l.dag.edge_references() {
        let style = if *e.weight() {
            " [style=dashed, color=gray40, tooltip=\"to the next layer\"]"
        } else {
            ""
        };
        writeln!(
            w,
            "  n{} -> n{}{style};",
            e.source().index(),
            e.target().index()
        )?;
    }
    writeln!(w, "}}")
}

/// Largest DAG (nodes, leaves included) rendered to SVG automatically. A 2-layer model's
/// decode DAG has ~70 nodes and renders in under a second; a 16-layer one has ~700 and
/// takes Graphviz more than ten minutes.
pub const MAX_SVG_NODES: usize = 300;

/// Longest time Graphviz may spend on one layout. The full DAG of a 16-layer model
/// (~700 nodes with its weight and cache leaves) takes Graphviz more than ten minutes on
/// this project's machines; the per-layer view takes well under a second.
pub const DOT_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Renders a DOT file to SVG with Graphviz's `dot`, giving up after
/// [`DOT_TIME_LIMIT`]. Returns a message instead of failing when `dot` is missing, fails
/// or runs out of time (the DOT file is still there, and the message says how to render
/// it by hand).
pub fn render_svg(dot_path: &std::path::Path, svg_path: &std::path::Path) -> Result<(), String> {
    render_svg_within(dot_path, svg_path, DOT_TIME_LIMIT)
}

/// [`render_svg`] with an explicit time limit.
pub fn render_svg_within(
    dot_path: &std::path::Path,
    svg_path: &std::path::Path,
    limit: std::time::Duration,
) -> Result<(), String> {
    let by_hand = format!("dot -Tsvg {} -o {}", dot_path.display(), svg_path.display());
    let mut child = match std::process::Command::new("dot")
        .arg("-Tsvg")
        .arg(dot_path)
        .arg("-o")
        .arg(svg_path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            return Err(format!(
                "Graphviz `dot` not available ({e}); render with `{by_hand}` (apt install graphviz)"
            ));
        }
    };
    let started = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let mut stderr = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
                }
                return Err(format!("`{by_hand}` failed ({status}): {}", stderr.trim()));
            }
            Ok(None) if started.elapsed() < limit => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = std::fs::remove_file(svg_path);
                return Err(format!(
                    "Graphviz did not lay out {} within {limit:?} (too many nodes); the \
                     per-layer view shows the structure; render this one by hand with `{by_hand}`",
                    dot_path.display()
                ));
            }
            Err(e) => return Err(format!("waiting for `{by_hand}`: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_over_the_time_limit_is_abandoned_with_a_message() {
        if std::process::Command::new("dot")
            .arg("-V")
            .output()
            .is_err()
        {
            eprintln!("SKIPPED: Graphviz `dot` is not installed");
            return;
        }
        let dir = std::env::temp_dir().join(format!("profinfer-dot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let (dot, svg) = (dir.join("g.dot"), dir.join("g.svg"));
        // A dense graph whose layout takes far longer than the limit.
        let mut text = String::from("digraph g {\n");
        for i in 0..400 {
            for j in (i + 1..400).step_by(7) {
                text.push_str(&format!("  n{i} -> n{j};\n"));
            }
        }
        text.push_str("}\n");
        std::fs::write(&dot, text).expect("write dot");
        let err = render_svg_within(&dot, &svg, std::time::Duration::from_millis(200))
            .expect_err("a 200 ms limit is too short for this graph");
        assert!(
            err.contains("within 200ms") && err.contains("dot -Tsvg"),
            "{err}"
        );
        assert!(!svg.exists());
        // A tiny graph renders well within the limit.
        std::fs::write(&dot, "digraph g { a -> b; }").expect("write dot");
        render_svg_within(&dot, &svg, DOT_TIME_LIMIT).expect("renders");
        assert!(svg.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn heat_spans_white_to_red() {
        assert_eq!(heat(0.0), "#ffffe6");
        assert_eq!(heat(1.0), "#d73027");
        assert_eq!(heat(f64::NAN), "#ffffe6");
        assert_eq!(heat(7.0), "#d73027");
    }

    #[test]
    fn color_by_parses() {
        assert_eq!("time".parse(), Ok(ColorBy::Time));
        assert_eq!("bandwidth".parse(), Ok(ColorBy::BytesPerSec));
        assert_eq!(
            "counter:cycles".parse(),
            Ok(ColorBy::Counter("cycles".to_owned()))
        );
        assert_eq!(
            "task-clock".parse(),
            Ok(ColorBy::Counter("task-clock".to_owned()))
        );
    }
}
