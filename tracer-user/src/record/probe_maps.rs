//! The collector's handles on the loaded eBPF object: the control map (what the probes
//! record and for which process), the thread set, the counter slots, the per-CPU
//! statistics and the event buffer. Target-independent.

use std::os::fd::{AsFd, OwnedFd};

use aya::{
    Ebpf,
    maps::{Array, HashMap as BpfHashMap, Map, MapData, PerCpuArray, PerfEventArray, RingBuf},
};
use common::{
    control::{CONTROL_INDEX, LEVEL_OP, TracerControl},
    event::{EventKind, PmcOpenEvent},
};

use super::clock::{clocks, collector_header};
use super::error::{RecordError, map_err};
use crate::{config::BufferKind, drain::EventSource, load::OpProbes, pmc::PmcSet};

/// The loaded eBPF object and the maps the collector reads and writes.
pub struct ProbeMaps {
    /// The object (programs and the maps not taken out).
    pub ebpf: Ebpf,
    control: Array<MapData, TracerControl>,
    stats: PerCpuArray<MapData, u64>,
    counters_fd: OwnedFd,
}

fn take_map(ebpf: &mut Ebpf, name: &'static str) -> Result<Map, RecordError> {
    ebpf.take_map(name).ok_or(RecordError::MapMissing { name })
}

fn map_mut<'a>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut Map, RecordError> {
    ebpf.map_mut(name).ok_or(RecordError::MapMissing { name })
}

impl ProbeMaps {
    /// Takes the control and statistics maps and the counter array's fd out of `ebpf`.
    ///
    /// # Errors
    /// A map is missing or of another type.
    pub fn new(mut ebpf: Ebpf) -> Result<ProbeMaps, RecordError> {
        let counters_fd: OwnedFd = match ebpf
            .map("COUNTERS")
            .ok_or(RecordError::MapMissing { name: "COUNTERS" })?
        {
            Map::PerfEventArray(data) => {
                data.fd()
                    .as_fd()
                    .try_clone_to_owned()
                    .map_err(|source| RecordError::Runtime {
                        what: "duplicating the COUNTERS map fd",
                        source,
                    })?
            }
            _ => {
                return Err(RecordError::MapType {
                    name: "COUNTERS",
                    expected: "perf event array",
                });
            }
        };
        let control =
            Array::try_from(take_map(&mut ebpf, "CONTROL")?).map_err(map_err("CONTROL"))?;
        let stats =
            PerCpuArray::try_from(take_map(&mut ebpf, "STATS")?).map_err(map_err("STATS"))?;
        Ok(ProbeMaps {
            ebpf,
            control,
            stats,
            counters_fd,
        })
    }

    /// Adds threads to the traced set (the sched and counter programs look them up).
    ///
    /// # Errors
    /// The `TIDS` map is missing or full.
    pub fn add_threads(&mut self, tids: &[u32]) -> Result<(), RecordError> {
        let mut set: BpfHashMap<_, u32, u32> =
            BpfHashMap::try_from(map_mut(&mut self.ebpf, "TIDS")?).map_err(map_err("TIDS"))?;
        for &t in tids {
            set.insert(t, 1, 0).map_err(map_err("TIDS"))?;
        }
        Ok(())
    }

    /// Opens the counters of thread `tid` of process `pid` and gives the thread its
    /// counter slot; returns the record saying which counters opened (none if the set is
    /// empty or none could be opened).
    ///
    /// # Errors
    /// A counter error the set does not tolerate, or the `PMC_SLOTS` map.
    pub fn open_counters(
        &mut self,
        pmcs: &mut PmcSet,
        pid: u32,
        tid: u32,
    ) -> Result<Option<PmcOpenEvent>, RecordError> {
        let Some((slot, mask)) = pmcs.open_thread(tid, self.counters_fd.as_fd())? else {
            return Ok(None);
        };
        let mut slots: BpfHashMap<_, u32, u32> =
            BpfHashMap::try_from(map_mut(&mut self.ebpf, "PMC_SLOTS")?)
                .map_err(map_err("PMC_SLOTS"))?;
        slots.insert(tid, slot, 0).map_err(map_err("PMC_SLOTS"))?;
        Ok(Some(PmcOpenEvent {
            header: collector_header(EventKind::PmcOpen, pid, tid, u32::MAX),
            slot,
            opened_mask: mask,
        }))
    }

    /// Takes the event buffer the configuration asks for (call inside the tokio
    /// runtime).
    ///
    /// # Errors
    /// The map is missing, or the buffer cannot be registered or opened.
    pub fn event_source(&mut self, buffer: BufferKind) -> Result<EventSource, RecordError> {
        Ok(match buffer {
            BufferKind::Ring { .. } => {
                let mut rings = Vec::new();
                for name in crate::load::RING_NAMES {
                    rings.push(
                        RingBuf::try_from(take_map(&mut self.ebpf, name)?)
                            .map_err(map_err(name))?,
                    );
                }
                EventSource::rings(rings)
            }
            BufferKind::Perf { pages } => EventSource::perf(
                PerfEventArray::try_from(take_map(&mut self.ebpf, "PERF_EVENTS")?)
                    .map_err(map_err("PERF_EVENTS"))?,
                pages,
            ),
        }?)
    }

    /// Writes `control` to the control map; returns the collector time (trace clock) of
    /// the write.
    ///
    /// # Errors
    /// The map update failed.
    pub fn write_control(&mut self, control: TracerControl) -> Result<u64, RecordError> {
        self.control
            .set(CONTROL_INDEX, control, 0)
            .map_err(map_err("CONTROL"))?;
        Ok(clocks().0)
    }

    /// Writes `control` and attaches or detaches the operator probes to match its levels:
    /// off, the control map first (programs in flight stop recording), then the probes
    /// come off the target; on, the probes first. Returns the collector times (trace
    /// clock) of the control map write, when the switch took effect, and of the other end
    /// of the time the probes trapped without recording: the start of the attachment
    /// (before the write), or the end of the detachment (after it: detaching waits for
    /// the kernel's uprobe grace period, ~0.2 s here).
    ///
    /// # Errors
    /// The map update or the (de)attachment failed.
    pub fn apply_levels(
        &mut self,
        control: TracerControl,
        op_probes: Option<&mut OpProbes>,
    ) -> Result<(u64, u64), RecordError> {
        let op_on = control.levels & LEVEL_OP != 0;
        Ok(match op_probes {
            Some(p) if op_on => {
                let attaching = clocks().0;
                p.set_attached(&mut self.ebpf, true)?;
                (self.write_control(control)?, attaching)
            }
            Some(p) => {
                let at = self.write_control(control)?;
                p.set_attached(&mut self.ebpf, false)?;
                (at, clocks().0)
            }
            None => {
                let at = self.write_control(control)?;
                (at, at)
            }
        })
    }

    /// Per-CPU values of statistics slot `slot`.
    ///
    /// # Errors
    /// The map read failed.
    pub fn stat_per_cpu(&self, slot: u32) -> Result<Vec<u64>, RecordError> {
        Ok(self
            .stats
            .get(&slot, 0)
            .map_err(map_err("STATS"))?
            .iter()
            .copied()
            .collect())
    }

    /// Sum over CPUs of statistics slot `slot` (0 if it cannot be read: for status
    /// lines, not for the footer).
    pub fn stat_sum(&self, slot: u32) -> u64 {
        self.stat_per_cpu(slot).map_or(0, |v| v.iter().sum())
    }
}
