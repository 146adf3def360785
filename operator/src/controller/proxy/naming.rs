//! The deterministic instance name and the spec hash. The name derives from the Proxy UID and the hash, so
//! a Create retried after a crash, or by a new leader, asks for the same instance; the hash covers every
//! input that shapes the instance, so any change of them makes a replacement.

use sha2::{Digest, Sha256};

use crate::crd::ProxySpec;

/// Length of the hash in names and status: 40 bits is plenty to tell one Proxy's specs apart.
const HASH_LEN: usize = 10;

/// Everything that decides what instance a Proxy needs. Secrets enter by resource version, never by
/// content, so no digest of a password ever reaches the status or a backend.
#[derive(Debug)]
pub struct SpecInputs<'a> {
    pub spec: &'a ProxySpec,
    /// The resource version of `spec.auth`'s Secret, or `generated`.
    pub auth_version: &'a str,
    /// The resource version of `spec.cloudInit`'s Secret, or `default`.
    pub cloud_init_version: &'a str,
}

impl SpecInputs<'_> {
    pub fn hash(&self) -> String {
        let spec = self.spec;
        let mut hash = Sha256::new();
        let mut field = |value: &str| {
            hash.update((value.len() as u64).to_be_bytes());
            hash.update(value.as_bytes());
        };
        field(&spec.provider);
        field(&spec.placement.region);
        field(&spec.placement.zone);
        field(&spec.placement.machine_type);
        field(&spec.placement.image);
        field(&spec.port.to_string());
        field(spec.protocol.scheme());
        for range in &spec.allowed_source_ranges {
            field(range);
        }
        field(self.auth_version);
        field(self.cloud_init_version);
        let digest = hash.finalize();
        digest.iter().map(|b| format!("{b:02x}")).collect::<String>()[..HASH_LEN].to_owned()
    }
}

/// `px-<uid>-<hash>`, shortened from the UID side to fit `max_len`.
pub fn instance_name(uid: &str, spec_hash: &str, max_len: u32) -> String {
    let uid: String = uid
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let room = (max_len as usize)
        .saturating_sub("px--".len() + spec_hash.len())
        .min(16);
    format!("px-{}-{spec_hash}", &uid[..room.min(uid.len())])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{Placement, ProxyProtocol};

    fn spec() -> ProxySpec {
        ProxySpec {
            provider: "fake".into(),
            placement: Placement::default(),
            port: 3128,
            protocol: ProxyProtocol::Http,
            auth: None,
            allowed_source_ranges: vec![],
            cloud_init: None,
        }
    }

    #[test]
    fn the_name_is_stable_for_one_uid_and_spec() {
        let s = spec();
        let hash = SpecInputs {
            spec: &s,
            auth_version: "generated",
            cloud_init_version: "default",
        }
        .hash();
        let uid = "0b6f3c1e-7a2d-4c55-9e0f-3b1a2c4d5e6f";
        assert_eq!(instance_name(uid, &hash, 63), instance_name(uid, &hash, 63));
        assert_eq!(instance_name(uid, &hash, 63), format!("px-0b6f3c1e7a2d4c55-{hash}"));
        assert!(instance_name(uid, &hash, 24).len() <= 24);
    }

    #[test]
    fn every_input_changes_the_hash() {
        let base = spec();
        let hash = |s: &ProxySpec, auth: &str, init: &str| {
            SpecInputs {
                spec: s,
                auth_version: auth,
                cloud_init_version: init,
            }
            .hash()
        };
        let original = hash(&base, "generated", "default");
        let mut port = base.clone();
        port.port = 8080;
        let mut ranges = base.clone();
        ranges.allowed_source_ranges = vec!["10.0.0.0/8".into()];
        let mut protocol = base.clone();
        protocol.protocol = ProxyProtocol::Socks5;
        for changed in [
            hash(&port, "generated", "default"),
            hash(&ranges, "generated", "default"),
            hash(&protocol, "generated", "default"),
            hash(&base, "41", "default"),
            hash(&base, "generated", "77"),
        ] {
            assert_ne!(changed, original);
        }
    }
}
