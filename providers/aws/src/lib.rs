//! The AWS provider: instances are EC2 instances, launched from a catalogue of AMIs in the configured
//! regions, with the request's cloud-init as user data, marked with EC2 tags, and reached through a
//! security group of their own (or a shared one). See docs/aws-provider-spec.md and docs/aws-provider.md.

pub mod check;
pub mod clients;
pub mod config;
pub mod create;
pub mod credentials;
mod delete;
pub mod error;
pub mod instances;
pub mod placement;
pub mod provider;
mod read;
pub mod security_group;
pub mod tags;

pub use config::AwsConfig;
pub use instances::PROVIDER_TYPE;
pub use provider::AwsProvider;
