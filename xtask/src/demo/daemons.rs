//! The two daemons the demo runs: `egress-provider-host` on a unix socket with the loopback sample config,
//! and `egress-operator` against the cluster. Each runs in a process group of its own, so Ctrl-C reaches
//! only the demo, which then deletes the Proxy before stopping them; each logs to a file in the work
//! directory.

use std::{
    fs::File,
    io::{Read, Write},
    net::TcpStream,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use egress_test_support::{ChildProcess, poll_until};

use super::{
    NAMESPACE,
    cluster::Cluster,
    path_str,
    prepare::{Binaries, HOST_STATE},
};

/// How long a daemon has to drain on SIGTERM before it is killed (the SDK's drain is 20 s).
const STOP_GRACE: Duration = Duration::from_secs(25);
const OPERATOR_LOG: &str = "operator.log";
const PROVIDER_LOG: &str = "host-provider.log";

#[derive(Debug)]
pub struct Daemons {
    /// The work directory: configs, the provider's socket and state, both logs.
    work: PathBuf,
    provider: Option<ChildProcess>,
    operator: Option<ChildProcess>,
    metrics_port: Option<u16>,
}

impl Daemons {
    /// Nothing running yet; everything goes into `work`.
    pub fn new(work: &Path) -> Self {
        Self {
            work: work.to_path_buf(),
            provider: None,
            operator: None,
            metrics_port: None,
        }
    }

    pub fn start_host_provider(&mut self, binaries: &Binaries, repo: &Path) -> Result<()> {
        let work = self.work.clone();
        let socket = work.join("host.sock");
        // The sample config as is, with the state directory moved into the work directory so that each
        // demo starts from nothing and never meets the records of a host provider run by hand.
        let sample = repo.join("examples/provider-host-loopback.yaml");
        let sample = std::fs::read_to_string(&sample).with_context(|| format!("reading {}", sample.display()))?;
        let config = work.join("provider-host.yaml");
        let state = work.join(HOST_STATE);
        std::fs::write(&config, format!("{sample}\nstateDir: {}\n", state.display()))
            .with_context(|| format!("writing {}", config.display()))?;
        let mut command = Command::new(&binaries.host_provider);
        command
            .arg("--config")
            .arg(&config)
            .arg("--listen")
            .arg(format!("unix://{}", socket.display()));
        let mut child = spawn("egress-provider-host", &mut command, &work.join(PROVIDER_LOG))?;
        let up = poll_until(Duration::from_secs(30), || {
            socket.exists() || child.try_wait().is_ok_and(|exited| exited.is_some())
        });
        if !up || !socket.exists() {
            self.provider = Some(child);
            self.print_log_tails();
            bail!("egress-provider-host did not start serving on {}", socket.display());
        }
        println!(
            "   serving on unix://{} (log: {})",
            socket.display(),
            work.join(PROVIDER_LOG).display()
        );
        self.provider = Some(child);
        Ok(())
    }

    pub fn start_operator(&mut self, binaries: &Binaries, cluster: &Cluster) -> Result<()> {
        let work = self.work.clone();
        let config = work.join("operator.yaml");
        std::fs::write(
            &config,
            format!(
                "# Written by the demo: one provider, the host daemon it started.\nclusterId: demo\nproviders:\n  \
                 host:\n    type: host\n    endpoint: unix://{}\n",
                work.join("host.sock").display()
            ),
        )
        .with_context(|| format!("writing {}", config.display()))?;
        let port = egress_test_support::free_port()?;
        let mut command = Command::new(&binaries.operator);
        command
            .args(["--config", &path_str(&config), "--no-leader-election"])
            .args(["--watch-namespace", NAMESPACE])
            .args(["--http-addr", &format!("127.0.0.1:{port}")])
            .env("KUBECONFIG", cluster.kubeconfig());
        let mut child = spawn("egress-operator", &mut command, &work.join(OPERATOR_LOG))?;
        let ready = poll_until(Duration::from_secs(60), || {
            http_get(port, "/readyz").is_some_and(|answer| answer.starts_with("HTTP/1.1 200"))
                || child.try_wait().is_ok_and(|exited| exited.is_some())
        });
        self.operator = Some(child);
        self.metrics_port = Some(port);
        if !ready || http_get(port, "/readyz").is_none() {
            self.print_log_tails();
            bail!("egress-operator did not become ready on 127.0.0.1:{port}/readyz");
        }
        println!(
            "   ready (config: {}, log: {})",
            config.display(),
            work.join(OPERATOR_LOG).display()
        );
        Ok(())
    }

    pub fn operator_running(&mut self) -> bool {
        self.operator
            .as_mut()
            .is_some_and(|operator| operator.try_wait().is_ok_and(|exited| exited.is_none()))
    }

    pub fn metrics_url(&self) -> Option<String> {
        self.metrics_port.map(|port| format!("http://127.0.0.1:{port}/metrics"))
    }

    pub fn operator_log(&self) -> PathBuf {
        self.work.join(OPERATOR_LOG)
    }

    pub fn provider_log(&self) -> PathBuf {
        self.work.join(PROVIDER_LOG)
    }

    /// SIGTERM to the operator, then to the provider (which leaves no tinyproxy once the Proxy is gone).
    pub fn stop(&mut self) {
        for daemon in [self.operator.take(), self.provider.take()].into_iter().flatten() {
            let name = daemon.name().to_owned();
            match daemon.terminate(STOP_GRACE) {
                Ok(status) => println!("   {name} stopped ({status})"),
                Err(error) => eprintln!("   {name}: {error}"),
            }
        }
    }

    /// The last lines of both logs, after a failure.
    pub fn print_log_tails(&self) {
        for log in [self.provider_log(), self.operator_log()] {
            let Ok(text) = std::fs::read_to_string(&log) else {
                continue;
            };
            let lines: Vec<&str> = text.lines().collect();
            eprintln!("\n--- the last lines of {}", log.display());
            for line in &lines[lines.len().saturating_sub(15)..] {
                eprintln!("{line}");
            }
        }
    }
}

/// Starts a daemon with text logs into `log`, in a process group of its own.
fn spawn(name: &str, command: &mut Command, log: &Path) -> Result<ChildProcess> {
    let file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    command
        .env("EGRESS_LOG_FORMAT", "text")
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .process_group(0);
    Ok(ChildProcess::spawn(name, command)?)
}

/// A bare HTTP/1.1 GET to 127.0.0.1; the whole answer, or `None` when nothing listens.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}
