//! QoS-adaptive probe switching (seed 002 §3.1, §3.3.1): a pure state machine fed with
//! decode-step completion times. When the decode rate falls below the minimum, operator
//! probes (and with them structure parsing and counter reads) are switched off; when the
//! rate has headroom again, they come back. Hysteresis and a hold period avoid flapping.

use std::collections::VecDeque;

/// Settings of the controller.
#[derive(Clone, Debug, PartialEq)]
pub struct QosSettings {
    /// Minimum decode tokens per second.
    pub min_tps: f64,
    /// Switch back on only above `min_tps * (1 + hysteresis)`.
    pub hysteresis: f64,
    /// Decode steps in the rate window.
    pub window: usize,
    /// Decode steps to wait after a switch before the next one.
    pub hold: usize,
}

impl Default for QosSettings {
    fn default() -> Self {
        QosSettings {
            min_tps: 0.0,
            hysteresis: 0.25,
            window: 4,
            hold: 4,
        }
    }
}

/// A decision of the controller.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum QosDecision {
    /// Keep the current levels.
    Keep,
    /// Switch operator-level probes off; the measured rate is attached.
    SwitchOff {
        /// Decode tokens per second that caused the switch.
        tps: f64,
    },
    /// Switch operator-level probes back on.
    SwitchOn {
        /// Decode tokens per second that allowed the switch.
        tps: f64,
    },
}

/// The controller state.
#[derive(Clone, Debug)]
pub struct QosController {
    settings: QosSettings,
    times_ns: VecDeque<u64>,
    detailed: bool,
    since_switch: usize,
}

impl QosController {
    /// A controller that starts with operator probes on.
    pub fn new(settings: QosSettings) -> QosController {
        QosController {
            times_ns: VecDeque::with_capacity(settings.window + 1),
            settings,
            detailed: true,
            since_switch: 0,
        }
    }

    /// Whether operator probes are currently on.
    pub fn detailed(&self) -> bool {
        self.detailed
    }

    /// Current rate over the window, tokens per second (None until the window is full).
    pub fn tps(&self) -> Option<f64> {
        if self.times_ns.len() < self.settings.window.max(2) {
            return None;
        }
        let first = *self.times_ns.front()?;
        let last = *self.times_ns.back()?;
        let span = last.checked_sub(first)?;
        if span == 0 {
            return None;
        }
        Some((self.times_ns.len() - 1) as f64 * 1e9 / span as f64)
    }

    /// Feeds the completion time of one decode step (one generated token).
    pub fn on_decode_step(&mut self, ts_ns: u64) -> QosDecision {
        self.times_ns.push_back(ts_ns);
        while self.times_ns.len() > self.settings.window.max(2) {
            self.times_ns.pop_front();
        }
        self.since_switch += 1;
        let Some(tps) = self.tps() else {
            return QosDecision::Keep;
        };
        if self.since_switch < self.settings.hold {
            return QosDecision::Keep;
        }
        if self.detailed && tps < self.settings.min_tps {
            self.switch(false);
            return QosDecision::SwitchOff { tps };
        }
        if !self.detailed && tps > self.settings.min_tps * (1.0 + self.settings.hysteresis) {
            self.switch(true);
            return QosDecision::SwitchOn { tps };
        }
        QosDecision::Keep
    }

    fn switch(&mut self, on: bool) {
        self.detailed = on;
        self.since_switch = 0;
        // Rates measured under the old setting say nothing about the new one.
        self.times_ns.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctl(min_tps: f64) -> QosController {
        QosController::new(QosSettings {
            min_tps,
            hysteresis: 0.5,
            window: 3,
            hold: 3,
        })
    }

    /// Feeds `n` steps `period_ns` apart starting at `*t`; returns the decisions.
    fn feed(c: &mut QosController, t: &mut u64, period_ns: u64, n: usize) -> Vec<QosDecision> {
        (0..n)
            .map(|_| {
                *t += period_ns;
                c.on_decode_step(*t)
            })
            .collect()
    }

    #[test]
    fn rate_is_steps_over_span() {
        let mut c = ctl(0.0);
        let mut t = 0;
        feed(&mut c, &mut t, 100_000_000, 3); // 10 tokens/s
        let tps = c.tps().expect("window full");
        assert!((tps - 10.0).abs() < 1e-9, "{tps}");
    }

    #[test]
    fn slow_decoding_switches_off_once_and_fast_switches_back() {
        let mut c = ctl(20.0);
        let mut t = 0;
        // 10 tok/s < 20: off as soon as window and hold allow (3rd step), then keep.
        let d = feed(&mut c, &mut t, 100_000_000, 6);
        assert_eq!(
            d.iter()
                .filter(|d| matches!(d, QosDecision::SwitchOff { .. }))
                .count(),
            1
        );
        assert!(matches!(d[2], QosDecision::SwitchOff { .. }), "{d:?}");
        assert!(!c.detailed());
        // 25 tok/s is above the minimum but inside the hysteresis band (< 30): stay off.
        let d = feed(&mut c, &mut t, 40_000_000, 6);
        assert!(d.iter().all(|d| *d == QosDecision::Keep), "{d:?}");
        // 50 tok/s: back on once the window's rate (2 steps over 40 + 20 ms = 33.3/s)
        // clears 30/s, i.e. on the first fast step.
        let d = feed(&mut c, &mut t, 20_000_000, 3);
        assert!(
            matches!(d[0], QosDecision::SwitchOn { tps } if (tps - 2e9 / 60e6).abs() < 1e-6),
            "{d:?}"
        );
        assert!(
            d[1..].iter().all(|d| *d == QosDecision::Keep),
            "hold after a switch: {d:?}"
        );
        assert!(c.detailed());
    }

    #[test]
    fn fast_decoding_never_switches() {
        let mut c = ctl(5.0);
        let mut t = 0;
        let d = feed(&mut c, &mut t, 10_000_000, 50);
        assert!(d.iter().all(|d| *d == QosDecision::Keep));
    }
}
