//! Recording configuration: the TOML file (`tracer.example.toml` documents every key),
//! command-line overrides, and the validated [`TracerConfig`] the recorder runs with.
//!
//! Low → high: [`FileConfig`] and [`Overrides`] stay close to what the user wrote and
//! only parse; [`TracerConfig::build`] merges them (flags win) and validates.

use std::{path::Path, time::Duration};

use common::control::{LEVEL_GRAPH, LEVEL_OP, LEVEL_PHASE, LEVEL_SAMPLE, LEVEL_SCHED, LEVEL_TOKEN};
use serde::Deserialize;

/// Smallest ring buffer accepted (one page).
pub const MIN_RING_BYTES: u64 = 4096;
/// Largest ring buffer accepted.
pub const MAX_RING_BYTES: u64 = 1 << 30;
/// Largest perf buffer per CPU, in pages.
pub const MAX_PERF_PAGES: u32 = 1 << 16;
/// Largest config file read.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Configuration errors.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config `{path}`")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is too large.
    #[error("config `{path}` is larger than {MAX_CONFIG_BYTES} bytes")]
    TooLarge {
        /// The file.
        path: String,
    },
    /// The TOML does not parse or has unknown keys.
    #[error("invalid config `{path}`")]
    Parse {
        /// The file.
        path: String,
        /// The parser's error.
        #[source]
        source: toml::de::Error,
    },
    /// A value is out of range.
    #[error("invalid setting {key} = {value}: {reason}")]
    Invalid {
        /// The key.
        key: &'static str,
        /// The value given.
        value: String,
        /// What is wrong.
        reason: &'static str,
    },
}

/// `[levels]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelsSection {
    /// Token level.
    pub token: Option<bool>,
    /// Graph level.
    pub graph: Option<bool>,
    /// Operator level.
    pub op: Option<bool>,
    /// Phase level.
    pub phase: Option<bool>,
    /// Scheduler level.
    pub sched: Option<bool>,
}

/// `[op]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpSection {
    /// Parse the operator structure.
    pub structure: Option<bool>,
    /// Read counters at operator entry and exit.
    pub pmc: Option<bool>,
    /// Probe both bounds of every operator span.
    pub exact_spans: Option<bool>,
    /// Probe the engine's node ends one at a time instead of batched.
    pub per_node_ends: Option<bool>,
    /// Sampled windows, `ON/PERIOD` decode steps (operators recorded in ON of every
    /// PERIOD steps).
    pub windows: Option<String>,
    /// Counter names; empty = hardware where available + software.
    pub counters: Option<Vec<String>>,
}

/// `[buffer]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BufferSection {
    /// `ring` or `perf`.
    pub kind: Option<String>,
    /// Ring buffer size in bytes (power of two).
    pub ring_bytes: Option<u64>,
    /// Perf buffer pages per CPU (power of two).
    pub perf_pages: Option<u32>,
}

/// `[qos]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QosSection {
    /// Minimum decode tokens/s; 0 disables adaptive switching.
    pub min_tps: Option<f64>,
    /// Relative headroom above `min_tps` before probes come back.
    pub hysteresis: Option<f64>,
    /// Decode steps in the rate window.
    pub window: Option<usize>,
    /// Decode steps between switches.
    pub hold: Option<usize>,
}

/// `[output]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSection {
    /// Event bytes per trace chunk.
    pub chunk_bytes: Option<usize>,
    /// Keep the kernel's eBPF run-time statistics on for the whole recording (exact
    /// program counts, ~30 ns more per program run) instead of 0.5 s in every 5 s.
    pub probe_stats_always: Option<bool>,
    /// `--max-size SIZE` (`64M`).
    pub max_size: Option<String>,
    /// `--switch-output SIZE|TIME` (`64M`, `10m`).
    pub switch_output: Option<String>,
}

/// The TOML file as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Probe levels.
    #[serde(default)]
    pub levels: LevelsSection,
    /// Operator details.
    #[serde(default)]
    pub op: OpSection,
    /// Buffer settings.
    #[serde(default)]
    pub buffer: BufferSection,
    /// QoS settings.
    #[serde(default)]
    pub qos: QosSection,
    /// Trace output.
    #[serde(default)]
    pub output: OutputSection,
}

impl FileConfig {
    /// Parses TOML text.
    pub fn parse(path: &str, text: &str) -> Result<FileConfig, ConfigError> {
        toml::from_str(text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })
    }

    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let name = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|source| ConfigError::Read {
            path: name.clone(),
            source,
        })?;
        if meta.len() > MAX_CONFIG_BYTES {
            return Err(ConfigError::TooLarge { path: name });
        }
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: name.clone(),
            source,
        })?;
        FileConfig::parse(&name, &text)
    }
}

/// Command-line overrides (None = not given).
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--levels token,graph,...`.
    pub levels: Option<Vec<String>>,
    /// `--structure` / `--no-structure`.
    pub structure: Option<bool>,
    /// `--pmc` / `--no-pmc`.
    pub pmc: Option<bool>,
    /// `--exact-spans`.
    pub exact_spans: Option<bool>,
    /// `--per-node-ends`.
    pub per_node_ends: Option<bool>,
    /// `--op-windows ON/PERIOD`.
    pub op_windows: Option<String>,
    /// `--probe-stats-always`.
    pub stats_always: Option<bool>,
    /// `--counters a,b`.
    pub counters: Option<Vec<String>>,
    /// `--buffer ring|perf`.
    pub buffer: Option<String>,
    /// `--ring-bytes`.
    pub ring_bytes: Option<u64>,
    /// `--perf-pages`.
    pub perf_pages: Option<u32>,
    /// `--qos-min-tps`.
    pub qos_min_tps: Option<f64>,
    /// `--qos-hysteresis`.
    pub qos_hysteresis: Option<f64>,
    /// `--duration` seconds.
    pub duration_secs: Option<f64>,
    /// `--max-size SIZE`.
    pub max_size: Option<String>,
    /// `--switch-output SIZE|TIME`.
    pub switch_output: Option<String>,
    /// `--sample HZ`.
    pub sample_hz: Option<u32>,
}

/// Buffer kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferKind {
    /// BPF ring buffer shared by all CPUs.
    Ring {
        /// Size in bytes.
        bytes: u32,
    },
    /// Per-CPU perf buffers.
    Perf {
        /// Pages per CPU.
        pages: u32,
    },
}

/// Validated settings of one recording.
#[derive(Clone, Debug, PartialEq)]
pub struct TracerConfig {
    /// `LEVEL_*` bits.
    pub levels: u32,
    /// Parse operator structure.
    pub structure: bool,
    /// Read counters in operator probes (at each operator's start and end).
    pub pmc: bool,
    /// Probe both bounds of every operator span (implied by `pmc`): two probe hits per
    /// node and thread (llama.cpp: more, its barrier also runs inside some ops) instead
    /// of one; otherwise the unprobed bound is where the barrier between nodes released
    /// (`common::control::DETAIL_EXACT_SPANS`).
    pub exact_spans: bool,
    /// Probe the engine's node ends one at a time (`engine_op_done`, one probe hit per
    /// node and thread) even where it hands them over batched (`engine_op_times`, one hit
    /// per table of up to 32 nodes; `common::control::DETAIL_PER_NODE_ENDS`).
    pub per_node_ends: bool,
    /// Sampled windows: operators recorded in `on` of every `period` decode steps.
    pub op_windows: Option<crate::windows::WindowSettings>,
    /// Keep the kernel's eBPF run-time statistics on for the whole recording (exact
    /// program counts) instead of sampled windows (`probe_cost`).
    pub stats_always: bool,
    /// Counter names (empty = automatic).
    pub counters: Vec<String>,
    /// Output buffer.
    pub buffer: BufferKind,
    /// QoS (None = off).
    pub qos: Option<crate::qos::QosSettings>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Event bytes per trace chunk.
    pub chunk_bytes: usize,
    /// The output's size cap and series switching.
    pub output: crate::output_limits::OutputLimits,
    /// CPU-clock sampling of the target's threads at this frequency (`--sample HZ`,
    /// `LEVEL_SAMPLE` in `levels`).
    pub sample_hz: Option<u32>,
}

/// Highest `--sample` frequency: the kernel's default `perf_event_max_sample_rate` is
/// higher, but above a few kHz the samples cost more than the operator probes they
/// replace.
pub const MAX_SAMPLE_HZ: u32 = 10_000;

fn level_bit(name: &str) -> Option<u32> {
    Some(match name {
        "token" => LEVEL_TOKEN,
        "graph" => LEVEL_GRAPH,
        "op" => LEVEL_OP,
        "phase" => LEVEL_PHASE,
        "sched" => LEVEL_SCHED,
        _ => return None,
    })
}

/// `--max-size` and `--switch-output`, from flags or the file's `[output]`.
fn output_limits(
    file: &FileConfig,
    cli: &Overrides,
) -> Result<crate::output_limits::OutputLimits, ConfigError> {
    use crate::output_limits::{MIN_SIZE, OutputLimits, SwitchOutput, parse_size, parse_switch};
    let max_size =
        match cli.max_size.as_ref().or(file.output.max_size.as_ref()) {
            None => None,
            Some(v) => Some(parse_size(v).filter(|&b| b >= MIN_SIZE).ok_or_else(|| {
                ConfigError::Invalid {
                    key: "output.max_size",
                    value: v.clone(),
                    reason: "expected a size of at least 64K (512K, 64M, 2G)",
                }
            })?),
        };
    let switch = match cli
        .switch_output
        .as_ref()
        .or(file.output.switch_output.as_ref())
    {
        None => None,
        Some(v) => Some(
            parse_switch(v)
                .filter(|s| !matches!(s, SwitchOutput::Size(b) if *b < MIN_SIZE))
                .ok_or_else(|| ConfigError::Invalid {
                    key: "output.switch_output",
                    value: v.clone(),
                    reason: "expected a size of at least 64K (64M) or a time (30s, 10m, 1h)",
                })?,
        ),
    };
    if let (Some(max), Some(SwitchOutput::Size(each))) = (max_size, switch)
        && max < each.saturating_mul(2)
    {
        return Err(ConfigError::Invalid {
            key: "output.max_size",
            value: max.to_string(),
            reason: "must hold at least two files of --switch-output's size",
        });
    }
    Ok(OutputLimits { max_size, switch })
}

impl TracerConfig {
    /// Merges file and flags (flags win) and validates.
    pub fn build(file: &FileConfig, cli: &Overrides) -> Result<TracerConfig, ConfigError> {
        let levels = if let Some(names) = &cli.levels {
            let mut bits = 0;
            for n in names {
                bits |= level_bit(n.trim()).ok_or_else(|| ConfigError::Invalid {
                    key: "levels",
                    value: n.clone(),
                    reason: "expected token, graph, op, phase or sched",
                })?;
            }
            bits
        } else {
            let l = &file.levels;
            [
                (l.token, LEVEL_TOKEN),
                (l.graph, LEVEL_GRAPH),
                (l.op, LEVEL_OP),
                (l.phase, LEVEL_PHASE),
                (l.sched, LEVEL_SCHED),
            ]
            .into_iter()
            .filter(|(on, _)| on.unwrap_or(true))
            .fold(0, |acc, (_, b)| acc | b)
        };
        let sample_hz = match cli.sample_hz {
            Some(hz) if !(1..=MAX_SAMPLE_HZ).contains(&hz) => {
                return Err(ConfigError::Invalid {
                    key: "sample",
                    value: hz.to_string(),
                    reason: "expected a frequency between 1 and 10000 Hz (997 is usual)",
                });
            }
            other => other,
        };
        // Sampling is the always-on mode: without levels asked for, it keeps only the
        // token probes (two hits per decode call) beside the samples.
        let levels = match sample_hz {
            Some(_) if cli.levels.is_none() => LEVEL_TOKEN | LEVEL_SAMPLE,
            Some(_) => levels | LEVEL_SAMPLE,
            None => levels,
        };
        let kind = cli
            .buffer
            .clone()
            .or_else(|| file.buffer.kind.clone())
            .unwrap_or_else(|| "ring".into());
        let buffer = match kind.as_str() {
            "ring" => {
                let bytes = cli.ring_bytes.or(file.buffer.ring_bytes).unwrap_or(8 << 20);
                if !(MIN_RING_BYTES..=MAX_RING_BYTES).contains(&bytes) || !bytes.is_power_of_two() {
                    return Err(ConfigError::Invalid {
                        key: "buffer.ring_bytes",
                        value: bytes.to_string(),
                        reason: "must be a power of two between 4 KiB and 1 GiB",
                    });
                }
                BufferKind::Ring {
                    bytes: bytes as u32,
                }
            }
            "perf" => {
                let pages = cli.perf_pages.or(file.buffer.perf_pages).unwrap_or(256);
                if pages == 0 || pages > MAX_PERF_PAGES || !pages.is_power_of_two() {
                    return Err(ConfigError::Invalid {
                        key: "buffer.perf_pages",
                        value: pages.to_string(),
                        reason: "must be a power of two between 1 and 65536",
                    });
                }
                BufferKind::Perf { pages }
            }
            _ => {
                return Err(ConfigError::Invalid {
                    key: "buffer.kind",
                    value: kind,
                    reason: "expected ring or perf",
                });
            }
        };
        let min_tps = cli.qos_min_tps.or(file.qos.min_tps).unwrap_or(0.0);
        if !(min_tps >= 0.0 && min_tps.is_finite()) {
            return Err(ConfigError::Invalid {
                key: "qos.min_tps",
                value: min_tps.to_string(),
                reason: "must be a finite number ≥ 0",
            });
        }
        let hysteresis = cli.qos_hysteresis.or(file.qos.hysteresis).unwrap_or(0.25);
        if !(0.0..=10.0).contains(&hysteresis) {
            return Err(ConfigError::Invalid {
                key: "qos.hysteresis",
                value: hysteresis.to_string(),
                reason: "must be between 0 and 10",
            });
        }
        let window = file.qos.window.unwrap_or(4);
        if !(2..=1024).contains(&window) {
            return Err(ConfigError::Invalid {
                key: "qos.window",
                value: window.to_string(),
                reason: "must be between 2 and 1024",
            });
        }
        let qos = (min_tps > 0.0).then(|| crate::qos::QosSettings {
            min_tps,
            hysteresis,
            window,
            hold: file.qos.hold.unwrap_or(window).min(1 << 20),
        });
        let duration = match cli.duration_secs {
            Some(s) if !(s > 0.0 && s.is_finite()) => {
                return Err(ConfigError::Invalid {
                    key: "duration",
                    value: s.to_string(),
                    reason: "must be a positive number of seconds",
                });
            }
            Some(s) => Some(Duration::from_secs_f64(s)),
            None => None,
        };
        let chunk_bytes = file
            .output
            .chunk_bytes
            .unwrap_or(trace_format::DEFAULT_CHUNK_BYTES);
        if !(1024..=(16 << 20)).contains(&chunk_bytes) {
            return Err(ConfigError::Invalid {
                key: "output.chunk_bytes",
                value: chunk_bytes.to_string(),
                reason: "must be between 1 KiB and 16 MiB",
            });
        }
        let op_windows = match cli.op_windows.as_ref().or(file.op.windows.as_ref()) {
            None => None,
            Some(w) => Some(crate::windows::WindowSettings::parse(w).ok_or_else(|| {
                ConfigError::Invalid {
                    key: "op.windows",
                    value: w.clone(),
                    reason: "expected ON/PERIOD decode steps with 1 <= ON < PERIOD (8/32)",
                }
            })?),
        };
        // Counters are read where asked: per-thread perf events cost every context switch
        // of the target's threads, and two reads per operator (docs/performance.md).
        let pmc = cli.pmc.or(file.op.pmc).unwrap_or(false);
        Ok(TracerConfig {
            levels,
            structure: cli.structure.or(file.op.structure).unwrap_or(true),
            pmc,
            exact_spans: pmc || cli.exact_spans.or(file.op.exact_spans).unwrap_or(false),
            per_node_ends: cli.per_node_ends.or(file.op.per_node_ends).unwrap_or(false),
            op_windows,
            stats_always: cli
                .stats_always
                .or(file.output.probe_stats_always)
                .unwrap_or(false),
            counters: cli
                .counters
                .clone()
                .or_else(|| file.op.counters.clone())
                .unwrap_or_default(),
            buffer,
            qos,
            duration,
            chunk_bytes,
            output: output_limits(file, cli)?,
            sample_hz,
        })
    }

    /// The recording settings for the trace header (the target's are added by its
    /// plan).
    pub fn settings(&self) -> trace_format::RecordingSettings {
        let mut s = trace_format::RecordingSettings::default();
        s.levels = Some(self.levels);
        s.structure = Some(self.structure);
        s.pmc = Some(self.pmc);
        s.exact_spans = Some(self.exact_spans);
        s.per_node_ends = Some(self.per_node_ends);
        s.op_windows = Some(self.op_windows.map(|w| trace_format::OpWindowsSetting {
            on: w.on,
            period: w.period,
        }));
        s.buffer = Some(format!("{:?}", self.buffer));
        s.qos = Some(self.qos.as_ref().map_or("off".into(), |q| format!("{q:?}")));
        s.chunk_bytes = Some(self.chunk_bytes as u64);
        if let Some(max) = self.output.max_size {
            s.other.insert("max_size".into(), max.to_string());
        }
        if let Some(hz) = self.sample_hz {
            s.other.insert("sample_hz".into(), hz.to_string());
        }
        if let Some(switch) = self.output.switch {
            s.other.insert("switch_output".into(), switch.to_string());
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::control::LEVEL_ALL;

    #[test]
    fn sampling_keeps_tokens_only_unless_levels_are_asked_for() {
        let sample = |levels: Option<Vec<String>>, hz| {
            TracerConfig::build(
                &FileConfig::default(),
                &Overrides {
                    levels,
                    sample_hz: Some(hz),
                    ..Overrides::default()
                },
            )
        };
        let c = sample(None, 997).expect("valid");
        assert_eq!(c.levels, LEVEL_TOKEN | LEVEL_SAMPLE);
        assert_eq!(c.sample_hz, Some(997));
        assert_eq!(
            c.settings().other.get("sample_hz").map(String::as_str),
            Some("997")
        );
        let c = sample(Some(vec!["token".into(), "graph".into()]), 99).expect("valid");
        assert_eq!(c.levels, LEVEL_TOKEN | LEVEL_GRAPH | LEVEL_SAMPLE);
        assert!(sample(None, 0).is_err());
        assert!(sample(None, MAX_SAMPLE_HZ + 1).is_err());
        let plain = TracerConfig::build(&FileConfig::default(), &Overrides::default());
        assert_eq!(plain.expect("valid").levels & LEVEL_SAMPLE, 0);
    }

    #[test]
    fn defaults_enable_everything_with_a_ring_buffer() {
        let c = TracerConfig::build(&FileConfig::default(), &Overrides::default()).expect("valid");
        assert_eq!(c.levels, LEVEL_ALL);
        assert!(c.structure && !c.pmc && !c.exact_spans && c.qos.is_none());
        assert_eq!(c.buffer, BufferKind::Ring { bytes: 8 << 20 });
    }

    #[test]
    fn flags_override_file() {
        let file = FileConfig::parse(
            "t",
            "[levels]\nop = false\n[buffer]\nkind = \"perf\"\nperf_pages = 8\n[qos]\nmin_tps = 5.0\n",
        )
        .expect("parses");
        let c = TracerConfig::build(&file, &Overrides::default()).expect("valid");
        assert!(!c.stats_always);
        assert_eq!(c.levels & LEVEL_OP, 0);
        assert_eq!(c.buffer, BufferKind::Perf { pages: 8 });
        assert_eq!(c.qos.as_ref().map(|q| q.min_tps), Some(5.0));
        let cli = Overrides {
            levels: Some(vec!["token".into(), "op".into()]),
            buffer: Some("ring".into()),
            ring_bytes: Some(1 << 16),
            qos_min_tps: Some(0.0),
            ..Overrides::default()
        };
        let c = TracerConfig::build(&file, &cli).expect("valid");
        assert_eq!(c.levels, LEVEL_TOKEN | LEVEL_OP);
        assert_eq!(c.buffer, BufferKind::Ring { bytes: 1 << 16 });
        assert!(c.qos.is_none());
        let file = FileConfig::parse("t", "[op]\nper_node_ends = true\n").expect("parses");
        let c = TracerConfig::build(&file, &Overrides::default()).expect("valid");
        assert!(c.per_node_ends, "the file asks for per-node ends");
        assert!(
            !TracerConfig::build(&FileConfig::default(), &Overrides::default())
                .expect("valid")
                .per_node_ends,
            "batched by default"
        );
        let file = FileConfig::parse("t", "[output]\nprobe_stats_always = true\n").expect("parses");
        let c = TracerConfig::build(&file, &Overrides::default()).expect("valid");
        assert!(c.stats_always, "the file turns the statistics on");
        let cli = Overrides {
            stats_always: Some(false),
            ..Overrides::default()
        };
        assert!(
            !TracerConfig::build(&file, &cli)
                .expect("valid")
                .stats_always
        );
    }

    #[test]
    fn bad_values_and_unknown_keys_are_refused() {
        assert!(FileConfig::parse("t", "[levels]\nbogus = true\n").is_err());
        let bad = Overrides {
            ring_bytes: Some(5000),
            ..Overrides::default()
        };
        assert!(TracerConfig::build(&FileConfig::default(), &bad).is_err());
        let bad = Overrides {
            levels: Some(vec!["tokens".into()]),
            ..Overrides::default()
        };
        assert!(TracerConfig::build(&FileConfig::default(), &bad).is_err());
    }

    #[test]
    fn output_bounds_are_checked_and_flags_win_over_the_file() {
        use crate::output_limits::SwitchOutput;
        let with = |max: Option<&str>, switch: Option<&str>| Overrides {
            max_size: max.map(str::to_owned),
            switch_output: switch.map(str::to_owned),
            ..Overrides::default()
        };
        let file: FileConfig =
            toml::from_str("[output]\nmax_size = \"1G\"\nswitch_output = \"10m\"\n").expect("toml");
        let c = TracerConfig::build(&file, &Overrides::default()).expect("file's bounds");
        assert_eq!(c.output.max_size, Some(1 << 30));
        assert_eq!(
            c.output.switch,
            Some(SwitchOutput::Time(Duration::from_secs(600)))
        );
        let c = TracerConfig::build(&file, &with(None, Some("64M"))).expect("flag wins");
        assert_eq!(c.output.switch, Some(SwitchOutput::Size(64 << 20)));
        assert_eq!(
            c.settings().other.get("switch_output").map(String::as_str),
            Some("64 MiB")
        );
        for (max, switch) in [
            (Some("16K"), None),
            (None, Some("1K")),
            (Some("lots"), None),
            (None, Some("0s")),
            (Some("100M"), Some("64M")),
        ] {
            let r = TracerConfig::build(&FileConfig::default(), &with(max, switch));
            assert!(r.is_err(), "{max:?} {switch:?} must be refused");
        }
        TracerConfig::build(&FileConfig::default(), &with(Some("128M"), Some("64M")))
            .expect("two files fit");
    }

    #[test]
    fn example_config_in_repo_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tracer.example.toml");
        let file = FileConfig::load(&path).expect("example parses");
        TracerConfig::build(&file, &Overrides::default()).expect("example is valid");
    }
}
