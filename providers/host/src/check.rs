//! Check: four targets that fail independently.
//!
//! | Target | Probe | Reasons | Details |
//! |---|---|---|---|
//! | `binary` | `tinyproxy -v` within `checkTimeoutMs` | OK, MISCONFIGURED | `path`, `version` |
//! | `state-dir` | create and remove a file in it | OK, PERMISSION_DENIED, MISCONFIGURED | `path` |
//! | `pool` | count held addresses; bind each free one on port 0 | OK, DEGRADED, QUOTA_EXHAUSTED, MISCONFIGURED | `total`, `in_use`, `free`, `unconfigured` |
//! | `instances` | supervision status of every instance | OK, CRASH_LOOP | `supervised`, `crash_looping` |

use std::{
    io,
    net::{Ipv4Addr, TcpListener},
    process::Stdio,
};

use provider_sdk::{
    check::{REASON_DEGRADED, REASON_MISCONFIGURED, REASON_PERMISSION_DENIED, REASON_QUOTA_EXHAUSTED},
    model::CheckResult,
};
use tokio::process::Command;

use crate::{provider::Inner, supervisor::Phase, tinyproxy};

/// A proxy exits again and again: its own log (`<stateDir>/<name>/tinyproxy.log`, `stderr.log`) says why,
/// which is a different place to look from any shared reason's.
pub const REASON_CRASH_LOOP: &str = "CRASH_LOOP";

pub async fn check(inner: &Inner) -> Vec<CheckResult> {
    vec![
        binary(inner).await,
        state_dir(inner).await,
        pool(inner),
        instances(inner),
    ]
}

async fn binary(inner: &Inner) -> CheckResult {
    let path = &inner.settings.tinyproxy_path;
    let run = Command::new(path)
        .arg("-v")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let failed = |message: String| {
        CheckResult::failed("binary", REASON_MISCONFIGURED, message).with_detail("path", path.display().to_string())
    };
    let output = match tokio::time::timeout(inner.settings.check_timeout, run).await {
        Err(_) => {
            return failed(format!(
                "{} -v did not answer within {:?}",
                path.display(),
                inner.settings.check_timeout
            ));
        }
        Ok(Err(error)) => return failed(format!("tinyproxyPath {} cannot be run: {error}", path.display())),
        Ok(Ok(output)) => output,
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    match tinyproxy::parse_version(&text) {
        Some(version) if output.status.success() => {
            CheckResult::ok("binary", format!("tinyproxy {version} at {}", path.display()))
                .with_detail("path", path.display().to_string())
                .with_detail("version", version)
        }
        _ => failed(format!(
            "{} -v did not print a tinyproxy version (exit {})",
            path.display(),
            output.status
        )),
    }
}

async fn state_dir(inner: &Inner) -> CheckResult {
    let dir = &inner.settings.state_dir;
    let probe = dir.join(".check");
    let result = async {
        tokio::fs::write(&probe, b"check\n").await?;
        tokio::fs::remove_file(&probe).await
    }
    .await;
    let shown = dir.display().to_string();
    match result {
        Ok(()) => CheckResult::ok("state-dir", format!("{shown} is writable")).with_detail("path", shown),
        Err(error) => {
            let reason = if error.kind() == io::ErrorKind::PermissionDenied {
                REASON_PERMISSION_DENIED
            } else {
                REASON_MISCONFIGURED
            };
            CheckResult::failed(
                "state-dir",
                reason,
                format!("stateDir {shown} is not writable: {error}"),
            )
            .with_detail("path", shown)
        }
    }
}

fn pool(inner: &Inner) -> CheckResult {
    let pool = &inner.settings.pool;
    let held: Vec<Ipv4Addr> = inner.entries().values().map(|entry| entry.address).collect();
    let free: Vec<Ipv4Addr> = pool.addresses().iter().copied().filter(|a| !held.contains(a)).collect();
    let in_use = pool.len() - free.len();
    // Port 0: whether the address is configured on this host, whatever port a Create will ask for.
    let unconfigured = free
        .iter()
        .filter(|address| TcpListener::bind((**address, 0)).is_err())
        .count();
    let usable = free.len() - unconfigured;
    let result = if free.is_empty() {
        CheckResult::failed(
            "pool",
            REASON_QUOTA_EXHAUSTED,
            format!("all {} addresses of the pool are in use", pool.len()),
        )
    } else if usable == 0 {
        CheckResult::failed(
            "pool",
            REASON_MISCONFIGURED,
            format!("none of the {unconfigured} free addresses is configured on this host"),
        )
    } else if unconfigured > 0 {
        CheckResult {
            reason: REASON_DEGRADED.to_owned(),
            ..CheckResult::ok(
                "pool",
                format!("{usable} addresses free; {unconfigured} more are not configured on this host"),
            )
        }
    } else {
        CheckResult::ok("pool", format!("{usable} of {} addresses free", pool.len()))
    };
    result
        .with_detail("total", pool.len().to_string())
        .with_detail("in_use", in_use.to_string())
        .with_detail("free", free.len().to_string())
        .with_detail("unconfigured", unconfigured.to_string())
}

fn instances(inner: &Inner) -> CheckResult {
    let entries: Vec<_> = inner.entries().values().cloned().collect();
    let looping: Vec<String> = entries
        .iter()
        .filter_map(|entry| {
            let status = entry.supervisor.status();
            (status.phase == Phase::CrashLoop).then(|| match status.last_exit {
                Some(how) => format!("{} ({how})", entry.name),
                None => entry.name.clone(),
            })
        })
        .collect();
    let result = if looping.is_empty() {
        CheckResult::ok(
            "instances",
            format!("{} instances supervised, none crash-looping", entries.len()),
        )
    } else {
        let shown: Vec<&str> = looping.iter().take(5).map(String::as_str).collect();
        CheckResult::failed(
            "instances",
            REASON_CRASH_LOOP,
            format!(
                "{} instance(s) crash-looping, see their tinyproxy.log and stderr.log: {}",
                looping.len(),
                shown.join(", ")
            ),
        )
    };
    result
        .with_detail("supervised", entries.len().to_string())
        .with_detail("crash_looping", looping.len().to_string())
}
