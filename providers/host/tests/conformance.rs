//! The conformance suite against the real `egress-provider-host` daemon over a unix socket, with a
//! temporary state directory and a loopback pool: real tinyproxy processes on 127/8.

mod common;

use provider_conformance::cli::assert_conforms;

#[tokio::test(flavor = "multi_thread")]
async fn the_host_daemon_passes_conformance_over_a_unix_socket() {
    let host = common::Host::new();
    let daemon = host.start();
    let params = host.dir.path().join("conformance.yaml");
    std::fs::write(&params, "allowedSourceRanges: [127.0.0.0/8]\nreadyTimeoutSeconds: 30\n").unwrap();
    assert_conforms(&["--endpoint", &host.endpoint(), "--params", params.to_str().unwrap()]).await;
    // Cleanup deleted everything: no instance directory and no tinyproxy is left.
    let left: Vec<_> = std::fs::read_dir(host.state_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| !n.to_string_lossy().starts_with('.'))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(daemon.stop(), Some(0));
}
