//! The operator at scale, against a real kube-apiserver and the fake provider daemon (zero latency), both
//! binaries run out of process:
//!
//! 1. **baseline**: a plain kube client makes, for each of N Proxies, the same apiserver requests the
//!    operator makes on a Proxy's way to Running (see `equivalent_writes`); run before and after the
//!    operator measurement, in fresh namespaces;
//! 2. **operator**: N Proxies applied at once in a fresh namespace; the time until a watch has seen every
//!    one Running, per-Proxy latency (create sent → Running seen), and the ratio to the baseline;
//! 3. **memory**: M Proxies with a fresh operator: its VmRSS / VmHWM before any Proxy, once all are Running
//!    and it is idle (or 60 s have passed), over the next 120 s also the steady-state load (reconciles,
//!    provider Gets and apiserver requests per second), and from a restarted operator that has reconciled
//!    them all again.
//!
//! It prints markdown tables; docs/benchmarks.md ("Operator at scale") records a run and reads it.
//! ```sh
//! cargo build --release -p egress-provider-fake -p egress-operator
//! cargo bench -p egress-operator --bench scale
//! ```
//!
//! BENCH_PROXIES (default 1000) and BENCH_MEMORY_PROXIES (default 10000; 0 skips the memory measurement)
//! set the sizes; BENCH_TIMEOUT_SECS (default 1800) bounds each wait; BENCH_BIN_DIR overrides where the two
//! binaries are (default: the `release` directory of the target directory this bench was built into).
//!
//! The control plane is the test-support one: etcd and kube-apiserver only, no kube-controller-manager, so
//! nothing is garbage-collected; every measurement has a namespace of its own. The bench client and the
//! operator both use the admin credential (system:masters), which API Priority and Fairness exempts.

use std::{
    collections::{BTreeMap, HashMap},
    fs::File,
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use anyhow::{Context as _, Result, anyhow, bail};
use egress_operator::{
    controller::proxy::status::{INSTANCE_CREATED, QUOTA_EXCEEDED, READY, UP_TO_DATE, set_condition},
    crd::{FINALIZER, InstanceRef, Proxy, ProxyPhase, ProxyStatus},
};
use egress_test_support::ControlPlane;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::{
    ByteString,
    api::{
        core::v1::{ObjectReference, Secret, Service, ServicePort, ServiceSpec},
        discovery::v1::{Endpoint, EndpointPort, EndpointSlice},
        events::v1::Event,
    },
    apimachinery::pkg::{
        apis::meta::v1::{MicroTime, ObjectMeta, Time},
        util::intstr::IntOrString,
    },
    jiff::Timestamp,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};

/// Requests in flight from the bench client, for creates and for the baseline's per-Proxy chains.
const CONCURRENCY: usize = 32;
const PORT: i32 = 3128;
/// The field manager of the baseline's applies.
const BASELINE_MANAGER: &str = "egress-bench-baseline";
/// The resources whose apiserver request counts are reported.
const COUNTED: [&str; 5] = ["proxies", "secrets", "services", "endpointslices", "events"];
/// Linux reports process CPU time in USER_HZ ticks, 100 per second on every mainstream architecture.
const TICKS_PER_SECOND: f64 = 100.0;
/// How long the memory run's operator rests before a second reading: longer than any idle-connection timeout
/// (hyper's pool: 90 s), so what remains is held, not in flight.
const LATER: Duration = Duration::from_secs(120);
const BUILD_COMMAND: &str = "cargo build --release -p egress-provider-fake -p egress-operator";

fn main() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        // Ctrl-C or SIGTERM (`timeout`, CI) drops the bench future, and with it the child processes, their
        // temporary directory and the control plane.
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            result = bench() => result,
            _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted")),
            _ = term.recv() => Err(anyhow!("terminated")),
        }
    })
}

struct Settings {
    proxies: usize,
    memory_proxies: usize,
    timeout: Duration,
    operator: PathBuf,
    fake: PathBuf,
}

fn env_number(name: &str, default: usize) -> Result<usize> {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .with_context(|| format!("{name}={value:?} is not a whole number")),
        Err(_) => Ok(default),
    }
}

impl Settings {
    fn from_env() -> Result<Self> {
        let dir = match std::env::var_os("BENCH_BIN_DIR") {
            Some(dir) => PathBuf::from(dir),
            // <target>/release/deps/scale-<hash> → <target>/release
            None => std::env::current_exe()?
                .parent()
                .and_then(Path::parent)
                .context("locating the target directory from the bench's path")?
                .to_path_buf(),
        };
        let operator = binary(&dir, "egress-operator", &["operator/src", "provider-sdk/src", "proto"])?;
        let fake = binary(
            &dir,
            "egress-provider-fake",
            &["providers/fake/src", "provider-sdk/src", "proto"],
        )?;
        Ok(Self {
            proxies: env_number("BENCH_PROXIES", 1000)?.max(1),
            memory_proxies: env_number("BENCH_MEMORY_PROXIES", 10_000)?,
            timeout: Duration::from_secs(env_number("BENCH_TIMEOUT_SECS", 1800)? as u64),
            operator,
            fake,
        })
    }
}

/// The binary in `dir`, refused when missing or older than the sources it is built from (`sources`,
/// relative to the workspace root).
fn binary(dir: &Path, name: &str, sources: &[&str]) -> Result<PathBuf> {
    let path = dir.join(name);
    let built = std::fs::metadata(&path).and_then(|m| m.modified()).map_err(|e| {
        anyhow!(
            "{} is missing ({e}). Build it first, with the same CARGO_TARGET_DIR as this bench: {BUILD_COMMAND} \
                 (or point BENCH_BIN_DIR at the directory that holds egress-operator and egress-provider-fake)",
            path.display()
        )
    })?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(Path::new("."));
    let newest = sources.iter().filter_map(|dir| newest_file(&root.join(dir))).max();
    if let Some((source_time, source)) = newest
        && source_time > built
    {
        bail!(
            "{} is older than {}: rebuild it first with {BUILD_COMMAND}",
            path.display(),
            source.display()
        );
    }
    Ok(path)
}

fn newest_file(dir: &Path) -> Option<(SystemTime, PathBuf)> {
    let mut newest: Option<(SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let candidate = if path.is_dir() {
            newest_file(&path)
        } else {
            entry.metadata().and_then(|m| m.modified()).ok().map(|t| (t, path))
        };
        if let Some(candidate) = candidate
            && newest.as_ref().is_none_or(|(t, _)| candidate.0 > *t)
        {
            newest = Some(candidate);
        }
    }
    newest
}

// ---------------------------------------------------------------------------------------------------------
// Child processes

/// A child process whose output goes to a log file; killed and reaped on drop.
struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Process {
    fn spawn(name: &'static str, command: &mut Command, log: PathBuf) -> Result<Self> {
        let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        Ok(Self { name, child, log })
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An error with the end of the log if the process has exited.
    fn check_alive(&mut self) -> Result<()> {
        match self.child.try_wait()? {
            None => Ok(()),
            Some(status) => bail!("{} exited ({status}); {}", self.name, self.log_tail()),
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        format!("last lines of {}:\n{tail}", self.log.display())
    }

    fn log_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

/// The fake provider daemon on a unix socket in `dir`, with an instant backend (no config file).
async fn start_fake(settings: &Settings, dir: &Path) -> Result<(Process, PathBuf)> {
    let socket = dir.join("fake.sock");
    let mut process = Process::spawn(
        "egress-provider-fake",
        Command::new(&settings.fake)
            .arg("--listen")
            .arg(format!("unix://{}", socket.display()))
            .env("RUST_LOG", "info"),
        dir.join("fake.log"),
    )?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        process.check_alive()?;
        if Instant::now() > deadline {
            bail!("egress-provider-fake did not create {}", socket.display());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok((process, socket))
}

/// The operator watching `namespace`, with the provider config the issue names; returns once /readyz is OK.
async fn start_operator(
    settings: &Settings,
    plane: &ControlPlane,
    dir: &Path,
    socket: &Path,
    namespace: &str,
) -> Result<(Process, SocketAddr)> {
    let config = dir.join("operator.yaml");
    std::fs::write(
        &config,
        format!(
            "clusterId: bench\nproviders:\n  fake:\n    type: fake\n    endpoint: unix://{}\n    \
             rateLimit: {{qps: 1000, burst: 1000}}\n    concurrency: 64\n",
            socket.display()
        ),
    )?;
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    let mut process = Process::spawn(
        "egress-operator",
        Command::new(&settings.operator)
            .arg("--config")
            .arg(&config)
            .arg("--no-leader-election")
            .arg("--http-addr")
            .arg(addr.to_string())
            .arg("--watch-namespace")
            .arg(namespace)
            .env("KUBECONFIG", plane.kubeconfig_path())
            .env("RUST_LOG", "info"),
        dir.join("operator.log"),
    )?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        process.check_alive()?;
        if let Ok((200, _)) = http_get(addr, "/readyz").await {
            return Ok((process, addr));
        }
        if Instant::now() > deadline {
            bail!("the operator's /readyz never answered 200; {}", process.log_tail());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A plain HTTP/1.1 GET on loopback: the status code and the body.
async fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String)> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let code = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .context("no status line")?;
        // The operator's small responses come with a length; a chunked body keeps its chunk sizes, which
        // the line-based parsing below skips.
        Ok((code, body.to_owned()))
    })
    .await?
}

// ---------------------------------------------------------------------------------------------------------
// Process and apiserver figures

/// CPU seconds (user + system) a process has used so far.
fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("malformed /proc/<pid>/stat")?
        .1
        .split_whitespace()
        .collect();
    let ticks = |i: usize| -> Result<f64> { Ok(fields.get(i).context("short /proc/<pid>/stat")?.parse::<f64>()?) };
    // utime and stime are fields 14 and 15 of stat(5); index 0 here is field 3.
    Ok((ticks(11)? + ticks(12)?) / TICKS_PER_SECOND)
}

/// How many sockets the process has open (its connections to the apiserver, nearly all of them).
fn sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with("socket:")))
                .count()
        })
        .unwrap_or(0)
}

/// VmRSS and VmHWM in bytes.
fn memory(pid: u32) -> Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .with_context(|| format!("no {name} in /proc/{pid}/status"))?;
        let kib: u64 = line.split_whitespace().nth(1).context("malformed line")?.parse()?;
        Ok(kib * 1024)
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// The processes whose CPU time a measurement reports.
#[derive(Clone)]
struct Watched(Vec<(&'static str, u32)>);

impl Watched {
    fn snapshot(&self) -> Result<Vec<f64>> {
        self.0.iter().map(|(_, pid)| cpu_seconds(*pid)).collect()
    }
}

/// Waits until the process has used less than 2 % of one core over a 5 s window, or `max` has passed.
/// Returns whether it went idle.
async fn wait_idle(pid: u32, max: Duration) -> Result<bool> {
    let window = Duration::from_secs(5);
    let started = Instant::now();
    loop {
        let before = cpu_seconds(pid)?;
        tokio::time::sleep(window).await;
        let used = cpu_seconds(pid)? - before;
        if used < 0.02 * window.as_secs_f64() {
            return Ok(true);
        }
        if started.elapsed() > max {
            return Ok(false);
        }
    }
}

type RequestCounts = BTreeMap<(String, String), f64>;

/// `apiserver_request_total` summed by verb and resource[/subresource], for the counted resources.
async fn request_counts(client: &Client) -> Result<RequestCounts> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client
        .request_text(request)
        .await
        .context("reading the apiserver's /metrics")?;
    let mut counts = RequestCounts::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let labels = parse_labels(labels);
        let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
        let (verb, resource, subresource) = (label("verb"), label("resource"), label("subresource"));
        if verb == "WATCH" || !COUNTED.contains(&resource.as_str()) {
            continue;
        }
        let resource = if subresource.is_empty() {
            resource
        } else {
            format!("{resource}/{subresource}")
        };
        *counts.entry((verb, resource)).or_default() += value.trim().parse::<f64>().unwrap_or(0.0);
    }
    Ok(counts)
}

fn parse_labels(text: &str) -> HashMap<String, String> {
    let mut labels = HashMap::new();
    let mut rest = text;
    while let Some((key, after)) = rest.split_once("=\"") {
        let end = after.find('"').unwrap_or(after.len());
        labels.insert(key.trim_start_matches(',').to_owned(), after[..end].to_owned());
        rest = after.get(end + 1..).unwrap_or("");
    }
    labels
}

fn difference(after: &RequestCounts, before: &RequestCounts) -> RequestCounts {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect()
}

/// Sums a metric of the operator's /metrics, by the value of `by` (or in one group when `None`).
fn operator_metric(text: &str, name: &str, by: Option<&str>) -> BTreeMap<String, f64> {
    let mut sums = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else { continue };
        let (labels, value) = match rest.strip_prefix('{') {
            Some(rest) => match rest.rsplit_once("} ") {
                Some((labels, value)) => (parse_labels(labels), value),
                None => continue,
            },
            None if rest.starts_with(' ') => (HashMap::new(), rest),
            None => continue,
        };
        let key = by.map_or_else(String::new, |by| labels.get(by).cloned().unwrap_or_default());
        *sums.entry(key).or_default() += value.trim().parse::<f64>().unwrap_or(0.0);
    }
    sums
}

// ---------------------------------------------------------------------------------------------------------
// Proxies

fn proxy(name: &str) -> Proxy {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "egressproxies.dev/v1alpha1",
        "kind": "Proxy",
        "metadata": {"name": name},
        "spec": {"provider": "fake", "port": PORT, "allowedSourceRanges": ["10.0.0.0/8"]},
    }))
    .expect("a valid Proxy")
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:05}")).collect()
}

/// Creates the Proxies, `CONCURRENCY` at a time; each with the instant its request was sent.
async fn create_all(api: &Api<Proxy>, names: &[String]) -> Result<Vec<(Proxy, Instant)>> {
    stream::iter(names)
        .map(|name| async move {
            let sent = Instant::now();
            let created = api
                .create(&PostParams::default(), &proxy(name))
                .await
                .with_context(|| format!("creating Proxy {name}"))?;
            Ok::<_, anyhow::Error>((created, sent))
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await
}

/// When a watch first saw each Proxy Running.
struct RunningWatch {
    seen: Arc<Mutex<HashMap<String, Instant>>>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningWatch {
    fn start(api: Api<Proxy>) -> Self {
        let seen: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let record = seen.clone();
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(
                watcher(api, watcher::Config::default())
                    .default_backoff()
                    .applied_objects()
            );
            while let Some(event) = events.next().await {
                match event {
                    Ok(proxy) if phase(&proxy) == Some(ProxyPhase::Running) => {
                        let now = Instant::now();
                        record.lock().unwrap().entry(proxy.name_any()).or_insert(now);
                    }
                    Ok(_) => {}
                    Err(error) => eprintln!("bench watch: {error}"),
                }
            }
        });
        Self { seen, task }
    }

    fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    fn times(&self) -> HashMap<String, Instant> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for RunningWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn phase(proxy: &Proxy) -> Option<ProxyPhase> {
    proxy.status.as_ref().and_then(|s| s.phase)
}

/// Waits until the watch has seen `n` Proxies Running; on timeout, fails with the phases and the operator's
/// log.
async fn wait_running(
    watch: &RunningWatch,
    n: usize,
    timeout: Duration,
    operator: &mut Process,
    api: &Api<Proxy>,
) -> Result<usize> {
    let deadline = Instant::now() + timeout;
    let (mut reported, mut last) = (Instant::now(), 0);
    let (mut peak_sockets, mut sampled) = (0, Instant::now());
    while watch.count() < n {
        operator.check_alive()?;
        if sampled.elapsed() > Duration::from_millis(250) {
            peak_sockets = peak_sockets.max(sockets(operator.pid()));
            sampled = Instant::now();
        }
        if Instant::now() > deadline {
            let mut phases: BTreeMap<String, usize> = BTreeMap::new();
            for proxy in api.list(&ListParams::default()).await?.items {
                *phases
                    .entry(phase(&proxy).map_or("none", |p| p.as_str()).to_owned())
                    .or_default() += 1;
            }
            bail!(
                "only {} of {n} Proxies Running after {} s (phases: {phases:?}); {}",
                watch.count(),
                timeout.as_secs(),
                operator.log_tail()
            );
        }
        if reported.elapsed() > Duration::from_secs(10) && watch.count() != last {
            last = watch.count();
            eprintln!("  … {last} of {n} Running");
            reported = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(peak_sockets)
}

// ---------------------------------------------------------------------------------------------------------
// The baseline

fn owned_meta(proxy: &Proxy, name: String, extra_labels: &[(&str, &str)]) -> ObjectMeta {
    let mut labels = BTreeMap::from([
        ("app.kubernetes.io/managed-by".to_owned(), "egress-operator".to_owned()),
        ("egressproxies.dev/proxy".to_owned(), proxy.name_any()),
    ]);
    labels.extend(extra_labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    ObjectMeta {
        name: Some(name),
        namespace: proxy.namespace(),
        labels: Some(labels),
        owner_references: proxy.controller_owner_ref(&()).map(|owner| vec![owner]),
        ..ObjectMeta::default()
    }
}

fn consumer_secret(proxy: &Proxy, ip: Option<&str>) -> Secret {
    let password = format!("{:0>32}", proxy.uid().unwrap_or_default().replace('-', ""));
    let url = |host: &str| ByteString(format!("http://egress:{password}@{host}:{PORT}").into_bytes());
    let mut data = BTreeMap::from([
        ("username".to_owned(), ByteString(b"egress".to_vec())),
        ("password".to_owned(), ByteString(password.clone().into_bytes())),
        (
            "url".to_owned(),
            url(&format!(
                "{}.{}.svc",
                proxy.name_any(),
                proxy.namespace().unwrap_or_default()
            )),
        ),
    ]);
    if let Some(ip) = ip {
        data.insert("endpoint".to_owned(), url(ip));
    }
    Secret {
        metadata: owned_meta(proxy, format!("{}-proxy", proxy.name_any()), &[]),
        type_: Some("Opaque".to_owned()),
        data: Some(data),
        ..Secret::default()
    }
}

fn event(proxy: &Proxy, reason: &str, action: &str, note: String) -> Event {
    let now = Timestamp::now();
    Event {
        action: Some(action.to_owned()),
        reason: Some(reason.to_owned()),
        event_time: Some(MicroTime(now)),
        regarding: Some(ObjectReference {
            api_version: Some("egressproxies.dev/v1alpha1".to_owned()),
            kind: Some("Proxy".to_owned()),
            name: proxy.metadata.name.clone(),
            namespace: proxy.namespace(),
            uid: proxy.uid(),
            ..ObjectReference::default()
        }),
        note: Some(note),
        metadata: ObjectMeta {
            namespace: proxy.namespace(),
            name: Some(format!("{}.{:x}", proxy.name_any(), now.as_nanosecond())),
            ..ObjectMeta::default()
        },
        reporting_controller: Some("egress-operator".to_owned()),
        reporting_instance: Some("egress-operator".to_owned()),
        type_: Some("Normal".to_owned()),
        ..Event::default()
    }
}

/// What the operator's first full reconcile writes for a new Proxy (operator/src/controller/proxy/), as
/// plain client requests, one after another:
///
///  1. PATCH the Proxy: the finalizer (the operator's is a JSON patch through kube's `finalizer`; here a
///     merge patch of `metadata.finalizers`);
///  2. GET the consumer Secret (`credentials::resolve` reuses a generated password);
///  3. apply the consumer Secret (`url`, `username`, `password`);
///  4. apply the status: phase Provisioning, the instance name (before Create);
///  5. apply the status: + the provider ID (right after Create);
///  6. POST an Event `Created`;
///  7. apply the Service; 8. apply the EndpointSlice;
///  9. apply the consumer Secret again, now with `endpoint`;
/// 10. POST an Event `Ready`;
/// 11. apply the status: Running with IP, endpoint, conditions.
///
/// Applies are server-side applies, forced, as the operator's are. The operator also runs a GetInfo once and
/// a Create per Proxy against the fake, and later reconciles woken by its own writes to owned objects; the
/// baseline has none of that.
async fn equivalent_writes(client: &Client, proxy: &Proxy, index: usize) -> Result<()> {
    let namespace = proxy.namespace().unwrap_or_default();
    let name = proxy.name_any();
    let proxies: Api<Proxy> = Api::namespaced(client.clone(), &namespace);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let events: Api<Event> = Api::namespaced(client.clone(), &namespace);
    let apply = PatchParams::apply(BASELINE_MANAGER).force();
    let write_status = |status: ProxyStatus| {
        let proxies = proxies.clone();
        let name = name.clone();
        let apply = apply.clone();
        async move {
            let patch = serde_json::json!({
                "apiVersion": "egressproxies.dev/v1alpha1",
                "kind": "Proxy",
                "status": status,
            });
            proxies.patch_status(&name, &apply, &Patch::Apply(&patch)).await
        }
    };

    proxies
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"finalizers": [FINALIZER]}})),
        )
        .await?;
    let secret_name = format!("{name}-proxy");
    secrets.get_opt(&secret_name).await?;
    secrets
        .patch(&secret_name, &apply, &Patch::Apply(&consumer_secret(proxy, None)))
        .await?;

    let instance_name = format!("bench-{}", &proxy.uid().unwrap_or_default()[..8]);
    let mut status = ProxyStatus {
        phase: Some(ProxyPhase::Provisioning),
        observed_generation: proxy.metadata.generation,
        instance: Some(InstanceRef {
            name: instance_name.clone(),
            spec_hash: "0123456789abcdef".to_owned(),
            provider_id: None,
        }),
        secret_name: Some(secret_name.clone()),
        ..ProxyStatus::default()
    };
    write_status(status.clone()).await?;
    let provider_id = format!("fake://{instance_name}");
    if let Some(instance) = &mut status.instance {
        instance.provider_id = Some(provider_id.clone());
    }
    write_status(status.clone()).await?;
    events
        .create(
            &PostParams::default(),
            &event(proxy, "Created", "Create", format!("instance {provider_id} created")),
        )
        .await?;

    let ip = std::net::Ipv4Addr::from(u32::from(std::net::Ipv4Addr::new(198, 18, 0, 0)) + 1 + index as u32).to_string();
    let service = Service {
        metadata: owned_meta(proxy, name.clone(), &[]),
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some("http".to_owned()),
                port: PORT,
                target_port: Some(IntOrString::Int(PORT)),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    Api::<Service>::namespaced(client.clone(), &namespace)
        .patch(&name, &apply, &Patch::Apply(&service))
        .await?;
    let slice_name = format!("{name}-instance");
    let slice = EndpointSlice {
        metadata: owned_meta(
            proxy,
            slice_name.clone(),
            &[
                ("kubernetes.io/service-name", name.as_str()),
                ("endpointslice.kubernetes.io/managed-by", "egressproxies.dev"),
            ],
        ),
        address_type: "IPv4".to_owned(),
        endpoints: Some(vec![Endpoint {
            addresses: vec![ip.clone()],
            ..Endpoint::default()
        }]),
        ports: Some(vec![EndpointPort {
            name: Some("http".to_owned()),
            port: Some(PORT),
            protocol: Some("TCP".to_owned()),
            ..EndpointPort::default()
        }]),
    };
    Api::<EndpointSlice>::namespaced(client.clone(), &namespace)
        .patch(&slice_name, &apply, &Patch::Apply(&slice))
        .await?;
    secrets
        .patch(&secret_name, &apply, &Patch::Apply(&consumer_secret(proxy, Some(&ip))))
        .await?;
    events
        .create(
            &PostParams::default(),
            &event(proxy, "Ready", "Reconcile", format!("serving on {ip}:{PORT}")),
        )
        .await?;

    let endpoint = format!("http://{ip}:{PORT}");
    status.phase = Some(ProxyPhase::Running);
    status.provider_id = Some(provider_id);
    status.instance_name = Some(instance_name.clone());
    status.ip = Some(ip);
    status.endpoint = Some(endpoint.clone());
    status.spec_hash = Some("0123456789abcdef".to_owned());
    status.created_at = Some(Time(Timestamp::now()));
    status.service_name = Some(name.clone());
    set_condition(
        &mut status,
        INSTANCE_CREATED,
        true,
        "InstanceCreated",
        format!("instance {instance_name} exists"),
    );
    set_condition(
        &mut status,
        READY,
        true,
        "InstanceRunning",
        format!("serving on {endpoint}"),
    );
    set_condition(
        &mut status,
        UP_TO_DATE,
        true,
        "SpecApplied",
        "the serving instance matches the spec",
    );
    set_condition(&mut status, QUOTA_EXCEEDED, false, "WithinQuota", "");
    write_status(status).await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Measurements

struct Timing {
    label: String,
    proxies: usize,
    total: Duration,
    /// Per-Proxy latencies, seconds.
    latencies: Vec<f64>,
    requests: RequestCounts,
    cpu: Vec<(&'static str, f64)>,
}

fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn baseline(plane: &ControlPlane, client: &Client, n: usize, label: &str, watched: &Watched) -> Result<Timing> {
    let ns = plane.namespace(label).await?;
    let api: Api<Proxy> = Api::namespaced(client.clone(), ns.name());
    let names = names("b", n);
    let requests_before = request_counts(client).await?;
    let cpu_before = watched.snapshot()?;
    let started = Instant::now();
    let created = create_all(&api, &names).await?;
    let latencies: Vec<f64> = stream::iter(created.iter().enumerate())
        .map(|(index, (proxy, _))| async move {
            let chain = Instant::now();
            equivalent_writes(client, proxy, index)
                .await
                .with_context(|| format!("baseline writes for {}", proxy.name_any()))?;
            Ok::<_, anyhow::Error>(chain.elapsed().as_secs_f64())
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    let total = started.elapsed();
    let cpu_after = watched.snapshot()?;
    let requests = difference(&request_counts(client).await?, &requests_before);
    Ok(Timing {
        label: label.to_owned(),
        proxies: n,
        total,
        latencies,
        requests,
        cpu: cpu_of(watched, &cpu_before, &cpu_after),
    })
}

fn cpu_of(watched: &Watched, before: &[f64], after: &[f64]) -> Vec<(&'static str, f64)> {
    watched
        .0
        .iter()
        .zip(before.iter().zip(after))
        .map(|((name, _), (b, a))| (*name, a - b))
        .collect()
}

/// What the operator did per Proxy, from its own metrics once idle.
struct OperatorCounts {
    /// One Running Proxy as JSON, bytes: all of it, and its managedFields.
    proxy_json: (usize, usize),
    reconciles: f64,
    reconcile_errors: f64,
    rpcs: BTreeMap<String, f64>,
    log_lines: usize,
    idle: bool,
    /// The requests of the whole operator run, up to idle (the timing's are up to all Running).
    requests_to_idle: RequestCounts,
    /// VmRSS and VmHWM at rest with no Proxies (after start-up), then with all of them.
    idle_rss: (u64, u64),
    rss: (u64, u64),
    fake_calls: BTreeMap<String, usize>,
    /// Open sockets: the most seen while Proxies went Running, and at rest.
    peak_sockets: usize,
    sockets_at_rest: usize,
}

/// The fake daemon logs one JSON line per call, with the RPC in `rpc`.
fn fake_calls(fake: &Process) -> BTreeMap<String, usize> {
    let mut calls = BTreeMap::new();
    for line in fake.log_lines() {
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(&line)
            && let Some(rpc) = value.get("rpc").and_then(|r| r.as_str())
        {
            *calls.entry(rpc.to_owned()).or_default() += 1;
        }
    }
    calls
}

/// A fake daemon and an operator watching one namespace.
struct Stack {
    dir: tempfile::TempDir,
    socket: PathBuf,
    namespace: String,
    fake: Process,
    operator: Process,
    addr: SocketAddr,
    idle_rss: (u64, u64),
}

async fn stack(settings: &Settings, plane: &ControlPlane, namespace: &str) -> Result<Stack> {
    let dir = tempfile::Builder::new().prefix("egress-scale-bench-").tempdir()?;
    let (fake, socket) = start_fake(settings, dir.path()).await?;
    let (operator, addr) = start_operator(settings, plane, dir.path(), &socket, namespace).await?;
    // Settled after start-up (first GC sweep, ProviderHealth), before any Proxy.
    wait_idle(operator.pid(), Duration::from_secs(30)).await?;
    let idle_rss = memory(operator.pid())?;
    Ok(Stack {
        dir,
        socket,
        namespace: namespace.to_owned(),
        fake,
        operator,
        addr,
        idle_rss,
    })
}

async fn operator_run(
    settings: &Settings,
    plane: &ControlPlane,
    client: &Client,
    n: usize,
    label: &str,
    watched: &Watched,
) -> Result<(Timing, OperatorCounts, Stack)> {
    let ns = plane.namespace(label).await?;
    let mut stack = stack(settings, plane, ns.name()).await?;
    let watched = Watched(
        watched
            .0
            .iter()
            .copied()
            .chain([("operator", stack.operator.pid()), ("fake provider", stack.fake.pid())])
            .collect(),
    );
    let api: Api<Proxy> = Api::namespaced(client.clone(), ns.name());
    let watch = RunningWatch::start(api.clone());
    let names = names("p", n);
    let requests_before = request_counts(client).await?;
    let cpu_before = watched.snapshot()?;
    let started = Instant::now();
    let created = create_all(&api, &names).await?;
    eprintln!("  created {n} in {:.1} s", started.elapsed().as_secs_f64());
    let peak_sockets = wait_running(&watch, n, settings.timeout, &mut stack.operator, &api).await?;
    let running = watch.times();
    let total = running
        .values()
        .map(|t| t.duration_since(started))
        .max()
        .unwrap_or_default();
    let cpu_after = watched.snapshot()?;
    let requests = difference(&request_counts(client).await?, &requests_before);
    let latencies = created
        .iter()
        .filter_map(|(proxy, sent)| {
            running
                .get(&proxy.name_any())
                .map(|r| r.duration_since(*sent).as_secs_f64())
        })
        .collect();
    drop(watch);

    let idle = wait_idle(stack.operator.pid(), Duration::from_secs(60)).await?;
    let requests_to_idle = difference(&request_counts(client).await?, &requests_before);
    let rss = memory(stack.operator.pid())?;
    let (_, metrics) = http_get(stack.addr, "/metrics").await?;
    let sample = api.get(&names[0]).await?;
    let proxy_json = (
        serde_json::to_vec(&sample)?.len(),
        serde_json::to_vec(&sample.metadata.managed_fields)?.len(),
    );
    let counts = OperatorCounts {
        proxy_json,
        reconciles: operator_metric(&metrics, "egress_reconciles_total", None)
            .values()
            .fold(0.0, |a, b| a + b),
        reconcile_errors: operator_metric(&metrics, "egress_reconcile_errors_total", None)
            .values()
            .fold(0.0, |a, b| a + b),
        rpcs: operator_metric(&metrics, "egress_provider_rpc_duration_seconds_count", Some("method")),
        log_lines: stack.operator.log_lines().len(),
        idle,
        requests_to_idle,
        idle_rss: stack.idle_rss,
        rss,
        fake_calls: fake_calls(&stack.fake),
        peak_sockets,
        sockets_at_rest: sockets(stack.operator.pid()),
    };
    let timing = Timing {
        label: label.to_owned(),
        proxies: n,
        total,
        latencies,
        requests,
        cpu: cpu_of(&watched, &cpu_before, &cpu_after),
    };
    Ok((timing, counts, stack))
}

/// What the operator and the apiserver do while all Proxies are Running and nothing changes.
struct Steady {
    window: Duration,
    requests: RequestCounts,
    reconciles: f64,
    gets: f64,
    operator_cpu: f64,
    apiserver_cpu: f64,
}

async fn operator_totals(addr: SocketAddr) -> Result<(f64, f64)> {
    let (_, metrics) = http_get(addr, "/metrics").await?;
    let reconciles = operator_metric(&metrics, "egress_reconciles_total", None)
        .values()
        .fold(0.0, |a, b| a + b);
    let gets = operator_metric(&metrics, "egress_provider_rpc_duration_seconds_count", Some("method"))
        .get("Get")
        .copied()
        .unwrap_or(0.0);
    Ok((reconciles, gets))
}

async fn steady_state(client: &Client, stack: &Stack, apiserver: u32, window: Duration) -> Result<Steady> {
    let requests_before = request_counts(client).await?;
    let (reconciles_before, gets_before) = operator_totals(stack.addr).await?;
    let cpu_before = (cpu_seconds(stack.operator.pid())?, cpu_seconds(apiserver)?);
    tokio::time::sleep(window).await;
    let (reconciles, gets) = operator_totals(stack.addr).await?;
    Ok(Steady {
        window,
        requests: difference(&request_counts(client).await?, &requests_before),
        reconciles: reconciles - reconciles_before,
        gets: gets - gets_before,
        operator_cpu: cpu_seconds(stack.operator.pid())? - cpu_before.0,
        apiserver_cpu: cpu_seconds(apiserver)? - cpu_before.1,
    })
}

/// Replaces the stack's operator by a fresh process and waits until it has reconciled every one of the `n`
/// Proxies (all Running already) and gone idle; returns its VmRSS and VmHWM then, and its open sockets.
async fn restart(
    settings: &Settings,
    plane: &ControlPlane,
    stack: &mut Stack,
    n: usize,
) -> Result<((u64, u64), usize)> {
    // Stopped first: the new process binds a new port but would share the log file.
    stack.operator.stop();
    let (operator, addr) = start_operator(settings, plane, stack.dir.path(), &stack.socket, &stack.namespace).await?;
    stack.operator = operator;
    stack.addr = addr;
    let deadline = Instant::now() + settings.timeout;
    loop {
        stack.operator.check_alive()?;
        let (_, metrics) = http_get(addr, "/metrics").await?;
        let reconciles = operator_metric(&metrics, "egress_reconciles_total", None)
            .values()
            .fold(0.0, |a, b| a + b);
        if reconciles >= n as f64 {
            break;
        }
        if Instant::now() > deadline {
            bail!("the restarted operator reconciled only {reconciles} of {n} Proxies");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    wait_idle(stack.operator.pid(), Duration::from_secs(300)).await?;
    Ok((memory(stack.operator.pid())?, sockets(stack.operator.pid())))
}

// ---------------------------------------------------------------------------------------------------------
// Report

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn total_requests(counts: &RequestCounts) -> f64 {
    counts.values().fold(0.0, |a, b| a + b)
}

/// The ratio is printed for runs of `n` Proxies, the baseline's size.
fn print_timings(timings: &[&Timing], n: usize, floor: f64) {
    println!(
        "| measurement | Proxies | apiserver requests | total s | Proxies/s | per-Proxy p50 s | per-Proxy p99 s | \
         total vs baseline |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for t in timings {
        println!(
            "| {} | {} | {:.0} | {:.2} | {:.0} | {:.2} | {:.2} | {} |",
            t.label,
            t.proxies,
            total_requests(&t.requests),
            t.total.as_secs_f64(),
            t.proxies as f64 / t.total.as_secs_f64(),
            percentile(&t.latencies, 0.5),
            percentile(&t.latencies, 0.99),
            if t.proxies == n {
                format!("{:.2}×", t.total.as_secs_f64() / floor)
            } else {
                String::new()
            },
        );
    }
}

fn print_requests(columns: &[(&str, f64, &RequestCounts)]) {
    let mut keys: Vec<&(String, String)> = columns.iter().flat_map(|(_, _, c)| c.keys()).collect();
    keys.sort();
    keys.dedup();
    print!("| verb | resource |");
    for (label, _, _) in columns {
        print!(" {label} |");
    }
    println!();
    print!("|---|---|");
    for _ in columns {
        print!("---:|");
    }
    println!();
    for key in keys {
        print!("| {} | {} |", key.0, key.1);
        for (_, per, counts) in columns {
            print!(" {:.2} |", counts.get(key).copied().unwrap_or(0.0) / per);
        }
        println!();
    }
    print!("| all | |");
    for (_, per, counts) in columns {
        print!(" {:.2} |", total_requests(counts) / per);
    }
    println!();
}

fn print_cpu(timings: &[&Timing]) {
    println!("| measurement | wall s | process | CPU s | share of 2 cores |");
    println!("|---|---:|---|---:|---:|");
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get()) as f64;
    for t in timings {
        for (process, seconds) in &t.cpu {
            println!(
                "| {} | {:.1} | {process} | {seconds:.1} | {:.0} % |",
                t.label,
                t.total.as_secs_f64(),
                100.0 * seconds / (cores * t.total.as_secs_f64())
            );
        }
    }
}

async fn bench() -> Result<()> {
    let settings = Settings::from_env()?;
    eprintln!(
        "scale bench: {} Proxies, memory with {}; operator {}, fake {}",
        settings.proxies,
        settings.memory_proxies,
        settings.operator.display(),
        settings.fake.display()
    );
    let plane = ControlPlane::start().await?;
    plane.install_crds(&egress_operator::crd::all()).await?;
    let client = plane.client()?;
    let ids = plane.process_ids();
    let watched = Watched(vec![
        ("kube-apiserver", ids.kube_apiserver),
        ("etcd", ids.etcd),
        ("bench client", std::process::id()),
    ]);
    let n = settings.proxies;

    eprintln!("warm-up: baseline with {} Proxies", n.min(100));
    baseline(&plane, &client, n.min(100), "warm-up", &watched).await?;
    eprintln!("baseline 1: {n} Proxies");
    let base1 = baseline(&plane, &client, n, "baseline, before", &watched).await?;
    eprintln!("  {:.2} s", base1.total.as_secs_f64());
    eprintln!("operator: {n} Proxies");
    let (run, counts, stack) = operator_run(&settings, &plane, &client, n, "operator", &watched).await?;
    drop(stack);
    eprintln!("  {:.2} s", run.total.as_secs_f64());
    eprintln!("baseline 2: {n} Proxies");
    let base2 = baseline(&plane, &client, n, "baseline, after", &watched).await?;
    eprintln!("  {:.2} s", base2.total.as_secs_f64());

    let memory_run = if settings.memory_proxies > 0 {
        let m = settings.memory_proxies;
        eprintln!("memory: {m} Proxies");
        let (timing, counts, mut stack) =
            operator_run(&settings, &plane, &client, m, "operator, memory", &watched).await?;
        eprintln!(
            "  all Running in {:.1} s; at rest for {} s more",
            timing.total.as_secs_f64(),
            LATER.as_secs()
        );
        let steady = steady_state(&client, &stack, ids.kube_apiserver, LATER).await?;
        let later = (memory(stack.operator.pid())?, sockets(stack.operator.pid()));
        eprintln!("  restarting the operator");
        let restarted = restart(&settings, &plane, &mut stack, m).await?;
        Some((timing, counts, later, restarted, steady))
    } else {
        None
    };

    let floor = (base1.total.as_secs_f64() + base2.total.as_secs_f64()) / 2.0;
    println!();
    println!(
        "### Apply → all Running ({CONCURRENCY} requests in flight from the bench client; the ratio is against \
         the mean of the two baselines)"
    );
    println!();
    let mut timings = vec![&base1, &run, &base2];
    if let Some((timing, _, _, _, _)) = &memory_run {
        timings.push(timing);
    }
    print_timings(&timings, n, floor);
    println!();
    println!("### apiserver requests per Proxy (apiserver_request_total, creates included)");
    println!();
    let nf = n as f64;
    let mut columns = vec![
        ("baseline", nf, &base1.requests),
        ("operator, until all Running", nf, &run.requests),
        ("operator, until idle", nf, &counts.requests_to_idle),
    ];
    if let Some((timing, counts, _, _, _)) = &memory_run {
        columns.push((
            "memory run, until idle",
            timing.proxies as f64,
            &counts.requests_to_idle,
        ));
    }
    print_requests(&columns);
    println!();
    println!("### CPU time during each measurement (until all Running)");
    println!();
    print_cpu(&timings);
    println!();
    println!("### The operator's own counts per Proxy, once idle");
    println!();
    println!(
        "| run | reconciles | reconcile errors | provider RPCs (operator metrics) | fake's logged calls | log lines | \
         went idle | open sockets, peak / at rest |"
    );
    println!("|---|---:|---:|---|---|---:|---|---:|");
    let mut runs = vec![(&run, &counts)];
    if let Some((timing, counts, _, _, _)) = &memory_run {
        runs.push((timing, counts));
    }
    for (timing, counts) in &runs {
        let per = timing.proxies as f64;
        let rpcs: Vec<String> = counts.rpcs.iter().map(|(m, c)| format!("{m} {:.2}", c / per)).collect();
        let calls: Vec<String> = counts
            .fake_calls
            .iter()
            .map(|(m, c)| format!("{m} {:.2}", *c as f64 / per))
            .collect();
        println!(
            "| {} ({}) | {:.2} | {:.2} | {} | {} | {:.2} | {} | {} / {} |",
            timing.label,
            timing.proxies,
            counts.reconciles / per,
            counts.reconcile_errors / per,
            rpcs.join(", "),
            calls.join(", "),
            counts.log_lines as f64 / per,
            if counts.idle { "yes" } else { "no (60 s)" },
            counts.peak_sockets,
            counts.sockets_at_rest,
        );
    }
    println!();
    println!(
        "One Running Proxy as JSON: {} bytes, of which managedFields {} bytes.",
        counts.proxy_json.0, counts.proxy_json.1
    );
    if let Some((timing, _, _, _, steady)) = &memory_run {
        let seconds = steady.window.as_secs_f64();
        println!();
        println!(
            "### Steady state with {} Proxies Running, nothing changing ({:.0} s right after all were Running)",
            timing.proxies, seconds
        );
        println!();
        println!("| reconciles/s | provider Get/s | apiserver requests/s | operator CPU | kube-apiserver CPU |");
        println!("|---:|---:|---:|---:|---:|");
        println!(
            "| {:.1} | {:.1} | {:.1} | {:.0} % of a core | {:.0} % of a core |",
            steady.reconciles / seconds,
            steady.gets / seconds,
            total_requests(&steady.requests) / seconds,
            100.0 * steady.operator_cpu / seconds,
            100.0 * steady.apiserver_cpu / seconds,
        );
        println!();
        let requests: Vec<String> = steady
            .requests
            .iter()
            .map(|((verb, resource), count)| format!("{verb} {resource} {:.1}/s", count / seconds))
            .collect();
        println!("Requests: {}.", requests.join(", "));
    }
    println!();
    println!("### Operator memory (at rest: under 2 % of a core over 5 s, or after 60 s)");
    println!();
    println!("| operator | state | VmRSS MiB | VmHWM MiB | RSS above its own start, bytes per Proxy |");
    println!("|---|---|---:|---:|---:|");
    let mut rows = vec![
        (
            "timing run",
            "no Proxies (after start-up)".to_owned(),
            counts.idle_rss,
            None,
        ),
        (
            "timing run",
            format!("{n} Proxies at rest"),
            counts.rss,
            Some((n, counts.idle_rss.0)),
        ),
    ];
    if let Some((timing, counts, later, restarted, _)) = &memory_run {
        let m = timing.proxies;
        rows.push((
            "memory run",
            "no Proxies (after start-up)".to_owned(),
            counts.idle_rss,
            None,
        ));
        rows.push((
            "memory run",
            format!("{m} Proxies at rest"),
            counts.rss,
            Some((m, counts.idle_rss.0)),
        ));
        rows.push((
            "memory run",
            format!("{m} Proxies, {} s later ({} open sockets)", LATER.as_secs(), later.1),
            later.0,
            Some((m, counts.idle_rss.0)),
        ));
        rows.push((
            "restarted",
            format!("{m} Proxies at rest ({} open sockets)", restarted.1),
            restarted.0,
            Some((m, counts.idle_rss.0)),
        ));
    }
    for (operator, state, (rss, hwm), per) in rows {
        let per = per.map_or_else(String::new, |(proxies, idle)| {
            format!("{:.0}", (rss as f64 - idle as f64) / proxies as f64)
        });
        println!("| {operator} | {state} | {:.1} | {:.1} | {per} |", mib(rss), mib(hwm));
    }
    Ok(())
}
