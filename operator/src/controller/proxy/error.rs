//! Errors of a Proxy reconcile and what each means for the next attempt. Provider errors keep their
//! contract class; the requeue policy is decided here once.

use std::time::Duration;

use provider_sdk::{ErrorClass, ProviderError};
use rand::Rng;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("provider {provider}: {source}")]
    Provider {
        provider: String,
        #[source]
        source: Box<ProviderError>,
    },
    /// The spec or a Secret it names is unusable; fixed only by the user.
    #[error("{field}: {message}")]
    Spec {
        field: String,
        reason: &'static str,
        message: String,
    },
    /// Deletion is under way on the backend; the finalizer stays until it is confirmed.
    #[error("waiting for {remaining} instance(s) to be deleted")]
    StillDeleting { remaining: usize },
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
}

impl Error {
    pub fn spec(field: impl Into<String>, reason: &'static str, message: impl Into<String>) -> Self {
        Error::Spec {
            field: field.into(),
            reason,
            message: message.into(),
        }
    }

    /// The contract class, so transient API trouble and provider errors share one policy.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::Kube(_) | Error::StillDeleting { .. } => ErrorClass::Transient,
            Error::Provider { source, .. } => source.class(),
            Error::Spec { .. } => ErrorClass::Permanent,
            Error::Finalizer(inner) => match inner.as_ref() {
                kube::runtime::finalizer::Error::ApplyFailed(e) | kube::runtime::finalizer::Error::CleanupFailed(e) => {
                    e.class()
                }
                _ => ErrorClass::Transient,
            },
        }
    }

    /// The reason a condition shows.
    pub fn reason(&self) -> String {
        match self {
            Error::Kube(_) | Error::Finalizer(_) => "KubernetesAPIError".to_owned(),
            Error::StillDeleting { .. } => "Deleting".to_owned(),
            Error::Provider { source, .. } => match source.class() {
                ErrorClass::Quota => "QuotaExceeded".to_owned(),
                ErrorClass::Transient => "ProviderUnavailable".to_owned(),
                ErrorClass::NotFound => "InstanceNotFound".to_owned(),
                ErrorClass::Permanent => pascal_case(source.reason()),
            },
            Error::Spec { reason, .. } => (*reason).to_owned(),
        }
    }
}

/// `NAME_IN_USE` → `NameInUse`, the Kubernetes condition reason style.
fn pascal_case(reason: &str) -> String {
    reason
        .split('_')
        .filter(|word| !word.is_empty())
        .map(|word| {
            let lower = word.to_ascii_lowercase();
            let mut chars = lower.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// How long to wait after the `failures`-th consecutive error of `class`; `None` means "until the spec
/// changes". Transient: 1 s doubling to 5 min; quota: 5 min; both with ±20 % jitter so a fleet does not
/// retry in step.
pub fn retry_after(class: ErrorClass, failures: u32, hinted: Option<Duration>) -> Option<Duration> {
    let base = match class {
        ErrorClass::Permanent => return None,
        ErrorClass::Quota => Duration::from_secs(300),
        ErrorClass::Transient | ErrorClass::NotFound => Duration::from_secs(1)
            .saturating_mul(1 << failures.min(9))
            .min(Duration::from_secs(300)),
    };
    let base = hinted.map_or(base, |hint| hint.max(base));
    let jitter = rand::rng().random_range(0.8..1.2);
    Some(base.mul_f64(jitter))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permanent_errors_are_never_retried() {
        assert_eq!(retry_after(ErrorClass::Permanent, 0, None), None);
    }

    #[test]
    fn transient_backoff_grows_and_is_capped() {
        let first = retry_after(ErrorClass::Transient, 0, None).unwrap();
        let later = retry_after(ErrorClass::Transient, 5, None).unwrap();
        let capped = retry_after(ErrorClass::Transient, 30, None).unwrap();
        assert!(first <= Duration::from_millis(1200), "{first:?}");
        assert!(later >= Duration::from_millis(25_600), "{later:?}");
        assert!(capped <= Duration::from_secs(360), "{capped:?}");
    }

    #[test]
    fn quota_waits_long_and_a_hint_can_only_lengthen_it() {
        let quota = retry_after(ErrorClass::Quota, 0, Some(Duration::from_secs(1))).unwrap();
        assert!(quota >= Duration::from_secs(240), "{quota:?}");
    }

    #[test]
    fn contract_reasons_become_condition_reasons() {
        assert_eq!(pascal_case("NAME_IN_USE"), "NameInUse");
        assert_eq!(pascal_case("INVALID_ARGUMENT"), "InvalidArgument");
    }
}
