//! Create: the instance it answers, idempotency by name, refusal of a name reused with another spec,
//! concurrency, and readiness.

use provider_sdk::{
    model::{Readiness, is_routable},
    proto,
};
use tonic::Code;

use super::{CheckResult, Shared, ensure};
use crate::{
    harness::{Harness, describe},
    report::Outcome,
};

/// Creates racing for one name in `concurrent_same_name_makes_one`.
const RACERS: usize = 8;

pub async fn returns_the_instance(h: &Harness, shared: &mut Shared) -> CheckResult {
    let request = h.request(&h.name("main"), &h.uid(), &h.cluster);
    let instance = h.create(request.clone()).await.map_err(|s| describe("Create", &s))?;
    shared.primary = Some((request.clone(), instance.clone()));
    ensure!(
        instance.name == request.name,
        "answered name {:?} for requested {:?}",
        instance.name,
        request.name
    );
    let marks = instance.marks.clone().unwrap_or_default();
    ensure!(marks.managed, "the managed mark is not set");
    ensure!(
        marks.proxy_uid == request.proxy_uid,
        "proxy_uid mark {:?}, expected {:?}",
        marks.proxy_uid,
        request.proxy_uid
    );
    ensure!(
        marks.cluster_id == request.cluster_id,
        "cluster mark {:?}, expected {:?}",
        marks.cluster_id,
        request.cluster_id
    );
    let state = proto::InstanceState::try_from(instance.state);
    let started = matches!(
        state,
        Ok(proto::InstanceState::Provisioning | proto::InstanceState::Running)
    );
    ensure!(
        started,
        "a new instance is {state:?}: it must be Provisioning or Running, never Stopped"
    );
    Ok(Outcome::Passed)
}

pub async fn immediate_readiness(h: &Harness, shared: &Shared) -> CheckResult {
    if h.info.profiles.readiness != Some(Readiness::Immediate) {
        return Ok(Outcome::Skipped("the provider declares a provisioning window".into()));
    }
    let (_, instance) = shared.primary()?;
    ensure!(
        instance.state == proto::InstanceState::Running as i32,
        "readiness immediate, but Create answered state {}",
        instance.state
    );
    Ok(Outcome::Passed)
}

pub async fn repeated_returns_the_same(h: &Harness, shared: &Shared) -> CheckResult {
    let (request, first) = shared.primary()?;
    for attempt in 2..=3 {
        let again = h
            .create(request.clone())
            .await
            .map_err(|s| describe(&format!("Create #{attempt}"), &s))?;
        ensure!(
            again.provider_id == first.provider_id,
            "Create #{attempt} made {} instead of returning {}",
            again.provider_id,
            first.provider_id
        );
    }
    let listed = h
        .list(&h.cluster, &request.proxy_uid)
        .await
        .map_err(|s| describe("ListByTag", &s))?;
    ensure!(
        listed.len() == 1,
        "{} instances listed for one name after three Creates",
        listed.len()
    );
    Ok(Outcome::Passed)
}

pub async fn same_name_other_spec_is_refused(h: &Harness, shared: &Shared) -> CheckResult {
    let (request, _) = shared.primary()?;
    let mut other = request.clone();
    if let Some(proxy) = other.proxy.as_mut() {
        proxy.port = if proxy.port == 1 { 2 } else { proxy.port - 1 };
    }
    match h.create(other).await {
        Ok(instance) => Err(format!(
            "a Create with another port under the same name answered {}",
            instance.provider_id
        )),
        Err(status) if status.code() == Code::AlreadyExists => Ok(Outcome::Passed),
        Err(status) => Err(describe("expected ALREADY_EXISTS, got", &status)),
    }
}

pub async fn running_implies_ipv4(h: &Harness, shared: &Shared) -> CheckResult {
    let (_, instance) = shared.primary()?;
    let running = h.wait_running(&instance.provider_id).await?;
    let ip = running.ipv4.parse();
    ensure!(ip.is_ok_and(is_routable), "Running with IPv4 {:?}", running.ipv4);
    Ok(Outcome::Passed)
}

pub async fn concurrent_same_name_makes_one(h: &Harness) -> CheckResult {
    let request = h.request(&h.name("race"), &h.uid(), &h.cluster);
    let racers = (0..RACERS).map(|_| h.create(request.clone()));
    let answers = futures::future::join_all(racers).await;
    let mut ids = Vec::new();
    for answer in answers {
        match answer {
            Ok(instance) => ids.push(instance.provider_id),
            // A racer may be told to retry; the operator would.
            Err(status) if matches!(status.code(), Code::Aborted | Code::Unavailable) => {}
            Err(status) => return Err(describe("a concurrent Create", &status)),
        }
    }
    ids.dedup();
    ensure!(
        ids.len() == 1,
        "concurrent Creates answered {} different instances: {ids:?}",
        ids.len()
    );
    let listed = h
        .list(&h.cluster, &request.proxy_uid)
        .await
        .map_err(|s| describe("ListByTag", &s))?;
    ensure!(
        listed.len() == 1,
        "{RACERS} concurrent Creates with one name left {} instances",
        listed.len()
    );
    Ok(Outcome::Passed)
}
