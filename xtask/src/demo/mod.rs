//! `cargo xtask demo`: everything a newcomer needs to see a Proxy carry traffic, on one machine.
//!
//! 1. tinyproxy, the two daemons and (unless a reachable cluster is configured) the control plane are
//!    built or installed; a first run shows the control plane build's progress;
//! 2. the CRDs are installed, the host provider starts on the loopback pool of
//!    `examples/provider-host-loopback.yaml` and the operator starts against the cluster;
//! 3. `examples/proxy-host.yaml` is applied with kubectl and waited on until Ready;
//! 4. an HTTP request goes through the proxy with the credentials from the Proxy's Secret to a local
//!    server that answers with the source address it saw; one without credentials must get 407;
//! 5. what to look at is printed, and everything stays up until Ctrl-C; then the Proxy is deleted (so its
//!    tinyproxy stops) and everything the demo started is stopped in reverse order.

mod cluster;
mod daemons;
mod prepare;
mod traffic;

use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
    time::Instant,
};

use anyhow::{Context, Result};

use cluster::Cluster;
use daemons::Daemons;

/// The namespace the sample Proxy is applied in.
const NAMESPACE: &str = "egress-demo";
/// `metadata.name` in `examples/proxy-host.yaml`.
const PROXY: &str = "demo";

#[derive(clap::Args, Debug)]
pub struct Options {
    /// Stop after the request through the proxy instead of waiting for Ctrl-C (CI runs the demo so).
    #[arg(long)]
    once: bool,
    /// Start a local control plane even when the kubeconfig names a reachable cluster.
    #[arg(long)]
    local: bool,
}

pub async fn run(options: Options) -> Result<()> {
    let started = Instant::now();
    let repo = repo_root();
    let work = prepare::work_dir()?;

    step("tinyproxy (Debian package), which the host provider runs");
    prepare::ensure_tinyproxy(&repo)?;
    step("building egress-operator and egress-provider-host");
    let binaries = prepare::build_daemons(&repo)?;
    let cluster = Cluster::connect_or_start(&repo, options.local).await?;

    let daemons = Daemons::new(&work);
    let outcome = show(&repo, &binaries, &cluster, daemons, options.once, started).await;
    if cluster.is_local() {
        step("stopping the control plane");
    }
    drop(cluster);
    outcome
}

/// Steps 2 to 5; the daemons are always stopped, and the Proxy deleted first so no tinyproxy outlives the
/// demo, whether the steps succeeded or not.
async fn show(
    repo: &Path,
    binaries: &prepare::Binaries,
    cluster: &Cluster,
    mut daemons: Daemons,
    once: bool,
    started: Instant,
) -> Result<()> {
    let result = async {
        step("installing the CRDs (charts/egress-proxies-operator/crds/crds.yaml)");
        cluster.install_crds(repo)?;
        step("starting egress-provider-host on the loopback pool 127.0.1.0/28");
        daemons.start_host_provider(binaries, repo)?;
        step("starting egress-operator");
        daemons.start_operator(binaries, cluster)?;

        step(&format!("kubectl apply -n {NAMESPACE} -f examples/proxy-host.yaml"));
        cluster.ensure_namespace(NAMESPACE)?;
        print_indented(&cluster.kubectl(&[
            "apply",
            "-n",
            NAMESPACE,
            "-f",
            &path_str(&repo.join("examples/proxy-host.yaml")),
        ])?);
        step("waiting until the Proxy is Ready");
        let ready = cluster.kubectl(&[
            "wait",
            "-n",
            NAMESPACE,
            "--for=condition=Ready",
            &format!("proxy/{PROXY}"),
            "--timeout=120s",
        ]);
        print_indented(&cluster.kubectl(&["get", "proxies", "-n", NAMESPACE])?);
        ready.context("the Proxy did not become Ready; see the operator's log")?;

        step("sending HTTP requests through the proxy to a local server");
        let echo_port = egress_test_support::start_echo_server().await?;
        let seen = traffic::prove(cluster, echo_port).await?;
        print_look_around(cluster, &daemons, echo_port, &seen, started);
        Ok::<_, anyhow::Error>(())
    }
    .await;

    if let Err(error) = &result {
        eprintln!("\nerror: {error:#}");
        daemons.print_log_tails();
    } else if !once {
        println!("\nThe demo stays up until Ctrl-C.");
        wait_for_interrupt().await;
        println!();
    }
    step("deleting the Proxy (its tinyproxy stops), then the daemons");
    if daemons.operator_running() {
        match cluster.kubectl(&[
            "delete",
            "proxy",
            PROXY,
            "-n",
            NAMESPACE,
            "--ignore-not-found",
            "--timeout=60s",
        ]) {
            Ok(out) => print_indented(&out),
            Err(error) => eprintln!("   could not delete the Proxy: {error:#}"),
        }
    }
    daemons.stop();
    if !cluster.is_local() {
        let _ = cluster.kubectl(&["delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false"]);
    }
    result.map_err(|_| anyhow::anyhow!("the demo failed (details above)"))
}

fn print_look_around(cluster: &Cluster, daemons: &Daemons, echo_port: u16, seen: &traffic::Seen, started: Instant) {
    let secret = format!("{PROXY}-proxy");
    println!(
        "\nThe Proxy {NAMESPACE}/{PROXY} runs tinyproxy on {address}; a request with the credentials from the Secret \
         {secret} reached the local server from {source}, one without credentials got 407. \
         Ready in {elapsed:.0?} from the start of the demo.",
        address = seen.endpoint,
        source = seen.source,
        elapsed = started.elapsed(),
    );
    println!("\nLook around (in another terminal):\n");
    println!("  export KUBECONFIG={}", cluster.kubeconfig().display());
    if let Some(dir) = cluster.kubectl_dir() {
        println!(
            "  export PATH={}:$PATH       # kubectl {}",
            dir.display(),
            egress_test_support::kubernetes_version()
        );
    }
    println!("  kubectl get proxies -n {NAMESPACE}");
    println!("  kubectl describe proxy {PROXY} -n {NAMESPACE}");
    println!("  kubectl get providerhealths");
    println!("  kubectl get secret,service,endpointslice -n {NAMESPACE}");
    println!(
        "  curl -x \"$(kubectl get secret {secret} -n {NAMESPACE} -o jsonpath='{{.data.endpoint}}' | base64 -d)\" \
         http://127.0.0.1:{echo_port}/"
    );
    println!(
        "  kubectl patch proxy {PROXY} -n {NAMESPACE} --type merge -p '{{\"spec\":{{\"port\":3129}}}}'   # a replacement, make before break"
    );
    println!("  kubectl delete proxy {PROXY} -n {NAMESPACE}");
    println!(
        "\nLogs: {}  {}",
        daemons.operator_log().display(),
        daemons.provider_log().display()
    );
    if let Some(metrics) = daemons.metrics_url() {
        println!("Metrics: {metrics}");
    }
}

async fn wait_for_interrupt() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

/// The workspace root: the parent of this crate's directory.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits in the workspace root")
        .to_path_buf()
}

/// Prints a step with the time since the demo started.
pub(crate) fn step(what: &str) {
    static START: OnceLock<Instant> = OnceLock::new();
    let elapsed = START.get_or_init(Instant::now).elapsed();
    println!("== [{:>5.1}s] {what}", elapsed.as_secs_f64());
}

pub(crate) fn print_indented(text: &str) {
    for line in text.lines() {
        println!("   {line}");
    }
}

pub(crate) fn path_str(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}
