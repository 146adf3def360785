//! Keeps the control-plane processes from outliving the test process, and the temporary directory from
//! outliving the processes.
//!
//! The processes are started by a small `/bin/sh` supervisor whose standard input is a pipe held by the
//! test process. Each line written to it names a script in the control plane's directory to start in the
//! background; the supervisor answers with the new process id. When the pipe closes, the supervisor stops
//! every process it started (newest first: SIGTERM, SIGKILL after 5 s), waits for them, and removes the
//! directory.
//!
//! The pipe closes in every way a test process can end: `Drop` of an owned `ControlPlane` closes it and
//! waits for the supervisor; a panic unwinds into that same `Drop`; and for the process-wide shared
//! control plane, which lives in a `static` that Rust never drops, or for a test process that aborts or is
//! killed with SIGKILL, the kernel closes the pipe when the process exits. No signal handler, `atexit`
//! hook or parent-death signal (which would need `unsafe`) is involved. Rust opens its pipes with
//! `O_CLOEXEC`, so no other child of the test process (kubectl, say) holds the pipe open.
//!
//! The supervisor ignores SIGINT, SIGQUIT and SIGHUP: a Ctrl-C in the terminal reaches the whole process
//! group, and the supervisor must survive it long enough to see the pipe close and clean up. SIGTERM makes
//! it clean up at once.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::Error;

/// Every control plane's directory starts with this, and the supervisor refuses to remove anything else.
pub const DIR_PREFIX: &str = "egress-control-plane-";

/// The supervisor, run as `sh -c SCRIPT egress-control-plane-supervisor <dir>`. (Its comments live here
/// rather than in the script, which `ps` shows whole.)
///
/// `stop` sends SIGTERM and arms a guard that sends SIGKILL after 5 s. The guard sleeps in 0.1 s steps
/// so that killing it once the process has exited leaves no sleeper behind, and it can never hit a
/// reused pid: `$pid` is a child of this shell and stays unreaped until the `wait` after the guard is
/// dead or done.
const SCRIPT: &str = r#"
dir=$1
case "$dir" in
  /*/egress-control-plane-*) ;;
  *) echo "refusing to supervise $dir" >&2; exit 2 ;;
esac
pids=
stop() {
  trap '' TERM
  for pid in $pids; do
    kill -TERM "$pid" 2>/dev/null
    ( i=0; while [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done; kill -KILL "$pid" ) >/dev/null 2>&1 &
    guard=$!
    wait "$pid" 2>/dev/null
    kill -KILL "$guard" 2>/dev/null
    wait "$guard" 2>/dev/null
  done
  rm -rf "$dir"
  exit 0
}
trap '' INT QUIT HUP
trap stop TERM
while IFS= read -r name; do
  "$dir/$name.sh" >"$dir/$name.log" 2>&1 </dev/null &
  pids="$! $pids"
  echo "$!"
done
stop
"#;

/// The running supervisor of one control plane. Dropping it stops everything and removes the directory.
#[derive(Debug)]
pub struct Supervisor {
    dir: PathBuf,
    child: Child,
    lifeline: Option<ChildStdin>,
    pids: BufReader<ChildStdout>,
}

impl Supervisor {
    /// Starts a supervisor that owns `dir` (which must be named `.../egress-control-plane-*`).
    pub fn spawn(dir: &Path) -> Result<Self, Error> {
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(SCRIPT)
            .arg("egress-control-plane-supervisor")
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // A process group of its own: Ctrl-C in a terminal reaches the program that owns the control
            // plane (a test runner, the demo), which then stops it in order; the lifeline still stops it
            // however that program exits.
            .process_group(0)
            .spawn()
            .map_err(Error::io("starting the /bin/sh supervisor"))?;
        let lifeline = child.stdin.take();
        let pids = BufReader::new(child.stdout.take().expect("stdout is piped"));
        Ok(Self {
            dir: dir.to_path_buf(),
            child,
            lifeline,
            pids,
        })
    }

    /// Starts `program args...` in the background, logging to `<dir>/<name>.log`; returns its pid.
    pub fn start(&mut self, name: &str, program: &Path, args: &[String]) -> Result<u32, Error> {
        let script = self.dir.join(format!("{name}.sh"));
        let mut text = format!("#!/bin/sh\nexec {}", shell_quote(&program.to_string_lossy()));
        for arg in args {
            text.push_str(" \\\n  ");
            text.push_str(&shell_quote(arg));
        }
        text.push('\n');
        std::fs::write(&script, text).map_err(Error::io(format!("writing {}", script.display())))?;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o700))
            .map_err(Error::io(format!("making {} executable", script.display())))?;

        let lifeline = self.lifeline.as_mut().expect("supervisor not stopped");
        writeln!(lifeline, "{name}")
            .and_then(|()| lifeline.flush())
            .map_err(Error::io(format!("asking the supervisor to start {name}")))?;
        let mut line = String::new();
        self.pids
            .read_line(&mut line)
            .map_err(Error::io(format!("reading the pid of {name}")))?;
        line.trim().parse().map_err(|_| Error::Io {
            action: format!("reading the pid of {name}"),
            source: std::io::Error::other(format!("supervisor answered {line:?}")),
        })
    }

    /// Where the process started as `name` writes its output.
    pub fn log_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    /// The last `lines` lines of `name`'s log, for error messages.
    pub fn log_tail(&self, name: &str, lines: usize) -> String {
        let log = std::fs::read_to_string(self.log_path(name)).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Stops the processes, removes the directory and waits for the supervisor to finish.
    fn stop(&mut self) {
        drop(self.lifeline.take());
        let _ = self.child.wait();
        // Only does something if the supervisor itself died first, e.g. killed with SIGKILL; the same
        // name check as the supervisor's keeps a wrong path from ever being removed.
        let ours = self
            .dir
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with(DIR_PREFIX));
        if ours && self.dir.exists() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether `pid` is a running (not exited, not zombie) process.
pub fn is_running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the parenthesised command name, which may itself contain ") ".
    let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
    !matches!(state, None | Some('Z' | 'X'))
}

fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control_plane_dir() -> PathBuf {
        tempfile::Builder::new().prefix(DIR_PREFIX).tempdir().unwrap().keep()
    }

    #[test]
    fn shell_quoting_survives_single_quotes() {
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn dropping_the_supervisor_stops_its_processes_and_removes_the_directory() {
        let dir = control_plane_dir();
        let mut supervisor = Supervisor::spawn(&dir).unwrap();
        let pid = supervisor
            .start("sleeper", Path::new("/bin/sleep"), &["600".to_owned()])
            .unwrap();
        assert!(is_running(pid));
        drop(supervisor);
        assert!(!is_running(pid), "sleep {pid} still running");
        assert!(!dir.exists(), "{} still exists", dir.display());
    }

    #[test]
    fn a_process_that_ignores_sigterm_is_killed() {
        let dir = control_plane_dir();
        let mut supervisor = Supervisor::spawn(&dir).unwrap();
        let stubborn = "trap '' TERM; while :; do sleep 1; done".to_owned();
        let pid = supervisor
            .start("stubborn", Path::new("/bin/sh"), &["-c".to_owned(), stubborn])
            .unwrap();
        drop(supervisor);
        assert!(!is_running(pid));
        assert!(!dir.exists());
    }

    #[test]
    fn output_goes_to_the_named_log() {
        let dir = control_plane_dir();
        let mut supervisor = Supervisor::spawn(&dir).unwrap();
        supervisor
            .start("echo", Path::new("/bin/echo"), &["it's logged".to_owned()])
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while supervisor.log_tail("echo", 1).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(supervisor.log_tail("echo", 1), "it's logged");
    }

    #[test]
    fn a_directory_without_the_prefix_is_never_removed() {
        let dir = tempfile::tempdir().unwrap();
        let supervisor = Supervisor::spawn(dir.path()).unwrap();
        drop(supervisor);
        assert!(dir.path().exists());
    }
}
