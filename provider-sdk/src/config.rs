//! Strict YAML config loading (contract §10): unknown fields are refused, and every error names the file,
//! the field path and the offending value, so a daemon can stop with one clear line (exit code 64).

use std::{fmt, path::Path};

use serde::de::DeserializeOwned;

/// One invalid value: `field` is a path such as `pool[2]` or `regions.eu-west-1.ami`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigViolation {
    pub field: String,
    pub value: String,
    pub problem: String,
}

impl ConfigViolation {
    pub fn new(field: impl Into<String>, value: impl fmt::Debug, problem: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            value: format!("{value:?}"),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for ConfigViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} {}", self.field, self.value, self.problem)
    }
}

/// Checks that serde's types cannot express (ranges, shapes, cross-field rules).
pub trait Validate {
    fn validate(&self) -> Vec<ConfigViolation>;
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("config {path}: {message}")]
    Parse { path: String, message: String },
    #[error("config {path}: {}", violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid {
        path: String,
        violations: Vec<ConfigViolation>,
    },
}

/// Reads, parses and validates `path`; `None` parses an empty document, so required fields are still named.
pub fn load<T: DeserializeOwned + Validate>(path: Option<&Path>) -> Result<T, ConfigError> {
    let (name, text) = match path {
        Some(path) => {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: name.clone(),
                source,
            })?;
            (name, text)
        }
        None => ("(none given)".to_owned(), String::new()),
    };
    parse(&name, &text)
}

/// Parses and validates YAML text; `name` labels errors.
pub fn parse<T: DeserializeOwned + Validate>(name: &str, text: &str) -> Result<T, ConfigError> {
    let text = if text.trim().is_empty() { "{}" } else { text };
    let config: T = serde_saphyr::from_str(text).map_err(|error| ConfigError::Parse {
        path: name.to_owned(),
        message: error.to_string(),
    })?;
    let violations = config.validate();
    if violations.is_empty() {
        Ok(config)
    } else {
        Err(ConfigError::Invalid {
            path: name.to_owned(),
            violations,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Sample {
        pool: Vec<String>,
        #[serde(default)]
        #[allow(dead_code)]
        max_instances: u32,
    }

    impl Validate for Sample {
        fn validate(&self) -> Vec<ConfigViolation> {
            self.pool
                .iter()
                .enumerate()
                .filter(|(_, cidr)| cidr.parse::<ipnet::IpNet>().is_err())
                .map(|(i, cidr)| ConfigViolation::new(format!("pool[{i}]"), cidr, "is not a CIDR"))
                .collect()
        }
    }

    #[test]
    fn unknown_fields_are_refused_by_name() {
        let error = parse::<Sample>("p.yaml", "pool: []\nmaxInstance: 3\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("p.yaml") && error.contains("maxInstance"), "{error}");
    }

    #[test]
    fn invalid_values_name_the_field_and_the_value() {
        let error = parse::<Sample>("p.yaml", "pool: [10.0.0.0/8, 10.0.0.0/33]\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("pool[1]: \"10.0.0.0/33\" is not a CIDR"), "{error}");
    }

    #[test]
    fn a_missing_file_still_names_required_fields() {
        let error = load::<Sample>(None).unwrap_err().to_string();
        assert!(error.contains("pool"), "{error}");
    }

    #[test]
    fn a_wrong_type_names_the_field() {
        let error = parse::<Sample>("p.yaml", "pool: []\nmaxInstances: lots\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("maxInstances") || error.contains("lots"), "{error}");
    }
}
