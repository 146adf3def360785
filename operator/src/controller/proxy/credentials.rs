//! The proxy credentials: from the Secret `spec.auth` names, or generated once and kept in the Secret the
//! operator manages for consumers. The password stays in `SecretString` until it is written to a Secret or
//! a Create request.

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, ResourceExt};
use rand::{Rng, distr::Alphanumeric};
use secrecy::{ExposeSecret, SecretString};

use super::error::Error;
use crate::crd::Proxy;

const GENERATED_PASSWORD_LEN: usize = 32;
pub const GENERATED_USERNAME: &str = "egress";

/// Credentials and the version that enters the spec hash.
#[derive(Debug)]
pub struct Credentials {
    pub username: String,
    pub password: SecretString,
    /// The user's Secret resource version, or `generated`.
    pub version: String,
    /// Generated in this reconcile: not stored anywhere yet.
    pub newly_generated: bool,
}

/// The name of the Secret the operator writes for consumers.
pub fn consumer_secret_name(proxy: &Proxy) -> String {
    format!("{}-proxy", proxy.name_any())
}

fn key(secret: &Secret, key: &str) -> Option<String> {
    let data = secret.data.as_ref()?.get(key)?;
    String::from_utf8(data.0.clone()).ok()
}

pub async fn resolve(proxy: &Proxy, secrets: &Api<Secret>) -> Result<Credentials, Error> {
    if let Some(auth) = &proxy.spec.auth {
        let field = "spec.auth.secretName";
        let secret = secrets.get_opt(&auth.secret_name).await?.ok_or_else(|| {
            Error::spec(
                field,
                "AuthSecretNotFound",
                format!("Secret {:?} does not exist", auth.secret_name),
            )
        })?;
        let missing = |k: &str| {
            Error::spec(
                field,
                "AuthSecretInvalid",
                format!("Secret {:?} has no {k:?} key", auth.secret_name),
            )
        };
        let username = key(&secret, "username")
            .filter(|u| !u.is_empty())
            .ok_or_else(|| missing("username"))?;
        let password = key(&secret, "password")
            .filter(|p| !p.is_empty())
            .ok_or_else(|| missing("password"))?;
        return Ok(Credentials {
            username,
            password: SecretString::from(password),
            version: secret.resource_version().unwrap_or_default(),
            newly_generated: false,
        });
    }
    // Generated: reuse what the consumer Secret already holds, so the password survives restarts.
    let existing = secrets.get_opt(&consumer_secret_name(proxy)).await?;
    let kept = existing
        .as_ref()
        .and_then(|s| Some((key(s, "username")?, key(s, "password")?)));
    let (username, password, newly_generated) = match kept {
        Some((username, password)) if !password.is_empty() => (username, password, false),
        _ => (GENERATED_USERNAME.to_owned(), generate_password(), true),
    };
    Ok(Credentials {
        username,
        password: SecretString::from(password),
        version: "generated".to_owned(),
        newly_generated,
    })
}

fn generate_password() -> String {
    rand::rng()
        .sample_iter(&Alphanumeric)
        .take(GENERATED_PASSWORD_LEN)
        .map(char::from)
        .collect()
}

/// `scheme://user:password@host:port` with the userinfo percent-encoded.
pub fn proxy_url(scheme: &str, credentials: &Credentials, host: &str, port: i32) -> SecretString {
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    let user = utf8_percent_encode(&credentials.username, NON_ALPHANUMERIC);
    let password = utf8_percent_encode(credentials.password.expose_secret(), NON_ALPHANUMERIC);
    SecretString::from(format!("{scheme}://{user}:{password}@{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_passwords_are_long_and_differ() {
        let (a, b) = (generate_password(), generate_password());
        assert_eq!(a.len(), GENERATED_PASSWORD_LEN);
        assert_ne!(a, b);
    }

    #[test]
    fn the_url_encodes_special_characters_in_the_userinfo() {
        let credentials = Credentials {
            username: "team a".into(),
            password: SecretString::from("p@ss:w/rd"),
            version: "1".into(),
            newly_generated: false,
        };
        let url = proxy_url("http", &credentials, "px.ns.svc", 3128);
        assert_eq!(url.expose_secret(), "http://team%20a:p%40ss%3Aw%2Frd@px.ns.svc:3128");
    }
}
