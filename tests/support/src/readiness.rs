//! Waiting for etcd and kube-apiserver to serve, and noticing early when one of them has exited instead.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::Error;
use crate::supervisor::{Supervisor, is_running};

const POLL: Duration = Duration::from_millis(200);
const LOG_LINES: usize = 30;

/// Polls `probe` until it succeeds, `pid` exits, or `timeout` passes; errors carry `name`'s log tail.
async fn wait_until<F, Fut>(
    supervisor: &Supervisor,
    process: &'static str,
    pid: u32,
    timeout: Duration,
    mut probe: F,
) -> Result<(), Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let started = Instant::now();
    loop {
        let last_error = match probe().await {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if !is_running(pid) {
            return Err(Error::ProcessExited {
                process,
                log_tail: supervisor.log_tail(process, LOG_LINES),
            });
        }
        if started.elapsed() >= timeout {
            return Err(Error::NotReady {
                process,
                seconds: timeout.as_secs(),
                last_error,
                log_tail: supervisor.log_tail(process, LOG_LINES),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits for etcd's `/health` on its plain-HTTP loopback client port. A hand-written HTTP/1.0 request
/// keeps an HTTP client dependency out of the crate for this one probe.
pub async fn etcd(supervisor: &Supervisor, pid: u32, port: u16, timeout: Duration) -> Result<(), Error> {
    wait_until(supervisor, "etcd", pid, timeout, || async move {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| e.to_string())?;
        stream
            .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .map_err(|e| e.to_string())?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await.map_err(|e| e.to_string())?;
        if response.contains(r#""health":"true""#) {
            Ok(())
        } else {
            Err(format!("/health answered {:?}", response.lines().last().unwrap_or("")))
        }
    })
    .await
}

/// Waits for kube-apiserver's `/readyz` (which includes etcd and the post-start hooks that install the
/// default RBAC roles and priority levels) through the client the tests will use.
pub async fn apiserver(
    supervisor: &Supervisor,
    pid: u32,
    config: &kube::Config,
    timeout: Duration,
) -> Result<(), Error> {
    let client = kube::Client::try_from(config.clone()).map_err(Error::Client)?;
    wait_until(supervisor, "kube-apiserver", pid, timeout, || {
        let client = client.clone();
        async move {
            let request = http::Request::get("/readyz")
                .body(Vec::new())
                .expect("a static request is valid");
            match client.request_text(request).await {
                Ok(body) if body.trim() == "ok" => Ok(()),
                Ok(body) => Err(format!("/readyz answered {body:?}")),
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await
}
