//! The SDK's gRPC server and client together, over a real unix socket: the RPC round trip, the error
//! contract on the wire (ErrorInfo, QuotaFailure, BadRequest), panics, graceful shutdown and deadlines.

mod support;

use std::{
    collections::BTreeSet,
    os::unix::fs::{FileTypeExt, PermissionsExt},
    time::{Duration, Instant},
};

use provider_sdk::{
    ErrorClass, ProviderError,
    client::CallTimeouts,
    error::{PermanentKind, TransientKind},
    model::{InstanceState, ListFilter, ProviderId},
    proto::{self, provider_service_client::ProviderServiceClient},
    status::{ERROR_DOMAIN, METADATA_PROVIDER},
    testing::{FAKE_PROVIDER_TYPE, FakeOptions, FakeProvider, Fault, Rpc},
};
use support::{CLUSTER, UnixDaemon, create_request, unix_client, wire_create_request};
use tonic::{Code, Status, transport::Channel};
use tonic_types::{ErrorInfo, StatusExt};

fn raw(daemon: &UnixDaemon) -> ProviderServiceClient<Channel> {
    ProviderServiceClient::new(daemon.client.channel())
}

fn error_info(status: &Status) -> ErrorInfo {
    status
        .get_error_details()
        .error_info()
        .cloned()
        .unwrap_or_else(|| panic!("no google.rpc.ErrorInfo in {status:?}"))
}

/// Polls `condition` every 5 ms for up to two seconds.
async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_unix_socket_daemon_creates_reports_lists_and_deletes_an_instance() {
    let fake = FakeProvider::new(FakeOptions::default());
    let daemon = UnixDaemon::start(fake.clone()).await;

    let meta = std::fs::metadata(&daemon.path).expect("the socket exists once bound");
    assert!(meta.file_type().is_socket());
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o660,
        "the socket must be reachable by owner and group only"
    );

    let client = &daemon.client;
    let info = client.get_info().await.expect("GetInfo");
    assert_eq!(info.provider_type, FAKE_PROVIDER_TYPE);

    let request = create_request("egress-round-trip");
    let created = client.create(&request).await.expect("Create");
    assert_eq!(created.name, "egress-round-trip");
    assert_eq!(created.marks.cluster_id, CLUSTER);
    assert!(created.marks.managed);

    let again = client.create(&request).await.expect("the same Create again");
    assert_eq!(again.provider_id, created.provider_id, "Create is idempotent by name");

    let got = client.get(&created.provider_id).await.expect("Get");
    assert_eq!(got.state, InstanceState::Running);
    let ip = got.ipv4.expect("a Running instance reports its IPv4");
    assert!(!ip.is_unspecified());

    let mine = ListFilter {
        cluster_id: CLUSTER.to_owned(),
        proxy_uid: None,
    };
    let listed = client.list_by_tag(&mine).await.expect("ListByTag");
    assert_eq!(listed, vec![got.clone()]);
    let foreign = ListFilter {
        cluster_id: "cluster-b".to_owned(),
        proxy_uid: None,
    };
    assert!(client.list_by_tag(&foreign).await.expect("ListByTag").is_empty());

    client.delete(&created.provider_id).await.expect("Delete");
    let gone = client.get(&created.provider_id).await.expect_err("Get after Delete");
    assert_eq!(gone.class(), ErrorClass::NotFound, "{gone:?}");
    client
        .delete(&created.provider_id)
        .await
        .expect("Delete of an absent instance is success");
    assert!(fake.instances().is_empty());

    daemon.daemon.stop().await.expect("serve returns cleanly");
}

#[tokio::test]
async fn every_error_reaching_the_client_carries_error_info_in_our_domain() {
    let fake = FakeProvider::new(FakeOptions::default());
    let daemon = UnixDaemon::start(fake.clone()).await;
    let mut raw = raw(&daemon);
    let get = |id: &str| proto::GetRequest {
        provider_id: id.to_owned(),
    };
    let delete = |id: &str| proto::DeleteRequest {
        provider_id: id.to_owned(),
    };

    let mut statuses: Vec<(&str, Code, Status)> = Vec::new();

    let missing = raw.get(get("fake://egress-missing")).await.unwrap_err();
    statuses.push(("INSTANCE_NOT_FOUND", Code::NotFound, missing));

    let foreign = raw.get(get("aws://i-0123")).await.unwrap_err();
    statuses.push(("MALFORMED_PROVIDER_ID", Code::InvalidArgument, foreign));

    let malformed = raw.delete(delete("fake://Not_A_Name")).await.unwrap_err();
    statuses.push(("MALFORMED_PROVIDER_ID", Code::InvalidArgument, malformed));

    fake.inject(
        Rpc::Get,
        Fault::Error(
            ProviderError::transient("BACKEND_UNAVAILABLE", "the backend is down")
                .with_retry_after(Duration::from_secs(7)),
        ),
    );
    let transient = raw.get(get("fake://egress-a")).await.unwrap_err();
    assert_eq!(
        transient.get_error_details().retry_info().and_then(|r| r.retry_delay),
        Some(Duration::from_secs(7)),
        "the backend's delay travels as RetryInfo"
    );
    statuses.push(("BACKEND_UNAVAILABLE", Code::Unavailable, transient));

    fake.inject(
        Rpc::Delete,
        Fault::Error(ProviderError::transient_kind(
            TransientKind::Aborted,
            "CONFLICT",
            "a concurrent change",
        )),
    );
    let aborted = raw.delete(delete("fake://egress-a")).await.unwrap_err();
    statuses.push(("CONFLICT", Code::Aborted, aborted));

    fake.inject(
        Rpc::Create,
        Fault::Error(ProviderError::permanent(
            PermanentKind::PermissionDenied,
            "ACCESS_DENIED",
            "the credentials may not create instances",
        )),
    );
    let denied = raw.create(wire_create_request("egress-denied")).await.unwrap_err();
    statuses.push(("ACCESS_DENIED", Code::PermissionDenied, denied));

    fake.inject(
        Rpc::ListByTag,
        Fault::Error(ProviderError::transient("BACKEND_UNAVAILABLE", "list failed")),
    );
    let listing = raw
        .list_by_tag(proto::ListByTagRequest {
            cluster_id: CLUSTER.to_owned(),
            proxy_uid: String::new(),
        })
        .await
        .expect_err("the listing fails when it opens");
    statuses.push(("BACKEND_UNAVAILABLE", Code::Unavailable, listing));

    let bad_filter = raw
        .list_by_tag(proto::ListByTagRequest {
            cluster_id: String::new(),
            proxy_uid: String::new(),
        })
        .await
        .expect_err("an empty cluster id is refused");
    statuses.push(("INVALID_ARGUMENT", Code::InvalidArgument, bad_filter));

    fake.inject(Rpc::Get, Fault::Panic);
    let panicked = raw.get(get("fake://egress-a")).await.unwrap_err();
    statuses.push(("PROVIDER_PANICKED", Code::Internal, panicked));

    for (reason, code, status) in statuses {
        assert_eq!(status.code(), code, "{status:?}");
        let info = error_info(&status);
        assert_eq!(info.domain, ERROR_DOMAIN, "{status:?}");
        assert_eq!(info.reason, reason, "{status:?}");
        assert_eq!(
            info.metadata.get(METADATA_PROVIDER).map(String::as_str),
            Some(FAKE_PROVIDER_TYPE),
            "{status:?}"
        );
    }
}

#[tokio::test]
async fn an_exhausted_quota_answers_resource_exhausted_with_a_quota_failure() {
    let fake = FakeProvider::new(FakeOptions::default());
    let daemon = UnixDaemon::start(fake.clone()).await;
    fake.inject(
        Rpc::Create,
        Fault::Error(ProviderError::quota(
            "INSTANCE_LIMIT_EXCEEDED",
            "instances/local",
            "the account may run 20 instances in local",
        )),
    );

    let status = raw(&daemon)
        .create(wire_create_request("egress-quota"))
        .await
        .expect_err("the injected quota error");

    assert_eq!(status.code(), Code::ResourceExhausted);
    let info = error_info(&status);
    assert_eq!(info.domain, ERROR_DOMAIN);
    assert_eq!(info.reason, "INSTANCE_LIMIT_EXCEEDED");
    let details = status.get_error_details();
    let quota = details.quota_failure().expect("a google.rpc.QuotaFailure");
    assert_eq!(quota.violations.len(), 1);
    assert_eq!(quota.violations[0].subject, "instances/local");
    assert_eq!(
        quota.violations[0].description,
        "the account may run 20 instances in local"
    );

    // The typed client reads the same answer as the quota class, not as the transport's exhaustion.
    fake.inject(
        Rpc::Create,
        Fault::Error(ProviderError::quota("INSTANCE_LIMIT_EXCEEDED", "instances", "full")),
    );
    let error = daemon
        .client
        .create(&create_request("egress-quota"))
        .await
        .expect_err("the injected quota error");
    assert_eq!(error.class(), ErrorClass::Quota, "{error:?}");
}

#[tokio::test]
async fn bad_request_fields_are_named_in_a_bad_request_and_never_reach_the_backend() {
    let fake = FakeProvider::new(FakeOptions::default());
    let daemon = UnixDaemon::start(fake.clone()).await;
    let mut request = wire_create_request("egress-valid");
    request.name = String::new();
    let proxy = request.proxy.as_mut().expect("proxy settings");
    proxy.port = 0;
    proxy.allowed_source_ranges = vec!["10.0.0.1/8".to_owned(), "192.168.0.0/16".to_owned()];

    let status = raw(&daemon).create(request).await.expect_err("an invalid request");

    assert_eq!(status.code(), Code::InvalidArgument);
    let info = error_info(&status);
    assert_eq!(info.domain, ERROR_DOMAIN);
    assert_eq!(info.reason, "INVALID_ARGUMENT");
    let details = status.get_error_details();
    let bad = details.bad_request().expect("a google.rpc.BadRequest");
    let fields: BTreeSet<&str> = bad.field_violations.iter().map(|v| v.field.as_str()).collect();
    assert_eq!(
        fields,
        BTreeSet::from(["name", "proxy.port", "proxy.allowed_source_ranges[0]"]),
        "one violation per bad field, and none for the good ones: {bad:?}"
    );
    let port = bad
        .field_violations
        .iter()
        .find(|v| v.field == "proxy.port")
        .expect("the port violation");
    assert!(port.description.contains("got 0"), "{port:?}");
    assert_eq!(
        fake.call_count(Rpc::Create),
        0,
        "validation happens before any backend call"
    );
    assert!(fake.instances().is_empty());
}

#[tokio::test]
async fn a_panicking_handler_answers_internal_and_the_daemon_keeps_serving() {
    let fake = FakeProvider::new(FakeOptions::default());
    let daemon = UnixDaemon::start(fake.clone()).await;
    fake.inject(Rpc::Create, Fault::Panic);

    let status = raw(&daemon)
        .create(wire_create_request("egress-panic"))
        .await
        .expect_err("the injected panic");
    assert_eq!(status.code(), Code::Internal);
    assert_eq!(error_info(&status).reason, "PROVIDER_PANICKED");
    assert!(
        !status.message().contains("injected panic"),
        "the panic payload stays in the daemon's log: {status:?}"
    );

    let created = daemon
        .client
        .create(&create_request("egress-panic"))
        .await
        .expect("the next call on the same daemon succeeds");
    let got = daemon
        .client
        .get(&created.provider_id)
        .await
        .expect("and the one after");
    assert_eq!(got.name, "egress-panic");
    assert_eq!(fake.call_count(Rpc::Create), 2);
}

#[tokio::test]
async fn shutdown_lets_the_call_in_flight_finish_and_refuses_new_connections() {
    let fake = FakeProvider::new(FakeOptions {
        latency: Duration::from_millis(500),
        ..FakeOptions::default()
    });
    let UnixDaemon {
        dir: _dir,
        path,
        mut daemon,
        client,
    } = UnixDaemon::start(fake.clone()).await;

    let in_flight = tokio::spawn({
        let client = client.clone();
        async move { client.create(&create_request("egress-draining")).await }
    });
    eventually("the Create reaches the backend", || fake.call_count(Rpc::Create) == 1).await;
    daemon.trigger_shutdown();

    // The listener closes at once, while the Create still has most of its 500 ms to go.
    let refused_at = {
        let deadline = Instant::now() + Duration::from_millis(400);
        loop {
            match tokio::net::UnixStream::connect(&path).await {
                Err(_) => break Instant::now(),
                Ok(stream) => drop(stream),
            }
            assert!(
                Instant::now() < deadline,
                "the daemon still accepts connections after shutdown"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !in_flight.is_finished(),
        "the listener must close well before the call in flight ends"
    );
    assert!(!daemon.has_returned(), "serve keeps draining while a call is in flight");
    let late = unix_client(&path, CallTimeouts::default())
        .get_info()
        .await
        .expect_err("a new connection after shutdown");
    assert_eq!(late.class(), ErrorClass::Transient, "{late:?}");

    let created = in_flight
        .await
        .expect("the Create task")
        .expect("the Create in flight still succeeds");
    assert_eq!(created.name, "egress-draining");
    assert!(refused_at.elapsed() < Duration::from_secs(5));

    daemon.stop().await.expect("serve returns cleanly");
    assert!(!path.exists(), "the socket file is removed when serve returns");
}

#[tokio::test]
async fn a_call_against_a_hung_backend_ends_at_its_deadline_as_transient() {
    let fake = FakeProvider::new(FakeOptions::default());
    let timeouts = CallTimeouts {
        // Long enough that the Get after the hung one never misses it on a busy 2-core machine.
        get: Duration::from_secs(1),
        ..CallTimeouts::default()
    };
    let daemon = UnixDaemon::start_with_timeouts(fake.clone(), timeouts).await;
    let id = ProviderId::new(FAKE_PROVIDER_TYPE, "egress-hung");
    fake.inject(Rpc::Get, Fault::Hang);

    let started = Instant::now();
    let error = daemon.client.get(&id).await.expect_err("the hung Get");
    let took = started.elapsed();

    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert!(took >= Duration::from_millis(950), "took {took:?}");
    assert_eq!(error.class(), ErrorClass::Transient, "{error:?}");
    assert!(
        matches!(
            error,
            ProviderError::Transient {
                kind: TransientKind::DeadlineExceeded,
                ..
            }
        ),
        "a passed deadline reads as DEADLINE_EXCEEDED (contract §1.5): {error:?}"
    );
    assert_eq!(error.reason(), "DEADLINE_EXCEEDED");

    // The abandoned handler pins nothing: the daemon answers its next call normally.
    let next = daemon.client.get(&id).await.expect_err("Get of an absent instance");
    assert_eq!(next.class(), ErrorClass::NotFound, "{next:?}");
    assert_eq!(fake.call_count(Rpc::Get), 2);
}
