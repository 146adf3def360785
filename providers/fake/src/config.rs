//! The fake's config block: how slow and how big the pretend backend is.

use std::time::Duration;

use provider_sdk::{
    config::{ConfigViolation, Validate},
    testing::FakeOptions,
};
use serde::Deserialize;

/// Longest provisioning window or latency accepted: anything longer is a typo in a test set-up.
const MAX_DELAY_MS: u64 = 10 * 60 * 1000;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FakeConfig {
    /// Milliseconds from Create until the instance is Running.
    #[serde(default)]
    pub provisioning_ms: u64,
    /// Milliseconds added to every call.
    #[serde(default)]
    pub latency_ms: u64,
    /// Most instances at once; Create beyond it is a quota error.
    #[serde(default)]
    pub capacity: Option<usize>,
}

impl FakeConfig {
    pub fn options(&self) -> FakeOptions {
        let defaults = FakeOptions::default();
        FakeOptions {
            provisioning: Duration::from_millis(self.provisioning_ms),
            latency: Duration::from_millis(self.latency_ms),
            capacity: self.capacity.unwrap_or(defaults.capacity),
        }
    }
}

impl Validate for FakeConfig {
    fn validate(&self) -> Vec<ConfigViolation> {
        let mut violations = Vec::new();
        for (field, value) in [("provisioningMs", self.provisioning_ms), ("latencyMs", self.latency_ms)] {
            if value > MAX_DELAY_MS {
                violations.push(ConfigViolation::new(
                    field,
                    value,
                    format!("must be at most {MAX_DELAY_MS}"),
                ));
            }
        }
        if self.capacity == Some(0) {
            violations.push(ConfigViolation::new("capacity", 0, "must be at least 1"));
        }
        violations
    }
}

#[cfg(test)]
mod tests {
    use provider_sdk::config::parse;

    use super::*;

    #[test]
    fn an_empty_config_means_an_instant_backend() {
        let config: FakeConfig = parse("fake.yaml", "").unwrap();
        assert_eq!(config.options().provisioning, Duration::ZERO);
    }

    #[test]
    fn bad_values_are_named_with_their_field() {
        let error = parse::<FakeConfig>("fake.yaml", "capacity: 0\nlatencyMs: 99999999\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("capacity: 0 must be at least 1"), "{error}");
        assert!(error.contains("latencyMs: 99999999"), "{error}");
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(parse::<FakeConfig>("fake.yaml", "provisioning: 5\n").is_err());
    }
}
