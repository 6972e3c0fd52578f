//! Exporters: thin writers over the model, the DAG and the stat tables. Each takes its
//! input by reference and writes to any `impl Write`.

pub mod chrome;
pub mod csv;
pub mod diff_page;
pub mod dot;
pub mod flame;
pub mod index;
pub mod json;
pub mod perfetto;
#[allow(
    clippy::allow_attributes_without_reason,
    reason = "rust-protobuf's generated file opens with bare allows of its own"
)]
pub mod perfetto_schema;
pub mod plot;
pub mod summary;
pub mod terminal;
pub mod timeline_parts;

/// Nanoseconds as microseconds with the nanoseconds kept as three decimals (`12.345`).
pub fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// `v` in engineering notation with three significant digits and an SI prefix, for
/// plot ticks and tables a person reads: `eng(250e6, "")` is `250 M`, `eng(4.5e-3, "s")`
/// is `4.5 ms`, never `250000000.0`.
pub fn eng(v: f64, unit: &str) -> String {
    const PREFIXES: [&str; 9] = ["p", "n", "µ", "m", "", "k", "M", "G", "T"];
    let sep = |prefix: &str| {
        if prefix.is_empty() && unit.is_empty() {
            ""
        } else {
            " "
        }
    };
    if v == 0.0 || !v.is_finite() {
        let n = if v.is_nan() {
            "–"
        } else if v == 0.0 {
            "0"
        } else {
            "∞"
        };
        return format!("{n}{}{unit}", sep(""));
    }
    let mut exp3 = (v.abs().log10() / 3.0).floor() as i32;
    // 999.6 would print as "1000": move to the next prefix.
    if (v / 10f64.powi(exp3 * 3)).abs() >= 999.5 {
        exp3 += 1;
    }
    let exp3 = exp3.clamp(-4, 4);
    let scaled = v / 10f64.powi(exp3 * 3);
    let decimals = match scaled.abs() {
        a if a >= 99.95 => 0,
        a if a >= 9.995 => 1,
        _ => 2,
    };
    let mut digits = format!("{scaled:.decimals$}");
    if digits.contains('.') {
        digits = digits
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned();
    }
    let prefix = PREFIXES[(exp3 + 4) as usize];
    format!("{digits}{}{prefix}{unit}", sep(prefix))
}

/// A counter's value as a person reads it: the software clocks (`task-clock`,
/// `cpu-clock`, which count nanoseconds) as times, everything else as a count in
/// engineering notation.
pub fn counter_value(counter: &str, v: f64) -> String {
    if counter.ends_with("-clock") {
        eng(v * 1e-9, "s")
    } else if v != 0.0 && v.abs() < 1.0 {
        // Events per call below one (a page fault every few calls): a plain fraction
        // reads better than `43.5 m`.
        format!("{v:.3}")
    } else {
        eng(v, "")
    }
}

/// A string as a JSON string literal.
pub fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn eng_uses_si_prefixes_and_three_digits() {
        use super::eng;
        assert_eq!(eng(250e6, ""), "250 M");
        assert_eq!(eng(4.5e-3, "s"), "4.5 ms");
        assert_eq!(eng(0.0, "s"), "0 s");
        assert_eq!(eng(0.0, ""), "0");
        assert_eq!(eng(1.0, ""), "1");
        assert_eq!(eng(12.0, "s"), "12 s");
        assert_eq!(eng(1234.0, ""), "1.23 k");
        assert_eq!(eng(999.6, ""), "1 k");
        assert_eq!(eng(999.4, ""), "999");
        assert_eq!(eng(99.96e-6, "s"), "100 µs");
        assert_eq!(eng(-2.5e-6, "s"), "-2.5 µs");
        assert_eq!(eng(0.25, ""), "250 m");
        assert_eq!(eng(1e15, ""), "1000 T");
        assert_eq!(eng(f64::NAN, "s"), "– s");
    }

    #[test]
    fn us_keeps_nanoseconds() {
        assert_eq!(super::us(0), "0.000");
        assert_eq!(super::us(1), "0.001");
        assert_eq!(super::us(123_456_789), "123456.789");
        assert_eq!(super::json_str("a\"b"), "\"a\\\"b\"");
    }
}
