//! The state records a series member's events need, kept as the recording goes: the
//! latest description of each node and each leaf node, the threads the target created
//! (until they exit), the counters opened on each thread, the QoS controller's last
//! level switch and an operator window still open. A new member of a series
//! (`--switch-output`) begins with copies of them, so it reads alone.

use std::collections::BTreeMap;
use std::mem::offset_of;

use common::event::{
    EventHeader, EventKind, LeafNodeEvent, NodeDescEvent, OpWindowEvent, TaskEvent,
};

/// What one state record is about: its kind and the node or thread it describes.
type StateKey = (u32, u64);

/// The latest state records, one per node or thread.
#[derive(Debug, Default)]
pub struct HeadRecords {
    latest: BTreeMap<StateKey, Vec<u8>>,
}

fn u32_at(record: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(record.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(record: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(record.get(at..at + 8)?.try_into().ok()?))
}

impl HeadRecords {
    /// Notes a record written to the trace: keeps it when it is state, forgets a thread's
    /// state when the thread exits.
    pub fn observe(&mut self, kind: u32, record: &[u8]) {
        let key = match EventKind::from_u32(kind) {
            Some(EventKind::NodeDesc) => u64_at(record, offset_of!(NodeDescEvent, node_addr)),
            Some(EventKind::LeafNode) => u64_at(record, offset_of!(LeafNodeEvent, node_addr)),
            Some(EventKind::TaskNew) => {
                u32_at(record, offset_of!(TaskEvent, child_tid)).map(u64::from)
            }
            Some(EventKind::PmcOpen) => u32_at(record, offset_of!(EventHeader, tid)).map(u64::from),
            Some(EventKind::QosSwitch) => Some(0),
            Some(EventKind::OpWindow) => {
                // An open window is state; a closed one is not.
                if u32_at(record, offset_of!(OpWindowEvent, traced)) == Some(0) {
                    self.latest.remove(&(kind, 0));
                    None
                } else {
                    Some(0)
                }
            }
            Some(EventKind::TaskExit) => {
                if let Some(tid) = u32_at(record, offset_of!(TaskEvent, child_tid)) {
                    for k in [EventKind::TaskNew, EventKind::PmcOpen] {
                        self.latest.remove(&(k as u32, u64::from(tid)));
                    }
                }
                None
            }
            _ => None,
        };
        if let Some(key) = key {
            let kept = self.latest.entry((kind, key)).or_default();
            kept.clear();
            kept.extend_from_slice(record);
        }
    }

    /// Records kept.
    pub fn count(&self) -> usize {
        self.latest.len()
    }

    /// Copies of the kept records stamped `ts_ns` (a member's start), in a fixed order.
    pub fn stamped(&self, ts_ns: u64) -> impl Iterator<Item = Vec<u8>> + '_ {
        let at = offset_of!(EventHeader, ts_ns);
        self.latest.values().map(move |r| {
            let mut copy = r.clone();
            copy[at..at + 8].copy_from_slice(&ts_ns.to_le_bytes());
            copy
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_format::{WireRecord, record_bytes};

    fn bytes<T: WireRecord>(r: &T) -> Vec<u8> {
        record_bytes(r).to_vec()
    }

    #[test]
    fn keeps_the_latest_state_per_node_and_thread_and_forgets_exited_threads() {
        let mut head = HeadRecords::default();
        let desc = |addr: u64, index: u32| NodeDescEvent {
            header: EventHeader {
                kind: EventKind::NodeDesc as u32,
                ts_ns: 5,
                ..EventHeader::default()
            },
            node_addr: addr,
            index,
            ..NodeDescEvent::zeroed()
        };
        let task = |kind: EventKind, tid: u32| TaskEvent {
            header: EventHeader {
                kind: kind as u32,
                ..EventHeader::default()
            },
            parent_tid: 1,
            child_tid: tid,
        };
        for r in [
            bytes(&desc(0x10, 1)),
            bytes(&desc(0x20, 2)),
            bytes(&desc(0x10, 3)),
            bytes(&task(EventKind::TaskNew, 7)),
            bytes(&task(EventKind::TaskNew, 8)),
            bytes(&task(EventKind::TaskExit, 7)),
        ] {
            head.observe(u32::from_le_bytes(r[..4].try_into().expect("kind")), &r);
        }
        assert_eq!(head.count(), 3, "two nodes, one living thread");
        let copies: Vec<Vec<u8>> = head.stamped(99).collect();
        let descs: Vec<NodeDescEvent> = copies
            .iter()
            .filter_map(
                |c| match trace_format::decode_record(EventKind::NodeDesc, c) {
                    Some(trace_format::Event::NodeDesc(d))
                        if c.len() == size_of::<NodeDescEvent>() =>
                    {
                        Some(*d)
                    }
                    _ => None,
                },
            )
            .collect();
        assert_eq!(descs.len(), 2);
        assert!(descs.iter().all(|d| d.header.ts_ns == 99));
        assert_eq!(
            descs.iter().find(|d| d.node_addr == 0x10).map(|d| d.index),
            Some(3)
        );
    }
}
