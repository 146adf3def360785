//! End-to-end checks of the test control plane itself: namespaces, CRDs with a status subresource and
//! CEL rules, server-side apply, watches, finalizers, RBAC and kubectl, all against one shared
//! etcd + kube-apiserver.

mod common;

use std::time::Duration;

use common::{COLOR_RULE_MESSAGE, FINALIZER, SIZE_RULE_MESSAGE, Widget, WidgetStatus, widget, widget_crd};
use egress_test_support::{ControlPlane, TEST_NAMESPACE_LABEL, TestNamespace};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

const MANAGER: &str = "e2e-test";
const CREATOR: &str = "e2e-creator";

async fn namespace_with_widgets(hint: &str) -> (&'static ControlPlane, TestNamespace) {
    let control_plane = ControlPlane::shared().await.expect("control plane");
    control_plane.install_crds(&[widget_crd()]).await.expect("Widget CRD");
    let namespace = control_plane.namespace(hint).await.expect("namespace");
    (control_plane, namespace)
}

fn apply() -> PatchParams {
    PatchParams::apply(MANAGER)
}

fn invalid_message(error: kube::Error) -> String {
    match error {
        kube::Error::Api(status) if status.code == 422 => status.message,
        other => panic!("expected 422 Invalid, got {other:?}"),
    }
}

/// The next watch event that satisfies `matches`, failing the test after 30 s.
async fn next_matching<S, F>(events: &mut S, what: &str, mut matches: F) -> watcher::Event<Widget>
where
    S: Stream<Item = Result<watcher::Event<Widget>, watcher::Error>> + Unpin,
    F: FnMut(&watcher::Event<Widget>) -> bool,
{
    let wait = async {
        loop {
            let event = events.next().await.expect("watch ended").expect("watch error");
            if matches(&event) {
                return event;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .unwrap_or_else(|_| panic!("no watch event for {what} within 30 s"))
}

#[tokio::test]
async fn a_test_namespace_is_created_active_and_labelled() {
    let control_plane = ControlPlane::shared().await.expect("control plane");
    let namespace = control_plane.namespace("a_test_namespace_is_created").await.unwrap();

    let stored = Api::<Namespace>::all(control_plane.client().unwrap())
        .get(namespace.name())
        .await
        .unwrap();
    assert_eq!(stored.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Active"));
    assert_eq!(
        stored.labels().get(TEST_NAMESPACE_LABEL).map(String::as_str),
        Some("true")
    );
}

#[tokio::test]
async fn cel_rules_refuse_invalid_widgets_with_their_messages() {
    let (_, namespace) = namespace_with_widgets("cel_rules_refuse").await;
    let widgets = namespace.api::<Widget>();

    let too_big = widgets
        .create(&PostParams::default(), &widget("too-big", 11, "red"))
        .await
        .expect_err("size 11 breaks the CEL rule");
    assert!(invalid_message(too_big).contains(SIZE_RULE_MESSAGE));

    // A transition rule: only checked on update, against the stored object.
    widgets
        .patch("fixed-color", &apply(), &Patch::Apply(widget("fixed-color", 1, "red")))
        .await
        .unwrap();
    let recolored = widgets
        .patch("fixed-color", &apply(), &Patch::Apply(widget("fixed-color", 1, "blue")))
        .await
        .expect_err("color is immutable");
    assert!(invalid_message(recolored).contains(COLOR_RULE_MESSAGE));
}

#[tokio::test]
async fn the_status_subresource_keeps_spec_and_status_writes_apart() {
    let (_, namespace) = namespace_with_widgets("status_subresource").await;
    let widgets = namespace.api::<Widget>();
    let created = widgets
        .patch("w", &apply(), &Patch::Apply(widget("w", 2, "red")))
        .await
        .unwrap();

    let mut with_status = widget("w", 2, "red");
    with_status.status = Some(WidgetStatus { phase: "Ready".into() });
    let after_status = widgets
        .patch_status("w", &apply(), &Patch::Apply(&with_status))
        .await
        .unwrap();
    assert_eq!(after_status.status, with_status.status);
    assert_eq!(
        after_status.metadata.generation, created.metadata.generation,
        "a status write must not bump the generation"
    );

    // Status sent to the main resource is dropped, so a spec writer cannot clobber the controller's status.
    let mut spec_writer = widget("w", 3, "red");
    spec_writer.status = Some(WidgetStatus { phase: "Forged".into() });
    let after_spec = widgets.patch("w", &apply(), &Patch::Apply(&spec_writer)).await.unwrap();
    assert_eq!(after_spec.spec.size, 3);
    assert_eq!(after_spec.status, with_status.status);
    assert!(after_spec.metadata.generation > created.metadata.generation);
}

#[tokio::test]
async fn a_widget_is_created_applied_watched_and_deleted_through_its_finalizer() {
    let (_, namespace) = namespace_with_widgets("widget_lifecycle").await;
    let widgets = namespace.api::<Widget>();
    let mut events = watcher(widgets.clone(), watcher::Config::default()).boxed();
    next_matching(&mut events, "the initial list", |e| {
        matches!(e, watcher::Event::InitDone)
    })
    .await;

    let mut desired = widget("lifecycle", 1, "green");
    desired.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
    let create = PostParams {
        field_manager: Some(CREATOR.to_owned()),
        ..PostParams::default()
    };
    let created = widgets.create(&create, &desired).await.unwrap();
    assert_eq!(created.finalizers(), [FINALIZER]);
    next_matching(
        &mut events,
        "the creation",
        |e| matches!(e, watcher::Event::Apply(w) if w.name_any() == "lifecycle"),
    )
    .await;

    // Server-side apply: another field manager may not silently take a field it does not own...
    let resize = serde_json::json!({
        "apiVersion": format!("{}/v1", common::GROUP),
        "kind": "Widget",
        "spec": { "size": 7, "color": "green" },
    });
    let conflict = widgets
        .patch("lifecycle", &PatchParams::apply("resizer"), &Patch::Apply(&resize))
        .await
        .expect_err("spec.size belongs to the creator");
    match conflict {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 409, "{status:?}");
            assert!(status.message.contains(CREATOR), "{}", status.message);
        }
        other => panic!("expected 409 Conflict, got {other:?}"),
    }
    // ...but may force it, and then owns it.
    let resized = widgets
        .patch(
            "lifecycle",
            &PatchParams::apply("resizer").force(),
            &Patch::Apply(&resize),
        )
        .await
        .unwrap();
    assert_eq!(resized.spec.size, 7);
    assert_eq!(resized.finalizers(), [FINALIZER]);
    let managers: Vec<_> = resized
        .managed_fields()
        .iter()
        .filter_map(|f| f.manager.as_deref())
        .collect();
    assert!(managers.contains(&"resizer"), "{managers:?}");
    next_matching(
        &mut events,
        "the resize",
        |e| matches!(e, watcher::Event::Apply(w) if w.spec.size == 7),
    )
    .await;

    // The finalizer holds the object: deletion only marks it.
    widgets.delete("lifecycle", &DeleteParams::default()).await.unwrap();
    let terminating = widgets.get("lifecycle").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    next_matching(
        &mut events,
        "the deletion mark",
        |e| matches!(e, watcher::Event::Apply(w) if w.metadata.deletion_timestamp.is_some()),
    )
    .await;

    let release = serde_json::json!({ "metadata": { "finalizers": null } });
    widgets
        .patch("lifecycle", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    next_matching(
        &mut events,
        "the removal",
        |e| matches!(e, watcher::Event::Delete(w) if w.name_any() == "lifecycle"),
    )
    .await;
    assert!(widgets.get_opt("lifecycle").await.unwrap().is_none());
}

#[tokio::test]
async fn rbac_refuses_a_user_without_bindings() {
    let (control_plane, namespace) = namespace_with_widgets("rbac_refuses").await;
    let mut config = control_plane.config().clone();
    config.auth_info.impersonate = Some("nobody".into());
    let nobody = kube::Client::try_from(config).unwrap();

    let refused = Api::<Widget>::namespaced(nobody, namespace.name())
        .list(&Default::default())
        .await
        .expect_err("no RoleBinding grants nobody anything");
    match refused {
        kube::Error::Api(status) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("expected 403, got {other:?}"),
    }
}

#[tokio::test]
async fn kubectl_from_the_cache_works_with_the_generated_kubeconfig() {
    let (control_plane, namespace) = namespace_with_widgets("kubectl_works").await;
    let kubectl = |args: &[&str]| {
        let output = control_plane.kubectl().args(args).output().unwrap();
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };

    let version: serde_json::Value = serde_json::from_str(&kubectl(&["version", "--output=json"])).unwrap();
    let expected = egress_test_support::kubernetes_version();
    assert_eq!(version["clientVersion"]["gitVersion"], expected);
    assert_eq!(version["serverVersion"]["gitVersion"], expected);

    let ns = namespace.name();
    kubectl(&[
        "--namespace",
        ns,
        "create",
        "configmap",
        "made-by-kubectl",
        "--from-literal=k=v",
    ]);
    let fetched = namespace
        .api::<k8s_openapi::api::core::v1::ConfigMap>()
        .get("made-by-kubectl")
        .await
        .unwrap();
    assert_eq!(fetched.data.unwrap()["k"], "v");

    // Objects the Rust client made are visible to kubectl, printer columns included.
    namespace
        .api::<Widget>()
        .patch("seen", &apply(), &Patch::Apply(widget("seen", 4, "red")))
        .await
        .unwrap();
    let table = kubectl(&["--namespace", ns, "get", "widgets"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    // Declared printer columns replace the default ones after NAME.
    assert_eq!(header, ["NAME", "SIZE", "PHASE"]);
    assert!(table.lines().any(|l| l.starts_with("seen ")), "{table}");

    assert_eq!(kubectl(&["auth", "can-i", "*", "*"]).trim(), "yes");
}
