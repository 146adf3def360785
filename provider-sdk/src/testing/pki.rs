//! A throw-away PKI for tests and benchmarks of the mutual-TLS transport: a CA, a server certificate for
//! 127.0.0.1 and localhost, and a client certificate, as PEM strings and files.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};

/// PEM material; `write_to` puts it on disk for daemons and CLIs that take file paths.
#[derive(Clone, Debug)]
pub struct TestPki {
    pub ca_pem: String,
    pub server_cert_pem: String,
    pub server_key_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
}

/// Paths of the files `TestPki::write_to` wrote.
#[derive(Clone, Debug)]
pub struct PkiFiles {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

impl TestPki {
    /// A fresh CA with one server and one client certificate. Panics on failure: test code only.
    pub fn generate() -> Self {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf = |names: Vec<String>, usage| {
            let key = KeyPair::generate().expect("leaf key");
            let mut params = CertificateParams::new(names).expect("leaf params");
            params.extended_key_usages = vec![usage];
            let cert = params.signed_by(&key, &issuer).expect("leaf certificate");
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert_pem, server_key_pem) = leaf(
            vec!["127.0.0.1".into(), "localhost".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_cert_pem, client_key_pem) =
            leaf(vec!["egress-operator".into()], ExtendedKeyUsagePurpose::ClientAuth);
        Self {
            ca_pem: ca.pem(),
            server_cert_pem,
            server_key_pem,
            client_cert_pem,
            client_key_pem,
        }
    }

    pub fn write_to(&self, dir: &Path) -> std::io::Result<PkiFiles> {
        let write = |name: &str, pem: &str| -> std::io::Result<PathBuf> {
            let path = dir.join(name);
            std::fs::write(&path, pem)?;
            Ok(path)
        };
        Ok(PkiFiles {
            ca: write("ca.pem", &self.ca_pem)?,
            server_cert: write("server.pem", &self.server_cert_pem)?,
            server_key: write("server-key.pem", &self.server_key_pem)?,
            client_cert: write("client.pem", &self.client_cert_pem)?,
            client_key: write("client-key.pem", &self.client_key_pem)?,
        })
    }

    /// The operator-side TLS settings for a client of the server certificate.
    pub fn client_tls(&self) -> crate::client::ClientTls {
        crate::client::ClientTls {
            ca_pem: self.ca_pem.clone().into_bytes(),
            cert_pem: self.client_cert_pem.clone().into_bytes(),
            key_pem: self.client_key_pem.clone().into_bytes(),
            server_name: None,
        }
    }
}
