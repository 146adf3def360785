//! What every provider binary shares: the flags, strict config loading, telemetry, signal handling and the
//! exit codes. A provider's `main` is one call to [`main`].

use std::{path::PathBuf, process::ExitCode};

use clap::{Args, Parser};
use serde::de::DeserializeOwned;

use crate::{
    config::{self, Validate},
    error::BoxError,
    provider::Provider,
    server::{self, Listen, TlsFiles},
    telemetry::{self, LogFormat},
};

/// EX_USAGE: a bad flag or config file.
pub const EXIT_USAGE: u8 = 64;
/// The provider could not start (backend set-up, listener).
pub const EXIT_START: u8 = 1;

/// The flags of every provider daemon; each also reads an environment variable.
#[derive(Args, Clone, Debug)]
pub struct DaemonArgs {
    /// The provider's YAML config file.
    #[arg(long, env = "EGRESS_PROVIDER_CONFIG")]
    pub config: Option<PathBuf>,
    /// unix:///PATH (sidecar) or tcp://HOST:PORT (mutual TLS).
    #[arg(long, env = "EGRESS_PROVIDER_LISTEN")]
    pub listen: String,
    /// PEM certificate the daemon presents on TCP.
    #[arg(long, env = "EGRESS_PROVIDER_TLS_CERT", requires_all = ["tls_key", "client_ca"])]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "EGRESS_PROVIDER_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// PEM CA that signs the operator's client certificates.
    #[arg(long, env = "EGRESS_PROVIDER_CLIENT_CA", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
    /// Serve plain TCP without TLS. Only for a loopback address or a trusted network.
    #[arg(long, env = "EGRESS_PROVIDER_INSECURE")]
    pub insecure: bool,
    /// Log line format.
    #[arg(long, env = "EGRESS_LOG_FORMAT", value_enum, default_value_t)]
    pub log_format: LogFormat,
    /// OTLP/gRPC collector for spans, for example http://otel-collector:4317.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
}

impl DaemonArgs {
    fn tls(&self) -> Option<TlsFiles> {
        match (&self.tls_cert, &self.tls_key, &self.client_ca) {
            (Some(cert), Some(key), Some(client_ca)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: client_ca.clone(),
            }),
            _ => None,
        }
    }
}

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    daemon: DaemonArgs,
}

/// Parses the flags, loads the config as `C`, builds the provider with `build`, and serves it until SIGTERM
/// or SIGINT. Usage and config errors exit with 64 and one line naming the field and value.
pub fn main<C, P>(service_name: &'static str, build: impl FnOnce(C) -> Result<P, BoxError>) -> ExitCode
where
    C: DeserializeOwned + Validate,
    P: Provider,
{
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    let args = cli.daemon;
    let listen: Listen = match args.listen.parse() {
        Ok(listen) => listen,
        Err(error) => return usage(error),
    };
    let config: C = match config::load(args.config.as_deref()) {
        Ok(config) => config,
        Err(error) => return usage(error),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => return fail("starting the async runtime", error),
    };
    runtime.block_on(async move {
        let _telemetry = match telemetry::init(service_name, args.log_format, args.otlp_endpoint.as_deref()) {
            Ok(guard) => guard,
            Err(error) => return usage(error),
        };
        let provider = match build(config) {
            Ok(provider) => provider,
            Err(error) => return fail("building the provider", error),
        };
        let bound = match server::bind(&listen, args.tls().as_ref(), args.insecure).await {
            Ok(bound) => bound,
            Err(error @ server::ListenError::TlsRequired { .. }) => return usage(error),
            Err(error) => return fail("listening", error),
        };
        tracing::info!(service = service_name, address = %bound.address(), "serving");
        match bound.serve(provider, shutdown_signal()).await {
            Ok(()) => {
                tracing::info!("stopped");
                ExitCode::SUCCESS
            }
            Err(error) => fail("serving", error),
        }
    })
}

fn usage(error: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {error}");
    ExitCode::from(EXIT_USAGE)
}

fn fail(what: &str, error: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {what}: {error}");
    ExitCode::from(EXIT_START)
}

/// Resolves on SIGTERM (Kubernetes stopping the pod) or SIGINT (Ctrl-C).
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(error) => {
            tracing::error!(%error, "cannot watch SIGTERM; only Ctrl-C stops the daemon");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
