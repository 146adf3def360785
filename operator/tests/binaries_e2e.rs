//! The shipped binaries together, out of process: `egress-operator` against the real kube-apiserver and
//! `egress-provider-fake` on a unix socket. A Proxy applied with kubectl runs, shows in `kubectl get`, and
//! is deleted with its instance; the operator's /metrics counts the provider calls.

use std::{
    io::{Read, Write},
    path::PathBuf,
    process::{Command, Stdio},
    time::Duration,
};

use egress_test_support::{ChildProcess, ControlPlane, binary_beside, poll_until};

fn fake_daemon_binary() -> PathBuf {
    binary_beside(env!("CARGO_BIN_EXE_egress-operator"), "egress-provider-fake")
}

fn free_port() -> u16 {
    egress_test_support::free_port().unwrap()
}

fn http_get(port: u16, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

fn wait_until(what: &str, timeout: Duration, done: impl Fn() -> bool) {
    assert!(poll_until(timeout, done), "timed out waiting for {what}");
}

#[tokio::test]
async fn the_operator_and_the_fake_daemon_binaries_run_a_proxy_from_apply_to_delete() {
    let plane = ControlPlane::shared().await.expect("control plane");
    plane.install_crds(&egress_operator::crd::all()).await.unwrap();
    let ns = plane.namespace("binaries").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("fake.sock");
    let _fake = ChildProcess::spawn(
        "egress-provider-fake",
        Command::new(fake_daemon_binary())
            .args(["--listen", &format!("unix://{}", socket.display())])
            .stdout(Stdio::null()),
    )
    .unwrap();
    wait_until("the fake daemon's socket", Duration::from_secs(20), || socket.exists());

    let config = dir.path().join("operator.yaml");
    std::fs::write(
        &config,
        format!(
            "clusterId: e2e-binaries\nproviders:\n  fake:\n    type: fake\n    endpoint: unix://{}\n",
            socket.display()
        ),
    )
    .unwrap();
    let port = free_port();
    let _operator = ChildProcess::spawn(
        "egress-operator",
        Command::new(env!("CARGO_BIN_EXE_egress-operator"))
            .args([
                "--config",
                config.to_str().unwrap(),
                "--no-leader-election",
                "--watch-namespace",
                ns.name(),
            ])
            .args(["--http-addr", &format!("127.0.0.1:{port}")])
            .env("KUBECONFIG", plane.kubeconfig_path())
            .stdout(Stdio::null()),
    )
    .unwrap();
    wait_until("/readyz", Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() && http_get(port, "/readyz").contains("200 OK")
    });

    let manifest =
        "apiVersion: egressproxies.dev/v1alpha1\nkind: Proxy\nmetadata:\n  name: web\nspec:\n  provider: fake\n";
    let mut apply = plane
        .kubectl()
        .args(["apply", "-n", ns.name(), "-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    apply.stdin.take().unwrap().write_all(manifest.as_bytes()).unwrap();
    assert!(apply.wait().unwrap().success());

    let phase = || {
        let out = plane
            .kubectl()
            .args(["get", "proxy", "web", "-n", ns.name(), "-o", "jsonpath={.status.phase}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    wait_until("phase Running", Duration::from_secs(30), || phase() == "Running");
    let metrics = http_get(port, "/metrics");
    assert!(
        metrics
            .contains("egress_provider_rpc_duration_seconds_count{provider=\"fake\",method=\"Create\",class=\"ok\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("egress_proxies{phase=\"Running\"} 1"), "{metrics}");

    let deleted = plane
        .kubectl()
        .args(["delete", "proxy", "web", "-n", ns.name(), "--timeout=30s"])
        .output()
        .unwrap();
    assert!(deleted.status.success(), "{}", String::from_utf8_lossy(&deleted.stderr));
    let metrics = http_get(port, "/metrics");
    assert!(
        metrics.contains("method=\"Delete\",class=\"ok\""),
        "the instance was never deleted: {metrics}"
    );
}
