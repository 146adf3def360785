//! One EC2 client per configured region, sharing one HTTP connection pool (rustls with ring, the system's
//! roots) and one credentials provider. Building them dials nothing: the first call does (contract §4.14).

use std::collections::BTreeMap;

use aws_config::{
    BehaviorVersion, Region, provider_config::ProviderConfig, retry::RetryConfig, timeout::TimeoutConfig,
};
use aws_sdk_ec2::{Client, config::SharedHttpClient};
use aws_smithy_http_client::{
    Builder,
    tls::{Provider, rustls_provider::CryptoMode},
};

use crate::{
    config::{AwsConfig, Budgets},
    credentials::RotatingCredentials,
};

/// The shared HTTP client: one pool for every region and for STS.
pub fn http_client() -> SharedHttpClient {
    Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

pub fn timeouts(budgets: &Budgets) -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(budgets.connect())
        .read_timeout(budgets.attempt())
        .operation_attempt_timeout(budgets.attempt())
        .operation_timeout(budgets.call())
        .build()
}

/// The SDK's standard retry mode (throttling, 5xx and network errors, with jittered backoff).
pub fn retries(budgets: &Budgets) -> RetryConfig {
    RetryConfig::standard().with_max_attempts(budgets.max_attempts)
}

/// Builds the credentials provider and one client per region.
pub fn build(config: &AwsConfig) -> (RotatingCredentials, BTreeMap<String, Client>) {
    let http = http_client();
    let first_region = config.regions.keys().next().cloned();
    // without_region() brings the Tokio sleep the STS client's retries and timeouts need.
    let base = ProviderConfig::without_region()
        .with_http_client(http.clone())
        .with_region(first_region.map(Region::new))
        .with_timeout_config(timeouts(&config.budgets))
        .with_retry_config(retries(&config.budgets))
        .with_behavior_version(Some(BehaviorVersion::latest()));
    let credentials = RotatingCredentials::new(&config.credentials, base);
    let clients = config
        .regions
        .keys()
        .map(|region| {
            let mut builder = aws_sdk_ec2::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .region(Region::new(region.clone()))
                .http_client(http.clone())
                .credentials_provider(credentials.clone())
                .timeout_config(timeouts(&config.budgets))
                .retry_config(retries(&config.budgets));
            if let Some(url) = &config.endpoint_url {
                builder = builder.endpoint_url(url);
            }
            (region.clone(), Client::from_conf(builder.build()))
        })
        .collect();
    (credentials, clients)
}
