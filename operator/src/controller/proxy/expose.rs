//! What in-cluster clients use: a selector-less Service named after the Proxy with an EndpointSlice that
//! points at the instance, and the consumer Secret with the proxy URL and credentials. All are owned by the
//! Proxy (deleted with it) and written with server-side apply under the operator's field manager.

use std::{collections::BTreeMap, net::Ipv4Addr};

use k8s_openapi::{
    ByteString,
    api::{
        core::v1::{Secret, Service, ServicePort, ServiceSpec},
        discovery::v1::{Endpoint, EndpointPort, EndpointSlice},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
};
use secrecy::ExposeSecret;

use super::{
    credentials::{Credentials, consumer_secret_name, proxy_url},
    error::Error,
};
use crate::crd::{FIELD_MANAGER, Proxy};

/// The label every object the operator manages carries; its watches select on it.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "egress-operator");
const PROXY_LABEL: &str = "egressproxies.dev/proxy";

fn meta(proxy: &Proxy, name: String, extra_labels: &[(&str, &str)]) -> ObjectMeta {
    let mut labels = BTreeMap::from([
        (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
        (PROXY_LABEL.to_owned(), proxy.name_any()),
    ]);
    labels.extend(extra_labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    ObjectMeta {
        name: Some(name),
        namespace: proxy.namespace(),
        labels: Some(labels),
        owner_references: proxy.controller_owner_ref(&()).map(|owner| vec![owner]),
        ..ObjectMeta::default()
    }
}

fn apply_params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

/// The in-cluster host name of the Proxy's Service.
pub fn service_host(proxy: &Proxy) -> String {
    format!("{}.{}.svc", proxy.name_any(), proxy.namespace().unwrap_or_default())
}

/// Writes the consumer Secret: `username`, `password`, `url` (through the Service) and, once the instance
/// is known, `endpoint` (its own address).
pub async fn write_secret(
    client: &kube::Client,
    proxy: &Proxy,
    credentials: &Credentials,
    instance_ip: Option<Ipv4Addr>,
) -> Result<String, Error> {
    let name = consumer_secret_name(proxy);
    let scheme = proxy.spec.protocol.scheme();
    let mut data = BTreeMap::from([
        (
            "username".to_owned(),
            ByteString(credentials.username.clone().into_bytes()),
        ),
        (
            "password".to_owned(),
            ByteString(credentials.password.expose_secret().as_bytes().to_vec()),
        ),
        (
            "url".to_owned(),
            ByteString(
                proxy_url(scheme, credentials, &service_host(proxy), proxy.spec.port)
                    .expose_secret()
                    .as_bytes()
                    .to_vec(),
            ),
        ),
    ]);
    if let Some(ip) = instance_ip {
        let url = proxy_url(scheme, credentials, &ip.to_string(), proxy.spec.port);
        data.insert(
            "endpoint".to_owned(),
            ByteString(url.expose_secret().as_bytes().to_vec()),
        );
    }
    let secret = Secret {
        metadata: meta(proxy, name.clone(), &[]),
        type_: Some("Opaque".to_owned()),
        data: Some(data),
        ..Secret::default()
    };
    let api: Api<Secret> = Api::namespaced(client.clone(), &proxy.namespace().unwrap_or_default());
    api.patch(&name, &apply_params(), &Patch::Apply(&secret)).await?;
    Ok(name)
}

/// Points the Service at `ip`: `<proxy>.<namespace>.svc:<port>` reaches the instance.
pub async fn write_service(client: &kube::Client, proxy: &Proxy, ip: Ipv4Addr) -> Result<String, Error> {
    let name = proxy.name_any();
    let namespace = proxy.namespace().unwrap_or_default();
    let port_name = proxy.spec.protocol.scheme().to_owned();
    let service = Service {
        metadata: meta(proxy, name.clone(), &[]),
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some(port_name.clone()),
                port: proxy.spec.port,
                target_port: Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(
                    proxy.spec.port,
                )),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    let services: Api<Service> = Api::namespaced(client.clone(), &namespace);
    services.patch(&name, &apply_params(), &Patch::Apply(&service)).await?;
    // Kubernetes refuses loopback and link-local endpoints (a host provider on a loopback pool, in local
    // use): the Service then has no endpoint and consumers use the Secret's `endpoint` key instead.
    if ip.is_loopback() || ip.is_link_local() {
        tracing::info!(proxy = %name, %ip, "instance address cannot be a Service endpoint; the Service stays empty");
        return Ok(name);
    }

    let slice = EndpointSlice {
        metadata: meta(
            proxy,
            format!("{name}-instance"),
            &[
                ("kubernetes.io/service-name", name.as_str()),
                ("endpointslice.kubernetes.io/managed-by", "egressproxies.dev"),
            ],
        ),
        address_type: "IPv4".to_owned(),
        endpoints: Some(vec![Endpoint {
            addresses: vec![ip.to_string()],
            ..Endpoint::default()
        }]),
        ports: Some(vec![EndpointPort {
            name: Some(port_name),
            port: Some(proxy.spec.port),
            protocol: Some("TCP".to_owned()),
            ..EndpointPort::default()
        }]),
    };
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &namespace);
    slices
        .patch(&format!("{name}-instance"), &apply_params(), &Patch::Apply(&slice))
        .await?;
    Ok(name)
}
