//! One running control plane: etcd and kube-apiserver on free loopback ports, with fresh certificates,
//! service-account keys, an admin client certificate and a kubeconfig, all in one private temporary
//! directory. See `supervisor` for how the processes and the directory are cleaned up.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use crate::binaries::Binaries;
use crate::supervisor::{DIR_PREFIX, Supervisor};
use crate::{Error, kubeconfig, pki, readiness};

/// How often startup is retried when another process took one of the ports between probing and binding.
const PORT_CLASH_ATTEMPTS: usize = 3;

/// The pids of the two server processes, for tests that check cleanup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessIds {
    pub etcd: u32,
    pub kube_apiserver: u32,
}

/// Options for starting a control plane; `ControlPlane::builder()` gives the defaults.
#[derive(Clone, Debug)]
pub struct Builder {
    binaries_dir: PathBuf,
    etcd_timeout: Duration,
    apiserver_timeout: Duration,
}

impl Builder {
    /// Where `etcd`, `kube-apiserver` and `kubectl` are; defaults to `Binaries::default_dir()`.
    pub fn binaries_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.binaries_dir = dir.into();
        self
    }

    /// How long kube-apiserver may take to report ready. The default, 180 s, is generous: a start takes
    /// about 3 s on an idle 2-core machine, but much longer while compilers compete for the cores.
    pub fn apiserver_timeout(mut self, timeout: Duration) -> Self {
        self.apiserver_timeout = timeout;
        self
    }

    /// Starts etcd and kube-apiserver and waits until the apiserver is ready.
    pub async fn start(self) -> Result<ControlPlane, Error> {
        let binaries = Binaries::in_dir(&self.binaries_dir)?;
        let mut attempt = 1;
        loop {
            match ControlPlane::start_once(&binaries, &self).await {
                Err(e) if attempt < PORT_CLASH_ATTEMPTS && is_port_clash(&e) => attempt += 1,
                result => return result,
            }
        }
    }
}

/// A running etcd + kube-apiserver. Dropping it stops both and removes its temporary directory.
#[derive(Debug)]
pub struct ControlPlane {
    binaries: Binaries,
    dir: PathBuf,
    kubeconfig: PathBuf,
    server: String,
    config: kube::Config,
    pids: ProcessIds,
    // Held only to be dropped: its Drop stops the processes. A Mutex makes the control plane `Sync`
    // for the process-wide shared instance.
    _supervisor: Mutex<Supervisor>,
}

impl ControlPlane {
    /// Options for a control plane of this test's own; most tests want `ControlPlane::shared()`.
    pub fn builder() -> Builder {
        Builder {
            binaries_dir: Binaries::default_dir(),
            etcd_timeout: Duration::from_secs(60),
            apiserver_timeout: Duration::from_secs(180),
        }
    }

    /// Starts a control plane of this test's own with the default options.
    pub async fn start() -> Result<Self, Error> {
        Self::builder().start().await
    }

    async fn start_once(binaries: &Binaries, options: &Builder) -> Result<Self, Error> {
        let dir = tempfile::Builder::new()
            .prefix(DIR_PREFIX)
            .tempdir()
            .map_err(Error::io("creating the control plane's temporary directory"))?
            // From here on the supervisor owns the directory: it removes it after the processes stop.
            .keep();
        let mut supervisor = Supervisor::spawn(&dir).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&dir);
        })?;
        let pki = pki::generate(&dir)?;
        let [etcd_client, etcd_peer, apiserver_port] = free_loopback_ports()?;

        let etcd = supervisor.start("etcd", &binaries.etcd, &etcd_args(&dir, etcd_client, etcd_peer))?;
        readiness::etcd(&supervisor, etcd, etcd_client, options.etcd_timeout).await?;

        let server = format!("https://127.0.0.1:{apiserver_port}");
        let args = apiserver_args(&dir, &pki, etcd_client, apiserver_port);
        let kube_apiserver = supervisor.start("kube-apiserver", &binaries.kube_apiserver, &args)?;
        let kubeconfig = kubeconfig::write(&dir, &server, &pki)?;
        let config = kubeconfig::load(&kubeconfig).await?;
        readiness::apiserver(&supervisor, kube_apiserver, &config, options.apiserver_timeout).await?;

        Ok(Self {
            binaries: binaries.clone(),
            dir,
            kubeconfig,
            server,
            config,
            pids: ProcessIds { etcd, kube_apiserver },
            _supervisor: Mutex::new(supervisor),
        })
    }

    /// A new client with the admin credential. Call it in the test's own runtime: a client's connection
    /// pool lives on the runtime that created it, and each `#[tokio::test]` has its own.
    pub fn client(&self) -> Result<kube::Client, Error> {
        kube::Client::try_from(self.config.clone()).map_err(Error::Client)
    }

    /// The client configuration (admin credential), e.g. to impersonate a less privileged user.
    pub fn config(&self) -> &kube::Config {
        &self.config
    }

    /// The kubeconfig file (admin credential), for kubectl and for processes under test.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The apiserver's URL, `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &str {
        &self.server
    }

    /// `kubectl --kubeconfig <this control plane's kubeconfig>`, built from the same release.
    pub fn kubectl(&self) -> Command {
        let mut command = Command::new(&self.binaries.kubectl);
        command.arg("--kubeconfig").arg(&self.kubeconfig);
        command
    }

    /// The binaries this control plane runs.
    pub fn binaries(&self) -> &Binaries {
        &self.binaries
    }

    /// The private temporary directory (certificates, etcd data, logs); removed when stopped.
    pub fn work_dir(&self) -> &Path {
        &self.dir
    }

    /// The server processes' pids.
    pub fn process_ids(&self) -> ProcessIds {
        self.pids
    }
}

fn is_port_clash(error: &Error) -> bool {
    matches!(error, Error::ProcessExited { log_tail, .. } | Error::NotReady { log_tail, .. }
        if log_tail.contains("address already in use"))
}

/// Three distinct free ports: all are bound at once so the kernel cannot hand out one twice, then
/// released for the servers to bind. Another process may take one in between; startup then retries.
fn free_loopback_ports() -> Result<[u16; 3], Error> {
    let bind = || TcpListener::bind(("127.0.0.1", 0)).map_err(Error::io("finding a free loopback port"));
    let listeners = [bind()?, bind()?, bind()?];
    let port = |l: &TcpListener| {
        l.local_addr()
            .map(|a| a.port())
            .map_err(Error::io("reading a bound port"))
    };
    Ok([port(&listeners[0])?, port(&listeners[1])?, port(&listeners[2])?])
}

fn etcd_args(dir: &Path, client: u16, peer: u16) -> Vec<String> {
    let client_url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    vec![
        "--name=egress-test".to_owned(),
        format!("--data-dir={}", dir.join("etcd-data").display()),
        format!("--listen-client-urls={client_url}"),
        format!("--advertise-client-urls={client_url}"),
        format!("--listen-peer-urls={peer_url}"),
        format!("--initial-advertise-peer-urls={peer_url}"),
        format!("--initial-cluster=egress-test={peer_url}"),
        // The data is thrown away with the directory; an fsync per write would dominate test time.
        "--unsafe-no-fsync".to_owned(),
        "--log-level=warn".to_owned(),
    ]
}

fn apiserver_args(dir: &Path, pki: &pki::PkiFiles, etcd_client: u16, port: u16) -> Vec<String> {
    let path = |p: &Path| p.display().to_string();
    vec![
        format!("--etcd-servers=http://127.0.0.1:{etcd_client}"),
        "--bind-address=127.0.0.1".to_owned(),
        "--advertise-address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        format!("--tls-cert-file={}", path(&pki.serving_cert)),
        format!("--tls-private-key-file={}", path(&pki.serving_key)),
        format!("--client-ca-file={}", path(&pki.ca_cert)),
        format!("--service-account-issuer=https://127.0.0.1:{port}"),
        format!("--service-account-key-file={}", path(&pki.service_account_public)),
        format!(
            "--service-account-signing-key-file={}",
            path(&pki.service_account_private)
        ),
        // Only an allocation range for Service cluster IPs; nothing routes to it. A /16, because every
        // Proxy gets a Service: the scale benchmark makes over 13,000, where a /24 runs out at 254.
        "--service-cluster-ip-range=10.0.0.0/16".to_owned(),
        // The `kubernetes` Service's endpoints would be 127.0.0.1, which Endpoints validation refuses
        // every 10 s; nothing in the tests reaches the apiserver through that Service.
        "--endpoint-reconciler-type=none".to_owned(),
        // As in production: RBAC is enforced; the admin passes as a member of system:masters.
        "--authorization-mode=RBAC".to_owned(),
        // Keeps the apiserver's self-generated loopback certificates out of /var/run/kubernetes.
        format!("--cert-dir={}", path(&dir.join("apiserver-certs"))),
        "--profiling=false".to_owned(),
    ]
}
