//! The contract's domain types. Provider code and the operator speak these; the generated proto types stay
//! behind the conversions in `convert`, where every incoming value is validated once.

use std::{
    collections::BTreeMap,
    fmt,
    net::Ipv4Addr,
    time::{Duration, SystemTime},
};

use ipnet::IpNet;
use secrecy::{ExposeSecret, SecretBox, SecretString};
use sha2::{Digest, Sha256};

pub use crate::profiles::*;

/// Default for `Limits::max_name_length`: a DNS label, which every backend we know accepts.
pub const DEFAULT_MAX_NAME_LENGTH: u32 = 63;

/// An instance name chosen by the operator: lowercase letters, digits and '-', starting with a letter and
/// not ending with '-'. Validated on the way in, so providers may paste it into backend identifiers.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceName(String);

impl InstanceName {
    /// Checks the shape and the length against `max_len`; the error says what is wrong, never echoing more
    /// than the value itself.
    pub fn parse(value: &str, max_len: u32) -> Result<Self, String> {
        crate::validate::instance_name(value, max_len).map(|()| Self(value.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InstanceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `"<provider_type>://<provider-specific part>"` (contract §6). The SDK checks the prefix; the provider
/// parses the rest strictly and answers a permanent error when it is malformed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProviderId(String);

impl ProviderId {
    /// Builds the ID a provider hands out for one of its instances.
    pub fn new(provider_type: &str, rest: &str) -> Self {
        Self(format!("{provider_type}://{rest}"))
    }

    /// Accepts any `<type>://<rest>` with a non-empty rest; used where the type is not known (the client).
    pub fn parse_any(value: &str) -> Result<Self, String> {
        crate::validate::provider_id(value, None).map(|()| Self(value.to_owned()))
    }

    /// Accepts only IDs of `provider_type`.
    pub fn parse_for(value: &str, provider_type: &str) -> Result<Self, String> {
        crate::validate::provider_id(value, Some(provider_type)).map(|()| Self(value.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The provider-specific part after `://`.
    pub fn rest(&self) -> &str {
        self.0.split_once("://").map_or("", |(_, rest)| rest)
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where an instance runs (contract §2.1). Empty strings mean "not given".
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Placement {
    pub region: String,
    pub zone: String,
    pub machine_type: String,
    pub image: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    Http,
    Socks5,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Socks5 => "socks5",
        }
    }
}

/// Proxy credentials. The password is a secret: its `Debug` prints `[REDACTED]`.
#[derive(Clone, Debug)]
pub struct ProxyAuth {
    pub username: String,
    pub password: SecretString,
}

/// The proxy an instance runs, in structured form (contract §2.3).
#[derive(Clone, Debug)]
pub struct ProxySettings {
    pub port: u16,
    pub protocol: Protocol,
    pub auth: ProxyAuth,
    pub allowed_source_ranges: Vec<IpNet>,
}

/// Cloud-init bytes, delivered byte for byte; `Debug` never shows them.
pub type CloudInit = SecretBox<[u8]>;

/// A validated Create request.
#[derive(Debug)]
pub struct CreateRequest {
    pub name: InstanceName,
    pub proxy_uid: String,
    pub cluster_id: String,
    pub placement: Placement,
    pub proxy: ProxySettings,
    pub cloud_init: Option<CloudInit>,
}

impl Clone for CreateRequest {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            proxy_uid: self.proxy_uid.clone(),
            cluster_id: self.cluster_id.clone(),
            placement: self.placement.clone(),
            proxy: self.proxy.clone(),
            cloud_init: self
                .cloud_init
                .as_ref()
                .map(|bytes| SecretBox::new(bytes.expose_secret().into())),
        }
    }
}

impl CreateRequest {
    /// A digest of everything but the name and the sensitive fields (contract §2.3). Providers store it with
    /// the instance to tell "the same Create again" from "the same name with another spec"; leaving the
    /// sensitive fields out means no password or cloud-init digest is ever written to a backend.
    pub fn spec_fingerprint(&self) -> String {
        let mut hash = Sha256::new();
        let mut field = |value: &str| {
            hash.update((value.len() as u64).to_be_bytes());
            hash.update(value.as_bytes());
        };
        field(&self.proxy_uid);
        field(&self.cluster_id);
        field(&self.placement.region);
        field(&self.placement.zone);
        field(&self.placement.machine_type);
        field(&self.placement.image);
        field(&self.proxy.port.to_string());
        field(self.proxy.protocol.as_str());
        field(&self.proxy.auth.username);
        for range in &self.proxy.allowed_source_ranges {
            field(&range.to_string());
        }
        let digest = hash.finalize();
        digest[..12].iter().map(|byte| format!("{byte:02x}")).collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InstanceState {
    Provisioning,
    /// Serving; the instance has a routable IPv4.
    Running,
    /// Started once and not serving, or in a backend state the provider does not know.
    Stopped,
    Terminated,
}

/// The logical tags every managed instance carries (contract §2.4).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Marks {
    pub managed: bool,
    pub proxy_uid: String,
    pub cluster_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub provider_id: ProviderId,
    pub name: String,
    pub state: InstanceState,
    pub ipv4: Option<Ipv4Addr>,
    pub created_at: SystemTime,
    pub marks: Marks,
}

/// What ListByTag selects: managed instances of one cluster, optionally of one Proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListFilter {
    pub cluster_id: String,
    pub proxy_uid: Option<String>,
}

impl ListFilter {
    pub fn matches(&self, marks: &Marks) -> bool {
        marks.managed
            && marks.cluster_id == self.cluster_id
            && self.proxy_uid.as_ref().is_none_or(|uid| *uid == marks.proxy_uid)
    }
}

/// One Check target's result (contract §2.7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckResult {
    pub target: String,
    pub ok: bool,
    pub reason: String,
    pub message: String,
    pub details: BTreeMap<String, String>,
}

impl CheckResult {
    pub fn ok(target: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            target: target.into(),
            ok: true,
            reason: crate::check::REASON_OK.to_owned(),
            message: message.into(),
            details: BTreeMap::new(),
        }
    }

    pub fn failed(target: impl Into<String>, reason: &str, message: impl Into<String>) -> Self {
        Self {
            target: target.into(),
            ok: false,
            reason: reason.to_owned(),
            message: message.into(),
            details: BTreeMap::new(),
        }
    }

    pub fn with_detail(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.details.insert(key.into(), value.into());
        self
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_name_length: u32,
    pub max_cloud_init_bytes: u32,
}

/// What GetInfo answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderInfo {
    pub provider_type: String,
    pub version: String,
    pub contract_minor_version: u32,
    pub profiles: Profiles,
    pub limits: Limits,
}

/// How long to wait before retrying, when the backend says.
pub type RetryAfter = Option<Duration>;

/// True for an address that can be reported with `Running` (contract §5): not unspecified, broadcast,
/// multicast or link-local. Loopback is allowed because local pools use it.
pub fn is_routable(ip: Ipv4Addr) -> bool {
    !(ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() || ip.is_link_local())
}
