//! The operator's `--sources FILE`: the only sources an agent may scan, by name.
//!
//! The file is a JSON object, `{"NAME": "SPEC", ...}`, each SPEC a `--source` argument
//! (`http:cfg.json`, `replay:pages.jsonl`, `sim:records=1000`, ...). A relative path in a
//! SPEC is taken from the file's directory and made absolute when the file is read, so the
//! server reads exactly the files the operator named, wherever it runs. An agent names a
//! source only by NAME: no tool argument is ever a path, a URL or a command.

use std::path::Path;

use serde_json::Value;

use crate::error::SourceError;
use crate::json::{self, ConfigError, Numbers};

/// Sources one catalog may declare.
pub const CATALOG_SOURCES_MAX: usize = 1024;
/// Bytes of a source name.
const NAME_LEN_MAX: usize = 128;
/// Bytes of the catalog file.
const CATALOG_BYTES_MAX: u64 = 1024 * 1024;

/// The declared sources, by name, in the file's order.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    entries: Vec<(String, String)>,
}

impl Catalog {
    /// Reads a catalog file.
    ///
    /// # Errors
    /// `SourceError::File` or `SourceError::Config` naming the entry at fault.
    pub fn read(path: &Path) -> Result<Catalog, SourceError> {
        let text = crate::io_bound::read_text(path, CATALOG_BYTES_MAX)?;
        let at = |error: ConfigError| SourceError::ConfigFile {
            path: path.to_owned(),
            error: error.placed(&text),
        };
        let value = json::parse(&text, Numbers::Any).map_err(|e| at(e.into()))?;
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        let base = std::fs::canonicalize(base).unwrap_or_else(|_| base.to_owned());
        Catalog::resolve(&value, &base).map_err(at)
    }

    fn resolve(value: &Value, base: &Path) -> Result<Catalog, ConfigError> {
        let Value::Object(obj) = value else {
            return Err(ConfigError::invalid(
                "",
                "the sources file must be a JSON object of NAME: SPEC strings",
            ));
        };
        if obj.len() > CATALOG_SOURCES_MAX {
            return Err(ConfigError::invalid(
                "",
                format!("more than {CATALOG_SOURCES_MAX} sources"),
            ));
        }
        let mut entries = Vec::with_capacity(obj.len());
        for (name, spec) in obj {
            if name.is_empty() || name.len() > NAME_LEN_MAX || name.chars().any(char::is_control) {
                return Err(ConfigError::invalid(
                    name,
                    format!("a source name is 1 to {NAME_LEN_MAX} bytes, no control characters"),
                ));
            }
            let Value::String(spec) = spec else {
                return Err(ConfigError::invalid(
                    name,
                    "the spec must be a string (a --source argument)",
                ));
            };
            entries.push((name.clone(), absolute(spec, base)));
        }
        Ok(Catalog { entries })
    }

    /// A catalog from pairs (specs taken as given).
    #[must_use]
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Catalog {
        Catalog {
            entries: pairs.into_iter().collect(),
        }
    }

    /// The spec of a declared name.
    #[must_use]
    pub fn spec(&self, name: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.as_str())
    }

    /// The declared names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// The name whose spec is `spec` (a recorded spec's provenance ignored), if declared.
    #[must_use]
    pub fn name_of(&self, spec: &str) -> Option<&str> {
        let bare = spec
            .rfind(crate::source::PROVENANCE_MARK)
            .map_or(spec, |i| &spec[..i]);
        self.entries
            .iter()
            .find(|(_, s)| s == bare)
            .map(|(n, _)| n.as_str())
    }
}

/// `spec` with a relative file path made absolute from `base`.
fn absolute(spec: &str, base: &Path) -> String {
    if let Some((_, rest)) = crate::source::spec_file(spec) {
        let p = Path::new(rest);
        if p.is_relative() {
            let joined = base.join(p);
            let full = std::fs::canonicalize(&joined).unwrap_or(joined);
            return crate::source::spec_with_file(spec, &full);
        }
    }
    spec.to_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    #[test]
    fn relative_paths_are_taken_from_the_file_and_names_are_all_an_agent_gives() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.jsonl"), "").unwrap();
        let file = dir.path().join("sources.json");
        std::fs::write(
            &file,
            r#"{"a": "replay:p.jsonl", "b": "sim:records=3", "c": "http:/abs/cfg.json"}"#,
        )
        .unwrap();
        let c = Catalog::read(&file).unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(
            c.spec("a"),
            Some(format!("replay:{}", base.join("p.jsonl").display()).as_str())
        );
        assert_eq!(
            (c.spec("b"), c.spec("c"), c.spec("replay:p.jsonl")),
            (Some("sim:records=3"), Some("http:/abs/cfg.json"), None)
        );
        assert_eq!(c.names().collect::<Vec<_>>(), ["a", "b", "c"]);
        // A recorded spec with its provenance is still the declared one.
        assert_eq!(c.name_of("http:/abs/cfg.json#server=x 1"), Some("c"));
        assert_eq!(c.name_of("http:/other.json"), None);
        for (text, words) in [
            ("[]", "JSON object"),
            (r#"{"a": 1}"#, "must be a string"),
            (r#"{"": "sim:"}"#, "a source name is 1 to"),
        ] {
            std::fs::write(&file, text).unwrap();
            let e = Catalog::read(&file).unwrap_err().to_string();
            assert!(e.contains(words), "{text}: {e}");
        }
    }
}
