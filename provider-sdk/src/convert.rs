//! Conversions between the generated proto types and the domain types. Incoming requests are validated here,
//! once, with every violation named by its proto field path; outgoing answers are checked on the client so a
//! misbehaving provider cannot hand the operator a half-formed instance.

use std::time::SystemTime;

use secrecy::{ExposeSecret, SecretBox, SecretString};

use crate::{
    error::{FieldViolation, PermanentKind, ProviderError},
    model::{
        CheckResult, CreateRequest, Instance, InstanceName, InstanceState, Limits, ListFilter, Marks, Placement,
        Protocol, ProviderId, ProviderInfo, ProxyAuth, ProxySettings,
    },
    proto, validate,
};

/// Collects field violations so one answer names every bad field.
#[derive(Default)]
struct Violations(Vec<FieldViolation>);

impl Violations {
    fn check<T>(&mut self, field: &str, result: Result<T, String>) -> Option<T> {
        result
            .map_err(|description| {
                self.0.push(FieldViolation {
                    field: field.to_owned(),
                    description,
                })
            })
            .ok()
    }

    fn finish(self) -> Result<(), ProviderError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ProviderError::invalid_fields(self.0))
        }
    }
}

impl CreateRequest {
    /// Validates a wire request against the contract and this provider's limits.
    pub fn from_wire(wire: proto::CreateRequest, limits: &Limits) -> Result<Self, ProviderError> {
        let mut v = Violations::default();
        let name = v.check("name", InstanceName::parse(&wire.name, limits.max_name_length));
        v.check("proxy_uid", validate::proxy_uid(&wire.proxy_uid));
        v.check("cluster_id", validate::cluster_id(&wire.cluster_id));

        let placement = wire.placement.unwrap_or_default();
        v.check("placement.region", validate::placement_field(&placement.region));
        v.check("placement.zone", validate::placement_field(&placement.zone));
        v.check(
            "placement.machine_type",
            validate::placement_field(&placement.machine_type),
        );
        v.check("placement.image", validate::placement_field(&placement.image));

        let proxy = v.check("proxy", wire.proxy.ok_or_else(|| "is required".to_owned()));
        let proxy = proxy.and_then(|proxy| proxy_settings(proxy, &mut v));

        let cloud_init = if wire.cloud_init.is_empty() {
            None
        } else {
            let max = limits.max_cloud_init_bytes as usize;
            let size = wire.cloud_init.len();
            let checked = match max {
                0 => Err("is not delivered by this provider; leave it empty".to_owned()),
                _ if size > max => Err(format!("must be at most {max} bytes, got {size}")),
                _ => Ok(SecretBox::new(wire.cloud_init.into_boxed_slice())),
            };
            v.check("cloud_init", checked)
        };

        v.finish()?;
        let (Some(name), Some(proxy)) = (name, proxy) else {
            unreachable!("a missing value always records a violation");
        };
        Ok(CreateRequest {
            name,
            proxy_uid: wire.proxy_uid,
            cluster_id: wire.cluster_id,
            placement: Placement {
                region: placement.region,
                zone: placement.zone,
                machine_type: placement.machine_type,
                image: placement.image,
            },
            proxy,
            cloud_init,
        })
    }
}

fn proxy_settings(wire: proto::ProxySettings, v: &mut Violations) -> Option<ProxySettings> {
    let port = v.check("proxy.port", validate::port(wire.port));
    let protocol = v.check(
        "proxy.protocol",
        match proto::Protocol::try_from(wire.protocol) {
            Ok(proto::Protocol::Http) => Ok(Protocol::Http),
            Ok(proto::Protocol::Socks5) => Ok(Protocol::Socks5),
            Ok(proto::Protocol::Unspecified) => Err("must be HTTP or SOCKS5, got PROTOCOL_UNSPECIFIED".into()),
            Err(_) => Err(format!("must be HTTP or SOCKS5, got unknown value {}", wire.protocol)),
        },
    );
    let auth = v.check(
        "proxy.auth",
        wire.auth
            .ok_or_else(|| "is required: an open proxy is never made".to_owned()),
    );
    let auth = auth.and_then(|auth| {
        let username = v.check("proxy.auth.username", validate::username(&auth.username));
        let password = v.check("proxy.auth.password", validate::password(&auth.password));
        username.and(password).map(|()| ProxyAuth {
            username: auth.username,
            password: SecretString::from(auth.password),
        })
    });
    let ranges: Vec<_> = wire
        .allowed_source_ranges
        .iter()
        .enumerate()
        .filter_map(|(i, range)| v.check(&format!("proxy.allowed_source_ranges[{i}]"), validate::cidr(range)))
        .collect();
    Some(ProxySettings {
        port: port?,
        protocol: protocol?,
        auth: auth?,
        allowed_source_ranges: ranges,
    })
}

impl From<&CreateRequest> for proto::CreateRequest {
    fn from(request: &CreateRequest) -> Self {
        proto::CreateRequest {
            name: request.name.as_str().to_owned(),
            proxy_uid: request.proxy_uid.clone(),
            cluster_id: request.cluster_id.clone(),
            placement: Some(proto::Placement {
                region: request.placement.region.clone(),
                zone: request.placement.zone.clone(),
                machine_type: request.placement.machine_type.clone(),
                image: request.placement.image.clone(),
            }),
            proxy: Some(proto::ProxySettings {
                port: u32::from(request.proxy.port),
                protocol: match request.proxy.protocol {
                    Protocol::Http => proto::Protocol::Http,
                    Protocol::Socks5 => proto::Protocol::Socks5,
                } as i32,
                auth: Some(proto::ProxyAuth {
                    username: request.proxy.auth.username.clone(),
                    password: request.proxy.auth.password.expose_secret().to_owned(),
                }),
                allowed_source_ranges: request
                    .proxy
                    .allowed_source_ranges
                    .iter()
                    .map(|r| r.to_string())
                    .collect(),
            }),
            cloud_init: request
                .cloud_init
                .as_ref()
                .map(|c| c.expose_secret().to_vec())
                .unwrap_or_default(),
        }
    }
}

/// Parses the provider ID of a Get or Delete on the server: the SDK checks the type prefix, the provider
/// the rest.
pub fn provider_id_from_wire(value: &str, provider_type: &str) -> Result<ProviderId, ProviderError> {
    ProviderId::parse_for(value, provider_type).map_err(ProviderError::malformed_provider_id)
}

impl ListFilter {
    pub fn from_wire(wire: proto::ListByTagRequest) -> Result<Self, ProviderError> {
        let mut v = Violations::default();
        v.check("cluster_id", validate::cluster_id(&wire.cluster_id));
        if !wire.proxy_uid.is_empty() {
            v.check("proxy_uid", validate::proxy_uid(&wire.proxy_uid));
        }
        v.finish()?;
        Ok(ListFilter {
            cluster_id: wire.cluster_id,
            proxy_uid: Some(wire.proxy_uid).filter(|uid| !uid.is_empty()),
        })
    }
}

impl From<&ListFilter> for proto::ListByTagRequest {
    fn from(filter: &ListFilter) -> Self {
        proto::ListByTagRequest {
            cluster_id: filter.cluster_id.clone(),
            proxy_uid: filter.proxy_uid.clone().unwrap_or_default(),
        }
    }
}

fn state_to_wire(state: InstanceState) -> proto::InstanceState {
    match state {
        InstanceState::Provisioning => proto::InstanceState::Provisioning,
        InstanceState::Running => proto::InstanceState::Running,
        InstanceState::Stopped => proto::InstanceState::Stopped,
        InstanceState::Terminated => proto::InstanceState::Terminated,
    }
}

impl From<&Instance> for proto::Instance {
    fn from(instance: &Instance) -> Self {
        proto::Instance {
            provider_id: instance.provider_id.as_str().to_owned(),
            name: instance.name.clone(),
            state: state_to_wire(instance.state) as i32,
            ipv4: instance.ipv4.map(|ip| ip.to_string()).unwrap_or_default(),
            created_at: Some(instance.created_at.into()),
            marks: Some(proto::Marks {
                managed: instance.marks.managed,
                proxy_uid: instance.marks.proxy_uid.clone(),
                cluster_id: instance.marks.cluster_id.clone(),
            }),
        }
    }
}

impl TryFrom<proto::Instance> for Instance {
    type Error = ProviderError;

    /// Checks what a provider answered: a well-formed ID, a known state, an IPv4 when Running.
    fn try_from(wire: proto::Instance) -> Result<Self, ProviderError> {
        let invalid = |field: &str, description: String| {
            ProviderError::permanent(
                PermanentKind::FailedPrecondition,
                "INVALID_RESPONSE",
                format!("the provider answered an invalid instance: {field}: {description}"),
            )
        };
        let provider_id = ProviderId::parse_any(&wire.provider_id).map_err(|e| invalid("provider_id", e))?;
        let state = match proto::InstanceState::try_from(wire.state) {
            Ok(proto::InstanceState::Provisioning) => InstanceState::Provisioning,
            Ok(proto::InstanceState::Running) => InstanceState::Running,
            Ok(proto::InstanceState::Stopped) => InstanceState::Stopped,
            Ok(proto::InstanceState::Terminated) => InstanceState::Terminated,
            // An unknown state is Stopped (contract §5); unspecified is a provider bug.
            Err(_) => InstanceState::Stopped,
            Ok(proto::InstanceState::Unspecified) => {
                return Err(invalid("state", "INSTANCE_STATE_UNSPECIFIED".into()));
            }
        };
        let ipv4 = validate::ipv4(&wire.ipv4).map_err(|e| invalid("ipv4", e))?;
        if state == InstanceState::Running && !ipv4.is_some_and(crate::model::is_routable) {
            return Err(invalid(
                "ipv4",
                format!("Running requires a routable IPv4, got {:?}", wire.ipv4),
            ));
        }
        let created_at = wire
            .created_at
            .and_then(|ts| SystemTime::try_from(ts).ok())
            .ok_or_else(|| invalid("created_at", "missing or out of range".into()))?;
        let marks = wire.marks.unwrap_or_default();
        Ok(Instance {
            provider_id,
            name: wire.name,
            state,
            ipv4,
            created_at,
            marks: Marks {
                managed: marks.managed,
                proxy_uid: marks.proxy_uid,
                cluster_id: marks.cluster_id,
            },
        })
    }
}

impl From<&CheckResult> for proto::CheckResult {
    fn from(result: &CheckResult) -> Self {
        proto::CheckResult {
            target: result.target.clone(),
            ok: result.ok,
            reason: result.reason.clone(),
            message: result.message.clone(),
            details: result.details.clone().into_iter().collect(),
        }
    }
}

impl From<proto::CheckResult> for CheckResult {
    fn from(wire: proto::CheckResult) -> Self {
        CheckResult {
            target: wire.target,
            ok: wire.ok,
            reason: wire.reason,
            message: wire.message,
            details: wire.details.into_iter().collect(),
        }
    }
}

impl From<&ProviderInfo> for proto::GetInfoResponse {
    fn from(info: &ProviderInfo) -> Self {
        proto::GetInfoResponse {
            provider_type: info.provider_type.clone(),
            version: info.version.clone(),
            contract_minor_version: info.contract_minor_version,
            profiles: Some((&info.profiles).into()),
            limits: Some(proto::Limits {
                max_name_length: info.limits.max_name_length,
                max_cloud_init_bytes: info.limits.max_cloud_init_bytes,
            }),
        }
    }
}

impl From<proto::GetInfoResponse> for ProviderInfo {
    fn from(wire: proto::GetInfoResponse) -> Self {
        let limits = wire.limits.unwrap_or_default();
        ProviderInfo {
            provider_type: wire.provider_type,
            version: wire.version,
            contract_minor_version: wire.contract_minor_version,
            profiles: wire.profiles.unwrap_or_default().into(),
            limits: Limits {
                max_name_length: limits.max_name_length,
                max_cloud_init_bytes: limits.max_cloud_init_bytes,
            },
        }
    }
}
