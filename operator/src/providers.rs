//! The configured providers, each a gRPC client behind a concurrency cap, a rate limit and a metrics
//! decorator (one histogram sample per call, by method and outcome class), in the manner of Karpenter's
//! cloudprovider metrics decorator.

use std::{collections::BTreeMap, num::NonZeroU32, sync::Arc, time::Instant};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use provider_sdk::{
    ProviderError,
    client::{ClientError, ClientTls, ProviderClient, ProviderEndpoint},
    model::{CheckResult, CreateRequest, Instance, ListFilter, ProviderId, ProviderInfo},
};
use tokio::sync::Semaphore;

use crate::{
    config::{OperatorConfig, ProviderConfig},
    metrics::{Metrics, RpcLabels},
};

#[derive(Debug, thiserror::Error)]
pub enum ProvidersError {
    #[error("providers.{name}.tls: reading {path}: {source}")]
    TlsFile {
        name: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("providers.{name}: {source}")]
    Client {
        name: String,
        #[source]
        source: ClientError,
    },
    #[error("providers.{name}.endpoint: {message}")]
    Endpoint { name: String, message: String },
}

/// One configured provider.
#[derive(Debug)]
pub struct ProviderHandle {
    pub name: String,
    pub provider_type: String,
    pub endpoint: String,
    client: ProviderClient,
    in_flight: Semaphore,
    rate: DefaultDirectRateLimiter,
    metrics: Metrics,
}

impl ProviderHandle {
    fn new(name: &str, config: &ProviderConfig, metrics: Metrics) -> Result<Self, ProvidersError> {
        let endpoint: ProviderEndpoint = config.endpoint.parse().map_err(|message| ProvidersError::Endpoint {
            name: name.to_owned(),
            message,
        })?;
        let tls = match &config.tls {
            None => None,
            Some(files) => {
                let read = |path: &std::path::PathBuf| {
                    std::fs::read(path).map_err(|source| ProvidersError::TlsFile {
                        name: name.to_owned(),
                        path: path.display().to_string(),
                        source,
                    })
                };
                Some(ClientTls {
                    ca_pem: read(&files.ca_file)?,
                    cert_pem: read(&files.cert_file)?,
                    key_pem: read(&files.key_file)?,
                    server_name: files.server_name.clone(),
                })
            }
        };
        let client =
            ProviderClient::connect_lazy(&endpoint, tls, config.timeouts.to_call_timeouts()).map_err(|source| {
                ProvidersError::Client {
                    name: name.to_owned(),
                    source,
                }
            })?;
        let qps = NonZeroU32::new(config.rate_limit.qps).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(config.rate_limit.burst).unwrap_or(qps);
        Ok(Self {
            name: name.to_owned(),
            provider_type: config.provider_type.clone(),
            endpoint: config.endpoint.clone(),
            client,
            in_flight: Semaphore::new(config.concurrency),
            rate: RateLimiter::direct(Quota::per_second(qps).allow_burst(burst)),
            metrics,
        })
    }

    /// Waits for a concurrency slot and a rate token, runs the call, and records its duration and class.
    async fn call<T>(
        &self,
        method: &'static str,
        call: impl Future<Output = Result<T, ProviderError>>,
    ) -> Result<T, ProviderError> {
        let _slot = self.in_flight.acquire().await.expect("the semaphore is never closed");
        self.rate.until_ready().await;
        let started = Instant::now();
        let result = call.await;
        let class = match &result {
            Ok(_) => "ok",
            Err(error) => error.class().as_str(),
        };
        let labels = RpcLabels {
            provider: self.name.clone(),
            method,
            class,
        };
        self.metrics
            .rpc_duration
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
        result
    }

    pub async fn get_info(&self) -> Result<ProviderInfo, ProviderError> {
        self.call("GetInfo", self.client.get_info()).await
    }

    pub async fn create(&self, request: &CreateRequest) -> Result<Instance, ProviderError> {
        self.call("Create", self.client.create(request)).await
    }

    pub async fn get(&self, id: &ProviderId) -> Result<Instance, ProviderError> {
        self.call("Get", self.client.get(id)).await
    }

    pub async fn delete(&self, id: &ProviderId) -> Result<(), ProviderError> {
        self.call("Delete", self.client.delete(id)).await
    }

    pub async fn list_by_tag(&self, filter: &ListFilter) -> Result<Vec<Instance>, ProviderError> {
        self.call("ListByTag", self.client.list_by_tag(filter)).await
    }

    pub async fn check(&self) -> Result<Vec<CheckResult>, ProviderError> {
        self.call("Check", self.client.check()).await
    }
}

/// Every configured provider by name, with what each declared in GetInfo once reached.
#[derive(Clone, Debug, Default)]
pub struct Providers {
    handles: Arc<BTreeMap<String, Arc<ProviderHandle>>>,
    info: Arc<tokio::sync::RwLock<BTreeMap<String, ProviderInfo>>>,
}

impl Providers {
    /// Builds a client per provider without dialing any of them.
    pub fn from_config(config: &OperatorConfig, metrics: &Metrics) -> Result<Self, ProvidersError> {
        let handles = config
            .providers
            .iter()
            .map(|(name, provider)| {
                Ok((
                    name.clone(),
                    Arc::new(ProviderHandle::new(name, provider, metrics.clone())?),
                ))
            })
            .collect::<Result<_, ProvidersError>>()?;
        Ok(Self {
            handles: Arc::new(handles),
            info: Arc::default(),
        })
    }

    pub fn get(&self, name: &str) -> Option<Arc<ProviderHandle>> {
        self.handles.get(name).cloned()
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<ProviderHandle>> {
        self.handles.values()
    }

    pub fn names(&self) -> Vec<String> {
        self.handles.keys().cloned().collect()
    }

    /// What the provider declared, asking it once and remembering the answer.
    pub async fn info(&self, handle: &ProviderHandle) -> Result<ProviderInfo, ProviderError> {
        if let Some(info) = self.info.read().await.get(&handle.name) {
            return Ok(info.clone());
        }
        let info = handle.get_info().await?;
        self.info.write().await.insert(handle.name.clone(), info.clone());
        Ok(info)
    }

    /// Records a fresh GetInfo answer (the health controller refreshes it on its cadence).
    pub async fn remember_info(&self, name: &str, info: ProviderInfo) {
        self.info.write().await.insert(name.to_owned(), info);
    }
}
