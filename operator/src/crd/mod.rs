//! The custom resources of API group `egressproxies.dev/v1alpha1`. The CRD YAML is generated from these
//! types by the `crdgen` binary and committed with the Helm chart; CI fails when it is stale.

mod provider_health;
mod proxy;

pub use provider_health::*;
pub use proxy::*;

/// The API group of every resource the operator serves.
pub const GROUP: &str = "egressproxies.dev";

/// The finalizer that holds a Proxy until its instance is confirmed gone.
pub const FINALIZER: &str = "egressproxies.dev/instance";

/// The field manager of every server-side apply the operator makes.
pub const FIELD_MANAGER: &str = "egress-operator";

/// Every CRD the operator serves, in install order.
pub fn all() -> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> {
    use kube::CustomResourceExt;
    vec![Proxy::crd(), ProviderHealth::crd()]
}
