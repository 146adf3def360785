//! The `Provider` trait: what a backend implements, over the domain types. The SDK's server validates
//! requests before calling it and classifies its errors after, so an implementation only speaks to its
//! backend.

use std::future::Future;

use futures::stream::BoxStream;

use crate::{
    error::ProviderError,
    model::{CheckResult, CreateRequest, Instance, ListFilter, ProviderId, ProviderInfo},
};

/// The instances ListByTag yields; the server streams them to the caller in pages as they arrive.
pub type InstanceStream = BoxStream<'static, Result<Instance, ProviderError>>;

/// One backend type. Futures are dropped when the caller's deadline passes, so every await point must be
/// safe to abandon (contract §1.5).
pub trait Provider: Send + Sync + 'static {
    /// Type, version, declared profiles and limits. Called once at start-up; never touches the backend.
    fn info(&self) -> ProviderInfo;

    /// Idempotent by `request.name` (contract §2.3): the same name and spec returns the existing instance;
    /// the same name with another `spec_fingerprint()` is a permanent ALREADY_EXISTS error.
    fn create(&self, request: CreateRequest) -> impl Future<Output = Result<Instance, ProviderError>> + Send;

    /// `ProviderError::NotFound` when the instance does not exist; a malformed ID is a permanent error.
    fn get(&self, id: &ProviderId) -> impl Future<Output = Result<Instance, ProviderError>> + Send;

    /// Succeeds when the instance is gone, being deleted, or never existed.
    fn delete(&self, id: &ProviderId) -> impl Future<Output = Result<(), ProviderError>> + Send;

    /// Every instance matching `filter` across the provider's whole scope (contract §2.6).
    fn list_by_tag(&self, filter: ListFilter) -> impl Future<Output = Result<InstanceStream, ProviderError>> + Send;

    /// One result per independently failing target; the server sorts them by target.
    fn check(&self) -> impl Future<Output = Vec<CheckResult>> + Send;
}
