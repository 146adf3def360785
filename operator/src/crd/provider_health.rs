//! `ProviderHealth`: one cluster-scoped object per configured provider, showing what its daemon declared in
//! GetInfo and what its Check found, refreshed on a cadence.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

#[derive(CustomResource, KubeSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "egressproxies.dev",
    version = "v1alpha1",
    kind = "ProviderHealth",
    status = "ProviderHealthStatus",
    shortname = "ph",
    category = "egressproxies",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".status.providerType"}"#,
    printcolumn = r#"{"name":"Available","type":"string","jsonPath":".status.conditions[?(@.type==\"Available\")].status"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.version"}"#,
    printcolumn = r#"{"name":"Checked","type":"date","jsonPath":".status.lastCheckTime"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ProviderHealthSpec {
    /// The `type:` of the provider in the operator's config.
    pub provider_type: String,
    /// Where the operator reaches the daemon.
    pub endpoint: String,
}

#[derive(KubeSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProviderHealthStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_minor_version: Option<u32>,
    /// The profile the provider declares on each contract axis (`readiness: provisioning-window`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profiles: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_name_length: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_check_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// One Check target's result.
#[derive(KubeSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CheckEntry {
    pub target: String,
    pub ok: bool,
    pub reason: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub details: BTreeMap<String, String>,
}
