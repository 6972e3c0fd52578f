//! Sampled windows (`--op-windows ON/PERIOD`): every operator of ON decode steps in each
//! PERIOD is recorded, and the operator probes are detached for the rest, so the
//! recording costs about ON/PERIOD of what recording every step costs. A pure state
//! machine fed with decode steps, like the QoS controller; the collector attaches and
//! detaches the probes when it says so, and the trace marks each switch
//! (`OpWindowEvent`), so the views tell traced tokens from untraced ones (the untraced
//! ones are also the recording's own measure of what tracing costs).

/// Windows of `on` traced decode steps in every `period`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowSettings {
    /// Decode steps traced per period (≥ 1).
    pub on: u32,
    /// Decode steps per period (> `on`).
    pub period: u32,
}

impl WindowSettings {
    /// Parses `ON/PERIOD` (`8/32`).
    pub fn parse(s: &str) -> Option<WindowSettings> {
        let (on, period) = s.split_once('/')?;
        let w = WindowSettings {
            on: on.trim().parse().ok()?,
            period: period.trim().parse().ok()?,
        };
        (w.on >= 1 && w.period > w.on).then_some(w)
    }
}

impl std::fmt::Display for WindowSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.on, self.period)
    }
}

/// Where the recording is in its windows.
#[derive(Clone, Debug)]
pub struct OpWindows {
    settings: WindowSettings,
    steps: u64,
    traced: bool,
}

impl OpWindows {
    /// Windows starting with a traced one (the prompt and the first steps are traced).
    pub fn new(settings: WindowSettings) -> OpWindows {
        OpWindows {
            settings,
            steps: 0,
            traced: true,
        }
    }

    /// Whether the operator level is on now.
    pub fn traced(&self) -> bool {
        self.traced
    }

    /// Decode steps seen.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// One decode step ended: the new state when the operator level must switch.
    pub fn on_decode_step(&mut self) -> Option<bool> {
        self.steps += 1;
        let want = self.steps % u64::from(self.settings.period) < u64::from(self.settings.on);
        (want != self.traced).then(|| {
            self.traced = want;
            want
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_on_over_period_and_refuses_the_rest() {
        assert_eq!(
            WindowSettings::parse("8/32"),
            Some(WindowSettings { on: 8, period: 32 })
        );
        for bad in ["8", "0/4", "4/4", "5/4", "a/4", "4/b", ""] {
            assert_eq!(WindowSettings::parse(bad), None, "{bad}");
        }
        assert_eq!(WindowSettings { on: 2, period: 5 }.to_string(), "2/5");
    }

    #[test]
    fn traces_on_steps_of_every_period() {
        let mut w = OpWindows::new(WindowSettings { on: 2, period: 5 });
        let mut states = vec![w.traced()];
        let mut switches = Vec::new();
        for _ in 0..10 {
            if let Some(s) = w.on_decode_step() {
                switches.push((w.steps(), s));
            }
            states.push(w.traced());
        }
        // Steps 0, 1 traced, 2..5 not, 5, 6 traced, ...
        assert_eq!(
            states,
            [
                true, true, false, false, false, true, true, false, false, false, true
            ]
        );
        assert_eq!(switches, [(2, false), (5, true), (7, false), (10, true)]);
    }
}
