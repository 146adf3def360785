//! Child processes that tests and the demo start: killed when dropped, so a failed assertion leaves no
//! daemon behind, or stopped with SIGTERM to see a clean shutdown.

use std::{
    io,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus},
    time::{Duration, Instant},
};

/// A child process killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct ChildProcess {
    name: String,
    child: Child,
}

impl ChildProcess {
    /// Spawns `command`; the error names the program.
    pub fn spawn(name: &str, command: &mut Command) -> io::Result<Self> {
        let child = command
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("starting {name}: {e}")))?;
        Ok(Self {
            name: name.to_owned(),
            child,
        })
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The exit status if the process has exited.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`; returns how it exited.
    pub fn terminate(mut self, grace: Duration) -> io::Result<ExitStatus> {
        send_signal(self.child.id(), "TERM");
        let deadline = Instant::now() + grace;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                return self.child.wait();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends a signal by name (`TERM`, `KILL`, ...) with kill(1): the workspace forbids `unsafe`, and this is
/// the only signal the tests need besides SIGKILL, which `Child::kill` sends.
pub fn send_signal(pid: u32, signal: &str) {
    let _ = Command::new("kill").args(["-s", signal, &pid.to_string()]).status();
}

/// Sends `signal` to every process whose pid is written in `<dir>/*/<pid_file>`, as the host provider
/// leaves one `tinyproxy.pid` per instance directory; returns the pids signalled. Its proxies outlive the
/// daemon by design (it re-adopts them), so whatever kills a daemon for good stops them this way.
pub fn signal_pid_files(dir: &Path, pid_file: &str, signal: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let pids: Vec<u32> = entries
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path().join(pid_file)).ok())
        .filter_map(|pid| pid.trim().parse().ok())
        .collect();
    for pid in &pids {
        send_signal(*pid, signal);
    }
    pids
}

/// True while `pid` names a process that has not exited (a zombie counts as exited).
pub fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

/// A TCP port nothing listens on at the moment on 127.0.0.1 (and so, on Linux, on the rest of 127/8).
pub fn free_port() -> io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Another binary of the workspace, in the same target directory as `exe` (a test's
/// `env!("CARGO_BIN_EXE_...")`); `cargo test --workspace` builds every binary first. Panics naming the
/// build command when it is missing.
pub fn binary_beside(exe: &str, name: &str) -> PathBuf {
    let path = Path::new(exe).with_file_name(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build -p {name}` first",
        path.display()
    );
    path
}

/// Polls `done` every 50 ms until it is true or `budget` runs out; false on time-out.
pub fn poll_until(budget: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + budget;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminate_stops_a_process_with_sigterm() {
        let child = ChildProcess::spawn("sleep", Command::new("sleep").arg("30")).unwrap();
        let status = child.terminate(Duration::from_secs(5)).unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(15), "{status:?}");
    }

    #[test]
    fn a_process_is_alive_until_it_exits_and_is_reaped() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        assert!(is_alive(child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!is_alive(child.id()));
    }

    #[test]
    fn the_processes_named_by_pid_files_are_signalled() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        std::fs::create_dir(dir.path().join("instance")).unwrap();
        std::fs::write(dir.path().join("instance/app.pid"), format!("{}\n", child.id())).unwrap();
        std::fs::create_dir(dir.path().join("without-pid")).unwrap();
        assert_eq!(signal_pid_files(dir.path(), "app.pid", "KILL"), [child.id()]);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(9));
        assert!(signal_pid_files(&dir.path().join("missing"), "app.pid", "KILL").is_empty());
    }

    #[test]
    fn a_missing_program_is_named_in_the_error() {
        let error = ChildProcess::spawn("ghost", &mut Command::new("/nonexistent/ghost")).unwrap_err();
        assert!(error.to_string().contains("starting ghost"), "{error}");
    }
}
