//! Bad Proxies are refused by the real kube-apiserver at apply time, each with a message naming the field,
//! through kubectl as a user would apply them.

use std::io::Write;

use egress_test_support::ControlPlane;

async fn control_plane() -> &'static ControlPlane {
    let plane = ControlPlane::shared().await.expect("control plane");
    plane
        .install_crds(&egress_operator::crd::all())
        .await
        .expect("CRDs install");
    plane
}

/// Applies `spec` (YAML lines under `spec:`) as a Proxy and returns kubectl's exit status and stderr.
fn apply(plane: &ControlPlane, namespace: &str, name: &str, spec: &str) -> (bool, String) {
    let manifest = format!(
        "apiVersion: egressproxies.dev/v1alpha1\nkind: Proxy\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n{spec}\n"
    );
    let mut child = plane
        .kubectl()
        .args(["apply", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    child.stdin.take().unwrap().write_all(manifest.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn invalid_proxies_are_refused_with_a_message_naming_the_field() {
    let plane = control_plane().await;
    let ns = plane.namespace("crd-validation").await.unwrap();
    let cases = [
        ("port-zero", "  provider: host\n  port: 0", "spec.port"),
        ("port-high", "  provider: host\n  port: 70000", "spec.port"),
        (
            "bad-cidr",
            "  provider: host\n  allowedSourceRanges: [\"10.0.0.300/8\"]",
            "allowedSourceRanges",
        ),
        (
            "host-bits",
            "  provider: host\n  allowedSourceRanges: [\"10.0.0.1/8\"]",
            "allowedSourceRanges",
        ),
        ("empty-provider", "  provider: \"\"", "spec.provider"),
        (
            "upper-provider",
            "  provider: Host",
            "provider must be a lowercase name",
        ),
        ("bad-protocol", "  provider: host\n  protocol: ftp", "spec.protocol"),
        (
            "long-region",
            &format!("  provider: host\n  placement:\n    region: {}", "r".repeat(256)),
            "spec.placement.region",
        ),
        ("no-provider", "  port: 3128", "spec.provider"),
    ];
    for (name, spec, expected) in cases {
        let (accepted, stderr) = apply(plane, ns.name(), name, spec);
        assert!(!accepted, "{name} was accepted");
        assert!(stderr.contains(expected), "{name}: expected {expected:?} in: {stderr}");
    }
}

#[tokio::test]
async fn a_valid_proxy_is_accepted_with_its_defaults() {
    let plane = control_plane().await;
    let ns = plane.namespace("crd-defaults").await.unwrap();
    let (accepted, stderr) = apply(
        plane,
        ns.name(),
        "ok",
        "  provider: host\n  allowedSourceRanges: [\"10.0.0.0/8\", \"2001:db8::/32\"]",
    );
    assert!(accepted, "{stderr}");
    let proxy: egress_operator::crd::Proxy = ns.api().get("ok").await.unwrap();
    assert_eq!(proxy.spec.port, 3128);
    assert_eq!(proxy.spec.protocol, egress_operator::crd::ProxyProtocol::Http);
    let columns = plane
        .kubectl()
        .args(["get", "proxies", "-n", ns.name()])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&columns.stdout);
    let header = table.lines().next().unwrap_or_default();
    for column in ["NAME", "PROVIDER", "PHASE", "IP", "ENDPOINT", "AGE"] {
        assert!(header.contains(column), "{header}");
    }
}
