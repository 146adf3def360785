//! Shared by the GC and health e2e tests: the fake provider served over a unix socket in-process, and the
//! operator's `Providers` pointing at it.

// Each test binary that includes this module uses a subset of it.
#![allow(dead_code)]

use std::{path::PathBuf, time::Duration};

use egress_operator::{config::OperatorConfig, metrics::Metrics, providers::Providers};
use provider_sdk::{
    server::{Listen, bind},
    testing::{FakeOptions, FakeProvider},
};
use tokio::sync::oneshot;

/// A fake provider daemon on a unix socket in a directory of its own.
pub struct Daemon {
    pub fake: FakeProvider,
    pub path: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Daemon {
    pub async fn start(options: FakeOptions) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fake.sock");
        let fake = FakeProvider::new(options);
        let bound = bind(&Listen::Unix(path.clone()), None, false).await.unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let serve = bound.serve(fake.clone(), async move {
            let _ = stopped.await;
        });
        let served = tokio::spawn(async move { serve.await.expect("the fake daemon serves") });
        Daemon {
            fake,
            path,
            stop: Some(stop),
            served: Some(served),
            _dir: dir,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.path.display())
    }

    /// Shuts the daemon down and waits until it has returned (its socket file is gone then).
    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.served.take() {
            tokio::time::timeout(Duration::from_secs(30), served)
                .await
                .expect("the daemon stops")
                .unwrap();
        }
        assert!(!self.path.exists(), "the socket is removed once the daemon stops");
    }
}

/// `Providers` with one provider `name` of type `provider_type` at `endpoint`, with short deadlines.
pub fn providers(cluster_id: &str, name: &str, provider_type: &str, endpoint: &str) -> (OperatorConfig, Providers) {
    let text = format!(
        "clusterId: {cluster_id}\nproviders:\n  {name}:\n    type: {provider_type}\n    endpoint: {endpoint}\n    \
         timeouts: {{getInfoSeconds: 3, checkSeconds: 3, listSeconds: 10, deleteSeconds: 5}}\n"
    );
    let config: OperatorConfig = provider_sdk::config::parse("operator.yaml", &text).unwrap();
    let providers = Providers::from_config(&config, &Metrics::default()).unwrap();
    (config, providers)
}

/// A DNS label unique to this run, for cluster-scoped names shared by the tests of one control plane.
pub fn unique(stem: &str) -> String {
    format!("{stem}-{:08x}", rand::random::<u32>())
}
