//! The attach-time check of a llama.cpp build's struct layout: the first records read
//! through it must describe real ggml nodes — an op number within the build's op table,
//! a printable NUL-terminated name, positive shapes, a known type; a graph's node count
//! within reason. If they do not, the layout (derived from the build's code or taken
//! from a table) is wrong for this process, and the recording stops with one line
//! instead of producing a plausible-looking wrong trace.

use common::{
    engine_abi::NODE_NAME_LEN,
    event::{EventKind, GraphEvent, OP_DETAIL_NAME, OP_DETAIL_STRUCTURE},
    op_catalog::OP_UNKNOWN_BASE,
};
use trace_format::{Event, decode_record};

use crate::targets::plan::{RecordCheck, RecordsRejected};

/// Node descriptions (or, without the op level, graphs) checked before the layout
/// counts as confirmed and the check is dropped.
const DESCRIPTIONS_CHECKED: u32 = 16;
/// Largest ggml type number accepted: a bound well above any build's `GGML_TYPE_COUNT`.
const MAX_GGML_TYPE: u32 = 64;
/// Most nodes accepted in one graph: a bound far above the graphs seen here (about a
/// thousand nodes for SmolLM2).
const MAX_GRAPH_NODES: u32 = 1 << 20;
/// Largest plausible extent of one dimension.
const MAX_EXTENT: i64 = 1 << 40;

/// The first records read through a llama.cpp build's struct layout are not ggml nodes:
/// the layout is wrong for this process.
#[derive(Debug, thiserror::Error)]
#[error(
    "the first records read through this llama.cpp build's struct layout show {found}: the layout (see `profinfer probes`) does not fit this process; recording stopped, trace removed, target left running unprobed"
)]
pub struct LayoutWrong {
    /// What was read.
    pub found: String,
}

/// The check's state over the first records of a recording.
#[derive(Debug)]
pub struct LayoutCheck {
    n_ops: u32,
    checked: u32,
    graphs_checked: u32,
}

impl LayoutCheck {
    /// A check for a build with `n_ops` ops in its op table.
    pub fn new(n_ops: u32) -> LayoutCheck {
        LayoutCheck {
            n_ops,
            checked: 0,
            graphs_checked: 0,
        }
    }
}

impl RecordCheck for LayoutCheck {
    /// Checks one raw record of `kind`; a record that, read through the layout, is not a
    /// ggml node or graph is [`LayoutWrong`].
    fn observe(&mut self, kind: u32, record: &[u8]) -> Result<(), RecordsRejected> {
        if self.confirmed() {
            return Ok(());
        }
        let checked = if kind == EventKind::GraphCompute as u32 {
            match decode_record(EventKind::GraphCompute, record) {
                Some(Event::Graph(g)) => {
                    self.graphs_checked += 1;
                    check_graph(&g)
                }
                _ => Ok(()),
            }
        } else if kind == EventKind::NodeDesc as u32
            && let Some(Event::NodeDesc(d)) = decode_record(EventKind::NodeDesc, record)
        {
            self.checked += 1;
            check_node(
                d.op,
                d.detail,
                &d.name,
                d.structure.dtype,
                &d.structure.ne,
                self.n_ops,
            )
        } else {
            Ok(())
        };
        checked.map_err(|found| RecordsRejected::new(LayoutWrong { found }))
    }

    /// Whether enough records have passed (the collector then drops the check).
    fn confirmed(&self) -> bool {
        self.checked >= DESCRIPTIONS_CHECKED || self.graphs_checked >= DESCRIPTIONS_CHECKED
    }
}

fn check_graph(g: &GraphEvent) -> Result<(), String> {
    if g.header.is_exit() || (1..=MAX_GRAPH_NODES).contains(&g.n_nodes) {
        Ok(())
    } else {
        Err(format!("a graph with {} nodes", g.n_nodes))
    }
}

fn check_node(
    op: u32,
    detail: u32,
    name: &[u8; NODE_NAME_LEN],
    dtype: u32,
    ne: &[i64; 4],
    n_ops: u32,
) -> Result<(), String> {
    let raw = if op == u32::MAX {
        None
    } else if op & OP_UNKNOWN_BASE != 0 {
        Some(op & !OP_UNKNOWN_BASE)
    } else {
        Some(0)
    };
    match raw {
        None => return Err("a node whose op number is out of range".into()),
        Some(n) if n >= n_ops => {
            return Err(format!(
                "a node with op number {n} (the build has {n_ops} ops)"
            ));
        }
        _ => {}
    }
    if detail & OP_DETAIL_NAME != 0 {
        let len = name.iter().position(|&b| b == 0);
        let printable = len
            .is_some_and(|l| l > 0 && name[..l].iter().all(|&b| b.is_ascii_graphic() || b == b' '));
        if !printable {
            return Err(format!(
                "a node whose name is not printable text ({:02x?}…)",
                &name[..8]
            ));
        }
    }
    if detail & OP_DETAIL_STRUCTURE != 0 {
        if let Some((i, e)) = ne
            .iter()
            .enumerate()
            .find(|(_, e)| !(1..=MAX_EXTENT).contains(*e))
        {
            return Err(format!("a node with ne[{i}] = {e}"));
        }
        if dtype >= MAX_GGML_TYPE {
            return Err(format!("a node of type {dtype}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> [u8; NODE_NAME_LEN] {
        let mut n = [0; NODE_NAME_LEN];
        n[..s.len()].copy_from_slice(s.as_bytes());
        n
    }

    const ALL: u32 = OP_DETAIL_NAME | OP_DETAIL_STRUCTURE;

    #[test]
    fn real_nodes_pass() {
        let ne = [576, 7, 1, 1];
        assert_eq!(
            check_node(3, ALL, &name("attn_norm-0"), 0, &ne, 101),
            Ok(())
        );
        // An op profinfer has no name for, within the build's table.
        let op = OP_UNKNOWN_BASE | 77;
        assert_eq!(check_node(op, ALL, &name("node_12"), 1, &ne, 101), Ok(()));
    }

    #[test]
    fn nodes_read_at_wrong_offsets_fail() {
        let ne = [576, 7, 1, 1];
        let e = check_node(u32::MAX, ALL, &name("x"), 0, &ne, 101).unwrap_err();
        assert!(e.contains("op number"), "{e}");
        let e = check_node(OP_UNKNOWN_BASE | 140, ALL, &name("x"), 0, &ne, 101).unwrap_err();
        assert!(e.contains("140") && e.contains("101 ops"), "{e}");
        let mut garbage = [0xffu8; NODE_NAME_LEN];
        garbage[3] = 0;
        let e = check_node(3, ALL, &garbage, 0, &ne, 101).unwrap_err();
        assert!(e.contains("name"), "{e}");
        let e = check_node(3, ALL, &name("x"), 0, &[576, 0, 1, 1], 101).unwrap_err();
        assert!(e.contains("ne[1] = 0"), "{e}");
        let e = check_node(3, ALL, &name("x"), 1000, &ne, 101).unwrap_err();
        assert!(e.contains("type 1000"), "{e}");
        // Without structure or name details only the op is checked.
        assert_eq!(check_node(3, 0, &garbage, 1000, &[0; 4], 101), Ok(()));
    }

    #[test]
    fn graphs_need_a_plausible_node_count() {
        let mut g = GraphEvent {
            header: common::event::EventHeader::ZERO,
            graph_addr: 0,
            graph_id: 0,
            n_nodes: 0,
            backend_id: 0,
            backend_kind: 0,
            n_tokens: 0,
            pos: 0,
            ret: 0,
        };
        assert!(check_graph(&g).is_err());
        g.n_nodes = 1 << 30;
        assert!(check_graph(&g).is_err());
        g.n_nodes = 1042;
        assert!(check_graph(&g).is_ok());
    }
}
