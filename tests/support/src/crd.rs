//! Installing CustomResourceDefinitions the way the operator's deployment will: server-side apply, then
//! waiting until the apiserver serves the new kind.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};

use crate::{ControlPlane, Error};

/// The field manager of everything this crate applies.
pub const FIELD_MANAGER: &str = "egress-test-support";

const ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(60);

impl ControlPlane {
    /// Applies each CRD and waits until it is `Established`. Applying is idempotent, so tests sharing
    /// a control plane may all install the same CRDs.
    pub async fn install_crds(&self, crds: &[CustomResourceDefinition]) -> Result<(), Error> {
        let api = Api::<CustomResourceDefinition>::all(self.client()?);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        for crd in crds {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let mut body = crd.clone();
            // A CRD read back from a server carries managedFields, which apply refuses, and a
            // resourceVersion, which would turn the apply into a conditional update.
            body.metadata.managed_fields = None;
            body.metadata.resource_version = None;
            body.status = None;
            api.patch(&name, &params, &Patch::Apply(&body))
                .await
                .map_err(Error::kube(format!("applying CRD {name}")))?;
        }
        for crd in crds {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let established = await_condition(api.clone(), &name, conditions::is_crd_established());
            match tokio::time::timeout(ESTABLISHED_TIMEOUT, established).await {
                Ok(Ok(_)) => {}
                Ok(Err(source)) => return Err(Error::CrdWait { name, source }),
                Err(_) => {
                    return Err(Error::CrdNotEstablished {
                        name,
                        seconds: ESTABLISHED_TIMEOUT.as_secs(),
                    });
                }
            }
        }
        Ok(())
    }
}
