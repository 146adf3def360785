//! Shared by the e2e tests that run the shipped binaries out of process: a provider daemon on a unix socket
//! and `egress-operator` watching one namespace of the test control plane, both killed when dropped.

// Each test binary that includes this module uses a subset of it.
#![allow(dead_code)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use egress_test_support::{ChildProcess, ControlPlane, binary_beside, poll_until};

/// Starts the workspace binary `name` (a provider daemon) with `--config config` on the unix socket
/// `socket`, and waits until it serves.
pub fn start_provider(name: &str, config: Option<&Path>, socket: &Path) -> ChildProcess {
    let mut command = Command::new(binary_beside(env!("CARGO_BIN_EXE_egress-operator"), name));
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    command
        .arg("--listen")
        .arg(format!("unix://{}", socket.display()))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null());
    let daemon = ChildProcess::spawn(name, &mut command).unwrap();
    assert!(
        poll_until(Duration::from_secs(20), || socket.exists()),
        "{name} did not serve on {}",
        socket.display()
    );
    daemon
}

/// Writes an operator config in `dir` with one provider, `name` of type `provider_type`, on `socket`.
pub fn operator_config(dir: &Path, cluster_id: &str, name: &str, provider_type: &str, socket: &Path) -> PathBuf {
    let path = dir.join("operator.yaml");
    let text = format!(
        "clusterId: {cluster_id}\nproviders:\n  {name}:\n    type: {provider_type}\n    endpoint: unix://{}\n",
        socket.display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Starts `egress-operator` with `config`, without leader election, watching `namespace`, serving
/// /metrics and the probes on `http_addr`.
pub fn start_operator(plane: &ControlPlane, config: &Path, namespace: &str, http_addr: &str) -> ChildProcess {
    ChildProcess::spawn(
        "egress-operator",
        Command::new(env!("CARGO_BIN_EXE_egress-operator"))
            .arg("--config")
            .arg(config)
            .args(["--no-leader-election", "--watch-namespace", namespace])
            .args(["--http-addr", http_addr])
            .env("KUBECONFIG", plane.kubeconfig_path())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null()),
    )
    .unwrap()
}
