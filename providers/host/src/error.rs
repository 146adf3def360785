//! The host provider's errors and their one classification into the contract's classes (contract §3.4).
//! No variant carries the proxy password: a refused password is named by field, never shown.

use std::{io, path::PathBuf, time::Duration};

use provider_sdk::{
    ProviderError,
    check::REASON_QUOTA_EXHAUSTED,
    error::{FieldViolation, PermanentKind, TransientKind, reason},
};

/// Reasons of this provider beyond the SDK's (listed in docs/host-provider-spec.md, entry 13).
pub mod host_reason {
    /// Another Create or Delete of the same name held its lock for the whole lock budget.
    pub const INSTANCE_BUSY: &str = "INSTANCE_BUSY";
    /// The port cannot be bound by the daemon's user (a privileged port without CAP_NET_BIND_SERVICE).
    pub const PORT_NEEDS_PRIVILEGE: &str = "PORT_NEEDS_PRIVILEGE";
}

/// How long a caller should wait before retrying a name that was busy.
const BUSY_RETRY: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{what} {path}", path = path.display())]
    Storage {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("instance {name} is busy with another Create or Delete")]
    Busy { name: String },
    #[error("instance {name} is being deleted")]
    Deleting { name: String },
    #[error("instance {name} exists with another spec")]
    NameInUse { name: String },
    #[error(
        "no address of the pool can take port {port}: {total} addresses, {in_use} used by instances, \
         {port_taken} with port {port} taken by another process, {unconfigured} not configured on this host"
    )]
    PoolExhausted {
        port: u16,
        total: usize,
        in_use: usize,
        port_taken: usize,
        unconfigured: usize,
    },
    #[error("port {port} cannot be bound by the daemon's user (a port below 1024 needs CAP_NET_BIND_SERVICE)")]
    PortNeedsPrivilege { port: u16 },
    #[error("invalid request: {}", .0.iter().map(|f| format!("{}: {}", f.field(), f.description())).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<InvalidField>),
    #[error("{id:?}: {problem}")]
    MalformedId { id: String, problem: String },
    #[error("instance {id} does not exist")]
    NotFound { id: String },
    #[error("the caller gave up before instance {name} was begun; nothing was made")]
    Abandoned { name: String },
}

/// A request field this provider cannot honour, although the SDK's validation accepted it.
#[derive(Debug)]
pub enum InvalidField {
    /// tinyproxy speaks HTTP only.
    Socks5,
    /// A username tinyproxy's `BasicAuth` line cannot carry.
    Username(String),
    /// A password tinyproxy's `BasicAuth` line cannot carry; never shown.
    Password,
}

const BASIC_AUTH_CHARACTERS: &str =
    "tinyproxy's BasicAuth accepts only letters, digits, '.', '_' and '-' (tinyproxy 1.11)";

impl InvalidField {
    pub fn field(&self) -> &'static str {
        match self {
            InvalidField::Socks5 => "proxy.protocol",
            InvalidField::Username(_) => "proxy.auth.username",
            InvalidField::Password => "proxy.auth.password",
        }
    }

    pub fn description(&self) -> String {
        match self {
            InvalidField::Socks5 => {
                "socks5 is not offered: this provider runs tinyproxy, an HTTP proxy; use http".to_owned()
            }
            InvalidField::Username(value) => format!("{value:?}: {BASIC_AUTH_CHARACTERS}"),
            InvalidField::Password => format!("the password has other characters: {BASIC_AUTH_CHARACTERS}"),
        }
    }
}

impl HostError {
    pub fn storage(what: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| HostError::Storage { what, path, source }
    }
}

/// The one place a [`HostError`] becomes a contract error.
pub fn classify(error: HostError) -> ProviderError {
    let message = error.to_string();
    match error {
        HostError::Storage { source, .. } => {
            ProviderError::transient(reason::BACKEND_UNAVAILABLE, message).with_source(source)
        }
        HostError::Busy { .. } => {
            ProviderError::transient_kind(TransientKind::Aborted, host_reason::INSTANCE_BUSY, message)
                .with_retry_after(BUSY_RETRY)
        }
        HostError::Deleting { .. } => {
            ProviderError::transient_kind(TransientKind::Aborted, reason::INSTANCE_DELETING, message)
                .with_retry_after(BUSY_RETRY)
        }
        HostError::NameInUse { .. } => {
            ProviderError::permanent(PermanentKind::AlreadyExists, reason::NAME_IN_USE, message)
        }
        HostError::PoolExhausted { .. } => ProviderError::quota(REASON_QUOTA_EXHAUSTED, "pool", message),
        HostError::PortNeedsPrivilege { .. } => {
            let mut error = ProviderError::invalid_field("proxy.port", message);
            if let ProviderError::Permanent { reason: r, .. } = &mut error {
                *r = host_reason::PORT_NEEDS_PRIVILEGE.to_owned();
            }
            error
        }
        HostError::Invalid(fields) => ProviderError::invalid_fields(
            fields
                .iter()
                .map(|f| FieldViolation {
                    field: f.field().to_owned(),
                    description: f.description(),
                })
                .collect(),
        ),
        HostError::MalformedId { .. } => ProviderError::malformed_provider_id(message),
        HostError::NotFound { .. } => ProviderError::not_found(message),
        HostError::Abandoned { .. } => {
            ProviderError::transient_kind(TransientKind::Cancelled, reason::CANCELLED, message)
        }
    }
}

#[cfg(test)]
mod tests {
    use provider_sdk::ErrorClass;

    use super::*;

    fn classified(error: HostError) -> (ErrorClass, String, String, Vec<String>) {
        let error = classify(error);
        let fields = error.field_violations().iter().map(|v| v.field.clone()).collect();
        (
            error.class(),
            error.reason().to_owned(),
            error.message_with_causes(),
            fields,
        )
    }

    #[test]
    fn each_error_maps_to_its_class_and_reason() {
        let storage = HostError::storage("writing", "/s/a/record.json")(io::Error::other("disk full"));
        let cases = [
            (storage, ErrorClass::Transient, "BACKEND_UNAVAILABLE"),
            (
                HostError::Busy { name: "a".into() },
                ErrorClass::Transient,
                "INSTANCE_BUSY",
            ),
            (
                HostError::Deleting { name: "a".into() },
                ErrorClass::Transient,
                "INSTANCE_DELETING",
            ),
            (
                HostError::NameInUse { name: "a".into() },
                ErrorClass::Permanent,
                "NAME_IN_USE",
            ),
            (
                HostError::PoolExhausted {
                    port: 3128,
                    total: 2,
                    in_use: 1,
                    port_taken: 1,
                    unconfigured: 0,
                },
                ErrorClass::Quota,
                "QUOTA_EXHAUSTED",
            ),
            (
                HostError::PortNeedsPrivilege { port: 80 },
                ErrorClass::Permanent,
                "PORT_NEEDS_PRIVILEGE",
            ),
            (
                HostError::Invalid(vec![InvalidField::Socks5]),
                ErrorClass::Permanent,
                "INVALID_ARGUMENT",
            ),
            (
                HostError::MalformedId {
                    id: "host://A".into(),
                    problem: "bad".into(),
                },
                ErrorClass::Permanent,
                "MALFORMED_PROVIDER_ID",
            ),
            (
                HostError::NotFound { id: "host://a".into() },
                ErrorClass::NotFound,
                "INSTANCE_NOT_FOUND",
            ),
        ];
        for (error, class, reason) in cases {
            let shown = error.to_string();
            let (got_class, got_reason, ..) = classified(error);
            assert_eq!((got_class, got_reason.as_str()), (class, reason), "{shown}");
        }
    }

    #[test]
    fn storage_errors_keep_their_cause_and_path() {
        let error = HostError::storage("writing", "/s/a/record.json")(io::Error::other("disk full"));
        let (.., message, _) = classified(error);
        assert_eq!(message, "writing /s/a/record.json: disk full");
    }

    #[test]
    fn refused_fields_are_named_together_and_the_password_is_never_shown() {
        let invalid = HostError::Invalid(vec![
            InvalidField::Socks5,
            InvalidField::Username("a b".into()),
            InvalidField::Password,
        ]);
        let (.., message, fields) = classified(invalid);
        assert_eq!(fields, ["proxy.protocol", "proxy.auth.username", "proxy.auth.password"]);
        assert!(message.contains("proxy.auth.username: \"a b\""), "{message}");
        assert!(message.contains("socks5 is not offered"), "{message}");
        assert_eq!(
            message.matches('"').count(),
            2,
            "only the username is quoted: {message}"
        );
        let (.., fields) = classified(HostError::PortNeedsPrivilege { port: 80 });
        assert_eq!(fields, ["proxy.port"]);
    }
}
