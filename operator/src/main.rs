//! `egress-operator --config FILE`: parses the flags, installs telemetry, loads the config, and runs.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use clap::Parser;
use egress_operator::run::{LeaseOptions, RunOptions, load_config, run};
use provider_sdk::telemetry::{self, LogFormat};

#[derive(Parser, Debug)]
#[command(
    name = "egress-operator",
    about = "Runs Proxies as instances on egress-proxy providers"
)]
struct Cli {
    /// The operator's YAML config (providers, cluster id, GC and health cadences).
    #[arg(long, env = "EGRESS_OPERATOR_CONFIG")]
    config: PathBuf,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "EGRESS_OPERATOR_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    http_addr: SocketAddr,
    /// Run without leader election (a single replica).
    #[arg(long, env = "EGRESS_OPERATOR_NO_LEADER_ELECTION")]
    no_leader_election: bool,
    /// Namespace of the leader-election Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "egress-system")]
    lease_namespace: String,
    #[arg(long, default_value = "egress-operator")]
    lease_name: String,
    /// This replica's identity in the Lease.
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Watch Proxies in this namespace only (default: all namespaces).
    #[arg(long, env = "EGRESS_OPERATOR_WATCH_NAMESPACE")]
    watch_namespace: Option<String>,
    #[arg(long, env = "EGRESS_LOG_FORMAT", value_enum, default_value_t)]
    log_format: LogFormat,
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match load_config(&cli.config) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(provider_sdk::daemon::EXIT_USAGE);
        }
    };
    let _telemetry = match telemetry::init("egress-operator", cli.log_format, cli.otlp_endpoint.as_deref()) {
        Ok(guard) => guard,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(provider_sdk::daemon::EXIT_USAGE);
        }
    };
    let identity = cli
        .identity
        .unwrap_or_else(|| format!("egress-operator-{}", std::process::id()));
    let lease = (!cli.no_leader_election).then_some(LeaseOptions {
        namespace: cli.lease_namespace,
        name: cli.lease_name,
        identity,
    });
    let options = RunOptions {
        config_path: cli.config,
        http_addr: cli.http_addr,
        lease,
        namespace: cli.watch_namespace,
    };
    match run(options, config, provider_sdk::daemon::shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "the operator stopped");
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
