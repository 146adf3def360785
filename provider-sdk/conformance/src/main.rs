//! `provider-conformance --endpoint unix:///PATH|https://HOST:PORT [--params FILE]`.

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let args = provider_conformance::cli::Args::parse();
    provider_conformance::cli::run(args, &mut std::io::stdout()).await
}
