//! The shared Check reasons (contract §2.7). A provider uses these first and adds its own only when the
//! administrator would act differently.

pub const REASON_OK: &str = "OK";
/// The backend or one of its regions did not answer.
pub const REASON_UNREACHABLE: &str = "UNREACHABLE";
/// The credential was refused.
pub const REASON_UNAUTHENTICATED: &str = "UNAUTHENTICATED";
/// The credential works but lacks a permission the provider needs.
pub const REASON_PERMISSION_DENIED: &str = "PERMISSION_DENIED";
/// No capacity left: addresses, instances, vCPUs.
pub const REASON_QUOTA_EXHAUSTED: &str = "QUOTA_EXHAUSTED";
/// Something the configuration names does not exist or does not work.
pub const REASON_MISCONFIGURED: &str = "MISCONFIGURED";
/// Working, but with reduced capacity or a failing part.
pub const REASON_DEGRADED: &str = "DEGRADED";
