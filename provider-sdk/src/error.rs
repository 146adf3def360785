//! `ProviderError`: the four error classes of the contract (§3). Providers build these from their backend's
//! errors; `status` turns them into a gRPC status at the boundary and back on the client side.

use std::{fmt, time::Duration};

/// A boxed source error, kept so that logs can show the whole chain.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The class decides what the caller does next: give up on this instance, retry soon, stop until the spec
/// changes, or back off for a long time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    NotFound,
    Transient,
    Permanent,
    Quota,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::NotFound => "not-found",
            ErrorClass::Transient => "transient",
            ErrorClass::Permanent => "permanent",
            ErrorClass::Quota => "quota",
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The gRPC codes a transient error may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransientKind {
    Unavailable,
    DeadlineExceeded,
    Aborted,
    Cancelled,
}

/// The gRPC codes a permanent error may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PermanentKind {
    InvalidArgument,
    FailedPrecondition,
    PermissionDenied,
    Unauthenticated,
    AlreadyExists,
}

/// One invalid request field, named by its proto path (`proxy.port`, `placement.region`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldViolation {
    pub field: String,
    pub description: String,
}

/// One exhausted quota: what ran out and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaViolation {
    pub subject: String,
    pub description: String,
}

/// Every error a provider answers, by class. Messages never carry sensitive values (contract §8).
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("{message}")]
    NotFound { reason: String, message: String },
    #[error("{message}")]
    Transient {
        kind: TransientKind,
        reason: String,
        message: String,
        retry_after: Option<Duration>,
        #[source]
        source: Option<BoxError>,
    },
    #[error("{message}")]
    Permanent {
        kind: PermanentKind,
        reason: String,
        message: String,
        violations: Vec<FieldViolation>,
        #[source]
        source: Option<BoxError>,
    },
    #[error("{message}")]
    Quota {
        reason: String,
        message: String,
        retry_after: Option<Duration>,
        violations: Vec<QuotaViolation>,
        #[source]
        source: Option<BoxError>,
    },
}

/// Reasons the SDK itself uses in ErrorInfo; providers add their own in the same UPPER_SNAKE_CASE style.
pub mod reason {
    pub const INSTANCE_NOT_FOUND: &str = "INSTANCE_NOT_FOUND";
    pub const INVALID_ARGUMENT: &str = "INVALID_ARGUMENT";
    pub const MALFORMED_PROVIDER_ID: &str = "MALFORMED_PROVIDER_ID";
    pub const NAME_IN_USE: &str = "NAME_IN_USE";
    /// Create found the named instance being deleted: retry once it is gone (ABORTED).
    pub const INSTANCE_DELETING: &str = "INSTANCE_DELETING";
    pub const BACKEND_UNAVAILABLE: &str = "BACKEND_UNAVAILABLE";
    pub const DEADLINE_EXCEEDED: &str = "DEADLINE_EXCEEDED";
    pub const CANCELLED: &str = "CANCELLED";
    pub const PROVIDER_PANICKED: &str = "PROVIDER_PANICKED";
    pub const UNCLASSIFIED: &str = "UNCLASSIFIED";
}

impl ProviderError {
    pub fn not_found(message: impl Into<String>) -> Self {
        ProviderError::NotFound {
            reason: reason::INSTANCE_NOT_FOUND.to_owned(),
            message: message.into(),
        }
    }

    /// A transient error (UNAVAILABLE): the caller retries with backoff.
    pub fn transient(reason: &str, message: impl Into<String>) -> Self {
        Self::transient_kind(TransientKind::Unavailable, reason, message)
    }

    pub fn transient_kind(kind: TransientKind, reason: &str, message: impl Into<String>) -> Self {
        ProviderError::Transient {
            kind,
            reason: reason.to_owned(),
            message: message.into(),
            retry_after: None,
            source: None,
        }
    }

    /// A permanent error: the caller stops until the spec changes.
    pub fn permanent(kind: PermanentKind, reason: &str, message: impl Into<String>) -> Self {
        ProviderError::Permanent {
            kind,
            reason: reason.to_owned(),
            message: message.into(),
            violations: Vec::new(),
            source: None,
        }
    }

    /// INVALID_ARGUMENT naming one field; `description` says what is wrong and, for non-sensitive fields,
    /// the value.
    pub fn invalid_field(field: &str, description: impl Into<String>) -> Self {
        Self::invalid_fields(vec![FieldViolation {
            field: field.to_owned(),
            description: description.into(),
        }])
    }

    /// INVALID_ARGUMENT naming every invalid field at once.
    pub fn invalid_fields(violations: Vec<FieldViolation>) -> Self {
        let message = violations
            .iter()
            .map(|v| format!("{}: {}", v.field, v.description))
            .collect::<Vec<_>>()
            .join("; ");
        ProviderError::Permanent {
            kind: PermanentKind::InvalidArgument,
            reason: reason::INVALID_ARGUMENT.to_owned(),
            message: format!("invalid request: {message}"),
            violations,
            source: None,
        }
    }

    /// A malformed provider ID (contract §6): permanent, names the field.
    pub fn malformed_provider_id(description: impl Into<String>) -> Self {
        let mut error = Self::invalid_field("provider_id", description);
        if let ProviderError::Permanent { reason: r, .. } = &mut error {
            *r = reason::MALFORMED_PROVIDER_ID.to_owned();
        }
        error
    }

    /// A quota the backend reports as exhausted: long backoff, a QuotaExceeded condition.
    pub fn quota(reason: &str, subject: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        ProviderError::Quota {
            reason: reason.to_owned(),
            violations: vec![QuotaViolation {
                subject: subject.to_owned(),
                description: message.clone(),
            }],
            message,
            retry_after: None,
            source: None,
        }
    }

    /// Keeps `source` as the cause, shown in logs and in the status message.
    pub fn with_source(mut self, error: impl Into<BoxError>) -> Self {
        match &mut self {
            ProviderError::NotFound { .. } => {}
            ProviderError::Transient { source, .. }
            | ProviderError::Permanent { source, .. }
            | ProviderError::Quota { source, .. } => *source = Some(error.into()),
        }
        self
    }

    /// Sets the delay the backend asked for; meaningful for transient and quota errors only.
    pub fn with_retry_after(mut self, delay: Duration) -> Self {
        match &mut self {
            ProviderError::NotFound { .. } | ProviderError::Permanent { .. } => {}
            ProviderError::Transient { retry_after, .. } | ProviderError::Quota { retry_after, .. } => {
                *retry_after = Some(delay)
            }
        }
        self
    }

    pub fn class(&self) -> ErrorClass {
        match self {
            ProviderError::NotFound { .. } => ErrorClass::NotFound,
            ProviderError::Transient { .. } => ErrorClass::Transient,
            ProviderError::Permanent { .. } => ErrorClass::Permanent,
            ProviderError::Quota { .. } => ErrorClass::Quota,
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            ProviderError::NotFound { reason, .. }
            | ProviderError::Transient { reason, .. }
            | ProviderError::Permanent { reason, .. }
            | ProviderError::Quota { reason, .. } => reason,
        }
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::NotFound { .. } | ProviderError::Permanent { .. } => None,
            ProviderError::Transient { retry_after, .. } | ProviderError::Quota { retry_after, .. } => *retry_after,
        }
    }

    pub fn field_violations(&self) -> &[FieldViolation] {
        match self {
            ProviderError::Permanent { violations, .. } => violations,
            ProviderError::NotFound { .. } | ProviderError::Transient { .. } | ProviderError::Quota { .. } => &[],
        }
    }

    /// The message followed by its chain of causes, as written into the gRPC status.
    pub fn message_with_causes(&self) -> String {
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(error) = cause {
            text.push_str(": ");
            text.push_str(&error.to_string());
            cause = error.source();
        }
        text
    }
}
