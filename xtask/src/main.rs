//! Project tasks, run as `cargo xtask <task>` (an alias in `.cargo/config.toml`) or through the scripts
//! that wrap them (`scripts/demo.sh`).

mod demo;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "xtask", about = "egress-proxies-operator project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand, Debug)]
enum Task {
    /// The local demo: a control plane, the operator, the host provider on loopback addresses, a Proxy
    /// applied with kubectl, and an HTTP request through it. Stays up until Ctrl-C.
    Demo(demo::Options),
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Demo(options) => demo::run(options).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("\nerror: {error:#}");
            ExitCode::FAILURE
        }
    }
}
