//! moto's EC2 server (PyPI `moto[server,ec2]`) for tests of the AWS provider: one server per test on a
//! free 127.0.0.1 port, killed when dropped, so tests running side by side never see each other's
//! instances and need no reset. `scripts/install-test-deps.sh` installs it into a virtualenv.

use std::{
    io::{Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::free_port;

/// How long a moto server may take to answer after it was started (Python start-up on a busy machine).
const START_BUDGET: Duration = Duration::from_secs(60);

/// A moto server of one test.
#[derive(Debug)]
pub struct Moto {
    child: Child,
    port: u16,
}

impl Moto {
    /// Starts moto on a free loopback port and waits until it answers. Panics, naming
    /// `scripts/install-test-deps.sh`, when moto is not installed.
    pub fn start() -> Self {
        let program = moto_server();
        let port = free_port().expect("a free port");
        let child = Command::new(&program)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
        let moto = Moto { child, port };
        let deadline = Instant::now() + START_BUDGET;
        while !moto.answers() {
            assert!(
                Instant::now() < deadline,
                "moto did not answer on 127.0.0.1:{port} within {START_BUDGET:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }

    /// `http://127.0.0.1:<port>`, the EC2 endpoint URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server: the endpoint becomes unreachable.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether moto's own API answers with an HTTP status line.
    fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let request = "GET /moto-api/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
        let mut answer = String::new();
        stream.write_all(request.as_bytes()).is_ok()
            && stream.read_to_string(&mut answer).is_ok()
            && answer.starts_with("HTTP/1.")
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `$MOTO_SERVER`, `moto_server` on the PATH, or the virtualenv scripts/install-test-deps.sh makes
/// (`$MOTO_VENV`, default `~/.cache/egress-proxies/moto-venv`).
fn moto_server() -> PathBuf {
    if let Some(path) = std::env::var_os("MOTO_SERVER") {
        return path.into();
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("moto_server"));
    let venv = std::env::var_os("MOTO_VENV")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache/egress-proxies/moto-venv")))
        .map(|venv| venv.join("bin/moto_server"));
    on_path.chain(venv).find(|path| path.is_file()).unwrap_or_else(|| {
        panic!(
            "moto is not installed: no moto_server on the PATH or in $MOTO_VENV/bin. \
             Run scripts/install-test-deps.sh (it installs PyPI moto[server,ec2] into a virtualenv)"
        )
    })
}
