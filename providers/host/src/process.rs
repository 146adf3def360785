//! The operating-system side of a tinyproxy: starting it in the foreground, signalling it, telling whether
//! a pid is still a live tinyproxy of ours (for re-adoption), and reading the kernel's socket table to see
//! whether it listens. Linux only: liveness and sockets come from `/proc`.

use std::{
    collections::HashSet, ffi::OsStr, fs, io, net::Ipv4Addr, os::unix::ffi::OsStrExt, path::Path, process::Stdio,
    time::Duration,
};

use tokio::process::{Child, Command};

use crate::tinyproxy::PID_FILE;

/// Where a tinyproxy's own standard error goes (start-up failures before its log file is open).
pub const STDERR_FILE: &str = "stderr.log";

/// Starts `tinyproxy -d -c <conf>` in its own process group, so that a Ctrl-C meant for the daemon does
/// not stop the proxies, and with no pipe to the daemon, so that they outlive it and can be re-adopted.
pub fn spawn(tinyproxy: &Path, conf: &Path, dir: &Path) -> io::Result<Child> {
    let stderr = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(STDERR_FILE))?;
    Command::new(tinyproxy)
        .arg("-d")
        .arg("-c")
        .arg(conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .process_group(0)
        .kill_on_drop(false)
        .spawn()
}

/// Sends `signal` (`TERM`, `KILL`) with the system's `kill`, which keeps the crate free of unsafe code.
pub async fn signal(pid: u32, signal: &str) -> io::Result<()> {
    tracing::debug!(pid, signal, "signalling tinyproxy");
    let status = Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("kill -s {signal} {pid} exited with {status}")))
    }
}

/// True while `pid` names a process that has not exited (a zombie has).
pub fn is_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name, which may itself contain ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| !matches!(state, 'Z' | 'X')),
        Err(_) => false,
    }
}

/// Polls until `pid` has exited; for processes that are not our children (adopted ones).
pub async fn wait_exit(pid: u32) {
    while is_alive(pid) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The pid in an instance's pid file, when the file exists and holds one.
pub fn read_pid(dir: &Path) -> Option<u32> {
    fs::read_to_string(dir.join(PID_FILE)).ok()?.trim().parse().ok()
}

/// True when `pid` is a live tinyproxy started with `-c conf`: the pid file's process is then ours to
/// adopt, not a stranger that inherited a recycled pid.
pub fn is_our_tinyproxy(pid: u32, tinyproxy: &Path, conf: &Path) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let program = tinyproxy.file_name();
    let runs_tinyproxy = args
        .first()
        .is_some_and(|arg0| Path::new(OsStr::from_bytes(arg0)).file_name() == program);
    let conf = conf.as_os_str().as_bytes();
    let uses_conf = args.windows(2).any(|pair| pair[0] == b"-c" && pair[1] == conf);
    runs_tinyproxy && uses_conf && is_alive(pid)
}

/// The IPv4 addresses and ports with a listening TCP socket, from `/proc/net/tcp`.
pub fn listening_sockets() -> io::Result<HashSet<(Ipv4Addr, u16)>> {
    Ok(parse_listening(&fs::read_to_string("/proc/net/tcp")?))
}

pub async fn listening_sockets_async() -> io::Result<HashSet<(Ipv4Addr, u16)>> {
    Ok(parse_listening(&tokio::fs::read_to_string("/proc/net/tcp").await?))
}

/// State `0A` is LISTEN; the address is the 32-bit value in host byte order, printed in hex.
fn parse_listening(table: &str) -> HashSet<(Ipv4Addr, u16)> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let local = fields.nth(1)?;
            let state = fields.nth(1)?;
            if state != "0A" {
                return None;
            }
            let (address, port) = local.split_once(':')?;
            let address = u32::from_str_radix(address, 16).ok()?;
            let port = u16::from_str_radix(port, 16).ok()?;
            Some((Ipv4Addr::from(address.to_ne_bytes()), port))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_sockets_are_read_from_the_kernel_table() {
        let local = if cfg!(target_endian = "little") {
            "0501007F"
        } else {
            "7F000105"
        };
        let table = format!(
            "  sl  local_address rem_address   st tx_queue\n   0: {local}:0C38 00000000:0000 0A 00000000:00000000\n   \
             1: {local}:0C39 0100007F:1F90 01 00000000:00000000\n"
        );
        let sockets = parse_listening(&table);
        assert_eq!(sockets, HashSet::from([("127.0.1.5".parse().unwrap(), 3128)]));
    }

    #[test]
    fn a_listener_of_this_test_is_seen() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(listening_sockets().unwrap().contains(&(Ipv4Addr::LOCALHOST, port)));
    }

    #[test]
    fn this_process_is_alive_and_an_absent_pid_is_not() {
        assert!(is_alive(std::process::id()));
        assert!(!is_alive(u32::MAX - 1));
    }

    #[test]
    fn a_process_that_is_not_tinyproxy_is_never_adopted() {
        let conf = Path::new("/tmp/x/tinyproxy.conf");
        assert!(!is_our_tinyproxy(
            std::process::id(),
            Path::new("/usr/bin/tinyproxy"),
            conf
        ));
    }
}
