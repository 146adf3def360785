//! Reconcile tests against a mocked apiserver (see `fixtures`): each test states the requests a reconcile
//! makes, in order, and what the fake provider saw. What needs a real apiserver (watches, the finalizer
//! through a real deletion, make before break end to end) is in `tests/proxy_e2e.rs`.

use std::time::Duration;

use kube::runtime::controller::Action;
use provider_sdk::{
    model::{Marks, ProviderId},
    testing::{FAKE_PROVIDER_TYPE, FakeOptions, Rpc},
};

use super::{
    Error,
    fixtures::{Backend, CLUSTER_ID, UID, mock_client, proxy, reconcile, verified},
    status::READY,
};
use crate::crd::{InstanceRef, LastError, ProxyPhase, ProxyStatus};

/// Long enough that no instance runs during a test: a reconcile stops at "starting".
fn slow_start() -> FakeOptions {
    FakeOptions {
        provisioning: Duration::from_secs(3600),
        ..FakeOptions::default()
    }
}

fn ready_reason(status: &ProxyStatus) -> Option<&str> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == READY)
        .filter(|c| c.status == "False")
        .map(|c| c.reason.as_str())
}

#[tokio::test]
async fn a_proxy_without_the_finalizer_gets_it_and_nothing_else_happens() {
    let backend = Backend::start(FakeOptions::default()).await;
    let (client, mut apiserver) = mock_client();
    let px = proxy("px").build();
    let expected = px.clone();
    let verifier = tokio::spawn(async move {
        apiserver.expect_finalizer_added(&expected).await;
        apiserver.expect_no_more_requests().await;
    });

    let result = reconcile(px, backend.context(client)).await;

    verified(verifier).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(backend.fake.calls(), vec![], "no provider call");
}

#[tokio::test]
async fn a_new_proxy_has_its_instance_name_in_the_status_before_the_provider_is_asked_to_create_it() {
    let backend = Backend::start(slow_start()).await;
    let (client, mut apiserver) = mock_client();
    let px = proxy("px").with_finalizer().build();
    let (expected, fake) = (px.clone(), backend.fake.clone());
    let verifier = tokio::spawn(async move {
        apiserver.expect_consumer_secret_read_not_found(&expected).await;
        apiserver.expect_consumer_secret_applied(&expected).await;
        let named = apiserver
            .expect_status_applied(&expected, |status| {
                assert_eq!(
                    fake.call_count(Rpc::Create),
                    0,
                    "Create ran before the name was persisted"
                );
                let instance = status.instance.as_ref().expect("status.instance is written");
                assert!(instance.name.starts_with("px-"), "{instance:?}");
                assert_eq!(instance.provider_id, None);
                assert_eq!(status.phase, Some(ProxyPhase::Provisioning));
            })
            .await;
        let name = named.instance.unwrap().name;
        apiserver
            .expect_status_applied(&expected, |status| {
                let creates: Vec<_> = fake.calls().into_iter().filter(|c| c.rpc == Rpc::Create).collect();
                assert_eq!(creates.len(), 1, "{creates:?}");
                assert_eq!(creates[0].subject, name, "Create asks for the persisted name");
                let id = ProviderId::new(FAKE_PROVIDER_TYPE, &name).to_string();
                assert_eq!(
                    status.instance.as_ref().and_then(|i| i.provider_id.as_deref()),
                    Some(id.as_str()),
                    "the provider ID is persisted as soon as Create answers"
                );
            })
            .await;
        apiserver.expect_event(&expected, "Created").await;
        apiserver
            .expect_status_applied(&expected, |status| {
                assert_eq!(ready_reason(status), Some("InstanceProvisioning"));
            })
            .await;
        apiserver.expect_no_more_requests().await;
    });

    let result = reconcile(px, backend.context(client)).await;

    verified(verifier).await;
    assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(2)));
}

/// A later reconcile reads its Proxy from a cache that can predate the instance's address: rewriting the
/// Secret then would drop its `endpoint` key for a moment. Credentials already stored are left alone until
/// an instance runs.
#[tokio::test]
async fn stored_credentials_are_not_rewritten_before_an_instance_runs() {
    let backend = Backend::start(slow_start()).await;
    let (client, mut apiserver) = mock_client();
    let px = proxy("px").with_finalizer().build();
    let expected = px.clone();
    let verifier = tokio::spawn(async move {
        apiserver.expect_consumer_secret_read_with_credentials(&expected).await;
        apiserver
            .expect_status_applied(&expected, |status| {
                assert!(
                    status.instance.is_some(),
                    "the name is written first, with no Secret write before it"
                );
            })
            .await;
        apiserver.expect_status_applied(&expected, |_| {}).await;
        apiserver.expect_event(&expected, "Created").await;
        apiserver
            .expect_status_applied(&expected, |status| {
                assert_eq!(ready_reason(status), Some("InstanceProvisioning"));
            })
            .await;
        apiserver.expect_no_more_requests().await;
    });

    let result = reconcile(px, backend.context(client)).await;

    verified(verifier).await;
    assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(2)));
}

#[tokio::test]
async fn a_proxy_failed_permanently_at_its_current_generation_makes_no_call_at_all() {
    let backend = Backend::start(FakeOptions::default()).await;
    let (client, apiserver) = mock_client();
    let px = proxy("px")
        .with_finalizer()
        .status(ProxyStatus {
            phase: Some(ProxyPhase::Failed),
            observed_generation: Some(1),
            last_error: Some(LastError {
                class: "permanent".to_owned(),
                reason: "InvalidArgument".to_owned(),
                message: "placement.region: unknown region".to_owned(),
                time: None,
            }),
            ..ProxyStatus::default()
        })
        .build();
    let verifier = tokio::spawn(apiserver.expect_no_more_requests());

    let result = reconcile(px, backend.context(client)).await;

    verified(verifier).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(backend.fake.calls(), vec![], "no provider call");
}

#[tokio::test]
async fn an_unknown_provider_is_reported_as_provider_not_found_without_any_provider_call() {
    let backend = Backend::start(FakeOptions::default()).await;
    let (client, mut apiserver) = mock_client();
    let px = proxy("px").provider("nowhere").with_finalizer().build();
    let expected = px.clone();
    let verifier = tokio::spawn(async move {
        apiserver
            .expect_status_applied(&expected, |status| {
                assert_eq!(ready_reason(status), Some("ProviderNotFound"), "{status:?}");
                let error = status.last_error.as_ref().expect("the last error is recorded");
                assert_eq!(
                    (error.class.as_str(), error.reason.as_str()),
                    ("permanent", "ProviderNotFound")
                );
                assert!(error.message.contains("nowhere"), "{error:?}");
                assert_eq!(status.instance, None);
            })
            .await;
        apiserver.expect_event(&expected, "Failed").await;
        apiserver.expect_no_more_requests().await;
    });

    let result = reconcile(px, backend.context(client)).await;

    verified(verifier).await;
    // Looked at again now and then (the provider may be configured later), never in a hot loop.
    assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(60)));
    assert_eq!(backend.fake.calls(), vec![], "no provider call");
}

#[tokio::test]
async fn deletion_keeps_the_finalizer_until_get_answers_not_found() {
    let backend = Backend::with_slow_deletes(FakeOptions::default(), 1).await;
    let marks = Marks {
        managed: true,
        proxy_uid: UID.to_owned(),
        cluster_id: CLUSTER_ID.to_owned(),
    };
    let instance = backend.fake.seed("px-instance", marks, std::time::SystemTime::now());
    let serving = InstanceRef {
        name: instance.name.clone(),
        spec_hash: "0123456789".to_owned(),
        provider_id: Some(instance.provider_id.to_string()),
    };
    let running = ProxyStatus {
        phase: Some(ProxyPhase::Running),
        instance: Some(serving),
        ..ProxyStatus::default()
    };

    // First pass: Delete is accepted, but Get still sees the instance (terminating).
    let (client, mut apiserver) = mock_client();
    let px = proxy("px").with_finalizer().deleting().status(running).build();
    let expected = px.clone();
    let verifier = tokio::spawn(async move {
        apiserver
            .expect_status_applied(&expected, |status| assert_eq!(status.phase, Some(ProxyPhase::Deleting)))
            .await;
        apiserver.expect_no_more_requests().await;
    });
    let result = reconcile(px.clone(), backend.context(client)).await;
    verified(verifier).await;
    assert!(
        matches!(&result, Err(Error::Finalizer(inner)) if matches!(inner.as_ref(),
            kube::runtime::finalizer::Error::CleanupFailed(Error::StillDeleting { remaining: 1 }))),
        "{result:?}"
    );
    assert_eq!(backend.fake.call_count(Rpc::Delete), 1);

    // Second pass: Get answers NotFound, and only then does the finalizer go.
    let (client, mut apiserver) = mock_client();
    let mut deleting = (*px).clone();
    deleting.status.as_mut().unwrap().phase = Some(ProxyPhase::Deleting);
    let px = std::sync::Arc::new(deleting);
    let (expected, fake) = (px.clone(), backend.fake.clone());
    let verifier = tokio::spawn(async move {
        apiserver.expect_event(&expected, "Deleted").await;
        assert_eq!(fake.call_count(Rpc::Get), 2, "the second Get answered NotFound");
        apiserver.expect_finalizer_removed(&expected).await;
        apiserver.expect_no_more_requests().await;
    });
    let result = reconcile(px, backend.context(client)).await;
    verified(verifier).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert!(backend.fake.instances().is_empty());
}
