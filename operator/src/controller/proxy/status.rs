//! The Proxy status: conditions in the Kubernetes convention, and the one status write, a server-side
//! apply of the whole status under the operator's field manager.

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{
    Api,
    api::{Patch, PatchParams},
};

use super::error::Error;
use crate::crd::{FIELD_MANAGER, LastError, Proxy, ProxyStatus};

pub const READY: &str = "Ready";
pub const INSTANCE_CREATED: &str = "InstanceCreated";
pub const UP_TO_DATE: &str = "UpToDate";
pub const QUOTA_EXCEEDED: &str = "QuotaExceeded";

pub fn now() -> Time {
    Time(Timestamp::now())
}

/// Sets one condition of the Proxy at its observed generation.
pub fn set_condition(status: &mut ProxyStatus, type_: &str, value: bool, reason: &str, message: impl Into<String>) {
    let generation = status.observed_generation;
    crate::conditions::set(
        &mut status.conditions,
        type_,
        value,
        reason,
        message.into(),
        generation,
        now(),
    );
}

pub fn condition_is(status: &ProxyStatus, type_: &str, value: bool) -> bool {
    let value = if value { "True" } else { "False" };
    status.conditions.iter().any(|c| c.type_ == type_ && c.status == value)
}

/// Records an error: Ready goes False with the error's reason, QuotaExceeded follows the class.
pub fn record_error(status: &mut ProxyStatus, error: &Error) {
    let reason = error.reason();
    let message = error.to_string();
    status.last_error = Some(LastError {
        class: error.class().as_str().to_owned(),
        reason: reason.clone(),
        message: message.clone(),
        time: Some(now()),
    });
    set_condition(status, READY, false, &reason, message.clone());
    let quota = error.class() == provider_sdk::ErrorClass::Quota;
    set_condition(
        status,
        QUOTA_EXCEEDED,
        quota,
        if quota { "QuotaExceeded" } else { "WithinQuota" },
        if quota { message } else { String::new() },
    );
}

/// Writes the whole status; fields left out are removed, since the operator owns all of them.
pub async fn write(api: &Api<Proxy>, name: &str, status: &ProxyStatus) -> Result<(), Error> {
    let patch = serde_json::json!({
        "apiVersion": "egressproxies.dev/v1alpha1",
        "kind": "Proxy",
        "status": status,
    });
    api.patch_status(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch))
        .await?;
    Ok(())
}
