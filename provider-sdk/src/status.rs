//! The one place where errors cross the wire (contract §3): `ProviderError` → `tonic::Status` with
//! `google.rpc.ErrorInfo` (and RetryInfo, QuotaFailure, BadRequest) on the server, and back on the client.
//! Both directions are exhaustive matches, so a new class or code cannot slip through unclassified.

use std::collections::HashMap;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::error::{ErrorClass, FieldViolation, PermanentKind, ProviderError, QuotaViolation, TransientKind, reason};

/// The ErrorInfo domain of every error the contract defines.
pub const ERROR_DOMAIN: &str = "egressproxies.dev";

/// The ErrorInfo metadata key naming the provider type that answered.
pub const METADATA_PROVIDER: &str = "provider";

impl ProviderError {
    /// The status a provider daemon answers for this error.
    pub fn to_status(&self, provider_type: &str) -> Status {
        let message = self.message_with_causes();
        let metadata = HashMap::from([(METADATA_PROVIDER.to_owned(), provider_type.to_owned())]);
        let mut details = ErrorDetails::new();
        details.set_error_info(self.reason(), ERROR_DOMAIN, metadata);
        if let Some(delay) = self.retry_after() {
            details.set_retry_info(Some(delay));
        }
        let code = match self {
            ProviderError::NotFound { .. } => Code::NotFound,
            ProviderError::Transient { kind, .. } => match kind {
                TransientKind::Unavailable => Code::Unavailable,
                TransientKind::DeadlineExceeded => Code::DeadlineExceeded,
                TransientKind::Aborted => Code::Aborted,
                TransientKind::Cancelled => Code::Cancelled,
            },
            ProviderError::Permanent { kind, violations, .. } => {
                if !violations.is_empty() {
                    details.set_bad_request(
                        violations
                            .iter()
                            .map(|v| tonic_types::FieldViolation::new(&v.field, &v.description))
                            .collect::<Vec<_>>(),
                    );
                }
                match kind {
                    PermanentKind::InvalidArgument => Code::InvalidArgument,
                    PermanentKind::FailedPrecondition => Code::FailedPrecondition,
                    PermanentKind::PermissionDenied => Code::PermissionDenied,
                    PermanentKind::Unauthenticated => Code::Unauthenticated,
                    PermanentKind::AlreadyExists => Code::AlreadyExists,
                }
            }
            ProviderError::Quota { violations, .. } => {
                details.set_quota_failure(
                    violations
                        .iter()
                        .map(|v| tonic_types::QuotaViolation::new(&v.subject, &v.description))
                        .collect::<Vec<_>>(),
                );
                Code::ResourceExhausted
            }
        };
        Status::with_error_details(code, message, details)
    }

    /// Classifies a status received from a provider. `RESOURCE_EXHAUSTED` is quota only with our domain;
    /// without it the transport ran out of something, which is transient.
    pub fn from_status(status: &Status) -> Self {
        let details = status.get_error_details();
        let info = details.error_info().filter(|info| info.domain == ERROR_DOMAIN);
        let retry_after = details.retry_info().and_then(|retry| retry.retry_delay);
        let message = status.message().to_owned();
        let reason_or = |fallback: &str| info.map_or(fallback, |info| info.reason.as_str()).to_owned();
        let transient = |kind| ProviderError::Transient {
            kind,
            reason: reason_or(reason::UNCLASSIFIED),
            message: message.clone(),
            retry_after,
            source: None,
        };
        let permanent = |kind| ProviderError::Permanent {
            kind,
            reason: reason_or(reason::UNCLASSIFIED),
            message: message.clone(),
            violations: details
                .bad_request()
                .map(|bad| {
                    bad.field_violations
                        .iter()
                        .map(|v| FieldViolation {
                            field: v.field.clone(),
                            description: v.description.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            source: None,
        };
        match status.code() {
            Code::NotFound => ProviderError::NotFound {
                reason: reason_or(reason::INSTANCE_NOT_FOUND),
                message,
            },
            Code::Unavailable => transient(TransientKind::Unavailable),
            Code::DeadlineExceeded => transient(TransientKind::DeadlineExceeded),
            Code::Aborted => transient(TransientKind::Aborted),
            Code::Cancelled => transient(TransientKind::Cancelled),
            // A panicking handler, an unknown failure or an OK-coded error: worth another try after a pause.
            Code::Internal | Code::Unknown | Code::Ok => transient(TransientKind::Unavailable),
            Code::InvalidArgument | Code::OutOfRange => permanent(PermanentKind::InvalidArgument),
            Code::FailedPrecondition | Code::Unimplemented | Code::DataLoss => {
                permanent(PermanentKind::FailedPrecondition)
            }
            Code::PermissionDenied => permanent(PermanentKind::PermissionDenied),
            Code::Unauthenticated => permanent(PermanentKind::Unauthenticated),
            Code::AlreadyExists => permanent(PermanentKind::AlreadyExists),
            Code::ResourceExhausted if info.is_some() => ProviderError::Quota {
                reason: reason_or(reason::UNCLASSIFIED),
                message: message.clone(),
                retry_after,
                violations: details
                    .quota_failure()
                    .map(|quota| {
                        quota
                            .violations
                            .iter()
                            .map(|v| QuotaViolation {
                                subject: v.subject.clone(),
                                description: v.description.clone(),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                source: None,
            },
            Code::ResourceExhausted => transient(TransientKind::Unavailable),
        }
    }
}

impl From<Status> for ProviderError {
    fn from(status: Status) -> Self {
        ProviderError::from_status(&status)
    }
}

/// INTERNAL for a handler that panicked; the daemon answers and lives on.
pub(crate) fn panic_status(provider_type: &str) -> Status {
    let metadata = HashMap::from([(METADATA_PROVIDER.to_owned(), provider_type.to_owned())]);
    let details = ErrorDetails::with_error_info(reason::PROVIDER_PANICKED, ERROR_DOMAIN, metadata);
    Status::with_error_details(Code::Internal, "the provider's handler panicked", details)
}

/// The class a raw status falls in, for callers that only need the decision.
pub fn classify(status: &Status) -> ErrorClass {
    ProviderError::from_status(status).class()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn every_class_survives_the_wire_with_its_reason() {
        let cases = [
            ProviderError::not_found("gone"),
            ProviderError::transient("BACKEND_UNAVAILABLE", "down").with_retry_after(Duration::from_secs(3)),
            ProviderError::permanent(PermanentKind::PermissionDenied, "DENIED", "no"),
            ProviderError::quota("POOL_EXHAUSTED", "pool", "no free address"),
            ProviderError::invalid_field("proxy.port", "must be 1 to 65535, got 0"),
        ];
        for error in cases {
            let status = error.to_status("fake");
            let back = ProviderError::from_status(&status);
            let info = status
                .get_error_details()
                .error_info()
                .cloned()
                .expect("ErrorInfo present");
            assert_eq!(info.domain, ERROR_DOMAIN);
            assert_eq!(info.metadata.get(METADATA_PROVIDER).map(String::as_str), Some("fake"));
            assert_eq!(back.class(), error.class(), "{error:?}");
            assert_eq!(back.reason(), error.reason());
            assert_eq!(back.retry_after(), error.retry_after());
            assert_eq!(back.field_violations(), error.field_violations());
        }
    }

    #[test]
    fn resource_exhausted_without_our_domain_is_transient() {
        let status = Status::resource_exhausted("message larger than max");
        assert_eq!(classify(&status), ErrorClass::Transient);
        let quota = ProviderError::quota("POOL_EXHAUSTED", "pool", "full").to_status("host");
        assert_eq!(classify(&quota), ErrorClass::Quota);
    }

    #[test]
    fn codes_map_to_the_contract_classes() {
        let table = [
            (Code::NotFound, ErrorClass::NotFound),
            (Code::Unavailable, ErrorClass::Transient),
            (Code::DeadlineExceeded, ErrorClass::Transient),
            (Code::Aborted, ErrorClass::Transient),
            (Code::Cancelled, ErrorClass::Transient),
            (Code::Internal, ErrorClass::Transient),
            (Code::Unknown, ErrorClass::Transient),
            (Code::InvalidArgument, ErrorClass::Permanent),
            (Code::FailedPrecondition, ErrorClass::Permanent),
            (Code::PermissionDenied, ErrorClass::Permanent),
            (Code::Unauthenticated, ErrorClass::Permanent),
            (Code::AlreadyExists, ErrorClass::Permanent),
            (Code::Unimplemented, ErrorClass::Permanent),
            (Code::ResourceExhausted, ErrorClass::Transient),
        ];
        for (code, class) in table {
            assert_eq!(classify(&Status::new(code, "x")), class, "{code:?}");
        }
    }

    #[test]
    fn bad_request_names_each_field() {
        let error = ProviderError::invalid_fields(vec![
            FieldViolation {
                field: "proxy.port".into(),
                description: "must be 1 to 65535, got 0".into(),
            },
            FieldViolation {
                field: "name".into(),
                description: "must not be empty".into(),
            },
        ]);
        let status = error.to_status("fake");
        assert_eq!(status.code(), Code::InvalidArgument);
        let fields: Vec<String> = status
            .get_error_details()
            .bad_request()
            .expect("BadRequest")
            .field_violations
            .iter()
            .map(|v| v.field.clone())
            .collect();
        assert_eq!(fields, ["proxy.port", "name"]);
        assert!(status.message().contains("proxy.port: must be 1 to 65535, got 0"));
    }
}
