//! The controllers. `proxy` reconciles Proxies into provider instances; `health` keeps one ProviderHealth
//! object per configured provider.

pub mod health;
pub mod proxy;
