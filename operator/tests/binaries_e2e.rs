//! The shipped binaries together, out of process: `egress-operator` against the real kube-apiserver and
//! `egress-provider-fake` on a unix socket. A Proxy applied with kubectl runs, shows in `kubectl get`, and
//! is deleted with its instance; the operator's /metrics counts the provider calls.

mod shipped;

use std::{
    io::{Read, Write},
    process::Stdio,
    time::Duration,
};

use egress_test_support::{ControlPlane, poll_until};

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
    let _fake = shipped::start_provider("egress-provider-fake", None, &socket);
    let config = shipped::operator_config(dir.path(), "e2e-binaries", "fake", "fake", &socket);
    let port = free_port();
    let _operator = shipped::start_operator(plane, &config, ns.name(), &format!("127.0.0.1:{port}"));
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
