//! The garbage collector against the real kube-apiserver and the fake provider served over gRPC: exactly the
//! old orphans are deleted; young, unmarked, foreign and referenced instances survive; a failed listing
//! deletes nothing; and a Proxy that appears while the provider is being listed protects its instance.

mod fake_daemon;

use std::time::{Duration, SystemTime};

use egress_operator::{
    crd::{InstanceRef, Proxy},
    gc::{self, GcError, SweepReport},
    metrics::{Metrics, ProviderLabels},
    providers::Providers,
};
use egress_test_support::{ControlPlane, TestNamespace};
use fake_daemon::{Daemon, providers, unique};
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use provider_sdk::{
    ProviderError,
    error::reason::BACKEND_UNAVAILABLE,
    model::Marks,
    testing::{FakeOptions, Fault, Rpc},
};

const CLUSTER: &str = "gc-e2e";
const MIN_AGE: Duration = Duration::from_secs(600);
const PROVIDER: &str = "fake";

async fn namespace(hint: &str) -> (kube::Client, TestNamespace) {
    let plane = ControlPlane::shared().await.expect("control plane");
    plane.install_crds(&egress_operator::crd::all()).await.unwrap();
    (plane.client().unwrap(), plane.namespace(hint).await.unwrap())
}

fn ours(proxy_uid: &str) -> Marks {
    Marks {
        managed: true,
        proxy_uid: proxy_uid.to_owned(),
        cluster_id: CLUSTER.to_owned(),
    }
}

fn ago(seconds: u64) -> SystemTime {
    SystemTime::now() - Duration::from_secs(seconds)
}

/// Creates a Proxy and writes `instance` as its serving instance through the status subresource; returns
/// its UID.
async fn proxy_serving(api: &Api<Proxy>, name: &str, instance: &str) -> String {
    let proxy: Proxy = serde_json::from_value(serde_json::json!({
        "apiVersion": "egressproxies.dev/v1alpha1",
        "kind": "Proxy",
        "metadata": {"name": name},
        "spec": {"provider": PROVIDER},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &proxy).await.unwrap();
    let reference = InstanceRef {
        name: instance.to_owned(),
        spec_hash: "0123456789ab".to_owned(),
        provider_id: Some(format!("fake://{instance}")),
    };
    let status = serde_json::json!({
        "apiVersion": "egressproxies.dev/v1alpha1",
        "kind": "Proxy",
        "status": {"instance": reference, "instanceName": instance},
    });
    api.patch_status(name, &PatchParams::apply("gc-e2e-test").force(), &Patch::Apply(&status))
        .await
        .unwrap();
    created.uid().unwrap()
}

fn handle(providers: &Providers) -> std::sync::Arc<egress_operator::providers::ProviderHandle> {
    providers.get(PROVIDER).unwrap()
}

fn deleted(daemon: &Daemon) -> Vec<String> {
    daemon
        .fake
        .calls()
        .into_iter()
        .filter(|c| c.rpc == Rpc::Delete)
        .map(|c| c.subject)
        .collect()
}

fn names(daemon: &Daemon) -> Vec<String> {
    let mut names: Vec<String> = daemon.fake.instances().into_iter().map(|i| i.name).collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_sweep_deletes_exactly_the_old_orphan_of_this_cluster() {
    let (client, ns) = namespace("gc_deletes_exactly_the_orphan").await;
    let daemon = Daemon::start(FakeOptions::default()).await;
    let (_, providers) = providers(CLUSTER, PROVIDER, "fake", &daemon.endpoint());
    let uid = proxy_serving(&ns.api::<Proxy>(), "web", "px-web-serving").await;
    let gone_uid = "3f0c9a43-0000-4000-8000-00000000dead";

    daemon.fake.seed("px-orphan", ours(gone_uid), ago(3600));
    daemon.fake.seed("px-young-orphan", ours(gone_uid), ago(30));
    daemon.fake.seed(
        "px-unmarked",
        Marks {
            managed: false,
            ..ours(gone_uid)
        },
        ago(3600),
    );
    daemon.fake.seed(
        "px-foreign",
        Marks {
            cluster_id: "another-cluster".to_owned(),
            ..ours(gone_uid)
        },
        ago(3600),
    );
    daemon.fake.seed("px-web-serving", ours(&uid), ago(3600));

    let metrics = Metrics::default();
    let report = gc::sweep(&client, &handle(&providers), CLUSTER, MIN_AGE, &metrics)
        .await
        .unwrap();

    assert_eq!(
        report,
        SweepReport {
            listed: 3,
            deleted: 1,
            spared_young: 1,
            spared_owned: 1,
            spared_other: 0,
            errors: 0
        }
    );
    assert_eq!(deleted(&daemon), ["fake://px-orphan"]);
    assert_eq!(
        names(&daemon),
        ["px-foreign", "px-unmarked", "px-web-serving", "px-young-orphan"]
    );
    assert_eq!(
        metrics
            .gc_deletions
            .get_or_create(&ProviderLabels {
                provider: PROVIDER.to_owned()
            })
            .get(),
        1
    );
}

#[tokio::test]
async fn an_old_leftover_of_an_existing_proxy_is_deleted_but_its_serving_instance_is_not() {
    let (client, ns) = namespace("gc_deletes_a_leftover").await;
    let daemon = Daemon::start(FakeOptions::default()).await;
    let (_, providers) = providers(CLUSTER, PROVIDER, "fake", &daemon.endpoint());
    let uid = proxy_serving(&ns.api::<Proxy>(), "web", "px-web-new").await;

    daemon.fake.seed("px-web-new", ours(&uid), ago(3600));
    daemon.fake.seed("px-web-old", ours(&uid), ago(7200));
    daemon.fake.seed("px-web-just-made", ours(&uid), ago(5));

    let report = gc::sweep(&client, &handle(&providers), CLUSTER, MIN_AGE, &Metrics::default())
        .await
        .unwrap();

    assert_eq!(
        (report.deleted, report.spared_owned, report.spared_young),
        (1, 1, 1),
        "{report:?}"
    );
    assert_eq!(deleted(&daemon), ["fake://px-web-old"]);
    assert_eq!(names(&daemon), ["px-web-just-made", "px-web-new"]);
}

#[tokio::test]
async fn a_failed_listing_deletes_nothing_and_is_reported_as_an_error() {
    let (client, _ns) = namespace("gc_failed_listing").await;
    let daemon = Daemon::start(FakeOptions::default()).await;
    let (_, providers) = providers(CLUSTER, PROVIDER, "fake", &daemon.endpoint());
    daemon
        .fake
        .seed("px-orphan", ours("3f0c9a43-0000-4000-8000-00000000dead"), ago(3600));
    daemon.fake.inject(
        Rpc::ListByTag,
        Fault::Error(ProviderError::transient(BACKEND_UNAVAILABLE, "region down")),
    );

    let outcome = gc::sweep(&client, &handle(&providers), CLUSTER, MIN_AGE, &Metrics::default()).await;

    assert!(matches!(outcome, Err(GcError::ListInstances { .. })), "{outcome:?}");
    assert!(deleted(&daemon).is_empty());
    assert_eq!(names(&daemon), ["px-orphan"]);
    // The next round, with the provider back, collects it.
    let report = gc::sweep(&client, &handle(&providers), CLUSTER, MIN_AGE, &Metrics::default())
        .await
        .unwrap();
    assert_eq!(report.deleted, 1);
}

/// The provider is listed first and the cluster second: a Proxy (and its instance) that appear while the
/// provider is being listed are both seen, so the instance is spared. Listing the other way round would
/// miss the Proxy and delete the instance.
#[tokio::test]
async fn a_proxy_created_while_the_provider_is_listed_protects_its_instance() {
    let (client, ns) = namespace("gc_lists_the_provider_first").await;
    // Every call waits this long before acting, leaving a window after ListByTag has been entered.
    let daemon = Daemon::start(FakeOptions {
        latency: Duration::from_secs(3),
        ..FakeOptions::default()
    })
    .await;
    let (_, providers) = providers(CLUSTER, PROVIDER, "fake", &daemon.endpoint());
    let handle = handle(&providers);
    let sweep = tokio::spawn({
        let client = client.clone();
        async move { gc::sweep(&client, &handle, CLUSTER, MIN_AGE, &Metrics::default()).await }
    });

    tokio::time::timeout(Duration::from_secs(10), async {
        while daemon.fake.call_count(Rpc::ListByTag) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the sweep lists the provider");
    let name = unique("px-adopted");
    let uid = proxy_serving(&ns.api::<Proxy>(), "late", &name).await;
    daemon.fake.seed(&name, ours(&uid), ago(3600));

    let report = sweep.await.unwrap().unwrap();
    assert_eq!(
        (report.listed, report.spared_owned, report.deleted),
        (1, 1, 0),
        "{report:?}"
    );
    assert!(deleted(&daemon).is_empty());
}
