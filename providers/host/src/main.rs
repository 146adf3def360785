//! `egress-provider-host`: the host provider daemon. It parses the shared flags and the config, and
//! serves [`HostProvider`] until SIGTERM; the proxies it supervises keep running across its restarts.

use std::process::ExitCode;

use egress_provider_host::{HostConfig, HostProvider};

fn main() -> ExitCode {
    provider_sdk::daemon::main("egress-provider-host", |config: HostConfig| {
        let settings = config.settings()?;
        Ok(HostProvider::start(settings)?)
    })
}
