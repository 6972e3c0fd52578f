//! Threads: names and the scheduler state timeline derived from `sched_switch` /
//! `sched_wakeup` events.
//!
//! Rules (seed 002 §4.2, with the kernel's meaning of `prev_state`):
//! - switched in (`next_tid`): **running** on the CPU of the event;
//! - switched out (`prev_tid`) with `prev_state == 0` (`TASK_RUNNING`, preempted):
//!   **runnable**;
//! - switched out with any other `prev_state` (it blocked: sleeping, disk wait...):
//!   **sleeping** (idle);
//! - woken up (`sched_wakeup[_new]` with `target_tid`) while not running: **runnable**
//!   on `target_cpu`;
//! - thread exit: the timeline ends.
//!
//! The paper's text swaps "idle" and "runnable" for `prev_state == 0`; we follow the
//! kernel: a preempted task stays on the run queue.

use serde::Serialize;

/// A thread's scheduler state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SchedState {
    /// On a CPU.
    Running,
    /// On a run queue, waiting for a CPU (preempted or just woken).
    Runnable,
    /// Blocked (waiting on a futex, I/O...).
    Sleeping,
}

impl SchedState {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            SchedState::Running => "running",
            SchedState::Runnable => "runnable",
            SchedState::Sleeping => "sleeping",
        }
    }
}

/// One interval of a thread's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct StateSlice {
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
    /// State during the interval.
    pub state: SchedState,
    /// CPU it ran on (running) or was queued on (runnable); `u32::MAX` if unknown.
    pub cpu: u32,
}

/// The state timeline of one thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateTimeline {
    slices: Vec<StateSlice>,
    /// Time in each closed interval's state, ns: running, runnable, sleeping.
    totals: [u64; 3],
    /// Whether closed intervals are kept (else only their totals).
    keep: bool,
    current: Option<(SchedState, u64, u32)>,
}

impl Default for StateTimeline {
    fn default() -> Self {
        StateTimeline::new(true)
    }
}

impl StateTimeline {
    /// An empty timeline that keeps its closed intervals (`keep`) or only their totals.
    pub fn new(keep: bool) -> StateTimeline {
        StateTimeline {
            slices: Vec::new(),
            totals: [0; 3],
            keep,
            current: None,
        }
    }

    /// Moves to `state` at `ts_ns` (closing the open interval).
    pub fn transition(&mut self, ts_ns: u64, state: SchedState, cpu: u32) {
        self.close(ts_ns);
        self.current = Some((state, ts_ns, cpu));
    }

    /// A wake-up: runnable, unless already running.
    pub fn wakeup(&mut self, ts_ns: u64, cpu: u32) {
        if !matches!(self.current, Some((SchedState::Running, _, _))) {
            self.transition(ts_ns, SchedState::Runnable, cpu);
        }
    }

    /// Ends the timeline at `ts_ns` (thread exit or end of the trace).
    pub fn close(&mut self, ts_ns: u64) {
        if let Some((s, since, c)) = self.current.take()
            && ts_ns > since
        {
            let i = match s {
                SchedState::Running => 0,
                SchedState::Runnable => 1,
                SchedState::Sleeping => 2,
            };
            self.totals[i] += ts_ns - since;
            if self.keep {
                self.slices.push(StateSlice {
                    start_ns: since,
                    end_ns: ts_ns,
                    state: s,
                    cpu: c,
                });
            }
        }
    }

    /// Time in each state over the closed intervals, ns: running, runnable, sleeping.
    pub fn time_by_state(&self) -> [u64; 3] {
        self.totals
    }

    /// Closed intervals in time order (none when only totals are kept).
    pub fn slices(&self) -> &[StateSlice] {
        &self.slices
    }

    /// The open interval: state, since, cpu.
    pub fn current(&self) -> Option<(SchedState, u64, u32)> {
        self.current
    }
}

/// What the model knows about one thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadInfo {
    /// Thread id.
    pub tid: u32,
    /// Process id, if seen in one of its own events.
    pub pid: Option<u32>,
    /// Name (`comm`) from scheduler events, empty if unknown.
    pub comm: String,
    /// Whether it called `engine_decode` (the engine's main thread).
    pub is_main: bool,
    /// Operator slices it ran.
    pub op_slices: u64,
    /// Time inside operators, ns.
    pub op_busy_ns: u64,
    /// Scheduler states.
    pub states: StateTimeline,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_make_contiguous_slices() {
        let mut t = StateTimeline::default();
        t.transition(10, SchedState::Running, 1);
        t.transition(20, SchedState::Runnable, 1);
        t.wakeup(25, 0); // already runnable: new interval, same state
        t.transition(30, SchedState::Running, 0);
        t.wakeup(35, 1); // running: ignored
        t.transition(40, SchedState::Sleeping, 0);
        t.close(50);
        let s: Vec<_> = t
            .slices()
            .iter()
            .map(|s| (s.start_ns, s.end_ns, s.state, s.cpu))
            .collect();
        assert_eq!(
            s,
            vec![
                (10, 20, SchedState::Running, 1),
                (20, 25, SchedState::Runnable, 1),
                (25, 30, SchedState::Runnable, 0),
                (30, 40, SchedState::Running, 0),
                (40, 50, SchedState::Sleeping, 0),
            ]
        );
        assert_eq!(t.current(), None);
        assert_eq!(t.time_by_state(), [20, 10, 10]);
    }
}
