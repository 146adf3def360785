//! The SDK every egress-proxies provider daemon is built on.
//!
//! A provider implements [`Provider`] over the domain types in [`model`]; [`daemon::main`] gives it the
//! shared flags, strict config loading, telemetry, and a gRPC server ([`server`]) with health, reflection,
//! trace-context propagation, per-call logging and graceful shutdown. The operator talks to providers
//! through [`client::ProviderClient`]. Errors are [`ProviderError`]s, classified once at the gRPC boundary
//! ([`status`]). The `testing` feature adds an in-memory fake backend with fault injection.

pub mod check;
pub mod client;
pub mod cloud_init;
pub mod config;
mod convert;
pub mod credentials;
pub mod daemon;
pub mod detached;
pub mod error;
pub mod locks;
pub mod model;
mod profiles;
pub mod propagation;
pub mod provider;
pub mod redaction;
pub mod server;
pub mod status;
pub mod telemetry;
mod validate;

#[cfg(feature = "testing")]
pub mod testing;

pub use convert::provider_id_from_wire;
pub use error::{ErrorClass, ProviderError};
pub use provider::{InstanceStream, Provider};

/// The generated contract types. Provider and operator code uses [`model`]; this module is for the
/// conformance suite and for clients that must see the raw wire.
pub mod proto {
    #![allow(missing_docs, clippy::all, missing_debug_implementations)]
    tonic::include_proto!("egressproxies.provider.v1");

    /// The encoded descriptor set of the contract, served by gRPC reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/provider_descriptor.bin"));

    /// The health-check service name of `ProviderService`.
    pub const SERVICE_NAME: &str = "egressproxies.provider.v1.ProviderService";
}

/// The contract minor version this SDK implements within v1.
pub const CONTRACT_MINOR_VERSION: u32 = 0;
