//! The Proxy controller against the real kube-apiserver and the fake provider served over gRPC: apply →
//! Running, the Service and Secret, deletion, make-before-break replacement, provider outages, each error
//! class with call counts that show no hot loop, and a crash between Create and the status write.

use std::{sync::Arc, time::Duration};

use egress_operator::{
    config::OperatorConfig,
    controller::proxy::{self, Context},
    crd::{Proxy, ProxyPhase},
    metrics::Metrics,
    providers::Providers,
};
use egress_test_support::{ControlPlane, TestNamespace};
use k8s_openapi::api::{
    core::v1::{Secret, Service},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use provider_sdk::{
    ProviderError,
    error::PermanentKind,
    model::InstanceState,
    server::{Listen, bind},
    testing::{FakeOptions, FakeProvider, Fault, Rpc},
};
use tokio::{sync::oneshot, task::JoinHandle};

/// The fake provider daemon on a unix socket; `stop` ends it, `start` brings it back on the same path.
struct Daemon {
    fake: FakeProvider,
    path: std::path::PathBuf,
    stop: Option<oneshot::Sender<()>>,
    _dir: Arc<tempfile::TempDir>,
}

impl Daemon {
    async fn new(options: FakeOptions) -> Self {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        let path = dir.path().join("fake.sock");
        let mut daemon = Daemon {
            fake: FakeProvider::new(options),
            path,
            stop: None,
            _dir: dir,
        };
        daemon.start().await;
        daemon
    }

    async fn start(&mut self) {
        let bound = bind(&Listen::Unix(self.path.clone()), None, false).await.unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(bound.serve(self.fake.clone(), async move {
            let _ = stopped.await;
        }));
        self.stop = Some(stop);
    }

    async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        for _ in 0..100 {
            if !self.path.exists() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// One test's world: a namespace, a fake provider daemon, and the controller watching that namespace.
struct World {
    ns: TestNamespace,
    daemon: Daemon,
    controller: JoinHandle<()>,
    client: kube::Client,
}

impl Drop for World {
    fn drop(&mut self) {
        self.controller.abort();
    }
}

async fn world(hint: &str, options: FakeOptions) -> World {
    let plane = ControlPlane::shared().await.expect("control plane");
    plane.install_crds(&egress_operator::crd::all()).await.unwrap();
    let ns = plane.namespace(hint).await.unwrap();
    let daemon = Daemon::new(options).await;
    let client = plane.client().unwrap();
    let controller = start_controller(&client, &daemon, ns.name());
    World {
        ns,
        daemon,
        controller,
        client,
    }
}

fn start_controller(client: &kube::Client, daemon: &Daemon, namespace: &str) -> JoinHandle<()> {
    let config: OperatorConfig = provider_sdk::config::parse(
        "test",
        &format!(
            "clusterId: e2e\nproviders:\n  fake:\n    type: fake\n    endpoint: unix://{}\n    timeouts: {{createSeconds: 5, getSeconds: 5, deleteSeconds: 5}}\n",
            daemon.path.display()
        ),
    )
    .unwrap();
    let metrics = Metrics::default();
    let providers = Providers::from_config(&config, &metrics).unwrap();
    let ctx = Arc::new(Context::new(client.clone(), providers, config.cluster_id, metrics));
    tokio::spawn(proxy::run(ctx, Some(namespace.to_owned())))
}

fn proxy(name: &str, port: i32) -> Proxy {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "egressproxies.dev/v1alpha1",
        "kind": "Proxy",
        "metadata": {"name": name},
        "spec": {"provider": "fake", "port": port, "allowedSourceRanges": ["10.0.0.0/8"]},
    }))
    .unwrap()
}

/// Polls the Proxy until `done` holds, or fails with its last status.
async fn wait_for(api: &Api<Proxy>, name: &str, what: &str, done: impl Fn(&Proxy) -> bool) -> Proxy {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let current = api.get_opt(name).await.unwrap();
        if let Some(proxy) = &current
            && done(proxy)
        {
            return proxy.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} never became {what}: {:#?}",
            current.map(|p| p.status)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn phase(proxy: &Proxy) -> Option<ProxyPhase> {
    proxy.status.as_ref().and_then(|s| s.phase)
}

fn condition<'a>(
    proxy: &'a Proxy,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    proxy.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)
}

fn running(proxy: &Proxy) -> bool {
    phase(proxy) == Some(ProxyPhase::Running)
}

#[tokio::test]
async fn an_applied_proxy_runs_with_its_service_and_secret_and_is_deleted_with_its_instance() {
    let w = world(
        "proxy-life",
        FakeOptions {
            provisioning: Duration::from_millis(300),
            ..FakeOptions::default()
        },
    )
    .await;
    let api: Api<Proxy> = w.ns.api();
    api.create(&PostParams::default(), &proxy("web", 3128)).await.unwrap();
    let ready = wait_for(&api, "web", "Running", running).await;
    let status = ready.status.clone().unwrap();
    let ip = status.ip.clone().expect("an IP");
    assert_eq!(status.endpoint.as_deref(), Some(format!("http://{ip}:3128").as_str()));
    assert_eq!(condition(&ready, "Ready").map(|c| c.status.as_str()), Some("True"));
    assert_eq!(status.observed_generation, ready.metadata.generation);
    assert!(status.created_at.is_some() && status.spec_hash.is_some() && status.provider_id.is_some());

    let service: Service = w.ns.api().get("web").await.unwrap();
    assert_eq!(service.spec.unwrap().ports.unwrap()[0].port, 3128);
    let slice: EndpointSlice = w.ns.api().get("web-instance").await.unwrap();
    assert_eq!(slice.endpoints.unwrap()[0].addresses, vec![ip.clone()]);
    let secret: Secret = w.ns.api().get(status.secret_name.as_deref().unwrap()).await.unwrap();
    let data = secret.data.unwrap();
    let url = String::from_utf8(data["url"].0.clone()).unwrap();
    let password = String::from_utf8(data["password"].0.clone()).unwrap();
    assert!(password.len() >= 24);
    assert_eq!(url, format!("http://egress:{password}@web.{}.svc:3128", w.ns.name()));

    let instances = w.daemon.fake.instances();
    assert_eq!(instances.len(), 1, "{instances:?}");
    assert_eq!(instances[0].marks.proxy_uid, ready.metadata.uid.clone().unwrap());

    // What a user sees: `kubectl get proxies` with the provider, phase, IP and endpoint columns filled.
    let plane = ControlPlane::shared().await.unwrap();
    let table = plane
        .kubectl()
        .args(["get", "proxies", "-n", w.ns.name()])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    let row = table
        .lines()
        .find(|line| line.starts_with("web "))
        .unwrap_or_else(|| panic!("{table}"));
    for value in ["fake", "Running", ip.as_str(), &format!("http://{ip}:3128")] {
        assert!(row.contains(value), "{value:?} missing from: {table}");
    }

    api.delete("web", &DeleteParams::default()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while api.get_opt("web").await.unwrap().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the finalizer was never removed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(w.daemon.fake.instances().is_empty(), "the instance outlived its Proxy");
}

#[tokio::test]
async fn a_spec_change_replaces_the_instance_without_a_moment_of_no_running_instance() {
    let w = world(
        "proxy-replace",
        FakeOptions {
            provisioning: Duration::from_millis(800),
            ..FakeOptions::default()
        },
    )
    .await;
    let api: Api<Proxy> = w.ns.api();
    api.create(&PostParams::default(), &proxy("web", 3128)).await.unwrap();
    let first = wait_for(&api, "web", "Running", running).await;
    let old_id = first.status.clone().unwrap().provider_id.unwrap();

    let patch = serde_json::json!({"spec": {"port": 8080}});
    api.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    // Sample the backend while the replacement happens: a running instance must exist at every moment.
    let fake = w.daemon.fake.clone();
    let watcher = tokio::spawn(async move {
        let mut samples = 0;
        for _ in 0..150 {
            let running = fake
                .instances()
                .iter()
                .filter(|i| i.state == InstanceState::Running)
                .count();
            assert!(running >= 1, "no running instance during the replacement");
            samples += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        samples
    });
    let replaced = wait_for(&api, "web", "replaced", |p| {
        running(p)
            && p.status
                .as_ref()
                .is_some_and(|s| s.provider_id.as_deref() != Some(old_id.as_str()) && s.retiring.is_empty())
    })
    .await;
    assert!(watcher.await.unwrap() > 0);
    let status = replaced.status.unwrap();
    assert!(status.endpoint.unwrap().ends_with(":8080"));
    let instances = w.daemon.fake.instances();
    assert_eq!(instances.len(), 1, "the old instance was not deleted: {instances:?}");
    assert_eq!(instances[0].provider_id.to_string(), status.provider_id.unwrap());
    let service: Service = w.ns.api().get("web").await.unwrap();
    assert_eq!(service.spec.unwrap().ports.unwrap()[0].port, 8080);
}

#[tokio::test]
async fn a_stopped_provider_shows_as_a_condition_and_the_proxy_recovers_when_it_is_back() {
    let mut w = world("proxy-outage", FakeOptions::default()).await;
    w.daemon.stop().await;
    let api: Api<Proxy> = w.ns.api();
    api.create(&PostParams::default(), &proxy("web", 3128)).await.unwrap();
    let down = wait_for(&api, "web", "ProviderUnavailable", |p| {
        condition(p, "Ready").is_some_and(|c| c.reason == "ProviderUnavailable")
    })
    .await;
    assert_eq!(down.status.unwrap().last_error.unwrap().class, "transient");
    w.daemon.start().await;
    wait_for(&api, "web", "Running", running).await;
}

#[tokio::test]
async fn a_permanent_error_is_a_condition_and_is_not_retried_until_the_spec_changes() {
    let w = world("proxy-permanent", FakeOptions::default()).await;
    let refusal = ProviderError::permanent(
        PermanentKind::InvalidArgument,
        "UNKNOWN_REGION",
        "placement.region \"mars\" is not configured",
    );
    w.daemon.fake.inject(Rpc::Create, Fault::Error(refusal));
    let api: Api<Proxy> = w.ns.api();
    api.create(&PostParams::default(), &proxy("web", 3128)).await.unwrap();
    let failed = wait_for(&api, "web", "Failed", |p| phase(p) == Some(ProxyPhase::Failed)).await;
    let ready = condition(&failed, "Ready").unwrap();
    assert_eq!(ready.reason, "UnknownRegion");
    assert!(ready.message.contains("mars"), "{}", ready.message);
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        w.daemon.fake.call_count(Rpc::Create),
        1,
        "a permanent error was retried"
    );

    let patch = serde_json::json!({"spec": {"port": 3129}});
    api.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_for(&api, "web", "Running", running).await;
    assert_eq!(w.daemon.fake.call_count(Rpc::Create), 2);
}

#[tokio::test]
async fn a_quota_error_sets_quota_exceeded_and_backs_off_for_long() {
    let w = world("proxy-quota", FakeOptions::default()).await;
    w.daemon.fake.inject(
        Rpc::Create,
        Fault::Error(ProviderError::quota("QUOTA_EXHAUSTED", "instances", "no room")),
    );
    let api: Api<Proxy> = w.ns.api();
    api.create(&PostParams::default(), &proxy("web", 3128)).await.unwrap();
    let limited = wait_for(&api, "web", "QuotaExceeded", |p| {
        condition(p, "QuotaExceeded").is_some_and(|c| c.status == "True")
    })
    .await;
    assert_eq!(limited.status.unwrap().last_error.unwrap().class, "quota");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        w.daemon.fake.call_count(Rpc::Create),
        1,
        "a quota error was retried within seconds"
    );
}

#[tokio::test]
async fn transient_errors_are_retried_with_growing_pauses_until_the_proxy_runs() {
    let w = world("proxy-transient", FakeOptions::default()).await;
    for _ in 0..3 {
        w.daemon.fake.inject(
            Rpc::Create,
            Fault::Error(ProviderError::transient("BACKEND_UNAVAILABLE", "try later")),
        );
    }
    let api: Api<Proxy> = w.ns.api();
    api.create(&PostParams::default(), &proxy("web", 3128)).await.unwrap();
    wait_for(&api, "web", "Running", running).await;
    let creates: Vec<_> = w
        .daemon
        .fake
        .calls()
        .into_iter()
        .filter(|c| c.rpc == Rpc::Create)
        .collect();
    assert_eq!(creates.len(), 4, "three failures then one success");
    let gaps: Vec<Duration> = creates
        .windows(2)
        .map(|pair| pair[1].at.duration_since(pair[0].at).unwrap_or_default())
        .collect();
    assert!(gaps[2] > gaps[0], "the pauses do not grow: {gaps:?}");
    assert!(
        gaps[0] >= Duration::from_millis(500),
        "the first retry came too soon: {gaps:?}"
    );
}

#[tokio::test]
async fn an_unknown_provider_name_is_a_provider_not_found_condition() {
    let w = world("proxy-unknown", FakeOptions::default()).await;
    let api: Api<Proxy> = w.ns.api();
    let mut unknown = proxy("web", 3128);
    unknown.spec.provider = "nowhere".into();
    api.create(&PostParams::default(), &unknown).await.unwrap();
    let failed = wait_for(&api, "web", "ProviderNotFound", |p| {
        condition(p, "Ready").is_some_and(|c| c.reason == "ProviderNotFound")
    })
    .await;
    assert!(condition(&failed, "Ready").unwrap().message.contains("nowhere"));
    assert_eq!(w.daemon.fake.calls().len(), 0);
}

#[tokio::test]
async fn an_operator_killed_between_create_and_the_status_write_ends_with_exactly_one_instance() {
    let mut w = world(
        "proxy-crash",
        FakeOptions {
            latency: Duration::from_millis(200),
            ..FakeOptions::default()
        },
    )
    .await;
    // The backend makes the instance but the answer is lost, as when the operator dies before the status
    // write; then the operator itself is killed and a new one starts.
    w.daemon.fake.inject(Rpc::Create, Fault::CrashAfterAct);
    let api: Api<Proxy> = w.ns.api();
    api.create(&PostParams::default(), &proxy("web", 3128)).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while w.daemon.fake.instances().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first Create never reached the backend"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    w.controller.abort();
    let persisted = api
        .get("web")
        .await
        .unwrap()
        .status
        .unwrap()
        .instance
        .expect("the name was written before Create");
    assert!(
        persisted.provider_id.is_none(),
        "the lost answer cannot have been recorded"
    );
    w.controller = start_controller(&w.client, &w.daemon, w.ns.name());
    let ready = wait_for(&api, "web", "Running", running).await;
    let instances = w.daemon.fake.instances();
    assert_eq!(instances.len(), 1, "{instances:?}");
    assert_eq!(instances[0].name, persisted.name);
    assert_eq!(
        ready.status.unwrap().instance_name.as_deref(),
        Some(persisted.name.as_str())
    );
}
