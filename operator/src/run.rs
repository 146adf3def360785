//! Start-up and the operator's life: config, clients, the HTTP endpoint, leader election on a Lease, then
//! the Proxy controller, the ProviderHealth loops and the garbage collector, until SIGTERM or a lost lease.

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

use crate::{
    config::OperatorConfig,
    controller::{health, proxy},
    gc,
    http::{self, HttpState},
    metrics::Metrics,
    providers::Providers,
};

/// Settings from the command line, beside the config file.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub config_path: PathBuf,
    pub http_addr: SocketAddr,
    /// `None` runs without leader election (one replica, or tests).
    pub lease: Option<LeaseOptions>,
    /// Watch Proxies in this namespace only; `None` watches all.
    pub namespace: Option<String>,
}

#[derive(Clone, Debug)]
pub struct LeaseOptions {
    pub namespace: String,
    pub name: String,
    pub identity: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] provider_sdk::config::ConfigError),
    #[error(transparent)]
    Providers(#[from] crate::providers::ProvidersError),
    #[error("connecting to Kubernetes: {0}")]
    Kube(#[from] kube::Error),
    #[error("leader election on Lease {namespace}/{name}: {source}")]
    Lease {
        namespace: String,
        name: String,
        #[source]
        source: kube_lease_manager::LeaseManagerError,
    },
    #[error("leadership of the Lease was lost; exiting so a standby takes over")]
    LeadershipLost,
    #[error("HTTP endpoint {addr}: {source}")]
    Http {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Loads and checks the config file; errors name the field and the value.
pub fn load_config(path: &std::path::Path) -> Result<OperatorConfig, provider_sdk::config::ConfigError> {
    provider_sdk::config::load(Some(path))
}

/// Runs the operator until `shutdown` resolves or leadership is lost, with the environment's client
/// (in-cluster, or `KUBECONFIG`).
pub async fn run(
    options: RunOptions,
    config: OperatorConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    let client = Client::try_default().await?;
    run_with_client(client, options, config, shutdown).await
}

/// [`run`] with a given client: tests point it at their control plane, since setting `KUBECONFIG` in a
/// running test process is `unsafe` (and this workspace forbids `unsafe`).
pub async fn run_with_client(
    client: Client,
    options: RunOptions,
    config: OperatorConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    let metrics = Metrics::default();
    let providers = Providers::from_config(&config, &metrics)?;
    let ready = Arc::new(AtomicBool::new(false));

    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let stopped = move |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };

    let state = HttpState {
        metrics: metrics.clone(),
        ready: ready.clone(),
    };
    let addr = options.http_addr;
    let http_stop = stopped(stop_rx.clone());
    let http = tokio::spawn(async move {
        http::serve(addr, state, http_stop)
            .await
            .map_err(|source| RunError::Http { addr, source })
    });

    let mut leadership = None;
    if let Some(lease) = &options.lease {
        let lease_error = |source| RunError::Lease {
            namespace: lease.namespace.clone(),
            name: lease.name.clone(),
            source,
        };
        let manager = LeaseManagerBuilder::new(client.clone(), &lease.name)
            .with_namespace(&lease.namespace)
            .with_identity(&lease.identity)
            .build()
            .await
            .map_err(lease_error)?;
        let (mut is_leader, task) = manager.watch().await;
        tracing::info!(lease = %lease.name, identity = %lease.identity, "waiting to lead");
        let mut stop = stop_rx.clone();
        tokio::select! {
            led = is_leader.wait_for(|leading| *leading) => { led.map_err(|_| RunError::LeadershipLost)?; }
            _ = stop.wait_for(|s| *s) => { return Ok(()); }
        }
        tracing::info!(lease = %lease.name, "leading");
        leadership = Some((is_leader, task));
    }

    let ctx = Arc::new(proxy::Context::new(
        client.clone(),
        providers.clone(),
        config.cluster_id.clone(),
        metrics.clone(),
    ));
    let controller = tokio::spawn(proxy::run(ctx, options.namespace.clone()));
    let health = tokio::spawn(health::run(
        client.clone(),
        providers.clone(),
        config.health.clone(),
        metrics.clone(),
        stopped(stop_rx.clone()),
    ));
    let collector = tokio::spawn(gc::run(
        client,
        providers,
        config.cluster_id.clone(),
        config.gc.clone(),
        metrics,
        stopped(stop_rx.clone()),
    ));
    ready.store(true, Ordering::Relaxed);

    let lost = async move {
        match leadership {
            Some((mut is_leader, _task)) => {
                let _ = is_leader.wait_for(|leading| !*leading).await;
                true
            }
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        _ = stopped(stop_rx) => Ok(()),
        true = lost => Err(RunError::LeadershipLost),
    };
    ready.store(false, Ordering::Relaxed);
    controller.abort();
    health.abort();
    collector.abort();
    http.abort();
    outcome
}
