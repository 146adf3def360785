//! `Proxy`: one egress proxy instance on a configured provider. The schema refuses bad input at apply time
//! with messages that name the field (OpenAPI bounds, enums and CEL rules).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The default proxy port: Squid's and tinyproxy's customary 3128.
pub const DEFAULT_PORT: i32 = 3128;

#[derive(CustomResource, KubeSchema, Clone, Debug, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "egressproxies.dev",
    version = "v1alpha1",
    kind = "Proxy",
    namespaced,
    status = "ProxyStatus",
    shortname = "px",
    category = "egressproxies",
    printcolumn = r#"{"name":"Provider","type":"string","jsonPath":".spec.provider"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"IP","type":"string","jsonPath":".status.ip"}"#,
    printcolumn = r#"{"name":"Endpoint","type":"string","jsonPath":".status.endpoint"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ProxySpec {
    /// The name of a provider configured in the operator (for example `host`, `aws-eu`).
    #[schemars(length(min = 1, max = 63))]
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')").message("provider must be a lowercase name such as aws-eu"))]
    pub provider: String,

    /// Where the instance runs; each provider documents which fields it uses.
    #[serde(default)]
    pub placement: Placement,

    /// The port the proxy listens on.
    #[serde(default = "default_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,

    /// `http` (HTTP CONNECT proxy) or `socks5`.
    #[serde(default)]
    pub protocol: ProxyProtocol,

    /// A Secret with `username` and `password` keys. When absent the operator generates credentials: an
    /// open proxy is never made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSecretRef>,

    /// Source CIDRs allowed to use the proxy, enforced by the provider's firewall where it has one and by
    /// the proxy's ACL. Empty allows every source (credentials are still required).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 43)))]
    #[x_kube(validation = Rule::new("self.all(r, isCIDR(r) && cidr(r) == cidr(r).masked())").message("allowedSourceRanges entries must be CIDRs without host bits, such as 10.0.0.0/8"))]
    pub allowed_source_ranges: Vec<String>,

    /// A custom cloud-init document, from a Secret because it may hold credentials. When absent the
    /// operator renders one that installs the proxy from the image's packages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init: Option<SecretKeyRef>,
}

fn default_port() -> i32 {
    DEFAULT_PORT
}

/// Provider-specific placement. Unknown values are refused by the provider, naming the field.
#[derive(KubeSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 255))]
    pub region: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 255))]
    pub zone: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 255))]
    pub machine_type: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 255))]
    pub image: String,
}

#[derive(JsonSchema, Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum ProxyProtocol {
    #[default]
    Http,
    Socks5,
}

impl ProxyProtocol {
    pub fn scheme(self) -> &'static str {
        match self {
            ProxyProtocol::Http => "http",
            ProxyProtocol::Socks5 => "socks5",
        }
    }
}

#[derive(KubeSchema, Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AuthSecretRef {
    /// A Secret in the Proxy's namespace with keys `username` and `password`.
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
}

#[derive(KubeSchema, Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// A Secret in the Proxy's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
    /// The key holding the document.
    #[serde(default = "default_cloud_init_key")]
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

fn default_cloud_init_key() -> String {
    "user-data".to_owned()
}

/// Where a Proxy is in its life.
#[derive(JsonSchema, Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, Hash)]
pub enum ProxyPhase {
    /// Accepted, no instance yet.
    #[default]
    Pending,
    /// The instance is being made or is starting.
    Provisioning,
    /// The instance serves on its endpoint.
    Running,
    /// A replacement for a changed spec is starting; the old instance still serves.
    Replacing,
    /// The Proxy is being deleted; waiting for the backend to confirm.
    Deleting,
    /// A permanent or quota error stops progress until the spec changes; see the conditions.
    Failed,
}

impl ProxyPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            ProxyPhase::Pending => "Pending",
            ProxyPhase::Provisioning => "Provisioning",
            ProxyPhase::Running => "Running",
            ProxyPhase::Replacing => "Replacing",
            ProxyPhase::Deleting => "Deleting",
            ProxyPhase::Failed => "Failed",
        }
    }
}

/// An instance the operator made or is making for this Proxy.
#[derive(KubeSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct InstanceRef {
    /// The deterministic name, written before Create so a retry after a crash finds the same instance.
    pub name: String,
    /// The spec hash the instance was made from.
    pub spec_hash: String,
    /// Set once Create answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
}

/// The class and reason of the last provider error, for `kubectl get -o yaml` and alerts.
#[derive(KubeSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LastError {
    /// `not-found`, `transient`, `permanent` or `quota`.
    pub class: String,
    pub reason: String,
    pub message: String,
    pub time: Option<Time>,
}

#[derive(KubeSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProxyStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ProxyPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The serving instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<InstanceRef>,
    /// A replacement being made for a changed spec (make before break).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<InstanceRef>,
    /// Old instances waiting for deletion after a replacement.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retiring: Vec<InstanceRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// `<protocol>://<ip>:<port>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The hash of the spec the serving instance was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_hash: Option<String>,
    /// When the backend made the serving instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastError>,
    /// The Secret with `url`, `username` and `password` for consumers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// The Service that points at the instance: `<service>.<namespace>.svc:<port>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
