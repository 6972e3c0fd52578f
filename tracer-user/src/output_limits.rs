//! How a recording's output is bounded: `--max-size SIZE` (one file stops there; a
//! series keeps its newest files within it) and `--switch-output SIZE|TIME` (a numbered
//! series of complete trace files, cut at token boundaries, as `perf record
//! --switch-output` cuts its files).
//!
//! Sizes and times are written as perf writes them: a number with a size suffix `B`,
//! `K`, `M`, `G` (powers of 1024; `k` and `g` too) or a time suffix `s`, `m`, `h`, `d`
//! (lower case: `m` is minutes, `M` mebibytes).

use std::time::Duration;

/// When to start the next file of a series.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwitchOutput {
    /// When the file being written reaches this many bytes.
    Size(u64),
    /// When the file being written has been open this long.
    Time(Duration),
}

/// A recording's output bounds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputLimits {
    /// Most bytes: of the one file (recording stops there), or of the series on disk
    /// (its oldest files are removed to stay within it).
    pub max_size: Option<u64>,
    /// Write a series, switching files at this size or age.
    pub switch: Option<SwitchOutput>,
}

/// The smallest size accepted (a file holds a header and at least one chunk).
pub const MIN_SIZE: u64 = 64 << 10;

/// `64M`, `512K`, `1G`, `100000` (bytes); `None` when it does not read as a size.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (i, c) = s.char_indices().last()?;
    let (digits, unit) = match c {
        '0'..='9' => (s, 1u64),
        'B' | 'b' => (&s[..i], 1),
        'K' | 'k' => (&s[..i], 1 << 10),
        'M' => (&s[..i], 1 << 20),
        'G' | 'g' => (&s[..i], 1 << 30),
        _ => return None,
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(unit)
}

/// `30s`, `10m`, `2h`, `1d`; `None` when it does not read as a time.
pub fn parse_time(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (i, c) = s.char_indices().last()?;
    let unit = match c {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return None,
    };
    let n: u64 = s[..i].trim().parse().ok()?;
    (n > 0).then(|| Duration::from_secs(n.saturating_mul(unit)))
}

/// `--switch-output`'s value: a size or a time.
pub fn parse_switch(s: &str) -> Option<SwitchOutput> {
    parse_time(s)
        .map(SwitchOutput::Time)
        .or_else(|| parse_size(s).map(SwitchOutput::Size))
}

impl std::fmt::Display for SwitchOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SwitchOutput::Size(b) => write!(f, "{}", human_bytes(*b)),
            SwitchOutput::Time(d) => write!(f, "{}s", d.as_secs()),
        }
    }
}

/// Bytes in the largest whole unit (`64 MiB`, `1.5 GiB`).
pub fn human_bytes(b: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (name, size) in UNITS {
        if b >= size {
            let v = b as f64 / size as f64;
            return if (v - v.round()).abs() < 0.05 {
                format!("{v:.0} {name}")
            } else {
                format!("{v:.1} {name}")
            };
        }
    }
    format!("{b} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_times_read_as_perf_writes_them() {
        assert_eq!(parse_size("64M"), Some(64 << 20));
        assert_eq!(parse_size("512K"), Some(512 << 10));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("100000"), Some(100_000));
        assert_eq!(parse_size("10B"), Some(10));
        assert_eq!(parse_size("M"), None);
        assert_eq!(parse_size("10m"), None, "lower-case m is minutes");
        assert_eq!(parse_size("99999999999G"), None, "overflow");
        assert_eq!(parse_time("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_time("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_time("1d"), Some(Duration::from_secs(86_400)));
        assert_eq!(parse_time("0s"), None);
        assert_eq!(
            parse_switch("10m"),
            Some(SwitchOutput::Time(Duration::from_secs(600)))
        );
        assert_eq!(parse_switch("10M"), Some(SwitchOutput::Size(10 << 20)));
        assert_eq!(parse_switch("soon"), None);
        assert_eq!(human_bytes(64 << 20), "64 MiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(human_bytes(100), "100 B");
    }
}
