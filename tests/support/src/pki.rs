//! The credentials one control plane needs, generated fresh for every start: a CA, the apiserver's
//! serving certificate for the loopback address, an admin client certificate, and the service-account
//! signing key pair.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

use crate::Error;

/// The admin's user name; its group `system:masters` is the apiserver's built-in superuser group, so the
/// admin passes RBAC without any binding (as in a kubeadm cluster's admin.conf).
pub const ADMIN_USER: &str = "egress-test-admin";
const ADMIN_GROUP: &str = "system:masters";

/// Paths of the written PEM files, all inside the control plane's private (0700) directory.
#[derive(Clone, Debug)]
pub struct PkiFiles {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    pub service_account_public: PathBuf,
    pub service_account_private: PathBuf,
}

/// Generates everything and writes it into `dir`.
pub fn generate(dir: &Path) -> Result<PkiFiles, Error> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name = name(&[(DnType::CommonName, "egress-test-ca")]);
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    // Both names a client may use for the loopback apiserver; never any other address.
    let serving_key = KeyPair::generate()?;
    let mut serving = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])?;
    serving.distinguished_name = name(&[(DnType::CommonName, "kube-apiserver")]);
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;

    // The apiserver maps CN to the user name and O to groups.
    let admin_key = KeyPair::generate()?;
    let mut admin = CertificateParams::new(Vec::<String>::new())?;
    admin.distinguished_name = name(&[
        (DnType::CommonName, ADMIN_USER),
        (DnType::OrganizationName, ADMIN_GROUP),
    ]);
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let admin_cert = admin.signed_by(&admin_key, &issuer)?;

    // ES256: kube-apiserver accepts an ECDSA P-256 key for signing service-account tokens.
    let service_account = KeyPair::generate()?;

    let write = |file: &str, pem: String| -> Result<PathBuf, Error> {
        let path = dir.join(file);
        std::fs::write(&path, pem).map_err(Error::io(format!("writing {}", path.display())))?;
        Ok(path)
    };
    Ok(PkiFiles {
        ca_cert: write("ca.crt", ca_cert.pem())?,
        serving_cert: write("apiserver.crt", serving_cert.pem())?,
        serving_key: write("apiserver.key", serving_key.serialize_pem())?,
        admin_cert: write("admin.crt", admin_cert.pem())?,
        admin_key: write("admin.key", admin_key.serialize_pem())?,
        service_account_public: write("sa.pub", service_account.public_key_pem())?,
        service_account_private: write("sa.key", service_account.serialize_pem())?,
    })
}

fn name(parts: &[(DnType, &str)]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    for (kind, value) in parts {
        dn.push(kind.clone(), *value);
    }
    dn
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_credential_is_written_as_pem() {
        let dir = tempfile::tempdir().unwrap();
        let files = generate(dir.path()).unwrap();
        for (path, marker) in [
            (&files.ca_cert, "BEGIN CERTIFICATE"),
            (&files.serving_cert, "BEGIN CERTIFICATE"),
            (&files.admin_cert, "BEGIN CERTIFICATE"),
            (&files.serving_key, "BEGIN PRIVATE KEY"),
            (&files.admin_key, "BEGIN PRIVATE KEY"),
            (&files.service_account_private, "BEGIN PRIVATE KEY"),
            (&files.service_account_public, "BEGIN PUBLIC KEY"),
        ] {
            let pem = std::fs::read_to_string(path).unwrap();
            assert!(pem.contains(marker), "{} lacks {marker}", path.display());
        }
    }
}
