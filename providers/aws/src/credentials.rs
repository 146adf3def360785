//! Where the EC2 clients' credentials come from, re-read so that a rotated credential is used without a
//! restart (contract §7.2).
//!
//! aws-config's providers read their files once per provider value, and the SDK's identity cache keeps
//! what they return until it expires; static keys never expire. So [`RotatingCredentials`] builds a fresh
//! file-based provider on every load (the files are read again) and caps the expiry of what it returns at
//! `refreshSeconds`, which makes the SDK's cache ask again that often (credentials of an assumed role keep
//! their own expiry when it is earlier). A web identity exchange reads its token file each time and keeps
//! the expiry STS gives (an hour), since the token is only read then. Without configured files the
//! standard chain (environment, the default shared files, web identity from the environment, ECS and the
//! instance profile) is used as it is: it refreshes what expires on its own.

use std::{
    path::PathBuf,
    sync::Arc,
    time::{Duration, SystemTime},
};

use aws_config::{
    default_provider::credentials::DefaultCredentialsChain,
    profile::ProfileFileCredentialsProvider,
    provider_config::ProviderConfig,
    web_identity_token::{StaticConfiguration, WebIdentityTokenCredentialsProvider},
};
use aws_credential_types::{
    Credentials,
    provider::{self, ProvideCredentials, error::CredentialsError, future},
};
use aws_runtime::env_config::file::{EnvConfigFileKind, EnvConfigFiles};
use tokio::sync::OnceCell;

use crate::config::CredentialsConfig;

/// The session name the provider's web identity exchanges carry (visible in CloudTrail).
const SESSION_NAME: &str = "egress-provider-aws";

#[derive(Clone, Debug)]
enum Source {
    Files {
        credentials: Option<PathBuf>,
        config: Option<PathBuf>,
        profile: String,
    },
    WebIdentity {
        token_file: PathBuf,
        role_arn: String,
    },
    Standard,
}

/// The credentials provider every regional client shares. Constructing it reads nothing.
#[derive(Clone, Debug)]
pub struct RotatingCredentials {
    source: Source,
    refresh: Duration,
    base: ProviderConfig,
    standard: Arc<OnceCell<DefaultCredentialsChain>>,
}

impl RotatingCredentials {
    /// `base` carries the HTTP client, region and budgets the exchanges with STS use.
    pub fn new(config: &CredentialsConfig, base: ProviderConfig) -> Self {
        let source = match (&config.web_identity_token_file, &config.role_arn) {
            (Some(token_file), Some(role_arn)) => Source::WebIdentity {
                token_file: token_file.clone(),
                role_arn: role_arn.clone(),
            },
            _ if config.shared_credentials_file.is_some() || config.config_file.is_some() => Source::Files {
                credentials: config.shared_credentials_file.clone(),
                config: config.config_file.clone(),
                profile: config.profile.clone().unwrap_or_else(|| "default".to_owned()),
            },
            _ => Source::Standard,
        };
        Self {
            source,
            refresh: Duration::from_secs(config.refresh_seconds),
            base,
            standard: Arc::default(),
        }
    }

    /// What the source is, for log lines and Check details; never a credential.
    pub fn describe(&self) -> String {
        match &self.source {
            Source::Files {
                credentials,
                config,
                profile,
            } => {
                let files: Vec<String> = credentials
                    .iter()
                    .chain(config)
                    .map(|p| p.display().to_string())
                    .collect();
                format!("profile {profile} of {}", files.join(" and "))
            }
            Source::WebIdentity { token_file, role_arn } => {
                format!("web identity token {} for {role_arn}", token_file.display())
            }
            Source::Standard => "the standard chain (environment, default files, instance profile)".to_owned(),
        }
    }

    async fn load(&self) -> provider::Result {
        let loaded = match &self.source {
            Source::Files {
                credentials,
                config,
                profile,
            } => {
                // Only the named files: the default ~/.aws files of the container are not consulted.
                let mut files = EnvConfigFiles::builder()
                    .include_default_credentials_file(false)
                    .include_default_config_file(false);
                if let Some(path) = credentials {
                    files = files.with_file(EnvConfigFileKind::Credentials, path);
                }
                if let Some(path) = config {
                    files = files.with_file(EnvConfigFileKind::Config, path);
                }
                let fresh = ProfileFileCredentialsProvider::builder()
                    .configure(&self.base)
                    .profile_files(files.build())
                    .profile_name(profile)
                    .build();
                fresh.provide_credentials().await?
            }
            Source::WebIdentity { token_file, role_arn } => {
                let fresh = WebIdentityTokenCredentialsProvider::builder()
                    .configure(&self.base)
                    .static_configuration(StaticConfiguration {
                        web_identity_token_file: token_file.clone(),
                        role_arn: role_arn.clone(),
                        session_name: SESSION_NAME.to_owned(),
                    })
                    .build();
                // The token file is read at each exchange; the credentials' own expiry (an hour) decides
                // when the next one happens, so a rotated token is used from then on.
                return fresh.provide_credentials().await;
            }
            Source::Standard => {
                let chain = self
                    .standard
                    .get_or_init(|| DefaultCredentialsChain::builder().configure(self.base.clone()).build())
                    .await;
                return chain.provide_credentials().await;
            }
        };
        Ok(capped(loaded, SystemTime::now() + self.refresh))
    }
}

/// `credentials` expiring no later than `latest`.
fn capped(mut credentials: Credentials, latest: SystemTime) -> Credentials {
    let expiry = credentials.expiry_mut();
    *expiry = Some(expiry.map_or(latest, |own| own.min(latest)));
    credentials
}

impl ProvideCredentials for RotatingCredentials {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(self.load())
    }
}

/// True when `error`, or any error it wraps, is a failure to load credentials.
pub fn is_credentials_error(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(error) = current {
        if error.downcast_ref::<CredentialsError>().is_some() {
            return true;
        }
        current = error.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use secrecy::{ExposeSecret, SecretString};

    use super::*;

    fn base() -> ProviderConfig {
        ProviderConfig::without_region().with_http_client(crate::clients::http_client())
    }

    fn files_config(path: PathBuf) -> CredentialsConfig {
        CredentialsConfig {
            shared_credentials_file: Some(path),
            config_file: None,
            profile: None,
            web_identity_token_file: None,
            role_arn: None,
            refresh_seconds: 60,
        }
    }

    fn write_keys(path: &std::path::Path, secret: &str) {
        std::fs::write(
            path,
            format!("[default]\naws_access_key_id = AKIDEXAMPLE\naws_secret_access_key = {secret}\n"),
        )
        .unwrap();
    }

    #[tokio::test]
    async fn a_rotated_credentials_file_is_read_on_the_next_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("credentials");
        write_keys(&path, "first-secret");
        let provider = RotatingCredentials::new(&files_config(path.clone()), base());
        let first = provider.provide_credentials().await.unwrap();
        assert_eq!(
            SecretString::from(first.secret_access_key()).expose_secret(),
            "first-secret"
        );
        write_keys(&path, "second-secret");
        let second = provider.provide_credentials().await.unwrap();
        assert_eq!(second.secret_access_key(), "second-secret");
    }

    #[tokio::test]
    async fn file_credentials_expire_within_the_refresh_interval_so_the_sdk_cache_asks_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("credentials");
        write_keys(&path, "s");
        let provider = RotatingCredentials::new(&files_config(path), base());
        let expiry = provider.provide_credentials().await.unwrap().expiry().unwrap();
        let left = expiry.duration_since(SystemTime::now()).unwrap();
        assert!(
            left <= Duration::from_secs(60) && left > Duration::from_secs(50),
            "{left:?}"
        );
        let own = SystemTime::now() + Duration::from_secs(5);
        let keep = capped(
            Credentials::new("a", "b", None, Some(own), "t"),
            SystemTime::now() + Duration::from_secs(60),
        );
        assert_eq!(keep.expiry(), Some(own), "an earlier expiry of its own is kept");
    }

    #[tokio::test]
    async fn a_missing_file_is_a_credentials_error_naming_the_source_never_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let provider = RotatingCredentials::new(&files_config(dir.path().join("absent")), base());
        let error = provider.provide_credentials().await.unwrap_err();
        assert!(is_credentials_error(&error));
        assert!(provider.describe().contains("absent"), "{}", provider.describe());
    }
}
