//! `--params FILE`: what a provider needs to accept a Create (placement keys from its catalogue, a port it
//! can serve) and the few IDs the suite cannot derive on its own.

use std::time::Duration;

use provider_sdk::config::{ConfigViolation, Validate};
use serde::Deserialize;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PlacementParams {
    #[serde(default)]
    pub region: String,
    #[serde(default)]
    pub zone: String,
    #[serde(default)]
    pub machine_type: String,
    #[serde(default)]
    pub image: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Params {
    /// Placement of every instance the suite creates.
    #[serde(default)]
    pub placement: PlacementParams,
    /// The proxy port; a second, different port is derived for the "other spec" check.
    #[serde(default = "default_port")]
    pub port: u16,
    /// CIDRs allowed to reach the proxy.
    #[serde(default = "default_ranges")]
    pub allowed_source_ranges: Vec<String>,
    /// How long an instance may take to reach Running.
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout_seconds: u64,
    /// A well-formed ID of an instance that does not exist, for providers whose IDs do not embed the name.
    #[serde(default)]
    pub unknown_provider_id: Option<String>,
    /// Extra IDs that must be refused as malformed, beyond the suite's own list.
    #[serde(default)]
    pub malformed_provider_ids: Vec<String>,
    /// Cluster id prefix of the suite's instances; a random suffix keeps runs apart.
    #[serde(default = "default_cluster_prefix")]
    pub cluster_id_prefix: String,
}

fn default_port() -> u16 {
    3128
}

fn default_ranges() -> Vec<String> {
    vec!["127.0.0.0/8".to_owned()]
}

fn default_ready_timeout() -> u64 {
    120
}

fn default_cluster_prefix() -> String {
    "conformance".to_owned()
}

impl Default for Params {
    fn default() -> Self {
        Self {
            placement: PlacementParams::default(),
            port: default_port(),
            allowed_source_ranges: default_ranges(),
            ready_timeout_seconds: default_ready_timeout(),
            unknown_provider_id: None,
            malformed_provider_ids: Vec::new(),
            cluster_id_prefix: default_cluster_prefix(),
        }
    }
}

impl Params {
    pub fn ready_timeout(&self) -> Duration {
        Duration::from_secs(self.ready_timeout_seconds)
    }
}

impl Validate for Params {
    fn validate(&self) -> Vec<ConfigViolation> {
        let mut violations = Vec::new();
        if self.port == 0 || self.port == u16::MAX {
            violations.push(ConfigViolation::new("port", self.port, "must be 1 to 65534"));
        }
        if self.cluster_id_prefix.is_empty() || self.cluster_id_prefix.len() > 40 {
            violations.push(ConfigViolation::new(
                "clusterIdPrefix",
                &self.cluster_id_prefix,
                "must be 1 to 40 characters",
            ));
        }
        if self.ready_timeout_seconds == 0 {
            violations.push(ConfigViolation::new("readyTimeoutSeconds", 0, "must be at least 1"));
        }
        violations
    }
}
