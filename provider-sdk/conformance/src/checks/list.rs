//! ListByTag: the marks and created-at it reports, and the cluster boundary.

use std::time::{Duration, SystemTime};

use super::{CheckResult, Shared, ensure};
use crate::{
    harness::{Harness, describe},
    report::Outcome,
};

/// Clock skew tolerated between the suite and the backend.
const SKEW: Duration = Duration::from_secs(300);

pub async fn returns_created_with_marks(h: &Harness, shared: &Shared) -> CheckResult {
    let (request, instance) = shared.primary()?;
    let listed = h.list(&h.cluster, "").await.map_err(|s| describe("ListByTag", &s))?;
    let found = listed.iter().find(|i| i.provider_id == instance.provider_id);
    let Some(found) = found else {
        return Err(format!(
            "{} missing from ListByTag of cluster {}",
            instance.provider_id, h.cluster
        ));
    };
    let marks = found.marks.clone().unwrap_or_default();
    ensure!(
        marks.proxy_uid == request.proxy_uid,
        "listed proxy_uid {:?}, expected {:?}",
        marks.proxy_uid,
        request.proxy_uid
    );
    let created_at = found.created_at.and_then(|ts| SystemTime::try_from(ts).ok());
    let Some(created_at) = created_at else {
        return Err("listed instance has no valid created_at".into());
    };
    let now = SystemTime::now();
    let plausible = created_at <= now + SKEW
        && now.duration_since(created_at).unwrap_or_default() <= SKEW + h.params.ready_timeout() * 4;
    ensure!(plausible, "created_at {created_at:?} is not near now ({now:?})");
    Ok(Outcome::Passed)
}

pub async fn excludes_other_clusters(h: &Harness) -> CheckResult {
    let request = h.request(&h.name("foreign"), &h.uid(), &h.other_cluster);
    let foreign = h
        .create(request)
        .await
        .map_err(|s| describe("Create in the other cluster", &s))?;
    let ours = h.list(&h.cluster, "").await.map_err(|s| describe("ListByTag", &s))?;
    ensure!(
        ours.iter().all(|i| i.provider_id != foreign.provider_id),
        "ListByTag for cluster {} returned {}, which is marked for cluster {}",
        h.cluster,
        foreign.provider_id,
        h.other_cluster
    );
    ensure!(
        ours.iter()
            .all(|i| i.marks.as_ref().is_some_and(|m| m.managed && m.cluster_id == h.cluster)),
        "ListByTag for cluster {} returned instances without its marks",
        h.cluster
    );
    let theirs = h
        .list(&h.other_cluster, "")
        .await
        .map_err(|s| describe("ListByTag", &s))?;
    ensure!(
        theirs.iter().any(|i| i.provider_id == foreign.provider_id),
        "the other cluster's listing misses its instance"
    );
    Ok(Outcome::Passed)
}
