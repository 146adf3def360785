//! What every check shares: raw gRPC access to the provider (the suite judges the wire, not the SDK's
//! view of it), the run's unique names and cluster ids, and the records the final checks and the cleanup
//! need: every instance made, every error status and every instance answer seen.

use std::{
    collections::BTreeSet,
    sync::Mutex,
    time::{Duration, Instant},
};

use futures::TryStreamExt;
use provider_sdk::{
    model::{ProviderInfo, is_routable},
    proto::{self, provider_service_client::ProviderServiceClient},
};
use tonic::{Request, Status, transport::Channel};

use crate::params::Params;

/// Deadline of the suite's ordinary calls; generous, since some backends are slow.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct Harness {
    client: ProviderServiceClient<Channel>,
    pub channel: Channel,
    pub info: ProviderInfo,
    pub params: Params,
    run_id: String,
    /// The cluster id of the suite's instances, and a second one standing for a foreign cluster.
    pub cluster: String,
    pub other_cluster: String,
    created: Mutex<BTreeSet<String>>,
    errors: Mutex<Vec<(&'static str, Status)>>,
    contract_breaches: Mutex<Vec<String>>,
}

impl Harness {
    pub async fn new(channel: Channel, params: Params) -> Result<Self, String> {
        let mut client = ProviderServiceClient::new(channel.clone());
        let info = client
            .get_info(with_deadline(proto::GetInfoRequest {}, CALL_TIMEOUT))
            .await
            .map_err(|status| format!("GetInfo failed: {:?}: {}", status.code(), status.message()))?
            .into_inner();
        let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
        let cluster = format!("{}-{run_id}", params.cluster_id_prefix);
        Ok(Self {
            client,
            channel,
            info: info.into(),
            other_cluster: format!("{cluster}-other"),
            cluster,
            params,
            run_id,
            created: Mutex::default(),
            errors: Mutex::default(),
            contract_breaches: Mutex::default(),
        })
    }

    /// A fresh instance name for this run, within the provider's name limit.
    pub fn name(&self, purpose: &str) -> String {
        let name = format!("conf-{}-{purpose}", self.run_id);
        let max = self.info.limits.max_name_length as usize;
        name[..name.len().min(max)].trim_end_matches('-').to_owned()
    }

    pub fn uid(&self) -> String {
        uuid::Uuid::new_v4().to_string()
    }

    /// A valid Create request built from the params.
    pub fn request(&self, name: &str, uid: &str, cluster: &str) -> proto::CreateRequest {
        let placement = &self.params.placement;
        proto::CreateRequest {
            name: name.to_owned(),
            proxy_uid: uid.to_owned(),
            cluster_id: cluster.to_owned(),
            placement: Some(proto::Placement {
                region: placement.region.clone(),
                zone: placement.zone.clone(),
                machine_type: placement.machine_type.clone(),
                image: placement.image.clone(),
            }),
            proxy: Some(proto::ProxySettings {
                port: u32::from(self.params.port),
                protocol: proto::Protocol::Http as i32,
                auth: Some(proto::ProxyAuth {
                    username: "conformance".to_owned(),
                    password: format!("pw-{}", self.run_id),
                }),
                allowed_source_ranges: self.params.allowed_source_ranges.clone(),
            }),
            cloud_init: Vec::new(),
        }
    }

    pub async fn create(&self, request: proto::CreateRequest) -> Result<proto::Instance, Status> {
        let mut client = self.client.clone();
        let result = client.create(with_deadline(request, CALL_TIMEOUT)).await;
        let instance = self.answer("Create", result.map(|r| r.into_inner().instance))?;
        self.created.lock().unwrap().insert(instance.provider_id.clone());
        Ok(instance)
    }

    pub async fn get(&self, provider_id: &str) -> Result<proto::Instance, Status> {
        let mut client = self.client.clone();
        let request = proto::GetRequest {
            provider_id: provider_id.to_owned(),
        };
        let result = client.get(with_deadline(request, CALL_TIMEOUT)).await;
        self.answer("Get", result.map(|r| r.into_inner().instance))
    }

    pub async fn delete(&self, provider_id: &str) -> Result<(), Status> {
        let mut client = self.client.clone();
        let request = proto::DeleteRequest {
            provider_id: provider_id.to_owned(),
        };
        let result = client.delete(with_deadline(request, CALL_TIMEOUT)).await;
        self.record("Delete", result.map(drop))
    }

    pub async fn list(&self, cluster: &str, uid: &str) -> Result<Vec<proto::Instance>, Status> {
        let mut client = self.client.clone();
        let request = proto::ListByTagRequest {
            cluster_id: cluster.to_owned(),
            proxy_uid: uid.to_owned(),
        };
        let listing = async {
            let pages = client
                .list_by_tag(with_deadline(request, CALL_TIMEOUT))
                .await?
                .into_inner();
            pages.map_ok(|page| page.instances).try_concat().await
        };
        let instances = self.record("ListByTag", listing.await)?;
        instances.iter().for_each(|instance| self.observe(instance));
        Ok(instances)
    }

    pub async fn check(&self) -> Result<Vec<proto::CheckResult>, Status> {
        let mut client = self.client.clone();
        let result = client.check(with_deadline(proto::CheckRequest {}, CALL_TIMEOUT)).await;
        self.record("Check", result.map(|r| r.into_inner().results))
    }

    /// The raw client, for calls that must not be recorded (expired deadlines answered by the transport).
    pub fn raw(&self) -> ProviderServiceClient<Channel> {
        self.client.clone()
    }

    /// Polls Get until Running, failing on Stopped or Terminated or after the ready timeout.
    pub async fn wait_running(&self, provider_id: &str) -> Result<proto::Instance, String> {
        let deadline = Instant::now() + self.params.ready_timeout();
        let mut pause = Duration::from_millis(100);
        loop {
            let instance = self.get(provider_id).await.map_err(|s| describe("Get", &s))?;
            match proto::InstanceState::try_from(instance.state) {
                Ok(proto::InstanceState::Running) => return Ok(instance),
                Ok(proto::InstanceState::Provisioning) => {}
                other => {
                    return Err(format!("{provider_id} went to {other:?} instead of Running"));
                }
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{provider_id} not Running after {:?}",
                    self.params.ready_timeout()
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }

    /// Polls Get until NOT_FOUND (a returns-early Delete may show Terminated for a while).
    pub async fn wait_gone(&self, provider_id: &str) -> Result<(), String> {
        let deadline = Instant::now() + self.params.ready_timeout();
        loop {
            match self.get(provider_id).await {
                Err(status) if status.code() == tonic::Code::NotFound => return Ok(()),
                Err(status) => return Err(describe("Get after Delete", &status)),
                Ok(instance) if Instant::now() >= deadline => {
                    return Err(format!(
                        "{provider_id} still answers state {} after Delete",
                        instance.state
                    ));
                }
                Ok(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }

    pub fn remember(&self, provider_id: &str) {
        self.created.lock().unwrap().insert(provider_id.to_owned());
    }

    pub fn errors(&self) -> Vec<(&'static str, Status)> {
        self.errors.lock().unwrap().clone()
    }

    pub fn breaches(&self) -> Vec<String> {
        self.contract_breaches.lock().unwrap().clone()
    }

    /// Deletes everything the run made (recorded IDs and whatever its two clusters list) and confirms it
    /// is gone.
    pub async fn cleanup(&self) -> Result<usize, String> {
        let mut ids: BTreeSet<String> = self.created.lock().unwrap().clone();
        for cluster in [&self.cluster, &self.other_cluster] {
            let listed = self
                .list(cluster, "")
                .await
                .map_err(|s| describe("ListByTag during cleanup", &s))?;
            ids.extend(listed.into_iter().map(|i| i.provider_id));
        }
        // Deletes run side by side and share one ready timeout, so a provider that never deletes costs the
        // run one timeout, not one per instance.
        let deletes = ids.iter().map(|id| async move {
            match self.delete(id).await {
                Err(status) => Err(describe(&format!("Delete {id}"), &status)),
                Ok(()) => self.wait_gone(id).await,
            }
        });
        let mut problems: Vec<String> = futures::future::join_all(deletes)
            .await
            .into_iter()
            .filter_map(Result::err)
            .collect();
        for cluster in [&self.cluster, &self.other_cluster] {
            match self.list(cluster, "").await {
                Ok(left) if !left.is_empty() => {
                    problems.push(format!("{} instance(s) left in cluster {cluster}", left.len()))
                }
                Ok(_) => {}
                Err(status) => problems.push(describe("ListByTag after cleanup", &status)),
            }
        }
        if problems.is_empty() {
            Ok(ids.len())
        } else {
            Err(problems.join("; "))
        }
    }

    fn answer(
        &self,
        rpc: &'static str,
        result: Result<Option<proto::Instance>, Status>,
    ) -> Result<proto::Instance, Status> {
        let instance = self.record(rpc, result)?;
        let instance = instance.ok_or_else(|| {
            self.breach(format!("{rpc} answered OK without an instance"));
            Status::internal("answer without an instance")
        })?;
        self.observe(&instance);
        Ok(instance)
    }

    fn record<T>(&self, rpc: &'static str, result: Result<T, Status>) -> Result<T, Status> {
        if let Err(status) = &result {
            self.errors.lock().unwrap().push((rpc, status.clone()));
        }
        result
    }

    /// Contract rules every answered instance must keep, whichever check received it.
    fn observe(&self, instance: &proto::Instance) {
        let prefix = format!("{}://", self.info.provider_type);
        if !instance.provider_id.starts_with(&prefix) || instance.provider_id.len() == prefix.len() {
            self.breach(format!(
                "provider ID {:?} does not start with {prefix:?}",
                instance.provider_id
            ));
        }
        let running = instance.state == proto::InstanceState::Running as i32;
        let ip_ok = instance.ipv4.parse().is_ok_and(is_routable);
        if running && !ip_ok {
            self.breach(format!("{} is Running with IPv4 {:?}", instance.name, instance.ipv4));
        }
        if instance.state == proto::InstanceState::Unspecified as i32 {
            self.breach(format!("{} has state UNSPECIFIED", instance.name));
        }
        if instance.created_at.is_none() {
            self.breach(format!("{} has no created_at", instance.name));
        }
    }

    fn breach(&self, what: String) {
        self.contract_breaches.lock().unwrap().push(what);
    }
}

pub fn with_deadline<T>(message: T, timeout: Duration) -> Request<T> {
    let mut request = Request::new(message);
    request.set_timeout(timeout);
    request
}

/// `"<what>: <CODE>: <message>"` for failure texts.
pub fn describe(what: &str, status: &Status) -> String {
    format!("{what}: {:?}: {}", status.code(), status.message())
}
