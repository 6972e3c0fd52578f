//! The metadata key/value store of a GGUF file and its typed getters.

use indexmap::IndexMap;
use indexmap::map::Entry;

use crate::error::GgufError;
use crate::value::{Array, Value};

/// Metadata key/value pairs in file order, with typed getters whose errors name the key
/// and the expected and actual types.
///
/// `get_*` getters fail with [`GgufError::KeyMissing`] on a missing key; `opt_*` getters
/// return `Ok(None)` instead. Both fail with [`GgufError::KeyType`] on a wrong type.
/// Integer getters accept any integer value type whose value fits the requested type,
/// because GGUF writers disagree on u32/i32/u64 for the same key.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    entries: IndexMap<String, Value>,
}

impl Metadata {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store with room for `capacity` pairs.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            entries: IndexMap::with_capacity(capacity),
        }
    }

    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no pairs.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The pairs in file order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The value of `key`, of any type.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.get(key)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// Adds a pair; fails with [`GgufError::DuplicateKey`] (offset 0) if `key` exists.
    pub fn insert(&mut self, key: impl Into<String>, value: Value) -> Result<(), GgufError> {
        match self.entries.entry(key.into()) {
            Entry::Occupied(e) => Err(GgufError::DuplicateKey {
                key: e.key().clone(),
                offset: 0,
            }),
            Entry::Vacant(e) => {
                e.insert(value);
                Ok(())
            }
        }
    }

    fn require(&self, key: &str) -> Result<&Value, GgufError> {
        self.get(key).ok_or_else(|| GgufError::KeyMissing {
            key: key.to_owned(),
        })
    }

    fn integer<T: TryFrom<i128>>(
        &self,
        key: &str,
        target: &'static str,
    ) -> Result<Option<T>, GgufError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let Some(i) = value.as_integer() else {
            return Err(GgufError::KeyType {
                key: key.to_owned(),
                expected: target,
                found: value.type_description(),
            });
        };
        T::try_from(i)
            .map(Some)
            .map_err(|_| GgufError::KeyOutOfRange {
                key: key.to_owned(),
                value: i,
                target,
            })
    }

    fn wrong_type(key: &str, expected: &'static str, found: &Value) -> GgufError {
        GgufError::KeyType {
            key: key.to_owned(),
            expected,
            found: found.type_description(),
        }
    }

    /// An integer value of any integer type that fits in `u32`, or `None` if missing.
    pub fn opt_u32(&self, key: &str) -> Result<Option<u32>, GgufError> {
        self.integer(key, "u32")
    }

    /// An integer value of any integer type that fits in `u64`, or `None` if missing.
    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>, GgufError> {
        self.integer(key, "u64")
    }

    /// An integer value of any integer type that fits in `i32`, or `None` if missing.
    pub fn opt_i32(&self, key: &str) -> Result<Option<i32>, GgufError> {
        self.integer(key, "i32")
    }

    /// An integer value of any integer type that fits in `i64`, or `None` if missing.
    pub fn opt_i64(&self, key: &str) -> Result<Option<i64>, GgufError> {
        self.integer(key, "i64")
    }

    /// A float value (`f32`, or `f64` rounded to `f32`), or `None` if missing.
    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::F32(v)) => Ok(Some(*v)),
            Some(Value::F64(v)) => Ok(Some(*v as f32)),
            Some(other) => Err(Self::wrong_type(key, "f32", other)),
        }
    }

    /// A string value, or `None` if missing.
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Str(v)) => Ok(Some(v)),
            Some(other) => Err(Self::wrong_type(key, "string", other)),
        }
    }

    /// A boolean value, or `None` if missing.
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(v)) => Ok(Some(*v)),
            Some(other) => Err(Self::wrong_type(key, "bool", other)),
        }
    }

    /// An array value of any element type, or `None` if missing.
    pub fn opt_array(&self, key: &str) -> Result<Option<&Array>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(v)) => Ok(Some(v)),
            Some(other) => Err(Self::wrong_type(key, "array", other)),
        }
    }

    /// An integer value of any integer type that fits in `u32`.
    pub fn get_u32(&self, key: &str) -> Result<u32, GgufError> {
        self.require(key)?;
        self.opt_u32(key)?.ok_or_else(|| GgufError::KeyMissing {
            key: key.to_owned(),
        })
    }

    /// An integer value of any integer type that fits in `u64`.
    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        self.require(key)?;
        self.opt_u64(key)?.ok_or_else(|| GgufError::KeyMissing {
            key: key.to_owned(),
        })
    }

    /// An integer value of any integer type that fits in `i32`.
    pub fn get_i32(&self, key: &str) -> Result<i32, GgufError> {
        self.require(key)?;
        self.opt_i32(key)?.ok_or_else(|| GgufError::KeyMissing {
            key: key.to_owned(),
        })
    }

    /// An integer value of any integer type that fits in `i64`.
    pub fn get_i64(&self, key: &str) -> Result<i64, GgufError> {
        self.require(key)?;
        self.opt_i64(key)?.ok_or_else(|| GgufError::KeyMissing {
            key: key.to_owned(),
        })
    }

    /// A float value (`f32`, or `f64` rounded to `f32`).
    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        self.require(key)?;
        self.opt_f32(key)?.ok_or_else(|| GgufError::KeyMissing {
            key: key.to_owned(),
        })
    }

    /// A string value.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        match self.require(key)? {
            Value::Str(v) => Ok(v),
            other => Err(Self::wrong_type(key, "string", other)),
        }
    }

    /// A boolean value.
    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        match self.require(key)? {
            Value::Bool(v) => Ok(*v),
            other => Err(Self::wrong_type(key, "bool", other)),
        }
    }

    /// An array value of any element type.
    pub fn get_array(&self, key: &str) -> Result<&Array, GgufError> {
        match self.require(key)? {
            Value::Array(v) => Ok(v),
            other => Err(Self::wrong_type(key, "array", other)),
        }
    }

    /// An array of strings (e.g. `tokenizer.ggml.tokens`).
    pub fn get_str_array(&self, key: &str) -> Result<&[String], GgufError> {
        let array = self.get_array(key)?;
        array.as_strs().ok_or_else(|| GgufError::KeyType {
            key: key.to_owned(),
            expected: "array of string",
            found: array.type_description(),
        })
    }

    /// An array of `f32` (e.g. `tokenizer.ggml.scores`).
    pub fn get_f32_array(&self, key: &str) -> Result<&[f32], GgufError> {
        let array = self.get_array(key)?;
        array.as_f32s().ok_or_else(|| GgufError::KeyType {
            key: key.to_owned(),
            expected: "array of f32",
            found: array.type_description(),
        })
    }

    /// An array of `i32` (e.g. `tokenizer.ggml.token_type`).
    pub fn get_i32_array(&self, key: &str) -> Result<&[i32], GgufError> {
        let array = self.get_array(key)?;
        array.as_i32s().ok_or_else(|| GgufError::KeyType {
            key: key.to_owned(),
            expected: "array of i32",
            found: array.type_description(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Metadata {
        let mut m = Metadata::new();
        m.insert("u64.small", Value::U64(7)).expect("new key");
        m.insert("u64.big", Value::U64(u64::MAX)).expect("new key");
        m.insert("i32.neg", Value::I32(-3)).expect("new key");
        m.insert("name", Value::from("llama")).expect("new key");
        m.insert("eps", Value::F64(0.5)).expect("new key");
        m.insert("flag", Value::Bool(true)).expect("new key");
        m.insert(
            "tokens",
            Value::Array(Array::Str(vec!["a".into(), "b".into()])),
        )
        .expect("new key");
        m
    }

    #[test]
    fn integer_getters_accept_any_integer_type_that_fits() {
        let m = sample();
        assert_eq!(m.get_u32("u64.small").expect("fits"), 7);
        assert_eq!(m.get_i32("u64.small").expect("fits"), 7);
        assert_eq!(m.get_i64("i32.neg").expect("fits"), -3);
        assert_eq!(m.get_u64("u64.big").expect("fits"), u64::MAX);
    }

    #[test]
    fn integer_out_of_range_names_key_and_value() {
        let m = sample();
        let err = m.get_u32("u64.big").expect_err("does not fit");
        assert!(
            matches!(err, GgufError::KeyOutOfRange { ref key, target: "u32", .. } if key == "u64.big")
        );
        assert!(err.to_string().contains("u64.big"));
        assert!(matches!(
            m.get_u64("i32.neg"),
            Err(GgufError::KeyOutOfRange { value: -3, .. })
        ));
    }

    #[test]
    fn wrong_type_names_key_expected_and_found() {
        let m = sample();
        let err = m.get_u32("name").expect_err("string is not an integer");
        assert_eq!(
            err.to_string(),
            "metadata key \"name\" has type string, expected u32"
        );
        let err = m
            .get_f32_array("tokens")
            .expect_err("strings are not floats");
        assert_eq!(
            err.to_string(),
            "metadata key \"tokens\" has type array of string, expected array of f32"
        );
        assert!(matches!(
            m.get_str("flag"),
            Err(GgufError::KeyType {
                expected: "string",
                ..
            })
        ));
    }

    #[test]
    fn missing_keys() {
        let m = sample();
        assert!(
            matches!(m.get_u32("nope"), Err(GgufError::KeyMissing { ref key }) if key == "nope")
        );
        assert_eq!(m.opt_u32("nope").expect("missing is fine"), None);
        assert_eq!(m.opt_str("nope").expect("missing is fine"), None);
        assert!(m.opt_str("flag").is_err(), "opt_* still checks the type");
    }

    #[test]
    fn typed_getters_return_values() {
        let m = sample();
        assert_eq!(m.get_str("name").expect("string"), "llama");
        assert_eq!(m.get_f32("eps").expect("f64 widens"), 0.5);
        assert!(m.get_bool("flag").expect("bool"));
        assert_eq!(m.get_str_array("tokens").expect("strings"), ["a", "b"]);
        assert_eq!(m.get_array("tokens").expect("array").len(), 2);
    }

    #[test]
    fn keeps_insertion_order_and_rejects_duplicates() {
        let mut m = sample();
        let keys: Vec<&str> = m.iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            [
                "u64.small",
                "u64.big",
                "i32.neg",
                "name",
                "eps",
                "flag",
                "tokens"
            ]
        );
        assert!(matches!(
            m.insert("name", Value::U8(0)),
            Err(GgufError::DuplicateKey { .. })
        ));
    }
}
