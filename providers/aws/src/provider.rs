//! `AwsProvider`: the shared state (one EC2 client per region, the per-name locks, the teardowns in
//! progress), the contract's `Provider` implementation that hands each RPC to its module, and the declared
//! profiles.

use std::{
    collections::{BTreeMap, HashSet},
    sync::{Arc, Mutex},
};

use aws_sdk_ec2::{Client, types::Instance as Ec2Instance};
use provider_sdk::{
    CONTRACT_MINOR_VERSION, InstanceStream, Provider, ProviderError, cloud_init, detached::run_detached,
    error::FieldViolation, model::*,
};

use crate::{
    clients,
    config::AwsConfig,
    credentials::RotatingCredentials,
    error::{AwsError, Ec2Code, classify, failure},
    instances::{InstanceRef, PROVIDER_TYPE},
    placement::GroupMode,
};
use provider_sdk::locks::NameLocks;

/// EC2 user data is limited to 16 KB before base64 encoding.
pub const MAX_USER_DATA_BYTES: u32 = 16 * 1024;

#[derive(Debug)]
pub struct Inner {
    pub config: AwsConfig,
    pub clients: BTreeMap<String, Client>,
    pub credentials: RotatingCredentials,
    pub locks: NameLocks,
    /// Instance IDs whose teardown task runs: a repeated Delete answers at once.
    pub tearing_down: Mutex<HashSet<String>>,
}

impl Inner {
    pub fn client(&self, region: &str) -> Option<&Client> {
        self.clients.get(region)
    }

    pub fn group_mode(&self, region: &str) -> Option<GroupMode> {
        self.config.regions.get(region).map(GroupMode::of)
    }

    /// The instance as EC2 describes it now; `None` when EC2 says it does not exist.
    pub async fn describe(&self, client: &Client, reference: &InstanceRef) -> Result<Option<Ec2Instance>, AwsError> {
        tracing::debug!(region = %reference.region, instance_id = %reference.instance_id, "DescribeInstances");
        let answer = client
            .describe_instances()
            .instance_ids(&reference.instance_id)
            .send()
            .await
            .map_err(failure);
        match answer {
            Ok(answer) => Ok(answer
                .reservations
                .unwrap_or_default()
                .into_iter()
                .flat_map(|r| r.instances.unwrap_or_default())
                .find(|i| i.instance_id() == Some(reference.instance_id.as_str()))),
            Err(failure) if failure.is(Ec2Code::InstanceNotFound) => Ok(None),
            Err(failure) => Err(AwsError::api("DescribeInstances", &reference.region)(failure)),
        }
    }
}

/// The AWS provider. Clones share state.
#[derive(Clone, Debug)]
pub struct AwsProvider {
    inner: Arc<Inner>,
}

impl AwsProvider {
    /// Builds the clients; reads no credential and dials nothing.
    pub fn new(config: AwsConfig) -> Self {
        let (credentials, clients) = clients::build(&config);
        tracing::info!(
            regions = ?config.regions.keys().collect::<Vec<_>>(),
            credentials = %credentials.describe(),
            endpoint = config.endpoint_url.as_deref().unwrap_or("the regional EC2 endpoints"),
            "configured"
        );
        Self {
            inner: Arc::new(Inner {
                config,
                clients,
                credentials,
                locks: NameLocks::default(),
                tearing_down: Mutex::default(),
            }),
        }
    }
}

impl Provider for AwsProvider {
    fn info(&self) -> ProviderInfo {
        ProviderInfo {
            provider_type: PROVIDER_TYPE.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            contract_minor_version: CONTRACT_MINOR_VERSION,
            profiles: profiles(),
            limits: Limits {
                max_name_length: DEFAULT_MAX_NAME_LENGTH,
                max_cloud_init_bytes: MAX_USER_DATA_BYTES,
            },
        }
    }

    async fn create(&self, request: CreateRequest) -> Result<Instance, ProviderError> {
        // Placement and the document are settled here, before anything is spawned or any EC2 call is made.
        let target = crate::placement::resolve(&self.inner.config, &request.placement).map_err(classify)?;
        let request = with_default_cloud_init(request).map_err(classify)?;
        // Detached: a caller whose deadline passes must not cut a Create off between two EC2 calls.
        run_detached(crate::create::create(self.inner.clone(), target, request))
            .await
            .map_err(classify)
    }

    async fn get(&self, id: &ProviderId) -> Result<Instance, ProviderError> {
        crate::read::get(&self.inner, id).await.map_err(classify)
    }

    async fn delete(&self, id: &ProviderId) -> Result<(), ProviderError> {
        crate::delete::delete(self.inner.clone(), id).await.map_err(classify)
    }

    async fn list_by_tag(&self, filter: ListFilter) -> Result<InstanceStream, ProviderError> {
        Ok(crate::read::list(self.inner.clone(), filter))
    }

    async fn check(&self) -> Vec<CheckResult> {
        crate::check::check(&self.inner).await
    }
}

/// An EC2 instance is configured only through its user data: this provider cannot reach into the guest,
/// so when a request comes without a document (contract §5.5: the provider then configures the proxy from
/// `proxy` itself) it sends the same default document the operator renders.
fn with_default_cloud_init(mut request: CreateRequest) -> Result<CreateRequest, AwsError> {
    use secrecy::{ExposeSecret, SecretBox};
    if request
        .cloud_init
        .as_ref()
        .is_some_and(|document| !document.expose_secret().is_empty())
    {
        return Ok(request);
    }
    let proxy = &request.proxy;
    let config = cloud_init::ProxyConfig {
        protocol: proxy.protocol,
        port: proxy.port,
        username: &proxy.auth.username,
        password: proxy.auth.password.expose_secret(),
        allowed_source_ranges: &proxy.allowed_source_ranges,
    };
    let document = cloud_init::render(&config).map_err(|error| {
        AwsError::Invalid(vec![FieldViolation {
            field: error.field().to_owned(),
            description: error.description(),
        }])
    })?;
    request.cloud_init = Some(SecretBox::new(document.expose_secret().as_bytes().into()));
    Ok(request)
}

/// The declared profiles (contract §4); docs/aws-provider-spec.md justifies each.
pub fn profiles() -> Profiles {
    Profiles {
        primary_key: Some(PrimaryKey::AllocatedId),
        readiness: Some(Readiness::ProvisioningWindow),
        ip_source: Some(IpSource::AssignedAtCreate),
        gc_mark: Some(GcMark::NativeLabels),
        created_at: Some(CreatedAtSource::WrittenAtCreate),
        provisioning_state: Some(ProvisioningState::Native),
        create_return: Some(CreateReturn::Submit),
        async_ops: Some(AsyncOps::None),
        delete_return: Some(DeleteReturn::ReturnsEarly),
        secondary_resources: Some(SecondaryResources::Explicit),
        list_partial: Some(ListPartial::FailWhole),
        not_found: Some(NotFoundSignal::ErrorCode),
        quota: Some(QuotaSignal::Detected),
        credentials: Some(CredentialSource::MountedFiles),
        client_kind: Some(ClientKind::VendorSdk),
        child_spans: Some(ChildSpans::SdkInstrumentation),
        timeouts: Some(Timeouts::PerCall),
        logging: Some(Logging::Tiered),
        backend_test: Some(BackendTest::IntegrationTag),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(password: &str, cloud_init: Option<&str>) -> CreateRequest {
        CreateRequest {
            name: InstanceName::parse("px-a", DEFAULT_MAX_NAME_LENGTH).unwrap(),
            proxy_uid: "uid".into(),
            cluster_id: "c".into(),
            placement: Placement::default(),
            proxy: ProxySettings {
                port: 3128,
                protocol: Protocol::Http,
                auth: ProxyAuth {
                    username: "egress".into(),
                    password: password.into(),
                },
                allowed_source_ranges: vec!["203.0.113.0/24".parse().unwrap()],
            },
            cloud_init: cloud_init.map(|doc| secrecy::SecretBox::new(doc.as_bytes().into())),
        }
    }

    fn document(request: &CreateRequest) -> String {
        use secrecy::ExposeSecret;
        String::from_utf8(request.cloud_init.as_ref().unwrap().expose_secret().to_vec()).unwrap()
    }

    #[test]
    fn a_request_without_a_document_gets_the_default_one_from_its_proxy_settings() {
        let filled = with_default_cloud_init(request("pw-0123456789", None)).unwrap();
        let doc = document(&filled);
        assert!(doc.starts_with("#cloud-config"), "{doc}");
        assert!(
            doc.contains("tinyproxy") && doc.contains("3128") && doc.contains("203.0.113.0/24"),
            "{doc}"
        );
        let empty = with_default_cloud_init(request("pw-0123456789", Some(""))).unwrap();
        assert_eq!(document(&empty), doc, "an empty document counts as none");
    }

    #[test]
    fn a_document_from_the_caller_is_sent_as_it_is() {
        let given = with_default_cloud_init(request("pw-0123456789", Some("#cloud-config\n{}\n"))).unwrap();
        assert_eq!(document(&given), "#cloud-config\n{}\n");
    }

    #[test]
    fn credentials_the_default_document_cannot_carry_are_refused_naming_the_field_not_the_value() {
        let error = with_default_cloud_init(request("sentinel pass/word", None)).unwrap_err();
        let AwsError::Invalid(fields) = &error else {
            panic!("{error:?}")
        };
        assert_eq!(fields[0].field, "proxy.auth.password");
        assert!(!format!("{error:?} {error}").contains("sentinel"), "{error:?}");
    }

    #[test]
    fn every_axis_is_declared() {
        let undeclared: Vec<_> = profiles()
            .entries()
            .into_iter()
            .filter(|(_, profile)| profile.is_none())
            .collect();
        assert!(undeclared.is_empty(), "{undeclared:?}");
        assert_eq!(profiles().entries().len(), 19);
    }
}
