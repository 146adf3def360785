//! `egress-provider-aws`: the AWS EC2 provider daemon. It parses the shared flags and the config, and
//! serves [`AwsProvider`] until SIGTERM.

use std::process::ExitCode;

use egress_provider_aws::{AwsConfig, AwsProvider};

fn main() -> ExitCode {
    provider_sdk::daemon::main("egress-provider-aws", |config: AwsConfig| Ok(AwsProvider::new(config)))
}
