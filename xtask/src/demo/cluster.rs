//! The cluster the demo runs against: the one the kubeconfig names when it answers, otherwise a local
//! control plane (etcd + kube-apiserver from `tests/control-plane`, built on first use).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use egress_test_support::ControlPlane;

use super::{path_str, print_indented, step};

/// A CRD the operator needs before it starts; `kubectl wait` is given both.
const CRDS: [&str; 2] = ["crd/proxies.egressproxies.dev", "crd/providerhealths.egressproxies.dev"];

#[derive(Debug)]
pub enum Cluster {
    /// Started by the demo; stopped when dropped.
    Local(Box<ControlPlane>),
    /// Configured by the user; the demo only adds the CRDs, a namespace and a Proxy.
    External { kubeconfig: PathBuf, kubectl: PathBuf },
}

impl Cluster {
    /// The configured cluster if it answers `/readyz` within 5 s (and `local` is false), else a local one.
    pub async fn connect_or_start(repo: &Path, local: bool) -> Result<Self> {
        if !local && let Some(external) = configured_cluster() {
            return Ok(external);
        }
        step("the local control plane (etcd and kube-apiserver built from Go modules; cached after the first run)");
        let script = repo.join("scripts/build-control-plane.sh");
        let status = Command::new(&script)
            .status()
            .with_context(|| format!("running {}", script.display()))?;
        if !status.success() {
            bail!("{} failed ({status})", script.display());
        }
        step("starting etcd and kube-apiserver on loopback");
        let plane = ControlPlane::start()
            .await
            .context("starting the local control plane")?;
        println!(
            "   {} (kubeconfig {})",
            plane.server_url(),
            plane.kubeconfig_path().display()
        );
        Ok(Self::Local(Box::new(plane)))
    }

    pub fn is_local(&self) -> bool {
        matches!(self, Self::Local(_))
    }

    pub fn kubeconfig(&self) -> &Path {
        match self {
            Self::Local(plane) => plane.kubeconfig_path(),
            Self::External { kubeconfig, .. } => kubeconfig,
        }
    }

    /// The directory of the kubectl the demo uses when it is not on the PATH.
    pub fn kubectl_dir(&self) -> Option<&Path> {
        match self {
            Self::Local(plane) => plane.binaries().kubectl.parent(),
            Self::External { .. } => None,
        }
    }

    fn kubectl_command(&self) -> Command {
        match self {
            Self::Local(plane) => plane.kubectl(),
            Self::External { kubeconfig, kubectl } => {
                let mut command = Command::new(kubectl);
                command.arg("--kubeconfig").arg(kubeconfig);
                command
            }
        }
    }

    /// Runs kubectl and returns its standard output; the error carries its standard error.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        let output = self
            .kubectl_command()
            .args(args)
            .output()
            .with_context(|| format!("running kubectl {}", args.join(" ")))?;
        if !output.status.success() {
            bail!(
                "kubectl {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Applies the chart's CRDs (server-side, as Helm would leave them) and waits until they are served.
    pub fn install_crds(&self, repo: &Path) -> Result<()> {
        let crds = repo.join("charts/egress-proxies-operator/crds/crds.yaml");
        let applied = self.kubectl(&["apply", "--server-side", "--force-conflicts", "-f", &path_str(&crds)])?;
        print_indented(&applied);
        let mut wait = vec!["wait", "--for=condition=Established", "--timeout=60s"];
        wait.extend(CRDS);
        self.kubectl(&wait)?;
        Ok(())
    }

    pub fn ensure_namespace(&self, name: &str) -> Result<()> {
        if self.kubectl(&["get", "namespace", name]).is_err() {
            self.kubectl(&["create", "namespace", name])?;
        }
        Ok(())
    }
}

/// The cluster named by `$KUBECONFIG` or `~/.kube/config`, when there is a kubectl on the PATH to reach it
/// and it answers.
fn configured_cluster() -> Option<Cluster> {
    let kubeconfig = std::env::var_os("KUBECONFIG")
        .and_then(|paths| std::env::split_paths(&paths).next())
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".kube/config")))
        .filter(|path| path.is_file())?;
    let kubectl = find_on_path("kubectl")?;
    let probe = Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--request-timeout=5s", "get", "--raw", "/readyz"])
        .output()
        .ok()?;
    if probe.status.success() {
        step(&format!(
            "using the cluster of {} (it answers /readyz)",
            kubeconfig.display()
        ));
        Some(Cluster::External { kubeconfig, kubectl })
    } else {
        println!(
            "== {} names a cluster that does not answer; starting a local one instead",
            kubeconfig.display()
        );
        None
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}
