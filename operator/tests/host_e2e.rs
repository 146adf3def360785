//! The operator and the host provider, both as shipped binaries, against the real kube-apiserver: a Proxy
//! applied with kubectl becomes a tinyproxy on a loopback pool address that carries traffic with the
//! credentials the operator generated, refuses clients without them or outside `allowedSourceRanges`, and
//! sends from the instance's address; a spec change replaces it without a moment without a working
//! endpoint; deleting the Proxy stops the process and gives the address back to the pool.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

mod shipped;

use egress_operator::crd::{Proxy, ProxyPhase};
use egress_test_support::{
    ChildProcess, ControlPlane, ProxiedGet, TestNamespace, is_alive, poll_until, signal_pid_files, start_echo_server,
};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use provider_sdk::client::{CallTimeouts, ProviderClient, ProviderEndpoint};

/// Addresses in the /28 pool: the network and broadcast addresses are left out.
const POOL_SIZE: usize = 14;

/// Everything one test runs: the host daemon on a random loopback /28, the operator watching the test's
/// namespace, and the namespace itself.
struct Stack {
    plane: &'static ControlPlane,
    ns: TestNamespace,
    dir: tempfile::TempDir,
    pool: Ipv4Addr,
    _operator: ChildProcess,
    _provider: ChildProcess,
}

impl Stack {
    async fn start(hint: &str) -> Self {
        let plane = ControlPlane::shared().await.expect("control plane");
        plane.install_crds(&egress_operator::crd::all()).await.unwrap();
        let ns = plane.namespace(hint).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        // A /28 of 127/8 of this test's own, so that tests and other runs on the machine never meet.
        let pool = Ipv4Addr::new(127, 100 + rand::random_range(0..150), rand::random_range(0..=255), 0);
        let host_config = dir.path().join("host.yaml");
        std::fs::write(
            &host_config,
            format!("pool: [{pool}/28]\nstateDir: {}\n", dir.path().join("state").display()),
        )
        .unwrap();
        let socket = dir.path().join("host.sock");
        let provider = shipped::start_provider("egress-provider-host", Some(&host_config), &socket);
        let config = shipped::operator_config(dir.path(), "e2e-host", "host", "host", &socket);
        let operator = shipped::start_operator(plane, &config, ns.name(), "127.0.0.1:0");
        Self {
            plane,
            ns,
            dir,
            pool,
            _operator: operator,
            _provider: provider,
        }
    }

    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> String {
        use std::io::Write;
        let mut child = self
            .plane
            .kubectl()
            .args(["-n", self.ns.name()])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.unwrap_or_default().as_bytes()).unwrap();
        drop(input);
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn apply_proxy(&self, name: &str, port: u16, allowed: &str) {
        let manifest = format!(
            "apiVersion: egressproxies.dev/v1alpha1\nkind: Proxy\nmetadata:\n  name: {name}\nspec:\n  provider: host\n  \
             port: {port}\n  allowedSourceRanges: [{allowed}]\n"
        );
        self.kubectl(&["apply", "-f", "-"], Some(&manifest));
    }

    fn wait_ready(&self, name: &str) {
        self.kubectl(
            &[
                "wait",
                "--for=condition=Ready",
                &format!("proxy/{name}"),
                "--timeout=60s",
            ],
            None,
        );
    }

    fn proxies(&self) -> Api<Proxy> {
        self.ns.api()
    }

    /// The endpoint the Proxy's status publishes, as a consumer reads it.
    async fn published_endpoint(&self, name: &str) -> Option<SocketAddr> {
        let proxy = self.proxies().get(name).await.ok()?;
        let endpoint = proxy.status?.endpoint?;
        endpoint.strip_prefix("http://")?.parse().ok()
    }

    async fn credentials(&self, name: &str) -> (String, String) {
        let secrets: Api<Secret> = self.ns.api();
        let secret = secrets
            .get(&format!("{name}-proxy"))
            .await
            .expect("the consumer Secret");
        let data = secret.data.expect("Secret data");
        let text = |key: &str| String::from_utf8(data[key].0.clone()).unwrap();
        (text("username"), text("password"))
    }

    fn provider_client(&self) -> ProviderClient {
        let endpoint: ProviderEndpoint = format!("unix://{}", self.dir.path().join("host.sock").display())
            .parse()
            .unwrap();
        ProviderClient::connect_lazy(&endpoint, None, CallTimeouts::default()).unwrap()
    }

    /// Free addresses as the provider's Check reports them.
    async fn free_addresses(&self) -> usize {
        let results = self.provider_client().check().await.expect("Check");
        let pool = results.into_iter().find(|r| r.target == "pool").expect("a pool target");
        pool.details["free"].parse().unwrap()
    }

    /// The pid of the tinyproxy serving `instance_name`.
    fn tinyproxy_pid(&self, instance_name: &str) -> u32 {
        let pid_file = self.state_dir().join(instance_name).join("tinyproxy.pid");
        std::fs::read_to_string(&pid_file)
            .unwrap_or_else(|e| panic!("{}: {e}", pid_file.display()))
            .trim()
            .parse()
            .unwrap()
    }

    /// The name of the instance the Proxy's status says serves it.
    async fn serving_instance(&self, name: &str) -> String {
        let status = self.proxies().get(name).await.unwrap().status.unwrap_or_default();
        status.instance_name.expect("status.instanceName")
    }

    fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }
}

impl Drop for Stack {
    /// The host daemon leaves its proxies running when it is killed (it re-adopts them on restart), so a
    /// failed test kills them itself.
    fn drop(&mut self) {
        signal_pid_files(&self.state_dir(), "tinyproxy.pid", "KILL");
    }
}

fn free_port() -> u16 {
    egress_test_support::free_port().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_proxy_applied_with_kubectl_carries_traffic_only_with_credentials_and_from_allowed_sources() {
    let stack = Stack::start("host-traffic").await;
    // Only 127.0.0.1 may use it: the test connects from 127.0.0.1 and, to be refused, from 127.0.0.2.
    stack.apply_proxy("web", free_port(), "127.0.0.1/32");
    stack.wait_ready("web");

    let endpoint = stack.published_endpoint("web").await.expect("status.endpoint");
    let IpAddr::V4(address) = endpoint.ip() else {
        panic!("{endpoint}")
    };
    assert_eq!(
        address.octets()[..3],
        stack.pool.octets()[..3],
        "{address} is from the pool"
    );
    let (username, password) = stack.credentials("web").await;
    let target = start_echo_server().await.unwrap();

    let anonymous = ProxiedGet::new(endpoint, target).send().await.unwrap();
    assert_eq!(anonymous.status, Some(407), "{anonymous:?}");

    let authorised = ProxiedGet::new(endpoint, target)
        .credentials(&username, &password)
        .send()
        .await
        .unwrap();
    assert_eq!(authorised.status, Some(200), "{authorised:?}");
    assert_eq!(
        authorised.body,
        address.to_string(),
        "the server saw the instance's address as the source"
    );

    // tinyproxy's ACL answers 403, or closes the connection before reading the request.
    let outsider = ProxiedGet::new(endpoint, target)
        .credentials(&username, &password)
        .from(Ipv4Addr::new(127, 0, 0, 2).into())
        .send()
        .await;
    match outsider {
        Ok(answer) => {
            assert!(matches!(answer.status, Some(403) | None), "{answer:?}");
            assert_ne!(
                answer.body,
                address.to_string(),
                "the request must not reach the server"
            );
        }
        Err(error) => assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset, "{error}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spec_change_keeps_a_working_endpoint_and_deleting_frees_the_address() {
    let stack = Stack::start("host-replace").await;
    let first_port = free_port();
    stack.apply_proxy("web", first_port, "127.0.0.0/8");
    stack.wait_ready("web");
    let (username, password) = stack.credentials("web").await;
    let target = start_echo_server().await.unwrap();
    let old_endpoint = stack.published_endpoint("web").await.unwrap();
    let old_instance = stack.serving_instance("web").await;
    let old_pid = stack.tinyproxy_pid(&old_instance);
    assert_eq!(stack.free_addresses().await, POOL_SIZE - 1);

    // A new port changes the spec hash: the operator makes a new instance, publishes it, then retires the
    // old one. Meanwhile a consumer keeps reading the published endpoint and sending a request through it.
    let second_port = free_port();
    stack.apply_proxy("web", second_port, "127.0.0.0/8");
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut samples, mut swaps_mid_request, mut settled_samples) = (0, 0, 0);
    while settled_samples < 10 {
        assert!(Instant::now() < deadline, "the replacement did not finish in 60 s");
        let endpoint = stack
            .published_endpoint("web")
            .await
            .expect("an endpoint is published throughout");
        let answer = ProxiedGet::new(endpoint, target)
            .credentials(&username, &password)
            .send()
            .await;
        samples += 1;
        if !matches!(&answer, Ok(a) if a.status == Some(200)) {
            // Only a swap between reading the endpoint and using it excuses a failed request.
            let now = stack.published_endpoint("web").await;
            assert_ne!(
                now,
                Some(endpoint),
                "the published endpoint {endpoint} did not work: {answer:?}"
            );
            swaps_mid_request += 1;
        }
        let proxy = stack.proxies().get("web").await.unwrap();
        let status = proxy.status.unwrap_or_default();
        if endpoint.port() == second_port && status.phase == Some(ProxyPhase::Running) && status.retiring.is_empty() {
            settled_samples += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        swaps_mid_request <= 1,
        "{swaps_mid_request} of {samples} samples raced a swap"
    );
    let new_endpoint = stack.published_endpoint("web").await.unwrap();
    assert_ne!(new_endpoint, old_endpoint);
    assert!(
        poll_until(Duration::from_secs(20), || !is_alive(old_pid)),
        "the retired instance's tinyproxy (pid {old_pid}) still runs"
    );
    assert_eq!(
        stack.free_addresses().await,
        POOL_SIZE - 1,
        "the old address went back to the pool"
    );

    let new_instance = stack.serving_instance("web").await;
    let new_pid = stack.tinyproxy_pid(&new_instance);
    stack.kubectl(&["delete", "proxy", "web", "--timeout=60s"], None);
    assert!(
        !is_alive(new_pid),
        "kubectl delete returned while tinyproxy (pid {new_pid}) still runs"
    );
    assert!(
        ProxiedGet::new(new_endpoint, target).send().await.is_err(),
        "nothing listens on {new_endpoint} any more"
    );
    assert_eq!(stack.free_addresses().await, POOL_SIZE, "every address is free again");
}
