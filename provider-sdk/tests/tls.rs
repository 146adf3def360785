//! TCP with mutual TLS between `ProviderClient` and a daemon, with certificates made by rcgen: the round
//! trip works when both sides trust one CA, and every other client is refused before the provider runs.

mod support;

use std::path::PathBuf;

use provider_sdk::{
    ErrorClass,
    client::{CallTimeouts, ClientTls, ProviderClient, ProviderEndpoint},
    model::{InstanceState, ListFilter},
    proto::{self, provider_service_client::ProviderServiceClient},
    server::{Listen, ListenError, TlsFiles, bind},
    testing::{FakeOptions, FakeProvider},
};
use support::{CLUSTER, Ca, Daemon, Pki, create_request};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

fn any_loopback_port() -> Listen {
    Listen::Tcp("127.0.0.1:0".parse().expect("an address"))
}

/// A daemon on TCP with the PKI's server certificate, requiring client certificates from its CA.
async fn mtls_daemon(pki: &Pki, fake: &FakeProvider) -> (Daemon, String) {
    let bound = bind(&any_loopback_port(), Some(&pki.server_files), false)
        .await
        .expect("binding TCP with TLS");
    let daemon = Daemon::start(bound, fake.clone());
    let authority = daemon.address.strip_prefix("tcp://").expect("a TCP address").to_owned();
    (daemon, authority)
}

fn https_client(authority: &str, tls: ClientTls) -> ProviderClient {
    ProviderClient::connect_lazy(
        &ProviderEndpoint::Https {
            authority: authority.to_owned(),
        },
        Some(tls),
        CallTimeouts::default(),
    )
    .expect("a valid TLS client")
}

#[tokio::test]
async fn mutual_tls_carries_the_round_trip_when_both_sides_trust_one_ca() {
    let pki = Pki::new();
    let fake = FakeProvider::new(FakeOptions::default());
    let (daemon, authority) = mtls_daemon(&pki, &fake).await;
    let client = https_client(&authority, pki.client_tls(&pki.ca.client()));

    let created = client
        .create(&create_request("egress-over-tls"))
        .await
        .expect("Create over mTLS");
    let got = client.get(&created.provider_id).await.expect("Get");
    assert_eq!(got.state, InstanceState::Running);
    assert!(got.ipv4.is_some());
    let listed = client
        .list_by_tag(&ListFilter {
            cluster_id: CLUSTER.to_owned(),
            proxy_uid: None,
        })
        .await
        .expect("ListByTag");
    assert_eq!(listed.len(), 1);
    client.delete(&created.provider_id).await.expect("Delete");
    let gone = client.get(&created.provider_id).await.unwrap_err();
    assert_eq!(gone.class(), ErrorClass::NotFound);

    // The name in the certificate also works when the operator's config names it explicitly.
    let mut by_name = pki.client_tls(&pki.ca.client());
    by_name.server_name = Some("localhost".to_owned());
    https_client(&authority, by_name)
        .get_info()
        .await
        .expect("GetInfo with server name localhost");

    daemon.stop().await.expect("serve returns cleanly");
}

#[tokio::test]
async fn a_client_without_a_certificate_is_refused() {
    let pki = Pki::new();
    let fake = FakeProvider::new(FakeOptions::default());
    let (_daemon, authority) = mtls_daemon(&pki, &fake).await;

    // Trusts the server, but presents no certificate of its own.
    let channel = Endpoint::from_shared(format!("https://{authority}"))
        .expect("a URI")
        .tls_config(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(&pki.ca.cert_pem))
                .domain_name("localhost"),
        )
        .expect("a TLS config")
        .connect_lazy();
    let refused = ProviderServiceClient::new(channel)
        .create(proto::CreateRequest::from(&create_request("egress-anonymous")))
        .await
        .expect_err("a client without a certificate");
    assert_ne!(refused.code(), tonic::Code::Ok);
    assert!(fake.calls().is_empty(), "the provider never saw the call");

    // The refusal costs the daemon nothing: a proper client is served right after.
    https_client(&authority, pki.client_tls(&pki.ca.client()))
        .create(&create_request("egress-proper"))
        .await
        .expect("a client with a certificate");
    assert_eq!(fake.calls().len(), 1);
}

#[tokio::test]
async fn a_client_certificate_signed_by_another_ca_is_refused() {
    let pki = Pki::new();
    let fake = FakeProvider::new(FakeOptions::default());
    let (_daemon, authority) = mtls_daemon(&pki, &fake).await;
    let rogue = Ca::new("someone else's CA");

    let error = https_client(&authority, pki.client_tls(&rogue.client()))
        .create(&create_request("egress-rogue"))
        .await
        .expect_err("a certificate from another CA");

    assert_eq!(error.class(), ErrorClass::Transient, "{error:?}");
    assert!(fake.calls().is_empty(), "the provider never saw the call");
}

#[tokio::test]
async fn a_client_refuses_a_server_whose_certificate_it_does_not_trust() {
    let pki = Pki::new();
    let fake = FakeProvider::new(FakeOptions::default());
    let (_daemon, authority) = mtls_daemon(&pki, &fake).await;
    let other = Ca::new("the CA the operator trusts");
    let mut tls = pki.client_tls(&pki.ca.client());
    tls.ca_pem = other.cert_pem.clone().into_bytes();

    let error = https_client(&authority, tls)
        .create(&create_request("egress-untrusted"))
        .await
        .expect_err("a server certificate from an unknown CA");

    assert_eq!(error.class(), ErrorClass::Transient, "{error:?}");
    assert!(fake.calls().is_empty());
}

#[tokio::test]
async fn tcp_without_tls_is_refused_unless_marked_insecure() {
    let refused = bind(&any_loopback_port(), None, false).await;
    assert!(matches!(refused, Err(ListenError::TlsRequired { .. })), "{refused:?}");

    let fake = FakeProvider::new(FakeOptions::default());
    let bound = bind(&any_loopback_port(), None, true)
        .await
        .expect("plain TCP when marked insecure");
    let daemon = Daemon::start(bound, fake);
    let authority = daemon.address.strip_prefix("tcp://").expect("TCP").to_owned();
    let client = ProviderClient::connect_lazy(&ProviderEndpoint::Http { authority }, None, CallTimeouts::default())
        .expect("a plain client");
    client.get_info().await.expect("GetInfo over plain TCP");
    daemon.stop().await.expect("serve returns cleanly");
}

#[tokio::test]
async fn a_missing_certificate_file_stops_start_up_naming_the_path() {
    let pki = Pki::new();
    let missing = PathBuf::from("/nonexistent/egress/server.crt");
    let files = TlsFiles {
        cert: missing.clone(),
        ..pki.server_files.clone()
    };

    let error = bind(&any_loopback_port(), Some(&files), false)
        .await
        .expect_err("an unreadable certificate");

    assert!(matches!(error, ListenError::Io { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("--tls-cert"), "{message}");
    assert!(message.contains(&missing.display().to_string()), "{message}");
}
