//! A secret setting: never printed (Debug and Serialize show `***`), and `file:/path`
//! reads the value from a file once at start-up (trailing newline removed).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
    /// The value itself; use only where the secret is needed (a comparison, a header).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("***")
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Any scalar is accepted: an environment variable `...PASSWORD=1234` arrives as a number.
        let v = serde_yaml::Value::deserialize(d)?;
        let s = match v {
            serde_yaml::Value::String(s) => s,
            serde_yaml::Value::Number(n) => n.to_string(),
            serde_yaml::Value::Bool(b) => b.to_string(),
            _ => return Err(serde::de::Error::custom("expected a string")),
        };
        match s.strip_prefix("file:") {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    serde::de::Error::custom(format!("cannot read the secret file {path}: {e}"))
                })?;
                Ok(Secret(
                    text.strip_suffix('\n')
                        .map(|t| t.strip_suffix('\r').unwrap_or(t))
                        .unwrap_or(&text)
                        .to_string(),
                ))
            }
            None => Ok(Secret(s)),
        }
    }
}

/// A map of plain values printed as [`Secret`]s are: every value `***` (a broker
/// destination's static `headers:`).
pub(crate) fn masked_values<S: Serializer>(
    map: &std::collections::BTreeMap<String, String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(map.len()))?;
    for k in map.keys() {
        m.serialize_entry(k, "***")?;
    }
    m.end()
}
