//! Prints the CRDs as one YAML stream: `cargo run -p egress-operator --bin crdgen > charts/.../crds.yaml`.

fn main() -> anyhow::Result<()> {
    print!("{}", egress_operator::crd_yaml()?);
    Ok(())
}
