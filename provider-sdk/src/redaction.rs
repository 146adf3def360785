//! The contract's sensitive fields (contract §8), read from the proto's `(sensitive) = true` option at
//! build time. Domain types keep these values in `secrecy` wrappers, whose `Debug` prints `[REDACTED]`.

include!(concat!(env!("OUT_DIR"), "/sensitive_fields.rs"));

#[cfg(test)]
mod tests {
    use secrecy::{SecretBox, SecretString};

    use super::SENSITIVE_FIELDS;
    use crate::model::*;

    const SENTINEL: &str = "sentinel-7f3a9c-must-not-leak";

    #[test]
    fn the_proto_marks_the_password_and_cloud_init_sensitive() {
        assert_eq!(
            SENSITIVE_FIELDS,
            [
                "egressproxies.provider.v1.CreateRequest.cloud_init",
                "egressproxies.provider.v1.ProxyAuth.password"
            ]
        );
    }

    /// Every sensitive field of the contract has a domain counterpart that `Debug` never shows. When a new
    /// field is marked sensitive, the first assertion fails until it is covered here.
    #[test]
    fn debug_output_of_a_request_never_shows_a_sensitive_value() {
        let covered = ["CreateRequest.cloud_init", "ProxyAuth.password"];
        for field in SENSITIVE_FIELDS {
            assert!(
                covered.iter().any(|c| field.ends_with(c)),
                "sensitive field {field} has no redaction test"
            );
        }
        let request = CreateRequest {
            name: InstanceName::parse("egress-a", 63).unwrap(),
            proxy_uid: "uid".into(),
            cluster_id: "c1".into(),
            placement: Placement::default(),
            proxy: ProxySettings {
                port: 3128,
                protocol: Protocol::Http,
                auth: ProxyAuth {
                    username: "u".into(),
                    password: SecretString::from(SENTINEL),
                },
                allowed_source_ranges: vec![],
            },
            cloud_init: Some(SecretBox::new(SENTINEL.as_bytes().into())),
        };
        let shown = format!("{request:?} {:?}", request.clone());
        assert!(!shown.contains(SENTINEL), "{shown}");
        assert!(!shown.contains(&format!("{:?}", SENTINEL.as_bytes())));
    }
}
