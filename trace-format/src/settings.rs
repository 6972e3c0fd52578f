//! The recording settings of a trace, typed: what the recorder wrote into the header's
//! `settings` table and what the analyzer reads back from it. On disk they stay a table
//! of strings ([`TraceHeader::settings`](crate::TraceHeader::settings)), so traces of
//! every version read the same; keys this version does not know are kept as they are.

use std::collections::BTreeMap;

/// How the engine's operator ends reached the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeEnds {
    /// Taken by the engine itself and handed over in tables (`engine_op_times`).
    Batched,
    /// Probed node by node (`engine_op_done`).
    PerNode,
}

impl NodeEnds {
    /// The header's text.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeEnds::Batched => "batched",
            NodeEnds::PerNode => "per-node",
        }
    }

    fn parse(s: &str) -> Option<NodeEnds> {
        match s {
            "batched" => Some(NodeEnds::Batched),
            "per-node" => Some(NodeEnds::PerNode),
            _ => None,
        }
    }
}

/// Sampled operator windows (`--op-windows ON/PERIOD`): operators recorded in `on` of
/// every `period` decode steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpWindowsSetting {
    /// Decode steps recorded per period.
    pub on: u32,
    /// Decode steps per period.
    pub period: u32,
}

/// A trace's recording settings. Every field is `None` where the header does not say
/// (an older recorder, another target, the live view's empty header).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordingSettings {
    /// Probe levels asked for (`LEVEL_*` bits).
    pub levels: Option<u32>,
    /// Operator structure (shapes, types, sources) recorded.
    pub structure: Option<bool>,
    /// Hardware counters read per operator.
    pub pmc: Option<bool>,
    /// `--exact-spans`: both ends of every operator probed.
    pub exact_spans: Option<bool>,
    /// `--per-node-ends`: node ends probed one by one even where they could be batched.
    pub per_node_ends: Option<bool>,
    /// Sampled operator windows: `Some(None)` when the recorder said they were off.
    pub op_windows: Option<Option<OpWindowsSetting>>,
    /// The event buffer (ring or perf buffer and its size), as the recorder printed it.
    pub buffer: Option<String>,
    /// The QoS controller's settings, as the recorder printed them, or `off`.
    pub qos: Option<String>,
    /// Trace chunk size, bytes.
    pub chunk_bytes: Option<u64>,
    /// The kind of target: `engine` or `llama.cpp`.
    pub target: Option<String>,
    /// How the engine's node ends were taken.
    pub node_ends: Option<NodeEnds>,
    /// The llama.cpp build detected (its ggml version, layout and backends).
    pub ggml: Option<String>,
    /// Why the operator level was not available, when it was not.
    pub op_level: Option<String>,
    /// This file's place in a series (`--switch-output`), when it is a member of one.
    pub series: Option<crate::SeriesMember>,
    /// Keys this version does not know, and values it could not read, as found.
    pub other: BTreeMap<String, String>,
}

/// Stores `value` in `slot` if it was read; whether it was.
fn set<T>(slot: &mut Option<T>, value: Option<T>) -> bool {
    let read = value.is_some();
    if read {
        *slot = value;
    }
    read
}

fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

fn parse_levels(s: &str) -> Option<u32> {
    u32::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

fn parse_windows(s: &str) -> Option<Option<OpWindowsSetting>> {
    if s == "off" {
        return Some(None);
    }
    let (on, period) = s.split_once('/')?;
    Some(Some(OpWindowsSetting {
        on: on.parse().ok()?,
        period: period.parse().ok()?,
    }))
}

fn parse_series(index: &str, head: Option<&String>) -> Option<crate::SeriesMember> {
    Some(crate::SeriesMember {
        index: index.parse().ok()?,
        head_records: head?.parse().ok()?,
    })
}

impl RecordingSettings {
    /// The settings a header's table holds. A value that does not read as its type is
    /// kept in [`RecordingSettings::other`] under its key.
    pub fn from_table(table: &BTreeMap<String, String>) -> RecordingSettings {
        let mut s = RecordingSettings::default();
        for (key, value) in table {
            let v = value.as_str();
            let text = || Some(value.clone());
            let read = match key.as_str() {
                "levels" => set(&mut s.levels, parse_levels(v)),
                "structure" => set(&mut s.structure, parse_bool(v)),
                "pmc" => set(&mut s.pmc, parse_bool(v)),
                "exact_spans" => set(&mut s.exact_spans, parse_bool(v)),
                "per_node_ends" => set(&mut s.per_node_ends, parse_bool(v)),
                "op_windows" => set(&mut s.op_windows, parse_windows(v)),
                "buffer" => set(&mut s.buffer, text()),
                "qos" => set(&mut s.qos, text()),
                "chunk_bytes" => set(&mut s.chunk_bytes, v.parse().ok()),
                "target" => set(&mut s.target, text()),
                "node_ends" => set(&mut s.node_ends, NodeEnds::parse(v)),
                "ggml" => set(&mut s.ggml, text()),
                "op_level" => set(&mut s.op_level, text()),
                "series" => set(&mut s.series, parse_series(v, table.get("series_head"))),
                // Read with `series`, and kept with it when the pair does not read.
                "series_head" => table
                    .get("series")
                    .and_then(|i| parse_series(i, Some(value)))
                    .is_some(),
                _ => false,
            };
            if !read {
                s.other.insert(key.clone(), value.clone());
            }
        }
        s
    }

    /// The header's table of these settings (only the fields that are set).
    pub fn to_table(&self) -> BTreeMap<String, String> {
        let mut t = self.other.clone();
        let mut put = |key: &str, value: Option<String>| {
            if let Some(v) = value {
                t.insert(key.to_owned(), v);
            }
        };
        put("levels", self.levels.map(|l| format!("{l:#x}")));
        put("structure", self.structure.map(|b| b.to_string()));
        put("pmc", self.pmc.map(|b| b.to_string()));
        put("exact_spans", self.exact_spans.map(|b| b.to_string()));
        put("per_node_ends", self.per_node_ends.map(|b| b.to_string()));
        put(
            "op_windows",
            self.op_windows
                .map(|w| w.map_or_else(|| "off".to_owned(), |w| format!("{}/{}", w.on, w.period))),
        );
        put("buffer", self.buffer.clone());
        put("qos", self.qos.clone());
        put("chunk_bytes", self.chunk_bytes.map(|b| b.to_string()));
        put("target", self.target.clone());
        put("node_ends", self.node_ends.map(|n| n.as_str().to_owned()));
        put("ggml", self.ggml.clone());
        put("op_level", self.op_level.clone());
        put("series", self.series.map(|m| m.index.to_string()));
        put(
            "series_head",
            self.series.map(|m| m.head_records.to_string()),
        );
        t
    }

    /// Whether sampled operator windows were on.
    pub fn windows_on(&self) -> bool {
        matches!(self.op_windows, Some(Some(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header as the recorder writes it reads back field by field and writes back the
    /// same table.
    #[test]
    fn a_recorders_table_round_trips() {
        let table: BTreeMap<String, String> = [
            ("levels", "0xf"),
            ("structure", "true"),
            ("pmc", "false"),
            ("exact_spans", "false"),
            ("per_node_ends", "false"),
            ("op_windows", "8/32"),
            ("buffer", "Ring { bytes: 8388608 }"),
            ("qos", "off"),
            ("chunk_bytes", "1048576"),
            ("target", "engine"),
            ("node_ends", "batched"),
            ("series", "3"),
            ("series_head", "120"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let s = RecordingSettings::from_table(&table);
        assert_eq!(s.levels, Some(0xf));
        assert_eq!(s.structure, Some(true));
        assert_eq!(
            s.op_windows,
            Some(Some(OpWindowsSetting { on: 8, period: 32 }))
        );
        assert!(s.windows_on());
        assert_eq!(s.node_ends, Some(NodeEnds::Batched));
        assert_eq!(s.chunk_bytes, Some(1 << 20));
        assert_eq!(
            s.series,
            Some(crate::SeriesMember {
                index: 3,
                head_records: 120
            })
        );
        assert!(s.other.is_empty(), "{:?}", s.other);
        assert_eq!(s.to_table(), table);
    }

    /// Unknown keys and unreadable values are kept, not lost; `off` windows are off.
    #[test]
    fn what_it_cannot_read_is_kept() {
        let table: BTreeMap<String, String> = [
            ("levels", "15"),
            ("op_windows", "off"),
            ("node_ends", "sideways"),
            ("future_key", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let s = RecordingSettings::from_table(&table);
        assert_eq!(s.levels, None);
        assert_eq!(s.op_windows, Some(None));
        assert!(!s.windows_on());
        assert_eq!(s.node_ends, None);
        assert_eq!(s.other.len(), 3, "{:?}", s.other);
        assert_eq!(s.to_table(), table);
        assert_eq!(
            RecordingSettings::from_table(&BTreeMap::new()),
            RecordingSettings::default()
        );
    }
}
