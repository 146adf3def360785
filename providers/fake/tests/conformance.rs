//! The conformance CLI against the real `egress-provider-fake` daemon, out of process, over a unix socket
//! and over TCP with mutual TLS: the same path CI and provider authors take.

use std::{
    path::PathBuf,
    process::{Command, Stdio},
    time::Duration,
};

use egress_test_support::{ChildProcess, poll_until};
use provider_conformance::cli::assert_conforms;
use provider_sdk::testing::TestPki;

/// The daemon as a child process, killed when dropped.
fn start_daemon(args: &[&str]) -> ChildProcess {
    ChildProcess::spawn(
        "egress-provider-fake",
        Command::new(env!("CARGO_BIN_EXE_egress-provider-fake"))
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null()),
    )
    .expect("egress-provider-fake starts")
}

fn wait_for(ready: impl Fn() -> bool) {
    assert!(poll_until(Duration::from_secs(20), ready), "the daemon did not come up");
}

#[tokio::test]
async fn the_fake_daemon_passes_conformance_over_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("fake.sock");
    let config = dir.path().join("fake.yaml");
    std::fs::write(&config, "provisioningMs: 200\n").unwrap();
    let listen = format!("unix://{}", socket.display());
    let _daemon = start_daemon(&["--config", config.to_str().unwrap(), "--listen", &listen]);
    wait_for(|| socket.exists());
    assert_conforms(&["--endpoint", &listen]).await;
}

fn free_port() -> u16 {
    egress_test_support::free_port().unwrap()
}

#[tokio::test]
async fn the_fake_daemon_passes_conformance_over_tcp_with_mutual_tls() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate().write_to(dir.path()).unwrap();
    let port = free_port();
    let listen = format!("tcp://127.0.0.1:{port}");
    let path = |p: &PathBuf| p.to_str().unwrap().to_owned();
    let _daemon = start_daemon(&[
        "--listen",
        &listen,
        "--tls-cert",
        &path(&pki.server_cert),
        "--tls-key",
        &path(&pki.server_key),
        "--client-ca",
        &path(&pki.ca),
    ]);
    wait_for(|| std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    let endpoint = format!("https://127.0.0.1:{port}");
    assert_conforms(&[
        "--endpoint",
        &endpoint,
        "--ca",
        &path(&pki.ca),
        "--tls-cert",
        &path(&pki.client_cert),
        "--tls-key",
        &path(&pki.client_key),
    ])
    .await;
}

#[test]
fn a_bad_config_stops_the_daemon_with_code_64_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fake.yaml");
    std::fs::write(&config, "capacity: 0\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_egress-provider-fake"))
        .args([
            "--config",
            config.to_str().unwrap(),
            "--listen",
            "unix:///tmp/never-bound.sock",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("capacity: 0 must be at least 1"), "{stderr}");
}

#[test]
fn plain_tcp_is_refused_without_the_insecure_flag() {
    let output = Command::new(env!("CARGO_BIN_EXE_egress-provider-fake"))
        .args(["--listen", "tcp://127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--insecure"));
}
