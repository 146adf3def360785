//! The host provider: instances are tinyproxy processes on this machine, each listening on and sending
//! from one address of a configured pool. The daemon supervises them (restart with backoff, crash-loop
//! detection) and keeps one record per instance on disk, so that a restarted daemon re-adopts the proxies
//! that kept running and restarts the others. See docs/host-provider-spec.md and docs/host-provider.md.

pub mod check;
pub mod config;
mod create;
mod delete;
pub mod error;
pub mod pool;
pub mod process;
pub mod provider;
mod read;
pub mod record;
mod startup;
pub mod supervisor;
pub mod tinyproxy;

pub use config::HostConfig;
pub use provider::{HostProvider, PROVIDER_TYPE};
pub use startup::StartError;
