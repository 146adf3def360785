//! The ProviderHealth controller: one loop per configured provider that keeps a cluster-scoped
//! `ProviderHealth` object (named after the provider) showing what the daemon declared in GetInfo and what
//! its Check found, refreshed every `interval_seconds` while available and every
//! `failing_interval_seconds` while not.
//!
//! Each round applies the object's spec (so a deleted object comes back), calls GetInfo and Check, and
//! writes the whole status by server-side apply on the status subresource. The `Available` condition is
//! True (`AllChecksPassed`) when every check is ok, and False with reason `CheckFailed` (naming the failing
//! targets), `Unreachable` (GetInfo or Check could not run) or `TypeMismatch` (the daemon answers another
//! provider type than the one configured). A fresh, matching GetInfo answer also refreshes what
//! [`Providers`] remembers for the Proxy controller.
//!
//! When the daemon cannot be reached the declared fields (version, profiles, limits) keep their last known
//! values, since GetInfo answers the same for the daemon's lifetime, while `checks` is emptied: results from
//! an earlier round would pass for current ones.
//!
//! ProviderHealth objects whose provider is not in this operator's config are left alone and logged once
//! at start-up. They are not deleted because another operator version (the other side of a rolling
//! upgrade, or a config rollback) may own them, and nothing on the object proves it was ours.

use std::{sync::Arc, time::Duration};

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use provider_sdk::{
    ProviderError,
    model::{CheckResult, ProviderInfo},
};

use crate::{
    config::HealthConfig,
    crd::{CheckEntry, FIELD_MANAGER, ProviderHealth, ProviderHealthSpec, ProviderHealthStatus},
    metrics::{ControllerLabels, ErrorLabels, Metrics},
    providers::{ProviderHandle, Providers},
};

const CONTROLLER: &str = "provider-health";

pub const AVAILABLE: &str = "Available";
pub const REASON_ALL_CHECKS_PASSED: &str = "AllChecksPassed";
pub const REASON_CHECK_FAILED: &str = "CheckFailed";
pub const REASON_UNREACHABLE: &str = "Unreachable";
pub const REASON_TYPE_MISMATCH: &str = "TypeMismatch";

/// Runs one loop per configured provider until `shutdown` resolves. A round cut off by shutdown is
/// dropped; the next leader writes a fresh one.
pub async fn run(
    client: Client,
    providers: Providers,
    config: HealthConfig,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
) {
    let api: Api<ProviderHealth> = Api::all(client);
    log_unconfigured(&api, &providers).await;
    let loops = async {
        futures::future::join_all(
            providers
                .all()
                .map(|handle| watch(&api, &providers, handle.clone(), &config, &metrics)),
        )
        .await;
        // Only reached with no provider configured (the config refuses that): wait for shutdown all the same.
        std::future::pending::<()>().await;
    };
    tokio::select! {
        () = loops => {}
        () = shutdown => tracing::info!("provider health loops stopped"),
    }
}

async fn log_unconfigured(api: &Api<ProviderHealth>, providers: &Providers) {
    let configured = providers.names();
    match api.list_metadata(&ListParams::default()).await {
        Ok(objects) => {
            for object in objects.items.iter().filter(|o| !configured.contains(&o.name_any())) {
                tracing::info!(
                    provider_health = %object.name_any(),
                    "ProviderHealth names a provider this operator is not configured with; leaving it alone \
                     (another operator version may own it; delete it by hand if it is stale)"
                );
            }
        }
        Err(error) => tracing::warn!(%error, "listing ProviderHealth objects failed"),
    }
}

async fn watch(
    api: &Api<ProviderHealth>,
    providers: &Providers,
    handle: Arc<ProviderHandle>,
    config: &HealthConfig,
    metrics: &Metrics,
) {
    loop {
        metrics
            .reconciles
            .get_or_create(&ControllerLabels { controller: CONTROLLER })
            .inc();
        let available = match refresh(api, providers, &handle).await {
            Ok(status) => is_available(&status),
            Err(error) => {
                metrics
                    .reconcile_errors
                    .get_or_create(&ErrorLabels {
                        controller: CONTROLLER,
                        class: "transient",
                    })
                    .inc();
                tracing::warn!(provider = %handle.name, %error, "writing ProviderHealth failed");
                false
            }
        };
        let pause = if available {
            config.interval_seconds
        } else {
            config.failing_interval_seconds
        };
        tokio::time::sleep(Duration::from_secs(pause)).await;
    }
}

/// One round for one provider: apply the spec, ask the daemon, write the status. Returns the status
/// written. Provider failures are part of the status; only Kubernetes API failures are errors.
pub async fn refresh(
    api: &Api<ProviderHealth>,
    providers: &Providers,
    handle: &ProviderHandle,
) -> Result<ProviderHealthStatus, kube::Error> {
    let spec = ProviderHealthSpec {
        provider_type: handle.provider_type.clone(),
        endpoint: handle.endpoint.clone(),
    };
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let object = api
        .patch(
            &handle.name,
            &params,
            &Patch::Apply(&ProviderHealth::new(&handle.name, spec)),
        )
        .await?;
    let previous = object.status.clone().unwrap_or_default();

    let info = handle.get_info().await;
    let checks = handle.check().await;
    if let Ok(info) = &info
        && info.provider_type == handle.provider_type
    {
        providers.remember_info(&handle.name, info.clone()).await;
    }
    let status = observe(
        &previous,
        &handle.provider_type,
        info.as_ref(),
        checks.as_ref().map(Vec::as_slice),
        object.metadata.generation,
        Time(Timestamp::now()),
    );
    log_transition(handle, &previous, &status);

    let patch = serde_json::json!({
        "apiVersion": ProviderHealth::api_version(&()),
        "kind": ProviderHealth::kind(&()),
        "status": status,
    });
    api.patch_status(&handle.name, &params, &Patch::Apply(&patch)).await?;
    Ok(status)
}

fn log_transition(handle: &ProviderHandle, previous: &ProviderHealthStatus, status: &ProviderHealthStatus) {
    let Some(now) = status.conditions.iter().find(|c| c.type_ == AVAILABLE) else {
        return;
    };
    let before = previous.conditions.iter().find(|c| c.type_ == AVAILABLE);
    if before.is_some_and(|b| b.status == now.status && b.reason == now.reason) {
        return;
    }
    if now.status == "True" {
        tracing::info!(provider = %handle.name, "provider available");
    } else {
        tracing::warn!(provider = %handle.name, reason = %now.reason, message = %now.message, "provider not available");
    }
}

pub fn is_available(status: &ProviderHealthStatus) -> bool {
    status
        .conditions
        .iter()
        .any(|c| c.type_ == AVAILABLE && c.status == "True")
}

/// The status after one round, from the previous status and what GetInfo and Check answered: a pure
/// function, so every outcome is testable without a daemon or an apiserver.
pub fn observe(
    previous: &ProviderHealthStatus,
    configured_type: &str,
    info: Result<&ProviderInfo, &ProviderError>,
    checks: Result<&[CheckResult], &ProviderError>,
    generation: Option<i64>,
    now: Time,
) -> ProviderHealthStatus {
    let mut status = previous.clone();
    if let Ok(info) = info {
        status.provider_type = Some(info.provider_type.clone());
        status.version = Some(info.version.clone());
        status.contract_minor_version = Some(info.contract_minor_version);
        status.profiles = info
            .profiles
            .entries()
            .into_iter()
            .filter_map(|(axis, profile)| Some((axis.to_owned(), profile?.to_owned())))
            .collect();
        status.max_name_length = Some(info.limits.max_name_length);
    }
    status.checks = match checks {
        Ok(results) => results.iter().map(entry).collect(),
        Err(_) => Vec::new(),
    };
    status.last_check_time = Some(now.clone());
    let (available, reason, message) = availability(configured_type, info, checks);
    crate::conditions::set(
        &mut status.conditions,
        AVAILABLE,
        available,
        reason,
        message,
        generation,
        now,
    );
    status
}

fn entry(result: &CheckResult) -> CheckEntry {
    CheckEntry {
        target: result.target.clone(),
        ok: result.ok,
        reason: result.reason.clone(),
        message: result.message.clone(),
        details: result.details.clone(),
    }
}

fn availability(
    configured_type: &str,
    info: Result<&ProviderInfo, &ProviderError>,
    checks: Result<&[CheckResult], &ProviderError>,
) -> (bool, &'static str, String) {
    let info = match info {
        Ok(info) => info,
        Err(error) => {
            return (
                false,
                REASON_UNREACHABLE,
                format!("GetInfo failed ({}): {error}", error.reason()),
            );
        }
    };
    if info.provider_type != configured_type {
        let message = format!(
            "the daemon answers provider type {:?} but is configured as type {configured_type:?}; \
             the operator refuses it until the two agree",
            info.provider_type
        );
        return (false, REASON_TYPE_MISMATCH, message);
    }
    let results = match checks {
        Ok(results) => results,
        Err(error) => {
            return (
                false,
                REASON_UNREACHABLE,
                format!("Check failed ({}): {error}", error.reason()),
            );
        }
    };
    let failing: Vec<String> = results
        .iter()
        .filter(|r| !r.ok)
        .map(|r| format!("{} ({}: {})", r.target, r.reason, r.message))
        .collect();
    if !failing.is_empty() {
        let message = format!(
            "{} of {} checks failing: {}",
            failing.len(),
            results.len(),
            failing.join("; ")
        );
        return (false, REASON_CHECK_FAILED, message);
    }
    let degraded: Vec<&str> = results
        .iter()
        .filter(|r| r.reason != provider_sdk::check::REASON_OK)
        .map(|r| r.target.as_str())
        .collect();
    let mut message = format!("all {} checks passed", results.len());
    if !degraded.is_empty() {
        message.push_str(&format!("; degraded: {}", degraded.join(", ")));
    }
    (true, REASON_ALL_CHECKS_PASSED, message)
}

#[cfg(test)]
mod tests {
    use provider_sdk::{
        Provider,
        check::{REASON_DEGRADED, REASON_QUOTA_EXHAUSTED},
        error::reason::BACKEND_UNAVAILABLE,
        testing::FakeProvider,
    };

    use super::*;

    fn info() -> ProviderInfo {
        FakeProvider::default().info()
    }

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(1_900_000_000 + seconds).unwrap())
    }

    fn healthy() -> Vec<CheckResult> {
        vec![
            CheckResult::ok("backend", "answering"),
            CheckResult::ok("capacity", "room"),
        ]
    }

    fn down() -> ProviderError {
        ProviderError::transient(BACKEND_UNAVAILABLE, "connection refused")
    }

    fn available(status: &ProviderHealthStatus) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == AVAILABLE)
            .expect("an Available condition")
    }

    fn round(
        previous: &ProviderHealthStatus,
        info: Result<&ProviderInfo, &ProviderError>,
        checks: Result<&[CheckResult], &ProviderError>,
        now: Time,
    ) -> ProviderHealthStatus {
        observe(previous, "fake", info, checks, Some(1), now)
    }

    #[test]
    fn a_healthy_provider_is_available_with_its_declaration_shown() {
        let info = info();
        let status = round(&ProviderHealthStatus::default(), Ok(&info), Ok(&healthy()), at(0));
        let condition = available(&status);
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("True", REASON_ALL_CHECKS_PASSED)
        );
        assert_eq!(condition.observed_generation, Some(1));
        assert_eq!(status.provider_type.as_deref(), Some("fake"));
        assert_eq!(status.version, Some(info.version.clone()));
        assert_eq!(status.contract_minor_version, Some(0));
        assert_eq!(status.max_name_length, Some(63));
        assert_eq!(status.profiles.len(), 19, "{:?}", status.profiles);
        assert_eq!(status.profiles["readiness"], "provisioning-window");
        assert_eq!(
            status.checks.iter().map(|c| c.target.as_str()).collect::<Vec<_>>(),
            ["backend", "capacity"]
        );
        assert_eq!(status.last_check_time, Some(at(0)));
    }

    #[test]
    fn undeclared_axes_are_left_out_of_the_profiles() {
        let mut info = info();
        info.profiles.readiness = None;
        let status = round(&ProviderHealthStatus::default(), Ok(&info), Ok(&healthy()), at(0));
        assert!(!status.profiles.contains_key("readiness"));
        assert_eq!(status.profiles.len(), 18);
    }

    #[test]
    fn a_failing_check_makes_the_provider_unavailable_naming_the_target() {
        let checks = vec![
            CheckResult::ok("backend", "answering"),
            CheckResult::failed("region/eu-west-1", REASON_QUOTA_EXHAUSTED, "no addresses left")
                .with_detail("quota", "addresses"),
        ];
        let status = round(&ProviderHealthStatus::default(), Ok(&info()), Ok(&checks), at(0));
        let condition = available(&status);
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", REASON_CHECK_FAILED)
        );
        assert!(
            condition.message.contains("region/eu-west-1 (QUOTA_EXHAUSTED"),
            "{}",
            condition.message
        );
        assert!(!condition.message.contains("backend"), "{}", condition.message);
        assert_eq!(status.checks[1].details["quota"], "addresses");
    }

    #[test]
    fn a_degraded_check_keeps_the_provider_available_and_says_so() {
        let checks = vec![CheckResult {
            reason: REASON_DEGRADED.to_owned(),
            ..CheckResult::ok("pool", "half the hosts")
        }];
        let status = round(&ProviderHealthStatus::default(), Ok(&info()), Ok(&checks), at(0));
        let condition = available(&status);
        assert_eq!(condition.status, "True");
        assert!(condition.message.contains("degraded: pool"), "{}", condition.message);
    }

    #[test]
    fn an_unreachable_daemon_is_unavailable_with_the_error_and_keeps_its_last_declaration() {
        let healthy = round(&ProviderHealthStatus::default(), Ok(&info()), Ok(&healthy()), at(0));
        let error = down();
        let status = round(&healthy, Err(&error), Err(&error), at(10));
        let condition = available(&status);
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", REASON_UNREACHABLE)
        );
        assert!(
            condition.message.contains("connection refused"),
            "{}",
            condition.message
        );
        assert!(condition.message.contains("GetInfo"), "{}", condition.message);
        assert_eq!(status.version, healthy.version);
        assert_eq!(status.profiles, healthy.profiles);
        assert!(status.checks.is_empty(), "stale checks kept: {:?}", status.checks);
        assert_eq!(status.last_check_time, Some(at(10)));
    }

    #[test]
    fn a_check_that_cannot_run_makes_the_provider_unreachable() {
        let error = down();
        let status = round(&ProviderHealthStatus::default(), Ok(&info()), Err(&error), at(0));
        let condition = available(&status);
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", REASON_UNREACHABLE)
        );
        assert!(condition.message.starts_with("Check failed"), "{}", condition.message);
    }

    #[test]
    fn a_daemon_of_another_type_is_a_type_mismatch_even_when_its_checks_pass() {
        let mut info = info();
        info.provider_type = "aws".to_owned();
        let status = round(&ProviderHealthStatus::default(), Ok(&info), Ok(&healthy()), at(0));
        let condition = available(&status);
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", REASON_TYPE_MISMATCH)
        );
        assert!(
            condition.message.contains("\"aws\"") && condition.message.contains("\"fake\""),
            "{}",
            condition.message
        );
    }

    #[test]
    fn the_transition_time_moves_only_when_the_status_changes() {
        let error = down();
        let first = round(&ProviderHealthStatus::default(), Ok(&info()), Ok(&healthy()), at(0));
        let second = round(&first, Ok(&info()), Ok(&healthy()), at(60));
        assert_eq!(available(&second).last_transition_time, at(0));
        assert_eq!(second.last_check_time, Some(at(60)));
        let failed = round(&second, Err(&error), Err(&error), at(120));
        assert_eq!(available(&failed).last_transition_time, at(120));
        let still_failing = round(&failed, Ok(&info()), Err(&error), at(130));
        assert_eq!(available(&still_failing).last_transition_time, at(120));
        assert_eq!(still_failing.conditions.len(), 1);
    }
}
