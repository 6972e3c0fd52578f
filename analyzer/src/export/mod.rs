//! Exporters: thin writers over the model, the DAG and the stat tables. Each takes its
//! input by reference and writes to any `impl Write`.

pub mod chrome;
pub mod csv;
pub mod dot;
pub mod flame;
pub mod index;
pub mod json;
pub mod plot;
pub mod summary;
pub mod terminal;

/// Nanoseconds as microseconds with the nanoseconds kept as three decimals (`12.345`).
pub fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// A string as a JSON string literal.
pub fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn us_keeps_nanoseconds() {
        assert_eq!(super::us(0), "0.000");
        assert_eq!(super::us(1), "0.001");
        assert_eq!(super::us(123_456_789), "123456.789");
        assert_eq!(super::json_str("a\"b"), "\"a\\\"b\"");
    }
}
