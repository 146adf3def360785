//! The provider conformance suite: black-box checks over gRPC that any `ProviderService` implementation,
//! in any language, must pass. Modelled on csi-test's sanity package: it creates, inspects and deletes
//! real instances through the provider, skips what the provider's declared profiles make inapplicable, and
//! cleans up everything it made; a failed cleanup fails the run.

mod checks;
pub mod cli;
mod harness;
pub mod params;
pub mod report;

pub use params::Params;
pub use report::{Outcome, Report};
use tonic::transport::Channel;

/// Runs every check against the provider behind `channel`.
pub async fn run(channel: Channel, params: Params) -> Result<Report, String> {
    let harness = harness::Harness::new(channel, params).await?;
    Ok(checks::run_all(&harness).await)
}
