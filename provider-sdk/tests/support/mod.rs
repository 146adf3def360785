//! Shared helpers for the SDK's integration tests: a daemon serving a `FakeProvider` over a real listener,
//! request builders, and an rcgen-made PKI for mutual TLS.
//!
//! Each test binary uses a different subset, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::{
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use provider_sdk::{
    client::{CallTimeouts, ClientTls, ProviderClient, ProviderEndpoint},
    model::{CreateRequest, DEFAULT_MAX_NAME_LENGTH, InstanceName, Placement, Protocol, ProxyAuth, ProxySettings},
    proto,
    server::{Bound, Listen, ListenError, TlsFiles, bind},
    testing::FakeProvider,
};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use secrecy::{SecretBox, SecretString};
use tempfile::TempDir;
use tokio::{sync::oneshot, task::JoinHandle};
use tracing::Instrument;

/// The cluster id every test request carries.
pub const CLUSTER: &str = "cluster-a";

/// How long a test waits for a daemon to stop before calling it stuck.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// A valid Create request for `name`, with a password and no cloud-init.
pub fn create_request(name: &str) -> CreateRequest {
    CreateRequest {
        name: InstanceName::parse(name, DEFAULT_MAX_NAME_LENGTH).expect("a valid test name"),
        proxy_uid: format!("uid-{name}"),
        cluster_id: CLUSTER.to_owned(),
        placement: Placement {
            region: "local".to_owned(),
            ..Placement::default()
        },
        proxy: ProxySettings {
            port: 3128,
            protocol: Protocol::Http,
            auth: ProxyAuth {
                username: "proxy-user".to_owned(),
                password: SecretString::from("not-a-real-password"),
            },
            allowed_source_ranges: vec!["10.0.0.0/8".parse().expect("a CIDR")],
        },
        cloud_init: None,
    }
}

/// `create_request` carrying `secret` in both sensitive fields.
pub fn create_request_with_secret(name: &str, secret: &str) -> CreateRequest {
    let mut request = create_request(name);
    request.proxy.auth.password = SecretString::from(secret);
    let cloud_init = format!("#cloud-config\nwrite_files:\n  - content: {secret}\n");
    request.cloud_init = Some(SecretBox::new(cloud_init.into_bytes().into_boxed_slice()));
    request
}

/// The wire form of `create_request`, for raw calls that bend it out of shape.
pub fn wire_create_request(name: &str) -> proto::CreateRequest {
    proto::CreateRequest::from(&create_request(name))
}

/// A daemon serving one `FakeProvider` on a bound listener, stopped through its shutdown future.
#[derive(Debug)]
pub struct Daemon {
    pub address: String,
    shutdown: Option<oneshot::Sender<()>>,
    serving: Option<JoinHandle<Result<(), ListenError>>>,
}

impl Daemon {
    /// Serves on a new task, inside the caller's current span as a daemon's `main` would be.
    pub fn start(bound: Bound, provider: FakeProvider) -> Self {
        let address = bound.address();
        let (shutdown, stop) = oneshot::channel::<()>();
        let serve = bound.serve(provider, async move {
            let _ = stop.await;
        });
        let serving = tokio::spawn(serve.instrument(tracing::Span::current()));
        Self {
            address,
            shutdown: Some(shutdown),
            serving: Some(serving),
        }
    }

    /// Resolves the daemon's shutdown future; `serve` then drains and returns.
    pub fn trigger_shutdown(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }

    /// Whether `serve` has returned (or the task ended otherwise).
    pub fn has_returned(&self) -> bool {
        self.serving.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Triggers shutdown and waits for `serve` to return.
    pub async fn stop(mut self) -> Result<(), ListenError> {
        self.trigger_shutdown();
        let serving = self.serving.take().expect("stopped once");
        tokio::time::timeout(STOP_TIMEOUT, serving)
            .await
            .expect("serve returns after shutdown")
            .expect("the serve task did not panic")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(serving) = &self.serving {
            serving.abort();
        }
    }
}

/// A daemon on a unix socket in its own temporary directory, and a client for it.
#[derive(Debug)]
pub struct UnixDaemon {
    pub dir: TempDir,
    pub path: PathBuf,
    pub daemon: Daemon,
    pub client: ProviderClient,
}

impl UnixDaemon {
    pub async fn start(provider: FakeProvider) -> Self {
        Self::start_with_timeouts(provider, CallTimeouts::default()).await
    }

    pub async fn start_with_timeouts(provider: FakeProvider, timeouts: CallTimeouts) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("provider.sock");
        let bound = bind(&Listen::Unix(path.clone()), None, false)
            .await
            .expect("binding the unix socket");
        let daemon = Daemon::start(bound, provider);
        let client = unix_client(&path, timeouts);
        Self {
            dir,
            path,
            daemon,
            client,
        }
    }
}

/// A fresh client (its own connection) for the daemon at `path`.
pub fn unix_client(path: &Path, timeouts: CallTimeouts) -> ProviderClient {
    ProviderClient::connect_lazy(&ProviderEndpoint::Unix(path.to_owned()), None, timeouts)
        .expect("a unix endpoint needs no set-up")
}

/// PEM material of one certificate and its key.
#[derive(Clone, Debug)]
pub struct Pem {
    pub cert: String,
    pub key: String,
}

/// A certificate authority that signs leaf certificates.
pub struct Ca {
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

impl Ca {
    pub fn new(common_name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("no names to check");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("a CA key");
        let cert = params.self_signed(&key).expect("a self-signed CA");
        Self {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A server certificate for `localhost` and 127.0.0.1.
    pub fn server(&self) -> Pem {
        self.leaf(
            "egress-provider",
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate, as the operator presents.
    pub fn client(&self) -> Pem {
        self.leaf(
            "egress-operator",
            &["egress-operator"],
            ExtendedKeyUsagePurpose::ClientAuth,
        )
    }

    fn leaf(&self, common_name: &str, names: &[&str], usage: ExtendedKeyUsagePurpose) -> Pem {
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("valid subject names");
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().expect("a leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("a signed leaf");
        Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

/// Everything mutual TLS needs: the daemon's files on disk and the operator's client material.
#[derive(Debug)]
pub struct Pki {
    pub dir: TempDir,
    pub ca: Ca,
    pub server_files: TlsFiles,
}

impl Pki {
    pub fn new() -> Self {
        let ca = Ca::new("egress-proxies test CA");
        let server = ca.server();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let write = |name: &str, contents: &str| {
            let path = dir.path().join(name);
            fs::write(&path, contents).expect("writing a PEM file");
            path
        };
        let server_files = TlsFiles {
            cert: write("server.crt", &server.cert),
            key: write("server.key", &server.key),
            client_ca: write("client-ca.crt", &ca.cert_pem),
        };
        Self { dir, ca, server_files }
    }

    /// Client material that trusts this CA and presents `identity`.
    pub fn client_tls(&self, identity: &Pem) -> ClientTls {
        ClientTls {
            ca_pem: self.ca.cert_pem.clone().into_bytes(),
            cert_pem: identity.cert.clone().into_bytes(),
            key_pem: identity.key.clone().into_bytes(),
            server_name: None,
        }
    }
}
