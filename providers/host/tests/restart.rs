//! Restarts: a daemon stopped and started again on the same state directory re-adopts the proxy that
//! kept running, starts again one that died while it was away (with the password read back from the
//! instance's config file), and its supervisor restarts a tinyproxy that was killed under it.

mod common;

use std::time::Duration;

use common::{
    Host, PASSWORD, USERNAME, echo_server, free_port, get_through, is_alive, pool_free, request, signal,
    wait_for_state, wait_until,
};
use provider_sdk::{ErrorClass, model::InstanceState};

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_daemon_re_adopts_the_running_proxy_and_delete_frees_its_address() {
    let host = Host::new();
    let daemon = host.start();
    let client = host.client();
    let total = pool_free(&client).await;
    let port = free_port();
    let created = client.create(&request("egress-kept", port, &[])).await.expect("Create");
    let before = wait_for_state(&client, &created.provider_id, InstanceState::Running).await;
    let pid = host.tinyproxy_pid("egress-kept").expect("tinyproxy wrote its pid");
    assert_eq!(pool_free(&client).await, total - 1);

    assert_eq!(daemon.stop(), Some(0), "SIGTERM stops the daemon cleanly");
    assert!(is_alive(pid), "the proxy keeps serving while the daemon is away");

    let daemon = host.start();
    let client = host.client();
    let after = wait_for_state(&client, &created.provider_id, InstanceState::Running).await;
    assert_eq!(after.ipv4, before.ipv4, "same address after the restart");
    assert_eq!(
        after.created_at, before.created_at,
        "created_at is read back, not renewed"
    );
    assert_eq!(
        host.tinyproxy_pid("egress-kept"),
        Some(pid),
        "the running proxy was adopted, not replaced"
    );
    assert_eq!(
        pool_free(&client).await,
        total - 1,
        "the adopted instance still holds its address"
    );
    let answer = get_through(
        (after.ipv4.unwrap(), port),
        echo_server().await,
        Some((USERNAME, PASSWORD)),
    )
    .await;
    assert_eq!(answer.status, Some(200), "{answer:?}");

    client.delete(&created.provider_id).await.expect("Delete");
    assert!(!is_alive(pid), "Delete waits until the proxy has stopped");
    assert!(
        !host.instance_dir("egress-kept").exists(),
        "Delete removes the record and the config"
    );
    let gone = client.get(&created.provider_id).await.unwrap_err();
    assert_eq!(gone.class(), ErrorClass::NotFound, "{gone}");
    assert_eq!(pool_free(&client).await, total, "Delete frees the address");
    client
        .delete(&created.provider_id)
        .await
        .expect("deleting an absent instance succeeds");
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_proxy_that_died_while_the_daemon_was_away_is_started_again_with_its_password() {
    let host = Host::new();
    let daemon = host.start();
    let client = host.client();
    let port = free_port();
    let created = client
        .create(&request("egress-revived", port, &[]))
        .await
        .expect("Create");
    let before = wait_for_state(&client, &created.provider_id, InstanceState::Running).await;
    let pid = host.tinyproxy_pid("egress-revived").unwrap();

    daemon.crash();
    signal(pid, "KILL");
    wait_until(Duration::from_secs(5), || !is_alive(pid));

    let _daemon = host.start();
    let client = host.client();
    let after = wait_for_state(&client, &created.provider_id, InstanceState::Running).await;
    assert_eq!(after.ipv4, before.ipv4);
    assert_ne!(
        host.tinyproxy_pid("egress-revived"),
        Some(pid),
        "a new tinyproxy was started"
    );
    let answer = get_through(
        (after.ipv4.unwrap(), port),
        echo_server().await,
        Some((USERNAME, PASSWORD)),
    )
    .await;
    assert_eq!(
        answer.status,
        Some(200),
        "the re-rendered config kept the password: {answer:?}"
    );
    client.delete(&created.provider_id).await.expect("Delete");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_tinyproxy_is_restarted_by_the_supervisor() {
    let host = Host::new();
    let _daemon = host.start();
    let client = host.client();
    let created = client
        .create(&request("egress-phoenix", free_port(), &[]))
        .await
        .expect("Create");
    let before = wait_for_state(&client, &created.provider_id, InstanceState::Running).await;
    let pid = host.tinyproxy_pid("egress-phoenix").unwrap();

    signal(pid, "KILL");
    wait_until(Duration::from_secs(10), || {
        host.tinyproxy_pid("egress-phoenix")
            .is_some_and(|new| new != pid && is_alive(new))
    });
    let after = wait_for_state(&client, &created.provider_id, InstanceState::Running).await;
    assert_eq!(after.ipv4, before.ipv4, "the restarted proxy keeps the address");
    client.delete(&created.provider_id).await.expect("Delete");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_daemon_finishes_a_cut_off_delete_and_removes_leftovers() {
    let host = Host::new();
    let daemon = host.start();
    let client = host.client();
    let created = client
        .create(&request("egress-doomed", free_port(), &[]))
        .await
        .expect("Create");
    wait_for_state(&client, &created.provider_id, InstanceState::Running).await;
    let pid = host.tinyproxy_pid("egress-doomed").unwrap();
    daemon.crash();
    // As if the daemon had died right after Delete's first step: the record says deleted, the proxy runs.
    let record_path = host.instance_dir("egress-doomed").join("record.json");
    let mut record: serde_json::Value = serde_json::from_slice(&std::fs::read(&record_path).unwrap()).unwrap();
    record["desired"] = "deleted".into();
    std::fs::write(&record_path, serde_json::to_vec(&record).unwrap()).unwrap();
    // And what a Create cut off before its record, and a Delete cut off after its rename, leave behind.
    std::fs::create_dir_all(host.instance_dir("egress-unborn")).unwrap();
    std::fs::write(host.instance_dir("egress-unborn").join("tinyproxy.conf"), "Port 1\n").unwrap();
    std::fs::create_dir_all(host.state_dir().join(".deleted-egress-gone")).unwrap();

    let _daemon = host.start();
    let client = host.client();
    wait_until(Duration::from_secs(10), || !host.instance_dir("egress-doomed").exists());
    assert!(!is_alive(pid), "the Delete was finished: the proxy is stopped");
    let gone = client.get(&created.provider_id).await.unwrap_err();
    assert_eq!(gone.class(), ErrorClass::NotFound, "{gone}");
    assert!(
        !host.instance_dir("egress-unborn").exists(),
        "a directory without a record is removed"
    );
    assert!(
        !host.state_dir().join(".deleted-egress-gone").exists(),
        "a Delete's leftover is removed"
    );
}
