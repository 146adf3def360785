//! The CRD YAML committed with the Helm chart must be what the Rust types generate: regenerate it with
//! `cargo run -p egress-operator --bin crdgen > charts/egress-proxies-operator/crds/crds.yaml`.

#[test]
fn the_committed_crds_match_the_rust_types() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../charts/egress-proxies-operator/crds/crds.yaml"
    );
    let committed = std::fs::read_to_string(path).expect("the chart's CRDs are committed");
    let generated = egress_operator::crd_yaml().expect("the CRDs serialize");
    assert!(
        committed == generated,
        "charts/egress-proxies-operator/crds/crds.yaml is stale: run \
         `cargo run -p egress-operator --bin crdgen > charts/egress-proxies-operator/crds/crds.yaml`"
    );
}
