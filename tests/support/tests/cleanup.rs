//! The control plane leaves nothing behind: not when dropped, not when its test panics, not when its
//! test process is killed. And without binaries it says how to build them.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use egress_test_support::{BUILD_COMMAND, ControlPlane, Error, ProcessIds, is_running};

const PROBE_ENV: &str = "EGRESS_CLEANUP_PROBE";
const HELPER: &str = "helper_holds_the_shared_control_plane_and_dies";

fn assert_gone(pids: ProcessIds, dir: &std::path::Path, within: Duration) {
    let deadline = Instant::now() + within;
    while (is_running(pids.etcd) || is_running(pids.kube_apiserver) || dir.exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!is_running(pids.etcd), "etcd ({}) still running", pids.etcd);
    assert!(
        !is_running(pids.kube_apiserver),
        "kube-apiserver ({}) still running",
        pids.kube_apiserver
    );
    assert!(!dir.exists(), "{} still exists", dir.display());
}

#[tokio::test]
async fn missing_binaries_fail_with_the_command_that_builds_them() {
    let empty = tempfile::tempdir().unwrap();
    let error = ControlPlane::builder()
        .binaries_dir(empty.path())
        .start()
        .await
        .expect_err("no binaries");
    assert!(matches!(error, Error::BinariesMissing { .. }), "{error:?}");
    assert!(error.to_string().contains(BUILD_COMMAND), "{error}");
}

#[tokio::test]
async fn a_dropped_control_plane_stops_its_processes_and_removes_its_files() {
    let control_plane = ControlPlane::start().await.expect("control plane");
    let pids = control_plane.process_ids();
    let dir = control_plane.work_dir().to_path_buf();
    assert!(is_running(pids.etcd) && is_running(pids.kube_apiserver));
    assert!(control_plane.kubeconfig_path().is_file());

    drop(control_plane);
    // Drop waits for the supervisor, so everything is already gone.
    assert_gone(pids, &dir, Duration::ZERO);
}

/// Runs `HELPER` in a child test process that dies in the given way, and checks what it left behind.
fn shared_control_plane_is_cleaned_up_when_the_process(dies: &str) {
    let report = tempfile::NamedTempFile::new().unwrap();
    let output = Command::new(std::env::current_exe().unwrap())
        .args([HELPER, "--exact", "--ignored", "--nocapture"])
        .env(PROBE_ENV, format!("{dies}:{}", report.path().display()))
        .output()
        .unwrap();
    assert!(
        !output.status.success(),
        "the helper should have died; it said:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let text = std::fs::read_to_string(report.path()).unwrap();
    let fields: Vec<&str> = text.split_whitespace().collect();
    let [etcd, kube_apiserver, dir] = fields[..] else {
        panic!(
            "the helper reported {text:?}; its output:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let pids = ProcessIds {
        etcd: etcd.parse().unwrap(),
        kube_apiserver: kube_apiserver.parse().unwrap(),
    };
    // The supervisor stops the servers after the child has exited: give it the SIGTERM grace period.
    assert_gone(pids, &PathBuf::from(dir), Duration::from_secs(15));
}

#[test]
fn the_shared_control_plane_is_cleaned_up_when_its_test_panics() {
    shared_control_plane_is_cleaned_up_when_the_process("panic");
}

#[test]
fn the_shared_control_plane_is_cleaned_up_when_its_test_process_is_killed() {
    shared_control_plane_is_cleaned_up_when_the_process("sigkill");
}

/// Only does something when started by the tests above, which set `PROBE_ENV` to `<how>:<report file>`.
#[tokio::test]
#[ignore = "run in a child process by the cleanup tests"]
async fn helper_holds_the_shared_control_plane_and_dies() {
    let Ok(probe) = std::env::var(PROBE_ENV) else {
        return;
    };
    let (how, report) = probe.split_once(':').unwrap();
    let control_plane = ControlPlane::shared().await.expect("control plane");
    let pids = control_plane.process_ids();
    let dir = control_plane.work_dir().display().to_string();
    std::fs::write(report, format!("{} {} {dir}", pids.etcd, pids.kube_apiserver)).unwrap();
    match how {
        // SIGKILL: no unwinding, no exit handlers, no core dump; only the kernel closing our fds.
        "sigkill" => {
            let _ = Command::new("kill")
                .args(["-KILL", &std::process::id().to_string()])
                .status();
            unreachable!("SIGKILL cannot be caught");
        }
        _ => panic!("dying on purpose while the shared control plane runs"),
    }
}
