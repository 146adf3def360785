//! Leader election against the real kube-apiserver: two replicas of `run` share one Lease; exactly one is
//! ready, and when it shuts down the other takes over within the lease duration.

mod fake_daemon;

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    time::Duration,
};

use egress_operator::run::{LeaseOptions, RunError, RunOptions, load_config, run_with_client};
use egress_test_support::ControlPlane;
use provider_sdk::testing::FakeOptions;
use tokio::{
    sync::oneshot,
    task::JoinHandle,
    time::{Instant, sleep},
};

/// kube-lease-manager 0.13's default lease duration (`DEFAULT_LEASE_DURATION_SECONDS`), which `run` keeps:
/// a standby looks at the Lease again only when the holder's last renewal expires.
const LEASE_DURATION: Duration = Duration::from_secs(30);

/// One operator replica: its HTTP address and the way to stop it.
struct Replica {
    identity: &'static str,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), RunError>>,
}

impl Replica {
    fn start(identity: &'static str, client: kube::Client, namespace: &str, config_path: &std::path::Path) -> Self {
        let config = load_config(config_path).unwrap();
        let addr = free_port();
        let options = RunOptions {
            config_path: config_path.to_owned(),
            http_addr: addr,
            lease: Some(LeaseOptions {
                namespace: namespace.to_owned(),
                name: "egress-operator".to_owned(),
                identity: identity.to_owned(),
            }),
            namespace: Some(namespace.to_owned()),
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(run_with_client(client, options, config, async move {
            let _ = stopped.await;
        }));
        Replica {
            identity,
            addr,
            stop: Some(stop),
            task,
        }
    }

    /// Whether `/readyz` answers 200; `false` while the endpoint is not up yet.
    async fn ready(&self) -> bool {
        let addr = self.addr;
        tokio::task::spawn_blocking(move || readyz_status(addr) == Some(200))
            .await
            .unwrap()
    }

    /// Resolves the replica's shutdown future and waits for `run` to return.
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .unwrap_or_else(|_| panic!("{} stops within 10 s", self.identity))
            .unwrap();
        assert!(result.is_ok(), "{} stopped with {result:?}", self.identity);
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// The status code of `GET /readyz`, by hand over a TCP stream.
fn readyz_status(addr: SocketAddr) -> Option<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream
        .write_all(format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
        .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer.split(' ').nth(1)?.parse().ok()
}

/// Polls both replicas until `done(a_ready, b_ready)` holds, failing after `within`.
async fn wait_until(a: &Replica, b: &Replica, within: Duration, what: &str, done: impl Fn(bool, bool) -> bool) {
    let deadline = Instant::now() + within;
    loop {
        let (ra, rb) = (a.ready().await, b.ready().await);
        if done(ra, rb) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} within {within:?}: {} ready {ra}, {} ready {rb}",
            a.identity,
            b.identity
        );
        sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lease_holder_is_ready_and_a_standby_takes_over_when_it_stops() {
    let plane = ControlPlane::shared().await.expect("control plane");
    plane.install_crds(&egress_operator::crd::all()).await.unwrap();
    let ns = plane.namespace("leader-election").await.unwrap();
    let daemon = fake_daemon::Daemon::start(FakeOptions::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("operator.yaml");
    std::fs::write(
        &config_path,
        format!(
            "clusterId: leader-e2e\nproviders:\n  fake:\n    type: fake\n    endpoint: {}\n",
            daemon.endpoint()
        ),
    )
    .unwrap();

    let a = Replica::start("replica-a", plane.client().unwrap(), ns.name(), &config_path);
    let b = Replica::start("replica-b", plane.client().unwrap(), ns.name(), &config_path);

    wait_until(&a, &b, Duration::from_secs(20), "one replica leads", |ra, rb| ra || rb).await;
    let (leader, standby) = if a.ready().await { (a, b) } else { (b, a) };
    // For a while, and never both: the standby waits on the Lease the leader keeps renewing.
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(3) {
        let (leading, standing_by) = (leader.ready().await, standby.ready().await);
        assert!(
            leading && !standing_by,
            "only the leader {} is ready: it is {leading}, {} is {standing_by}",
            leader.identity,
            standby.identity
        );
        sleep(Duration::from_millis(200)).await;
    }

    let stopped = Instant::now();
    let (leader_identity, standby_identity) = (leader.identity, standby.identity);
    leader.stop().await;
    let deadline = stopped + LEASE_DURATION + Duration::from_secs(5);
    while !standby.ready().await {
        assert!(
            Instant::now() < deadline,
            "{standby_identity} is ready within the lease duration after {leader_identity} stopped"
        );
        sleep(Duration::from_millis(200)).await;
    }
    println!(
        "{standby_identity} took over {:?} after {leader_identity} stopped",
        stopped.elapsed()
    );
    standby.stop().await;
}
