//! The ProviderHealth controller against the real kube-apiserver and the fake provider served over gRPC:
//! a healthy daemon is Available with its declaration shown, a stopped one is Unreachable, a daemon of
//! another type is a TypeMismatch, and `run` writes the object on its own and stops on shutdown.

mod fake_daemon;

use std::time::Duration;

use egress_operator::{
    config::HealthConfig,
    controller::health::{self, AVAILABLE},
    crd::{ProviderHealth, ProviderHealthStatus},
    metrics::Metrics,
    providers::Providers,
};
use egress_test_support::ControlPlane;
use fake_daemon::{Daemon, providers, unique};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use provider_sdk::testing::{FakeOptions, Rpc};
use tokio::sync::oneshot;

async fn provider_healths() -> Api<ProviderHealth> {
    let plane = ControlPlane::shared().await.expect("control plane");
    plane.install_crds(&egress_operator::crd::all()).await.unwrap();
    Api::all(plane.client().unwrap())
}

/// One round for the only configured provider, then the object as the apiserver holds it.
async fn one_round(api: &Api<ProviderHealth>, providers: &Providers, name: &str) -> ProviderHealth {
    health::refresh(api, providers, &providers.get(name).unwrap())
        .await
        .expect("the status is written");
    api.get(name).await.unwrap()
}

fn available(object: &ProviderHealth) -> Condition {
    let status = object.status.as_ref().expect("a status");
    status
        .conditions
        .iter()
        .find(|c| c.type_ == AVAILABLE)
        .cloned()
        .expect("an Available condition")
}

fn status(object: &ProviderHealth) -> &ProviderHealthStatus {
    object.status.as_ref().expect("a status")
}

#[tokio::test]
async fn a_healthy_daemon_is_available_with_its_profiles_and_checks_shown() {
    let api = provider_healths().await;
    let daemon = Daemon::start(FakeOptions::default()).await;
    let name = unique("healthy");
    let (_, providers) = providers("health-e2e", &name, "fake", &daemon.endpoint());

    let object = one_round(&api, &providers, &name).await;

    assert_eq!(object.spec.provider_type, "fake");
    assert_eq!(object.spec.endpoint, daemon.endpoint());
    let condition = available(&object);
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("True", "AllChecksPassed"),
        "{condition:?}"
    );
    let status = status(&object);
    assert_eq!(status.provider_type.as_deref(), Some("fake"));
    assert_eq!(status.contract_minor_version, Some(0));
    assert_eq!(status.max_name_length, Some(63));
    assert_eq!(status.profiles.len(), 19, "{:?}", status.profiles);
    assert_eq!(status.profiles["gc-mark"], "native-labels");
    let targets: Vec<&str> = status.checks.iter().map(|c| c.target.as_str()).collect();
    assert_eq!(targets, ["backend", "capacity"]);
    assert!(status.last_check_time.is_some());
    assert_eq!(daemon.fake.call_count(Rpc::Check), 1);
    let remembered = providers.info(&providers.get(&name).unwrap()).await.unwrap();
    assert_eq!(remembered.provider_type, "fake");
}

#[tokio::test]
async fn a_stopped_daemon_is_unreachable_and_keeps_its_last_declaration() {
    let api = provider_healths().await;
    let mut daemon = Daemon::start(FakeOptions::default()).await;
    let name = unique("stopped");
    let (_, providers) = providers("health-e2e", &name, "fake", &daemon.endpoint());
    let healthy = one_round(&api, &providers, &name).await;
    assert_eq!(available(&healthy).status, "True");

    daemon.stop().await;
    let object = one_round(&api, &providers, &name).await;

    let condition = available(&object);
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "Unreachable"),
        "{condition:?}"
    );
    assert!(condition.message.starts_with("GetInfo failed"), "{}", condition.message);
    assert_eq!(status(&object).version, status(&healthy).version);
    assert!(status(&object).checks.is_empty(), "{:?}", status(&object).checks);
}

#[tokio::test]
async fn a_daemon_that_never_ran_is_unreachable() {
    let api = provider_healths().await;
    let dir = tempfile::tempdir().unwrap();
    let name = unique("absent");
    let endpoint = format!("unix://{}", dir.path().join("nobody.sock").display());
    let (_, providers) = providers("health-e2e", &name, "fake", &endpoint);

    let object = one_round(&api, &providers, &name).await;

    let condition = available(&object);
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "Unreachable"),
        "{condition:?}"
    );
    assert_eq!(status(&object).version, None);
}

#[tokio::test]
async fn a_daemon_of_another_type_is_a_type_mismatch() {
    let api = provider_healths().await;
    let daemon = Daemon::start(FakeOptions::default()).await;
    let name = unique("mismatch");
    let (_, providers) = providers("health-e2e", &name, "host", &daemon.endpoint());

    let object = one_round(&api, &providers, &name).await;

    let condition = available(&object);
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "TypeMismatch"),
        "{condition:?}"
    );
    assert_eq!(object.spec.provider_type, "host");
    assert_eq!(status(&object).provider_type.as_deref(), Some("fake"));
}

#[tokio::test]
async fn run_keeps_the_object_fresh_and_returns_on_shutdown() {
    let api = provider_healths().await;
    let daemon = Daemon::start(FakeOptions::default()).await;
    let name = unique("looping");
    let (_, providers) = providers("health-e2e", &name, "fake", &daemon.endpoint());
    let (stop, stopped) = oneshot::channel::<()>();
    let config = HealthConfig {
        interval_seconds: 1,
        failing_interval_seconds: 1,
    };
    let client = ControlPlane::shared().await.unwrap().client().unwrap();
    let running = tokio::spawn(health::run(client, providers, config, Metrics::default(), async move {
        let _ = stopped.await;
    }));

    tokio::time::timeout(Duration::from_secs(20), async {
        while daemon.fake.call_count(Rpc::Check) < 2 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("two rounds within 20 s");
    let object = api.get(&name).await.unwrap();
    assert_eq!(available(&object).status, "True");

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("run returns on shutdown")
        .unwrap();
}
