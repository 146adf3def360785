//! What the demo needs before anything runs: a work directory for logs and sockets, tinyproxy, and the two
//! daemons built with cargo into the shared cache outside the clone.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

/// The Debian package's binary, as `examples/provider-host-loopback.yaml` names it.
const TINYPROXY: &str = "/usr/bin/tinyproxy";

/// Paths of the daemons the demo runs.
#[derive(Debug)]
pub struct Binaries {
    pub operator: PathBuf,
    pub host_provider: PathBuf,
}

/// The host provider's state directory inside the work directory.
pub const HOST_STATE: &str = "host-state";

/// `~/.cache/egress-proxies/demo`, emptied: the daemons' logs and configs, the provider's socket and state.
/// It stays after the demo so the logs can be read. A demo that was killed outright (SIGKILL) can have
/// left tinyproxy processes behind, since the host provider keeps them running for re-adoption: they are
/// stopped first, so their addresses are free again.
pub fn work_dir() -> Result<PathBuf> {
    let dir = cache_dir().join("demo");
    stop_leftover_proxies(&dir.join(HOST_STATE));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn cache_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache/egress-proxies")
}

fn stop_leftover_proxies(state_dir: &Path) {
    for pid in egress_test_support::signal_pid_files(state_dir, "tinyproxy.pid", "TERM") {
        println!("   stopped tinyproxy {pid}, left by an earlier demo");
    }
}

/// Installs tinyproxy from the distribution when it is missing and we are root; otherwise says how.
pub fn ensure_tinyproxy(repo: &Path) -> Result<()> {
    if Path::new(TINYPROXY).is_file() {
        println!("   {TINYPROXY} is there");
        return Ok(());
    }
    let script = repo.join("scripts/install-tinyproxy.sh");
    let status = Command::new(&script)
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !status.success() || !Path::new(TINYPROXY).is_file() {
        bail!(
            "{TINYPROXY} is missing and {} could not install it ({status}); install the tinyproxy package",
            script.display()
        );
    }
    Ok(())
}

/// `cargo build` of the operator and the host provider (cargo prints its own progress).
pub fn build_daemons(repo: &Path) -> Result<Binaries> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| cache_dir().join("target"), PathBuf::from);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(repo)
        .env("CARGO_TARGET_DIR", &target)
        .args([
            "build",
            "--locked",
            "-p",
            "egress-operator",
            "-p",
            "egress-provider-host",
        ])
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("cargo build of egress-operator and egress-provider-host failed ({status})");
    }
    let bin = target.join("debug");
    Ok(Binaries {
        operator: bin.join("egress-operator"),
        host_provider: bin.join("egress-provider-host"),
    })
}
