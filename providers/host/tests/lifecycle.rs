//! The daemon's own rules, end to end: a proxy that keeps exiting ends Stopped with a failed Check, the
//! pool running out is a quota error that Delete undoes, concurrent Creates get distinct addresses, and
//! start-up refuses a bad config or a state directory another daemon holds.

mod common;

use std::{collections::BTreeSet, process::Stdio, time::Duration};

use common::{Host, check_target, free_port, request, wait_for_state};
use provider_sdk::{
    ErrorClass,
    client::{CallTimeouts, ProviderClient},
    model::{InstanceState, ListFilter},
};

#[tokio::test(flavor = "multi_thread")]
async fn a_proxy_that_keeps_exiting_is_stopped_and_fails_check() {
    // /bin/false stands for a tinyproxy that exits at once, whatever it is given.
    let host = Host::with(
        28,
        "tinyproxyPath: /bin/false\ncrashLoop: {exits: 3, windowSeconds: 60}\n",
    );
    let _daemon = host.start();
    let client = host.client();
    let created = client
        .create(&request("egress-flaky", free_port(), &[]))
        .await
        .expect("Create");
    assert_eq!(
        created.state,
        InstanceState::Provisioning,
        "a new instance is never Stopped"
    );
    wait_for_state(&client, &created.provider_id, InstanceState::Stopped).await;

    let instances = check_target(&client, "instances").await;
    assert!(!instances.ok, "{instances:?}");
    assert_eq!(instances.reason, "CRASH_LOOP");
    assert!(instances.message.contains("egress-flaky"), "{}", instances.message);
    assert_eq!(instances.details["crash_looping"], "1");
    let binary = check_target(&client, "binary").await;
    assert_eq!(
        (binary.ok, binary.reason.as_str()),
        (false, "MISCONFIGURED"),
        "{binary:?}"
    );

    client.delete(&created.provider_id).await.expect("Delete");
    assert!(check_target(&client, "instances").await.ok);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exhausted_pool_is_a_quota_error_until_an_address_is_freed() {
    // A /31 holds two addresses.
    let host = Host::with(31, "");
    let _daemon = host.start();
    let client = host.client();
    let port = free_port();
    let first = client
        .create(&request("egress-one", port, &[]))
        .await
        .expect("Create 1");
    client
        .create(&request("egress-two", port, &[]))
        .await
        .expect("Create 2");

    let error = client.create(&request("egress-three", port, &[])).await.unwrap_err();
    assert_eq!(error.class(), ErrorClass::Quota, "{error}");
    assert_eq!(error.reason(), "QUOTA_EXHAUSTED");
    assert!(error.to_string().contains("2 used by instances"), "{error}");
    let pool = check_target(&client, "pool").await;
    assert_eq!((pool.ok, pool.reason.as_str()), (false, "QUOTA_EXHAUSTED"), "{pool:?}");
    assert_eq!(pool.details["free"], "0");

    client.delete(&first.provider_id).await.expect("Delete");
    let third = client
        .create(&request("egress-three", port, &[]))
        .await
        .expect("Create after Delete");
    assert_eq!(third.ipv4, first.ipv4, "the freed address is taken again");
    for name in ["egress-two", "egress-three"] {
        let id = provider_sdk::model::ProviderId::new("host", name);
        client.delete(&id).await.expect("Delete");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_creates_of_different_names_get_different_addresses() {
    let host = Host::new();
    let _daemon = host.start();
    let client = host.client();
    let port = free_port();
    let names: Vec<String> = (0..6).map(|i| format!("egress-many-{i}")).collect();
    let creates = names.iter().map(|name| {
        let client = client.clone();
        let request = request(name, port, &[]);
        async move { client.create(&request).await }
    });
    let created = futures::future::join_all(creates).await;
    let addresses: BTreeSet<_> = created.iter().map(|i| i.as_ref().unwrap().ipv4.unwrap()).collect();
    assert_eq!(addresses.len(), names.len(), "{addresses:?}");
    for instance in created.into_iter().flatten() {
        wait_for_state(&client, &instance.provider_id, InstanceState::Running).await;
        client.delete(&instance.provider_id).await.expect("Delete");
    }
}

#[test]
fn a_second_daemon_on_the_same_state_directory_is_refused() {
    let host = Host::new();
    let _daemon = host.start();
    let other = host.dir.path().join("other.sock");
    let output = host
        .command(&format!("unix://{}", other.display()))
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("is in use by another egress-provider-host"), "{stderr}");
}

#[test]
fn a_bad_config_stops_the_daemon_with_code_64_naming_the_field_and_value() {
    let host = Host::with(28, "maxClients: 0\n");
    let output = host.command("unix:///tmp/never-bound-host.sock").output().unwrap();
    assert_eq!(output.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("maxClients: 0 must be 1 to 100000"), "{stderr}");
    assert!(!host.state_dir().exists(), "nothing is made before the config is valid");
}

#[tokio::test(flavor = "multi_thread")]
async fn creates_and_deletes_cut_off_by_their_deadline_are_finished_and_found_by_the_retry() {
    let host = Host::new();
    let _daemon = host.start();
    let client = host.client();
    let endpoint = host.endpoint().parse().unwrap();
    let hasty_timeouts = CallTimeouts {
        create: Duration::from_millis(1),
        delete: Duration::from_millis(1),
        ..CallTimeouts::default()
    };
    let hasty = ProviderClient::connect_lazy(&endpoint, None, hasty_timeouts).unwrap();
    let request = request("egress-hasty", free_port(), &[]);
    for _ in 0..3 {
        // Whatever these answer, the work they began runs to its end.
        let _ = hasty.create(&request).await;
    }
    let created = client.create(&request).await.expect("the retried Create");
    let listed = client
        .list_by_tag(&ListFilter {
            cluster_id: request.cluster_id.clone(),
            proxy_uid: None,
        })
        .await
        .expect("ListByTag");
    assert_eq!(listed.len(), 1, "one instance for one name: {listed:?}");
    wait_for_state(&client, &created.provider_id, InstanceState::Running).await;

    let _ = hasty.delete(&created.provider_id).await;
    // A Delete during the first one's teardown answers at once; Get shows Terminated until it is gone.
    client.delete(&created.provider_id).await.expect("the retried Delete");
    loop {
        match client.get(&created.provider_id).await {
            Err(error) => break assert_eq!(error.class(), ErrorClass::NotFound, "{error}"),
            Ok(instance) => assert_eq!(instance.state, InstanceState::Terminated),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!host.instance_dir("egress-hasty").exists());
}
