//! GetInfo, health and Check.

use provider_sdk::proto::SERVICE_NAME;
use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient};

use super::{CheckResult, ensure};
use crate::{
    harness::{Harness, describe, with_deadline},
    report::Outcome,
};

/// The suite's own names need this many characters.
const MIN_NAME_LENGTH: u32 = 20;

pub async fn declares_every_axis(h: &Harness) -> CheckResult {
    let info = &h.info;
    let type_ok = !info.provider_type.is_empty()
        && info
            .provider_type
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    ensure!(
        type_ok,
        "provider_type {:?} must be a lowercase name",
        info.provider_type
    );
    ensure!(!info.version.is_empty(), "version is empty");
    let missing: Vec<&str> = info
        .profiles
        .entries()
        .into_iter()
        .filter(|(_, p)| p.is_none())
        .map(|(axis, _)| axis)
        .collect();
    ensure!(missing.is_empty(), "no profile declared on: {}", missing.join(", "));
    ensure!(
        info.limits.max_name_length >= MIN_NAME_LENGTH,
        "limits.max_name_length {} is below {MIN_NAME_LENGTH}",
        info.limits.max_name_length
    );
    Ok(Outcome::Passed)
}

pub async fn health_reports_serving(h: &Harness) -> CheckResult {
    let mut health = HealthClient::new(h.channel.clone());
    let request = with_deadline(
        HealthCheckRequest {
            service: SERVICE_NAME.to_owned(),
        },
        std::time::Duration::from_secs(10),
    );
    let answer = health
        .check(request)
        .await
        .map_err(|s| describe("grpc.health.v1 Check", &s))?
        .into_inner();
    ensure!(
        answer.status == ServingStatus::Serving as i32,
        "health status is {} for {SERVICE_NAME}",
        answer.status
    );
    Ok(Outcome::Passed)
}

pub async fn check_results_in_stable_order(h: &Harness) -> CheckResult {
    let first = h.check().await.map_err(|s| describe("Check", &s))?;
    let second = h.check().await.map_err(|s| describe("Check", &s))?;
    ensure!(!first.is_empty(), "Check answered no result");
    let targets =
        |results: &[provider_sdk::proto::CheckResult]| results.iter().map(|r| r.target.clone()).collect::<Vec<_>>();
    ensure!(
        targets(&first) == targets(&second),
        "target order changed: {:?} then {:?}",
        targets(&first),
        targets(&second)
    );
    let mut unique = targets(&first);
    unique.sort();
    unique.dedup();
    ensure!(unique.len() == first.len(), "targets repeat: {:?}", targets(&first));
    for result in &first {
        let reason_ok = !result.reason.is_empty()
            && result
                .reason
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        ensure!(
            reason_ok,
            "target {:?} has reason {:?}, not UPPER_SNAKE_CASE",
            result.target,
            result.reason
        );
        ensure!(
            result.ok || result.reason != "OK",
            "target {:?} failed with reason OK",
            result.target
        );
    }
    Ok(Outcome::Passed)
}
