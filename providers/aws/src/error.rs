//! The AWS provider's errors and their one classification into the contract's classes (contract §3.4).
//!
//! An EC2 failure is kept as its error code and message (never the SDK error itself, whose request
//! context could hold user data), read into [`Ec2Code`], and classified by one exhaustive match. The table
//! in docs/aws-provider-spec.md (entry 13) lists every row; `tests/classify.rs` feeds captured EC2
//! response bodies through the real SDK and this function.

use std::{fmt, time::Duration};

use aws_sdk_ec2::{
    config::http::HttpResponse,
    error::{ProvideErrorMetadata, SdkError},
};
use provider_sdk::{
    ProviderError,
    error::{FieldViolation, PermanentKind, TransientKind, reason},
};

use crate::credentials::is_credentials_error;

/// Reasons of this provider beyond the SDK's (docs/aws-provider-spec.md, entry 13).
pub mod aws_reason {
    /// EC2 has no capacity for the instance type in the zone right now.
    pub const INSUFFICIENT_INSTANCE_CAPACITY: &str = "INSUFFICIENT_INSTANCE_CAPACITY";
    /// The account's running-instance limit in the region.
    pub const INSTANCE_LIMIT_EXCEEDED: &str = "INSTANCE_LIMIT_EXCEEDED";
    /// The account's vCPU quota for the instance family in the region.
    pub const VCPU_LIMIT_EXCEEDED: &str = "VCPU_LIMIT_EXCEEDED";
    /// EC2 throttled the provider's calls (RequestLimitExceeded, Throttling).
    pub const THROTTLED: &str = "THROTTLED";
    /// The credential is missing, unreadable, expired or refused.
    pub const UNAUTHENTICATED: &str = "UNAUTHENTICATED";
    /// The credential lacks an IAM permission the call needs.
    pub const PERMISSION_DENIED: &str = "PERMISSION_DENIED";
    /// A catalogue AMI does not exist (or is not usable) in the region.
    pub const IMAGE_UNAVAILABLE: &str = "IMAGE_UNAVAILABLE";
    /// EC2 refused a parameter of the request (a type not offered in the zone, a bad combination).
    pub const BACKEND_REJECTED_REQUEST: &str = "BACKEND_REJECTED_REQUEST";
    /// Something the config names (subnet, VPC, shared group) does not exist, or the account cannot use it.
    pub const MISCONFIGURED: &str = "MISCONFIGURED";
    /// The account's security-group limit in the region (or the rule limit of one group).
    pub const SECURITY_GROUP_LIMIT_EXCEEDED: &str = "SECURITY_GROUP_LIMIT_EXCEEDED";
    /// The subnet has no free private address, or the account no more public addresses.
    pub const ADDRESS_LIMIT_EXCEEDED: &str = "ADDRESS_LIMIT_EXCEEDED";
    /// The security group is still used by the instance being terminated; retried.
    pub const DEPENDENCY_VIOLATION: &str = "DEPENDENCY_VIOLATION";
    /// Another Create or Delete of the same name held its lock for the whole lock budget.
    pub const INSTANCE_BUSY: &str = "INSTANCE_BUSY";
    /// EC2 refused the call with a code this provider does not know.
    pub const BACKEND_REFUSED: &str = "BACKEND_REFUSED";
}

/// Retry hints for the errors whose cause usually clears on its own.
const THROTTLE_RETRY: Duration = Duration::from_secs(2);
const CAPACITY_RETRY: Duration = Duration::from_secs(300);
const QUOTA_RETRY: Duration = Duration::from_secs(900);
const BUSY_RETRY: Duration = Duration::from_secs(1);
const DEPENDENCY_RETRY: Duration = Duration::from_secs(5);

/// The EC2 error codes this provider tells apart; every other code is [`Ec2Code::Other`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ec2Code {
    InstanceNotFound,
    InstanceIdMalformed,
    InsufficientInstanceCapacity,
    InstanceLimitExceeded,
    VcpuLimitExceeded,
    /// `SecurityGroupLimitExceeded`, `RulesPerSecurityGroupLimitExceeded`: the design's first quota, one
    /// group per Proxy.
    SecurityGroupLimitExceeded,
    /// `InsufficientFreeAddressesInSubnet`, `AddressLimitExceeded`.
    AddressLimitExceeded,
    Throttled,
    UnauthorizedOperation,
    AuthFailure,
    IdempotentParameterMismatch,
    /// `InvalidAMIID.NotFound`, `.Malformed`, `.Unavailable`.
    InvalidAmi,
    /// `InvalidParameterValue`, `InvalidParameterCombination`, `InvalidParameter`, `MissingParameter`,
    /// `Unsupported`, `InvalidInstanceType`, `InvalidUserData.Malformed`.
    InvalidParameter,
    /// `InvalidSubnetID.NotFound`, `InvalidVpcID.NotFound`, `OptInRequired`, `PendingVerification`, ...
    Misconfigured,
    GroupNotFound,
    GroupDuplicate,
    PermissionDuplicate,
    DependencyViolation,
    /// `InternalError`, `InternalFailure`, `ServiceUnavailable`, `Unavailable`.
    ServerError,
    DryRunOperation,
    Other(String),
}

impl Ec2Code {
    pub fn parse(code: &str) -> Self {
        match code {
            "InvalidInstanceID.NotFound" => Ec2Code::InstanceNotFound,
            "InvalidInstanceID.Malformed" => Ec2Code::InstanceIdMalformed,
            "InsufficientInstanceCapacity" | "InsufficientCapacity" => Ec2Code::InsufficientInstanceCapacity,
            "InstanceLimitExceeded" => Ec2Code::InstanceLimitExceeded,
            "VcpuLimitExceeded" => Ec2Code::VcpuLimitExceeded,
            "RequestLimitExceeded" | "Throttling" | "ThrottlingException" => Ec2Code::Throttled,
            // The service-linked role is an IAM permission the credential lacks, not a bad credential.
            "UnauthorizedOperation" | "Blocked" | "AuthFailure.ServiceLinkedRoleCreationNotPermitted" => {
                Ec2Code::UnauthorizedOperation
            }
            "SecurityGroupLimitExceeded" | "RulesPerSecurityGroupLimitExceeded" => Ec2Code::SecurityGroupLimitExceeded,
            "InsufficientFreeAddressesInSubnet" | "AddressLimitExceeded" => Ec2Code::AddressLimitExceeded,
            "AuthFailure"
            | "InvalidClientTokenId"
            | "SignatureDoesNotMatch"
            | "ExpiredToken"
            | "RequestExpired"
            | "UnrecognizedClientException" => Ec2Code::AuthFailure,
            "IdempotentParameterMismatch" => Ec2Code::IdempotentParameterMismatch,
            "InvalidParameterValue"
            | "InvalidParameterCombination"
            | "InvalidParameter"
            | "MissingParameter"
            | "Unsupported"
            | "InvalidInstanceType"
            | "InvalidUserData.Malformed"
            | "InvalidTagKey.Malformed" => Ec2Code::InvalidParameter,
            "InvalidSubnetID.NotFound"
            | "InvalidSubnetID.Malformed"
            | "InvalidVpcID.NotFound"
            | "OptInRequired"
            | "PendingVerification"
            | "InvalidGroup.Malformed"
            | "VPCIdNotSpecified" => Ec2Code::Misconfigured,
            "InvalidGroup.NotFound" | "InvalidGroupId.NotFound" => Ec2Code::GroupNotFound,
            "InvalidGroup.Duplicate" => Ec2Code::GroupDuplicate,
            "InvalidPermission.Duplicate" => Ec2Code::PermissionDuplicate,
            "DependencyViolation" => Ec2Code::DependencyViolation,
            "InternalError" | "InternalFailure" | "ServiceUnavailable" | "Unavailable" => Ec2Code::ServerError,
            "DryRunOperation" => Ec2Code::DryRunOperation,
            _ if code.starts_with("InvalidAMIID.") => Ec2Code::InvalidAmi,
            other => Ec2Code::Other(other.to_owned()),
        }
    }
}

/// Why one EC2 call failed, with nothing from the request in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiFailure {
    /// EC2 answered with an error code.
    Service { code: String, message: String, status: u16 },
    /// The credentials could not be loaded (the message names the source, never a value).
    Credentials(String),
    /// A per-call budget ran out (connect, attempt, or the whole call with retries).
    Timeout,
    /// The endpoint could not be reached: DNS, connection, TLS, a broken connection.
    Network(String),
    /// The answer could not be read.
    Response(String),
}

impl ApiFailure {
    pub fn code(&self) -> Option<Ec2Code> {
        match self {
            ApiFailure::Service { code, .. } => Some(Ec2Code::parse(code)),
            _ => None,
        }
    }

    pub fn is(&self, wanted: Ec2Code) -> bool {
        self.code() == Some(wanted)
    }
}

impl fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiFailure::Service { code, message, status } => write!(f, "{code} (HTTP {status}): {message}"),
            ApiFailure::Credentials(message) => write!(f, "no usable credentials: {message}"),
            ApiFailure::Timeout => f.write_str("the per-call budget ran out"),
            ApiFailure::Network(message) => write!(f, "the endpoint could not be reached: {message}"),
            ApiFailure::Response(message) => write!(f, "the answer could not be read: {message}"),
        }
    }
}

/// The longest AWS message kept: messages are one sentence, but an encoded authorization message is not.
const MAX_MESSAGE: usize = 400;

/// Reads an SDK error into an [`ApiFailure`], keeping only the code, message, and the cause chain of a
/// transport failure.
pub fn failure<E>(error: SdkError<E, HttpResponse>) -> ApiFailure
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let chain = |error: &(dyn std::error::Error + 'static)| {
        let mut text = error.to_string();
        let mut cause = error.source();
        while let Some(next) = cause {
            text.push_str(": ");
            text.push_str(&next.to_string());
            cause = next.source();
        }
        text
    };
    match &error {
        SdkError::ServiceError(context) if context.err().code().is_none() => {
            // Not EC2's error XML: a proxy or captive portal in between, or a truncated answer.
            ApiFailure::Response(format!(
                "HTTP {} without an EC2 error code",
                context.raw().status().as_u16()
            ))
        }
        SdkError::ServiceError(context) => {
            let service = context.err();
            let mut message = service.message().unwrap_or_default().to_owned();
            if message.len() > MAX_MESSAGE {
                let mut end = MAX_MESSAGE;
                while !message.is_char_boundary(end) {
                    end -= 1;
                }
                message.truncate(end);
                message.push_str("...");
            }
            ApiFailure::Service {
                code: service.code().unwrap_or("Unknown").to_owned(),
                message,
                status: context.raw().status().as_u16(),
            }
        }
        SdkError::TimeoutError(_) => ApiFailure::Timeout,
        SdkError::DispatchFailure(dispatch) if dispatch.is_timeout() => ApiFailure::Timeout,
        _ if is_credentials_error(&error) => ApiFailure::Credentials(credentials_message(&error)),
        SdkError::DispatchFailure(_) => ApiFailure::Network(chain(&error)),
        SdkError::ResponseError(_) => ApiFailure::Response(chain(&error)),
        // ConstructionFailure, and whatever later SDK versions add: nothing was sent.
        _ => ApiFailure::Response(chain(&error)),
    }
}

/// The innermost credentials error's own text: aws-config's messages name the profile, file or variable.
fn credentials_message(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = Some(error);
    let mut found = String::new();
    while let Some(error) = current {
        if let Some(credentials) = error.downcast_ref::<aws_credential_types::provider::error::CredentialsError>() {
            found = credentials.to_string();
            if let Some(source) = std::error::Error::source(credentials) {
                found = format!("{found}: {source}");
            }
        }
        current = error.source();
    }
    found
}

/// Every error the provider answers with, before classification.
#[derive(Debug, thiserror::Error)]
pub enum AwsError {
    #[error("EC2 {operation} in {region}: {failure}")]
    Api {
        operation: &'static str,
        region: String,
        failure: ApiFailure,
    },
    #[error("{}", .0.iter().map(|v| format!("{}: {}", v.field, v.description)).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<FieldViolation>),
    #[error("{id:?}: {problem}")]
    MalformedId { id: String, problem: String },
    #[error("instance {id} does not exist")]
    NotFound { id: String },
    #[error("name {name} is taken: {why}")]
    NameInUse { name: String, why: String },
    #[error("instance {name} ({id}) is being deleted")]
    Deleting { name: String, id: String },
    #[error("instance {name} is busy with another Create or Delete")]
    Busy { name: String },
    #[error("EC2 {operation} in {region} answered without {what}")]
    Unexpected {
        operation: &'static str,
        region: String,
        what: &'static str,
    },
}

impl AwsError {
    pub fn api(operation: &'static str, region: &str) -> impl FnOnce(ApiFailure) -> Self {
        let region = region.to_owned();
        move |failure| AwsError::Api {
            operation,
            region,
            failure,
        }
    }
}

/// The one place an [`AwsError`] becomes a contract error.
pub fn classify(error: AwsError) -> ProviderError {
    let message = error.to_string();
    match error {
        AwsError::Api { region, failure, .. } => classify_api(&region, failure, message),
        AwsError::Invalid(fields) => ProviderError::invalid_fields(fields),
        AwsError::MalformedId { .. } => ProviderError::malformed_provider_id(message),
        AwsError::NotFound { .. } => ProviderError::not_found(message),
        AwsError::NameInUse { .. } => {
            ProviderError::permanent(PermanentKind::AlreadyExists, reason::NAME_IN_USE, message)
        }
        AwsError::Deleting { .. } => {
            ProviderError::transient_kind(TransientKind::Aborted, reason::INSTANCE_DELETING, message)
                .with_retry_after(DEPENDENCY_RETRY)
        }
        AwsError::Busy { .. } => {
            ProviderError::transient_kind(TransientKind::Aborted, aws_reason::INSTANCE_BUSY, message)
                .with_retry_after(BUSY_RETRY)
        }
        AwsError::Unexpected { .. } => ProviderError::transient(reason::BACKEND_UNAVAILABLE, message),
    }
}

fn classify_api(region: &str, failure: ApiFailure, message: String) -> ProviderError {
    use PermanentKind::*;
    let code = match failure {
        ApiFailure::Service { code, status, .. } => (Ec2Code::parse(&code), status),
        ApiFailure::Credentials(_) => {
            return ProviderError::permanent(Unauthenticated, aws_reason::UNAUTHENTICATED, message);
        }
        ApiFailure::Timeout => {
            return ProviderError::transient_kind(TransientKind::DeadlineExceeded, reason::DEADLINE_EXCEEDED, message);
        }
        ApiFailure::Network(_) | ApiFailure::Response(_) => {
            return ProviderError::transient(reason::BACKEND_UNAVAILABLE, message);
        }
    };
    let quota = |reason: &str, what: &str, retry: Duration| {
        ProviderError::quota(reason, &format!("region/{region}/{what}"), message.clone()).with_retry_after(retry)
    };
    match code {
        // Get turns a missing instance into NOT_FOUND before classifying; elsewhere (a Describe right after
        // RunInstances, on an eventually consistent API) it is worth a retry.
        (Ec2Code::InstanceNotFound, _) => ProviderError::transient(reason::BACKEND_UNAVAILABLE, message),
        (Ec2Code::InstanceIdMalformed, _) => ProviderError::malformed_provider_id(message),
        (Ec2Code::InsufficientInstanceCapacity, _) => {
            quota(aws_reason::INSUFFICIENT_INSTANCE_CAPACITY, "capacity", CAPACITY_RETRY)
        }
        (Ec2Code::InstanceLimitExceeded, _) => quota(aws_reason::INSTANCE_LIMIT_EXCEEDED, "instances", QUOTA_RETRY),
        (Ec2Code::VcpuLimitExceeded, _) => quota(aws_reason::VCPU_LIMIT_EXCEEDED, "vcpus", QUOTA_RETRY),
        (Ec2Code::SecurityGroupLimitExceeded, _) => quota(
            aws_reason::SECURITY_GROUP_LIMIT_EXCEEDED,
            "security-groups",
            QUOTA_RETRY,
        ),
        (Ec2Code::AddressLimitExceeded, _) => quota(aws_reason::ADDRESS_LIMIT_EXCEEDED, "addresses", QUOTA_RETRY),
        (Ec2Code::Throttled, _) => {
            ProviderError::transient(aws_reason::THROTTLED, message).with_retry_after(THROTTLE_RETRY)
        }
        (Ec2Code::UnauthorizedOperation, _) => {
            ProviderError::permanent(PermissionDenied, aws_reason::PERMISSION_DENIED, message)
        }
        (Ec2Code::AuthFailure, _) => ProviderError::permanent(Unauthenticated, aws_reason::UNAUTHENTICATED, message),
        (Ec2Code::IdempotentParameterMismatch, _) => {
            ProviderError::permanent(AlreadyExists, reason::NAME_IN_USE, message)
        }
        (Ec2Code::InvalidAmi, _) => {
            ProviderError::permanent(FailedPrecondition, aws_reason::IMAGE_UNAVAILABLE, message)
        }
        (Ec2Code::InvalidParameter, _) => {
            ProviderError::permanent(InvalidArgument, aws_reason::BACKEND_REJECTED_REQUEST, message)
        }
        (Ec2Code::Misconfigured | Ec2Code::GroupNotFound, _) => {
            ProviderError::permanent(FailedPrecondition, aws_reason::MISCONFIGURED, message)
        }
        // Both mean a concurrent call made the same thing first; the retry finds it.
        (Ec2Code::GroupDuplicate | Ec2Code::PermissionDuplicate, _) => {
            ProviderError::transient_kind(TransientKind::Aborted, reason::BACKEND_UNAVAILABLE, message)
                .with_retry_after(BUSY_RETRY)
        }
        (Ec2Code::DependencyViolation, _) => {
            ProviderError::transient_kind(TransientKind::Aborted, aws_reason::DEPENDENCY_VIOLATION, message)
                .with_retry_after(DEPENDENCY_RETRY)
        }
        (Ec2Code::ServerError, _) => ProviderError::transient(reason::BACKEND_UNAVAILABLE, message),
        // Only Check sends DryRun; anywhere else it is a bug, and retrying will not fix it.
        (Ec2Code::DryRunOperation, _) => {
            ProviderError::permanent(FailedPrecondition, aws_reason::BACKEND_REFUSED, message)
        }
        (Ec2Code::Other(_), status) if status >= 500 => ProviderError::transient(reason::BACKEND_UNAVAILABLE, message),
        (Ec2Code::Other(_), _) => ProviderError::permanent(FailedPrecondition, aws_reason::BACKEND_REFUSED, message),
    }
}

#[cfg(test)]
mod tests {
    use provider_sdk::ErrorClass;

    use super::*;

    fn service(code: &str, status: u16) -> AwsError {
        AwsError::Api {
            operation: "RunInstances",
            region: "eu-west-1".into(),
            failure: ApiFailure::Service {
                code: code.into(),
                message: "m".into(),
                status,
            },
        }
    }

    /// Every row of the spec's table (entry 13) that needs no HTTP exchange: the codes moto never sends
    /// (Malformed, capacity, limits) included. tests/classify.rs covers the same codes through the SDK.
    #[test]
    fn each_code_maps_to_its_class_and_reason() {
        use ErrorClass::*;
        let rows: &[(&str, u16, ErrorClass, &str)] = &[
            ("InvalidInstanceID.NotFound", 400, Transient, "BACKEND_UNAVAILABLE"),
            ("InvalidInstanceID.Malformed", 400, Permanent, "MALFORMED_PROVIDER_ID"),
            (
                "InsufficientInstanceCapacity",
                500,
                Quota,
                "INSUFFICIENT_INSTANCE_CAPACITY",
            ),
            ("InstanceLimitExceeded", 400, Quota, "INSTANCE_LIMIT_EXCEEDED"),
            ("VcpuLimitExceeded", 400, Quota, "VCPU_LIMIT_EXCEEDED"),
            ("RequestLimitExceeded", 503, Transient, "THROTTLED"),
            ("Throttling", 400, Transient, "THROTTLED"),
            ("UnauthorizedOperation", 403, Permanent, "PERMISSION_DENIED"),
            ("AuthFailure", 401, Permanent, "UNAUTHENTICATED"),
            (
                "AuthFailure.ServiceLinkedRoleCreationNotPermitted",
                403,
                Permanent,
                "PERMISSION_DENIED",
            ),
            (
                "SecurityGroupLimitExceeded",
                400,
                Quota,
                "SECURITY_GROUP_LIMIT_EXCEEDED",
            ),
            (
                "RulesPerSecurityGroupLimitExceeded",
                400,
                Quota,
                "SECURITY_GROUP_LIMIT_EXCEEDED",
            ),
            (
                "InsufficientFreeAddressesInSubnet",
                400,
                Quota,
                "ADDRESS_LIMIT_EXCEEDED",
            ),
            ("AddressLimitExceeded", 400, Quota, "ADDRESS_LIMIT_EXCEEDED"),
            ("IdempotentParameterMismatch", 400, Permanent, "NAME_IN_USE"),
            ("InvalidAMIID.NotFound", 400, Permanent, "IMAGE_UNAVAILABLE"),
            ("InvalidAMIID.Malformed", 400, Permanent, "IMAGE_UNAVAILABLE"),
            ("InvalidAMIID.Unavailable", 400, Permanent, "IMAGE_UNAVAILABLE"),
            ("InvalidParameterValue", 400, Permanent, "BACKEND_REJECTED_REQUEST"),
            ("Unsupported", 400, Permanent, "BACKEND_REJECTED_REQUEST"),
            ("InvalidSubnetID.NotFound", 400, Permanent, "MISCONFIGURED"),
            ("DependencyViolation", 400, Transient, "DEPENDENCY_VIOLATION"),
            ("InvalidGroup.Duplicate", 400, Transient, "BACKEND_UNAVAILABLE"),
            ("InternalError", 500, Transient, "BACKEND_UNAVAILABLE"),
            ("SomethingNew", 503, Transient, "BACKEND_UNAVAILABLE"),
            ("SomethingNew", 400, Permanent, "BACKEND_REFUSED"),
        ];
        for (code, status, class, reason) in rows {
            let error = classify(service(code, *status));
            assert_eq!((error.class(), error.reason()), (*class, *reason), "{code}");
        }
    }

    #[test]
    fn quota_errors_name_the_region_and_carry_a_retry_delay() {
        let error = classify(service("VcpuLimitExceeded", 400));
        let ProviderError::Quota { violations, .. } = &error else {
            panic!("{error:?}")
        };
        assert_eq!(violations[0].subject, "region/eu-west-1/vcpus");
        assert_eq!(error.retry_after(), Some(QUOTA_RETRY));
        assert_eq!(
            classify(service("RequestLimitExceeded", 503)).retry_after(),
            Some(THROTTLE_RETRY)
        );
    }

    #[test]
    fn transport_failures_and_budgets_are_transient_and_credentials_permanent() {
        let api = |failure| classify(AwsError::api("DescribeInstances", "us-east-1")(failure));
        let timeout = api(ApiFailure::Timeout);
        assert_eq!(
            (timeout.class(), timeout.reason()),
            (ErrorClass::Transient, "DEADLINE_EXCEEDED")
        );
        let network = api(ApiFailure::Network("connection refused".into()));
        assert_eq!(
            (network.class(), network.reason()),
            (ErrorClass::Transient, "BACKEND_UNAVAILABLE")
        );
        let credentials = api(ApiFailure::Credentials("profile default not found".into()));
        assert_eq!(
            (credentials.class(), credentials.reason()),
            (ErrorClass::Permanent, "UNAUTHENTICATED")
        );
        assert_eq!(
            credentials.message_with_causes(),
            "EC2 DescribeInstances in us-east-1: no usable credentials: profile default not found"
        );
    }

    #[test]
    fn the_provider_s_own_errors_map_to_their_classes() {
        let cases = [
            (
                AwsError::NotFound {
                    id: "aws://eu-west-1/i-0123abcd".into(),
                },
                ErrorClass::NotFound,
                "INSTANCE_NOT_FOUND",
            ),
            (
                AwsError::MalformedId {
                    id: "aws://x".into(),
                    problem: "p".into(),
                },
                ErrorClass::Permanent,
                "MALFORMED_PROVIDER_ID",
            ),
            (
                AwsError::NameInUse {
                    name: "a".into(),
                    why: "w".into(),
                },
                ErrorClass::Permanent,
                "NAME_IN_USE",
            ),
            (
                AwsError::Deleting {
                    name: "a".into(),
                    id: "i".into(),
                },
                ErrorClass::Transient,
                "INSTANCE_DELETING",
            ),
            (
                AwsError::Busy { name: "a".into() },
                ErrorClass::Transient,
                "INSTANCE_BUSY",
            ),
            (
                AwsError::Unexpected {
                    operation: "RunInstances",
                    region: "r".into(),
                    what: "an instance",
                },
                ErrorClass::Transient,
                "BACKEND_UNAVAILABLE",
            ),
            (
                AwsError::Invalid(vec![FieldViolation {
                    field: "placement.region".into(),
                    description: "d".into(),
                }]),
                ErrorClass::Permanent,
                "INVALID_ARGUMENT",
            ),
        ];
        for (error, class, reason) in cases {
            let shown = error.to_string();
            let error = classify(error);
            assert_eq!((error.class(), error.reason()), (class, reason), "{shown}");
        }
    }
}
