//! `provider-conformance`: the suite as a command. One line per check, then `N passed, N failed, N skipped`;
//! the exit status is non-zero on any failure.

use std::{io::Write, path::PathBuf, process::ExitCode};

use clap::Parser;
use provider_sdk::client::{CallTimeouts, ClientTls, ProviderClient, ProviderEndpoint};

use crate::Params;

#[derive(Parser, Debug)]
#[command(
    name = "provider-conformance",
    about = "Checks a provider daemon against the egress-proxies provider contract"
)]
pub struct Args {
    /// unix:///PATH, https://HOST:PORT (mutual TLS) or http://HOST:PORT (with --insecure).
    #[arg(long)]
    pub endpoint: String,
    /// YAML with the placement, port and IDs the checks need.
    #[arg(long)]
    pub params: Option<PathBuf>,
    /// PEM CA that signed the provider's certificate.
    #[arg(long, requires_all = ["tls_cert", "tls_key"])]
    pub ca: Option<PathBuf>,
    /// PEM client certificate.
    #[arg(long)]
    pub tls_cert: Option<PathBuf>,
    /// PEM key of --tls-cert.
    #[arg(long)]
    pub tls_key: Option<PathBuf>,
    /// The name the provider's certificate carries, when it differs from the endpoint's host.
    #[arg(long)]
    pub server_name: Option<String>,
    /// Allow http:// endpoints.
    #[arg(long)]
    pub insecure: bool,
}

/// Runs the suite as the CLI does, writing the report to `out`.
pub async fn run(args: Args, out: &mut impl Write) -> ExitCode {
    match run_inner(args, out).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            let _ = writeln!(out, "error: {error}");
            ExitCode::from(2)
        }
    }
}

/// Runs the suite in-process with CLI arguments (without the program name), for the tests that prove a
/// provider daemon conforms; panics with the whole report unless every check passed or was skipped and the
/// exit code is 0. Returns the report.
pub async fn assert_conforms(argv: &[&str]) -> String {
    let args = Args::try_parse_from(std::iter::once("provider-conformance").chain(argv.iter().copied()))
        .unwrap_or_else(|e| panic!("provider-conformance {argv:?}: {e}"));
    let mut out = Vec::new();
    let code = run(args, &mut out).await;
    let report = String::from_utf8_lossy(&out).into_owned();
    let summary = report.lines().last().unwrap_or_default();
    assert!(
        summary.starts_with(|c: char| c.is_ascii_digit()) && summary.contains(" passed, 0 failed"),
        "{report}"
    );
    assert!(!report.contains("FAIL "), "{report}");
    assert_eq!(code, ExitCode::SUCCESS, "{report}");
    report
}

async fn run_inner(args: Args, out: &mut impl Write) -> Result<bool, String> {
    let endpoint: ProviderEndpoint = args.endpoint.parse().map_err(|e| format!("--endpoint: {e}"))?;
    if matches!(endpoint, ProviderEndpoint::Http { .. }) && !args.insecure {
        return Err("--endpoint http:// needs --insecure".into());
    }
    let read = |flag: &str, path: &PathBuf| std::fs::read(path).map_err(|e| format!("{flag} {}: {e}", path.display()));
    let tls = match (&args.ca, &args.tls_cert, &args.tls_key) {
        (Some(ca), Some(cert), Some(key)) => Some(ClientTls {
            ca_pem: read("--ca", ca)?,
            cert_pem: read("--tls-cert", cert)?,
            key_pem: read("--tls-key", key)?,
            server_name: args.server_name.clone(),
        }),
        _ => None,
    };
    let params: Params = provider_sdk::config::load(args.params.as_deref()).map_err(|e| e.to_string())?;
    let client = ProviderClient::connect_lazy(&endpoint, tls, CallTimeouts::default()).map_err(|e| e.to_string())?;
    let report = crate::run(client.channel(), params).await?;
    report.write(out).map_err(|e| format!("writing the report: {e}"))?;
    Ok(report.failed() == 0)
}
