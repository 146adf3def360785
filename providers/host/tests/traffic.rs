//! Traffic through a real instance: tinyproxy on a loopback pool address, asked through the daemon over
//! gRPC, carrying plain HTTP requests to a server on 127.0.0.1 that answers with the source it saw.

mod common;

use common::{Host, PASSWORD, USERNAME, echo_server, free_port, get_through, request, wait_for_state};
use provider_sdk::model::InstanceState;

#[tokio::test(flavor = "multi_thread")]
async fn traffic_needs_the_credentials_and_leaves_from_the_instance_address() {
    let host = Host::new();
    let _daemon = host.start();
    let client = host.client();
    let port = free_port();
    let created = client
        .create(&request("egress-traffic", port, &["127.0.0.0/8"]))
        .await
        .expect("Create");
    let running = wait_for_state(&client, &created.provider_id, InstanceState::Running).await;
    let address = running.ipv4.expect("a Running instance has an address");
    assert_eq!(
        address.octets()[..3],
        host.pool.octets()[..3],
        "the address comes from the pool"
    );
    let proxy = (address, port);
    let target = echo_server().await;

    let anonymous = get_through(proxy, target, None).await;
    assert_eq!(anonymous.status, Some(407), "{anonymous:?}");
    let wrong = get_through(proxy, target, Some((USERNAME, "not-the-password"))).await;
    // tinyproxy 1.11 answers a wrong password with 401, a missing one with 407.
    assert!(matches!(wrong.status, Some(401 | 407)), "{wrong:?}");
    let authorised = get_through(proxy, target, Some((USERNAME, PASSWORD))).await;
    assert_eq!(authorised.status, Some(200), "{authorised:?}");
    assert_eq!(
        authorised.body,
        address.to_string(),
        "the server saw the instance's address as the source"
    );

    client.delete(&created.provider_id).await.expect("Delete");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_outside_the_allowed_source_ranges_is_refused() {
    let host = Host::new();
    let _daemon = host.start();
    let client = host.client();
    // The test connects from 127.0.0.1, which 127.0.9.0/24 does not contain.
    let port = free_port();
    let created = client
        .create(&request("egress-fenced", port, &["127.0.9.0/24"]))
        .await
        .expect("Create");
    let running = wait_for_state(&client, &created.provider_id, InstanceState::Running).await;
    let proxy = (running.ipv4.unwrap(), port);
    let target = echo_server().await;
    let refused = get_through(proxy, target, Some((USERNAME, PASSWORD))).await;
    assert!(matches!(refused.status, Some(403) | None), "{refused:?}");
    assert_ne!(
        refused.body,
        running.ipv4.unwrap().to_string(),
        "the request must not reach the server"
    );
    client.delete(&created.provider_id).await.expect("Delete");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_socks5_request_is_refused_naming_the_protocol_field() {
    let host = Host::new();
    let _daemon = host.start();
    let client = host.client();
    let mut socks = request("egress-socks", free_port(), &[]);
    socks.proxy.protocol = provider_sdk::model::Protocol::Socks5;
    let error = client.create(&socks).await.unwrap_err();
    let fields: Vec<&str> = error.field_violations().iter().map(|v| v.field.as_str()).collect();
    assert_eq!(fields, ["proxy.protocol"], "{error}");
    assert!(error.to_string().contains("tinyproxy"), "{error}");
    assert!(
        !host.instance_dir("egress-socks").exists(),
        "a refused Create makes nothing"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_password_tinyproxy_cannot_parse_is_refused_without_echoing_it() {
    let host = Host::new();
    let _daemon = host.start();
    let client = host.client();
    let mut bad = request("egress-badpw", free_port(), &[]);
    bad.proxy.auth.password = "sentinel pass+word/4d1e".into();
    let error = client.create(&bad).await.unwrap_err();
    let fields: Vec<&str> = error.field_violations().iter().map(|v| v.field.as_str()).collect();
    assert_eq!(fields, ["proxy.auth.password"], "{error}");
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains("sentinel"), "the password leaked: {shown}");
}
