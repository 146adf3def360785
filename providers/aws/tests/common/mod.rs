//! What the AWS provider's integration tests share: a moto EC2 server of their own on a free loopback port
//! (killed on drop), the real daemon as a child process on a unix socket configured against it, an SDK
//! client, and request builders. Only 127.0.0.1 is ever contacted: the daemon reads its credentials from a
//! file, so the standard chain (and its instance-metadata probe) is never used.

#![allow(dead_code)]

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use provider_sdk::{
    client::{CallTimeouts, ProviderClient, ProviderEndpoint},
    model::*,
};
use secrecy::SecretString;

/// An AMI of moto's built-in set, present in every region it emulates (Ubuntu 16.04).
pub const MOTO_AMI: &str = "ami-785db401";
pub const USERNAME: &str = "egress";
pub const PASSWORD: &str = "pw-0123456789.test";

pub use egress_test_support::Moto;

/// A temporary directory with the daemon's config (two regions of moto's, its shared credentials file)
/// and socket.
#[derive(Debug)]
pub struct Aws {
    pub dir: tempfile::TempDir,
    pub moto: Moto,
}

impl Aws {
    pub fn new() -> Self {
        Self::with_extra_region("")
    }

    /// `region` is appended to the `regions:` block (already indented).
    pub fn with_extra_region(region: &str) -> Self {
        let moto = Moto::start();
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "endpointUrl: {url}\n\
             regions:\n  us-east-1:\n    zones: {{us-east-1a: {{}}, us-east-1b: {{}}}}\n    images: {{ubuntu: {MOTO_AMI}}}\n\
             \x20 eu-west-1:\n    images: {{ubuntu: {MOTO_AMI}}}\n{region}\
             machineTypes: [t3.micro, t3.small]\ndefaultMachineType: t3.micro\n\
             credentials:\n  sharedCredentialsFile: {creds}\n  refreshSeconds: 1\n\
             budgets: {{pollMs: 100, connectMs: 1000, attemptMs: 5000, callMs: 10000, maxAttempts: 2}}\n",
            url = moto.url(),
            creds = dir.path().join("credentials").display(),
        );
        std::fs::write(dir.path().join("aws.yaml"), config).unwrap();
        let aws = Self { dir, moto };
        aws.write_credentials("AKIDEXAMPLE", "test-secret-key");
        aws
    }

    pub fn write_credentials(&self, key_id: &str, secret: &str) {
        std::fs::write(
            self.credentials_file(),
            format!("[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n"),
        )
        .unwrap();
    }

    pub fn credentials_file(&self) -> PathBuf {
        self.dir.path().join("credentials")
    }

    pub fn config_file(&self) -> PathBuf {
        self.dir.path().join("aws.yaml")
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("aws.sock")
    }

    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    pub fn start(&self) -> Daemon {
        self.start_with(Stdio::null(), Stdio::inherit(), "warn")
    }

    /// Starts the daemon with every log line (`RUST_LOG` at `level`, standard output and error) in `log`.
    pub fn start_logging_to(&self, log: &Path, level: &str) -> Daemon {
        let file = std::fs::File::create(log).unwrap();
        self.start_with(file.try_clone().unwrap().into(), file.into(), level)
    }

    fn start_with(&self, stdout: Stdio, stderr: Stdio, level: &str) -> Daemon {
        let _ = std::fs::remove_file(self.socket());
        let child = Command::new(env!("CARGO_BIN_EXE_egress-provider-aws"))
            .args(["--config", self.config_file().to_str().unwrap()])
            .args(["--listen", &self.endpoint()])
            .env("RUST_LOG", level)
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("egress-provider-aws starts");
        let daemon = Daemon { child };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.socket().exists() {
            assert!(Instant::now() < deadline, "the daemon did not serve within 20 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        daemon
    }

    /// An EC2 client of `region` against this moto, as the daemon builds it, to look behind its back.
    pub fn ec2(&self, region: &str) -> aws_sdk_ec2::Client {
        let config: egress_provider_aws::AwsConfig = provider_sdk::config::load(Some(&self.config_file())).unwrap();
        let (_, mut clients) = egress_provider_aws::clients::build(&config);
        clients.remove(region).expect("a configured region")
    }

    pub fn client(&self) -> ProviderClient {
        let endpoint: ProviderEndpoint = self.endpoint().parse().unwrap();
        ProviderClient::connect_lazy(&endpoint, None, CallTimeouts::default()).unwrap()
    }
}

/// The daemon process, killed on drop.
#[derive(Debug)]
pub struct Daemon {
    child: Child,
}

impl Daemon {
    /// SIGTERM; waits for the exit and returns its code.
    pub fn stop(mut self) -> Option<i32> {
        let _ = Command::new("kill")
            .args(["-s", "TERM", &self.child.id().to_string()])
            .status();
        let status = self.child.wait().unwrap();
        status.code()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    egress_test_support::free_port().unwrap()
}

/// A Create request placed in us-east-1a with the catalogue's image.
pub fn request(name: &str) -> CreateRequest {
    CreateRequest {
        name: InstanceName::parse(name, DEFAULT_MAX_NAME_LENGTH).unwrap(),
        proxy_uid: "5f0c6a52-8d0e-4f1e-9d55-6b9f0c2a7e11".into(),
        cluster_id: "aws-tests".into(),
        placement: Placement {
            region: "us-east-1".into(),
            zone: "us-east-1a".into(),
            machine_type: "t3.micro".into(),
            image: "ubuntu".into(),
        },
        proxy: ProxySettings {
            port: 3128,
            protocol: Protocol::Http,
            auth: ProxyAuth {
                username: USERNAME.into(),
                password: SecretString::from(PASSWORD),
            },
            allowed_source_ranges: vec!["10.0.0.0/8".parse().unwrap()],
        },
        cloud_init: None,
    }
}

/// Polls Get until NOT_FOUND.
pub async fn wait_gone(client: &ProviderClient, id: &ProviderId) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client.get(id).await {
            Err(error) if error.class() == provider_sdk::ErrorClass::NotFound => return,
            Err(error) => panic!("Get {id}: {error}"),
            Ok(instance) => assert!(Instant::now() < deadline, "{id} still {:?}", instance.state),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
