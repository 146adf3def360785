//! Builds the provider's CreateRequest from a Proxy: credentials, placement, proxy settings and the
//! cloud-init (custom from a Secret, or rendered), checked against what the provider declared.

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, ResourceExt};
use provider_sdk::cloud_init;
use provider_sdk::model::{CreateRequest, InstanceName, Placement, Protocol, ProviderInfo, ProxyAuth, ProxySettings};
use secrecy::{ExposeSecret, SecretBox};

use super::{credentials::Credentials, error::Error};
use crate::crd::{Proxy, ProxyProtocol};

/// The cloud-init that goes with a request, and the version that enters the spec hash.
#[derive(Debug)]
pub struct CloudInitSource {
    pub version: String,
    custom: Option<Vec<u8>>,
}

/// Reads `spec.cloudInit`'s Secret when one is named.
pub async fn cloud_init_source(proxy: &Proxy, secrets: &Api<Secret>) -> Result<CloudInitSource, Error> {
    let Some(reference) = &proxy.spec.cloud_init else {
        return Ok(CloudInitSource {
            version: "default".to_owned(),
            custom: None,
        });
    };
    let field = "spec.cloudInit";
    let secret = secrets.get_opt(&reference.secret_name).await?.ok_or_else(|| {
        Error::spec(
            field,
            "CloudInitSecretNotFound",
            format!("Secret {:?} does not exist", reference.secret_name),
        )
    })?;
    let document = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&reference.key))
        .map(|b| b.0.clone())
        .ok_or_else(|| {
            Error::spec(
                field,
                "CloudInitSecretInvalid",
                format!("Secret {:?} has no {:?} key", reference.secret_name, reference.key),
            )
        })?;
    Ok(CloudInitSource {
        version: secret.resource_version().unwrap_or_default(),
        custom: Some(document),
    })
}

/// The request for instance `name`. Values the schema already checked are re-checked here, because the
/// provider's own limits (name length, cloud-init size) are only known now.
pub fn build(
    proxy: &Proxy,
    name: &str,
    cluster_id: &str,
    info: &ProviderInfo,
    credentials: &Credentials,
    cloud_init_source: &CloudInitSource,
) -> Result<CreateRequest, Error> {
    let spec = &proxy.spec;
    let port = u16::try_from(spec.port).ok().filter(|p| *p != 0).ok_or_else(|| {
        Error::spec(
            "spec.port",
            "InvalidPort",
            format!("must be 1 to 65535, got {}", spec.port),
        )
    })?;
    let ranges = spec
        .allowed_source_ranges
        .iter()
        .enumerate()
        .map(|(i, range)| {
            range.parse().map_err(|_| {
                Error::spec(
                    format!("spec.allowedSourceRanges[{i}]"),
                    "InvalidCIDR",
                    format!("{range:?} is not a CIDR"),
                )
            })
        })
        .collect::<Result<Vec<ipnet::IpNet>, _>>()?;
    let name = InstanceName::parse(name, info.limits.max_name_length)
        .map_err(|problem| Error::spec("metadata.uid", "InvalidInstanceName", problem))?;
    let cloud_init = match (&cloud_init_source.custom, info.limits.max_cloud_init_bytes) {
        // The provider configures the proxy from the structured settings (contract §5.5).
        (None, 0) => None,
        (Some(_), 0) => {
            return Err(Error::spec(
                "spec.cloudInit",
                "CloudInitNotSupported",
                format!(
                    "provider {:?} does not deliver cloud-init; remove spec.cloudInit",
                    spec.provider
                ),
            ));
        }
        (Some(document), _) => Some(SecretBox::new(document.clone().into_boxed_slice())),
        (None, _) => {
            let config = cloud_init::ProxyConfig {
                protocol: protocol(spec.protocol),
                port,
                username: &credentials.username,
                password: credentials.password.expose_secret(),
                allowed_source_ranges: &ranges,
            };
            let document = cloud_init::render(&config)
                .map_err(|error| Error::spec("spec.auth", "CloudInitRenderFailed", error.to_string()))?;
            Some(SecretBox::new(
                document.expose_secret().as_bytes().to_vec().into_boxed_slice(),
            ))
        }
    };
    if let Some(document) = &cloud_init {
        let (size, max) = (
            document.expose_secret().len(),
            info.limits.max_cloud_init_bytes as usize,
        );
        if size > max {
            return Err(Error::spec(
                "spec.cloudInit",
                "CloudInitTooLarge",
                format!("is {size} bytes; provider {:?} carries at most {max}", spec.provider),
            ));
        }
    }
    Ok(CreateRequest {
        name,
        proxy_uid: proxy.uid().unwrap_or_default(),
        cluster_id: cluster_id.to_owned(),
        placement: Placement {
            region: spec.placement.region.clone(),
            zone: spec.placement.zone.clone(),
            machine_type: spec.placement.machine_type.clone(),
            image: spec.placement.image.clone(),
        },
        proxy: ProxySettings {
            port,
            protocol: protocol(spec.protocol),
            auth: ProxyAuth {
                username: credentials.username.clone(),
                password: credentials.password.clone(),
            },
            allowed_source_ranges: ranges,
        },
        cloud_init,
    })
}

fn protocol(protocol: ProxyProtocol) -> Protocol {
    match protocol {
        ProxyProtocol::Http => Protocol::Http,
        ProxyProtocol::Socks5 => Protocol::Socks5,
    }
}
