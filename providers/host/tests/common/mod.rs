//! What the host provider's integration tests share: the real daemon as a child process on a unix socket
//! with a temporary state directory and a random loopback pool, an SDK client, request builders, and a
//! raw HTTP client and echo server for traffic through the proxies. Only loopback addresses are used.

#![allow(dead_code)]

use std::{
    net::Ipv4Addr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

pub use egress_test_support::Answer;
use egress_test_support::ProxiedGet;
use provider_sdk::{
    client::{CallTimeouts, ProviderClient, ProviderEndpoint},
    model::*,
};
use rand::Rng;
use secrecy::SecretString;

pub const USERNAME: &str = "egress";
pub const PASSWORD: &str = "pw-0123456789.test";

/// A temporary state directory, config and socket, with a random /28 of 127/8 as the pool, so that test
/// binaries running side by side (and other runs on the machine) do not meet.
#[derive(Debug)]
pub struct Host {
    pub dir: tempfile::TempDir,
    pub pool: Ipv4Addr,
}

impl Host {
    pub fn new() -> Self {
        Self::with(28, "")
    }

    /// A pool of one `/prefix` block, and `extra` appended to the generated config.
    pub fn with(prefix: u8, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = rand::rng();
        let pool = Ipv4Addr::new(127, rng.random_range(100..=250), rng.random_range(0..=255), 0);
        let config = format!(
            "pool: [{pool}/{prefix}]\nstateDir: {}\nrestartBackoff: {{initialMs: 50, maxMs: 200}}\n{extra}",
            dir.path().join("state").display()
        );
        std::fs::write(dir.path().join("host.yaml"), config).unwrap();
        Self { dir, pool }
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("host.sock")
    }

    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    /// Starts the daemon and waits until it serves.
    pub fn start(&self) -> Daemon {
        self.start_with(Stdio::null(), Stdio::inherit(), "warn")
    }

    /// Starts the daemon with every log line (`RUST_LOG=debug`, standard output and error) in `log`.
    pub fn start_logging_to(&self, log: &Path) -> Daemon {
        let file = std::fs::File::create(log).unwrap();
        self.start_with(file.try_clone().unwrap().into(), file.into(), "debug")
    }

    fn start_with(&self, stdout: Stdio, stderr: Stdio, level: &str) -> Daemon {
        let _ = std::fs::remove_file(self.socket());
        let child = self
            .command(&self.endpoint())
            .env("RUST_LOG", level)
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("egress-provider-host starts");
        let daemon = Daemon {
            child,
            state_dir: self.state_dir(),
        };
        wait_until(Duration::from_secs(20), || self.socket().exists());
        daemon
    }

    /// The daemon's command line with this host's config, listening on `endpoint`.
    pub fn command(&self, endpoint: &str) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_egress-provider-host"));
        command
            .args(["--config", self.dir.path().join("host.yaml").to_str().unwrap()])
            .args(["--listen", endpoint])
            .env("RUST_LOG", "warn");
        command
    }

    pub fn client(&self) -> ProviderClient {
        let endpoint: ProviderEndpoint = self.endpoint().parse().unwrap();
        ProviderClient::connect_lazy(&endpoint, None, CallTimeouts::default()).unwrap()
    }

    pub fn instance_dir(&self, name: &str) -> PathBuf {
        self.state_dir().join(name)
    }

    /// The pid a tinyproxy wrote into its instance directory.
    pub fn tinyproxy_pid(&self, name: &str) -> Option<u32> {
        std::fs::read_to_string(self.instance_dir(name).join("tinyproxy.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

/// The daemon process. Dropping it kills the daemon and then every tinyproxy its state directory names,
/// so that a failed test leaves no process behind (the daemon itself leaves proxies running by design).
#[derive(Debug)]
pub struct Daemon {
    child: Child,
    state_dir: PathBuf,
}

impl Daemon {
    /// SIGTERM, as systemd or Kubernetes stops it; waits for the exit and returns its code.
    pub fn stop(mut self) -> Option<i32> {
        signal(self.child.id(), "TERM");
        let status = self.child.wait().unwrap();
        std::mem::forget(self);
        status.code()
    }

    /// SIGKILL: a crash, with no chance to clean up.
    pub fn crash(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::forget(self);
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        kill_proxies(&self.state_dir);
    }
}

/// Kills every tinyproxy whose pid file is under `state_dir`.
pub fn kill_proxies(state_dir: &Path) {
    egress_test_support::signal_pid_files(state_dir, "tinyproxy.pid", "KILL");
}

pub fn signal(pid: u32, signal: &str) {
    egress_test_support::send_signal(pid, signal);
}

pub fn wait_until(budget: Duration, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + budget;
    while !ready() {
        assert!(Instant::now() < deadline, "not ready within {budget:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Create request with the shared credentials.
pub fn request(name: &str, port: u16, allowed: &[&str]) -> CreateRequest {
    CreateRequest {
        name: InstanceName::parse(name, DEFAULT_MAX_NAME_LENGTH).unwrap(),
        proxy_uid: "5f0c6a52-8d0e-4f1e-9d55-6b9f0c2a7e11".into(),
        cluster_id: "host-tests".into(),
        placement: Placement::default(),
        proxy: ProxySettings {
            port,
            protocol: Protocol::Http,
            auth: ProxyAuth {
                username: USERNAME.into(),
                password: SecretString::from(PASSWORD),
            },
            allowed_source_ranges: allowed.iter().map(|r| r.parse().unwrap()).collect(),
        },
        cloud_init: None,
    }
}

/// Polls Get until the instance is in `state`.
pub async fn wait_for_state(client: &ProviderClient, id: &ProviderId, state: InstanceState) -> Instance {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let instance = client.get(id).await.expect("Get");
        if instance.state == state {
            return instance;
        }
        assert!(
            Instant::now() < deadline,
            "{id} stayed {:?}, expected {state:?}",
            instance.state
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One target of Check's answer.
pub async fn check_target(client: &ProviderClient, target: &str) -> CheckResult {
    let results = client.check().await.expect("Check");
    results
        .into_iter()
        .find(|r| r.target == target)
        .unwrap_or_else(|| panic!("no {target} target"))
}

/// The free addresses Check's `pool` target counts.
pub async fn pool_free(client: &ProviderClient) -> usize {
    check_target(client, "pool").await.details["free"].parse().unwrap()
}

/// True while `pid` is a process that has not exited.
pub fn is_alive(pid: u32) -> bool {
    egress_test_support::is_alive(pid)
}

/// A port nothing listens on at the moment, on every loopback address.
pub fn free_port() -> u16 {
    egress_test_support::free_port().unwrap()
}

/// An HTTP server on 127.0.0.1 that answers every request with the address of the peer it saw.
pub async fn echo_server() -> u16 {
    egress_test_support::start_echo_server().await.expect("echo server")
}

/// `GET http://127.0.0.1:<target_port>/` through the proxy at `proxy`, with basic credentials when given.
pub async fn get_through(proxy: (Ipv4Addr, u16), target_port: u16, credentials: Option<(&str, &str)>) -> Answer {
    let mut get = ProxiedGet::new(proxy.into(), target_port);
    if let Some((user, password)) = credentials {
        get = get.credentials(user, password);
    }
    get.send().await.expect("a proxied request")
}
