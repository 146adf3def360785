//! The operator's config file (a mounted ConfigMap): the providers by name, the cluster id, and the GC and
//! health cadences. Parsing is strict: an unknown field or a bad value stops start-up with a message naming
//! the field and the value.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use provider_sdk::{
    client::{CallTimeouts, ProviderEndpoint},
    config::{ConfigViolation, Validate},
};
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OperatorConfig {
    /// Marks every instance this operator makes, so clusters sharing a backend account never collect each
    /// other's instances. Lowercase letters, digits and '-'.
    pub cluster_id: String,
    /// Providers by the name Proxies use in `spec.provider`.
    pub providers: BTreeMap<String, ProviderConfig>,
    #[serde(default)]
    pub gc: GcConfig,
    #[serde(default)]
    pub health: HealthConfig,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProviderConfig {
    /// The provider daemon's type (`host`, `aws`, `fake`, ...); must match what it answers in GetInfo.
    #[serde(rename = "type")]
    pub provider_type: String,
    /// `unix:///path` (sidecar) or `https://host:port` (mutual TLS); `http://` only with `insecure: true`.
    pub endpoint: String,
    #[serde(default)]
    pub tls: Option<ClientTlsFiles>,
    #[serde(default)]
    pub insecure: bool,
    #[serde(default)]
    pub timeouts: TimeoutsConfig,
    /// Calls per second to this provider, with bursts up to `burst`.
    #[serde(default)]
    pub rate_limit: RateLimitConfig,
    /// Calls in flight at once.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClientTlsFiles {
    pub ca_file: PathBuf,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    #[serde(default)]
    pub server_name: Option<String>,
}

/// Per-RPC deadlines in seconds (contract §1.5: the operator sets them).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct TimeoutsConfig {
    pub get_info_seconds: u64,
    pub create_seconds: u64,
    pub get_seconds: u64,
    pub delete_seconds: u64,
    pub list_seconds: u64,
    pub check_seconds: u64,
}

impl Default for TimeoutsConfig {
    fn default() -> Self {
        let d = CallTimeouts::default();
        Self {
            get_info_seconds: d.get_info.as_secs(),
            create_seconds: d.create.as_secs(),
            get_seconds: d.get.as_secs(),
            delete_seconds: d.delete.as_secs(),
            list_seconds: d.list.as_secs(),
            check_seconds: d.check.as_secs(),
        }
    }
}

impl TimeoutsConfig {
    pub fn to_call_timeouts(&self) -> CallTimeouts {
        CallTimeouts {
            get_info: Duration::from_secs(self.get_info_seconds),
            create: Duration::from_secs(self.create_seconds),
            get: Duration::from_secs(self.get_seconds),
            delete: Duration::from_secs(self.delete_seconds),
            list: Duration::from_secs(self.list_seconds),
            check: Duration::from_secs(self.check_seconds),
        }
    }

    fn entries(&self) -> [(&'static str, u64); 6] {
        [
            ("getInfoSeconds", self.get_info_seconds),
            ("createSeconds", self.create_seconds),
            ("getSeconds", self.get_seconds),
            ("deleteSeconds", self.delete_seconds),
            ("listSeconds", self.list_seconds),
            ("checkSeconds", self.check_seconds),
        ]
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct RateLimitConfig {
    pub qps: u32,
    pub burst: u32,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self { qps: 50, burst: 100 }
    }
}

fn default_concurrency() -> usize {
    32
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct GcConfig {
    pub interval_seconds: u64,
    /// Instances younger than this are never collected: a Create may not have reached the status yet.
    pub min_age_seconds: u64,
}

impl Default for GcConfig {
    fn default() -> Self {
        Self {
            interval_seconds: 300,
            min_age_seconds: 900,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct HealthConfig {
    pub interval_seconds: u64,
    pub failing_interval_seconds: u64,
}

impl Default for HealthConfig {
    fn default() -> Self {
        Self {
            interval_seconds: 60,
            failing_interval_seconds: 10,
        }
    }
}

fn is_dns_label(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !value.starts_with('-')
        && !value.ends_with('-')
}

impl Validate for OperatorConfig {
    fn validate(&self) -> Vec<ConfigViolation> {
        let mut v = Vec::new();
        if !is_dns_label(&self.cluster_id) {
            v.push(ConfigViolation::new(
                "clusterId",
                &self.cluster_id,
                "must be 1 to 63 lowercase letters, digits or '-'",
            ));
        }
        if self.providers.is_empty() {
            v.push(ConfigViolation::new(
                "providers",
                "{}",
                "must name at least one provider",
            ));
        }
        for (name, provider) in &self.providers {
            let at = |field: &str| format!("providers.{name}.{field}");
            if !is_dns_label(name) {
                v.push(ConfigViolation::new(
                    format!("providers.{name}"),
                    name,
                    "must be a lowercase name (it is spec.provider)",
                ));
            }
            if !is_dns_label(&provider.provider_type) {
                v.push(ConfigViolation::new(
                    at("type"),
                    &provider.provider_type,
                    "must be a lowercase provider type",
                ));
            }
            match provider.endpoint.parse::<ProviderEndpoint>() {
                Err(problem) => v.push(ConfigViolation::new(at("endpoint"), &provider.endpoint, problem)),
                Ok(ProviderEndpoint::Https { .. }) if provider.tls.is_none() => v.push(ConfigViolation::new(
                    at("tls"),
                    "(absent)",
                    "is required for an https:// endpoint",
                )),
                Ok(ProviderEndpoint::Http { .. }) if !provider.insecure => v.push(ConfigViolation::new(
                    at("endpoint"),
                    &provider.endpoint,
                    "is plain TCP: use https:// with tls, or set insecure: true",
                )),
                Ok(_) => {}
            }
            for (field, seconds) in provider.timeouts.entries() {
                if seconds == 0 || seconds > 3600 {
                    v.push(ConfigViolation::new(
                        at(&format!("timeouts.{field}")),
                        seconds,
                        "must be 1 to 3600",
                    ));
                }
            }
            if provider.rate_limit.qps == 0 || provider.rate_limit.burst < provider.rate_limit.qps.min(1) {
                v.push(ConfigViolation::new(
                    at("rateLimit.qps"),
                    provider.rate_limit.qps,
                    "must be at least 1",
                ));
            }
            if provider.rate_limit.burst == 0 {
                v.push(ConfigViolation::new(
                    at("rateLimit.burst"),
                    provider.rate_limit.burst,
                    "must be at least 1",
                ));
            }
            if provider.concurrency == 0 {
                v.push(ConfigViolation::new(at("concurrency"), 0, "must be at least 1"));
            }
        }
        if self.gc.interval_seconds < 10 {
            v.push(ConfigViolation::new(
                "gc.intervalSeconds",
                self.gc.interval_seconds,
                "must be at least 10",
            ));
        }
        if self.gc.min_age_seconds < 60 {
            v.push(ConfigViolation::new(
                "gc.minAgeSeconds",
                self.gc.min_age_seconds,
                "must be at least 60",
            ));
        }
        if self.health.interval_seconds == 0 || self.health.failing_interval_seconds == 0 {
            v.push(ConfigViolation::new(
                "health",
                (self.health.interval_seconds, self.health.failing_interval_seconds),
                "intervals must be at least 1 second",
            ));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use provider_sdk::config::parse;

    use super::*;

    const GOOD: &str = "
clusterId: prod-eu-1
providers:
  host:
    type: host
    endpoint: unix:///run/egress/host.sock
";

    #[test]
    fn a_minimal_config_takes_the_defaults() {
        let config: OperatorConfig = parse("operator.yaml", GOOD).unwrap();
        let host = &config.providers["host"];
        assert_eq!(host.concurrency, 32);
        assert_eq!(host.timeouts.to_call_timeouts().create, Duration::from_secs(60));
        assert_eq!(config.gc.min_age_seconds, 900);
    }

    #[test]
    fn bad_values_are_named_with_their_field_and_value() {
        let text = "
clusterId: Prod
providers:
  aws:
    type: aws
    endpoint: https://aws-provider:8443
    timeouts: {createSeconds: 0}
";
        let error = parse::<OperatorConfig>("operator.yaml", text).unwrap_err().to_string();
        assert!(error.contains("clusterId: \"Prod\""), "{error}");
        assert!(error.contains("providers.aws.tls"), "{error}");
        assert!(error.contains("providers.aws.timeouts.createSeconds: 0"), "{error}");
    }

    #[test]
    fn plain_tcp_needs_the_insecure_flag() {
        let text = "clusterId: c\nproviders:\n  f:\n    type: fake\n    endpoint: http://127.0.0.1:9000\n";
        let error = parse::<OperatorConfig>("operator.yaml", text).unwrap_err().to_string();
        assert!(error.contains("insecure: true"), "{error}");
        let text = format!("{text}    insecure: true\n");
        assert!(parse::<OperatorConfig>("operator.yaml", &text).is_ok());
    }

    #[test]
    fn unknown_fields_are_refused() {
        let text = format!("{GOOD}    concurency: 3\n");
        let error = parse::<OperatorConfig>("operator.yaml", &text).unwrap_err().to_string();
        assert!(error.contains("concurency"), "{error}");
    }
}
