//! `egress-provider-fake`: the SDK's in-memory fake backend as a provider daemon, so the operator's
//! end-to-end tests and benchmarks can run a provider out of process.

mod config;

use std::process::ExitCode;

use provider_sdk::testing::FakeProvider;

fn main() -> ExitCode {
    provider_sdk::daemon::main("egress-provider-fake", |config: config::FakeConfig| {
        Ok(FakeProvider::new(config.options()))
    })
}
