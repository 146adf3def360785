//! The garbage collector: every `interval_seconds`, per provider, deletes the instances this cluster made
//! that no Proxy owns any more.
//!
//! **Order.** Each sweep lists the provider first, then the cluster. A Proxy created between the two reads
//! is then seen as existing, so its instance is spared. The reverse order could collect an instance whose
//! Proxy was created (and whose Create answered) just after the cluster listing.
//!
//! **What is deleted.** An instance is deleted only when every one of these holds, checked again here even
//! though ListByTag already filters (a delete never trusts the wire):
//! - it carries the `managed` mark and a Proxy UID (an instance without them was not made by this operator,
//!   or is inside a provider's mark window);
//! - its `cluster` mark is this operator's cluster id;
//! - it is older than `min_age_seconds` by its `created_at`;
//! - no Proxy with its UID exists, or the Proxy with its UID does not reference it: neither the serving,
//!   pending nor retiring `InstanceRef` (nor the top-level `instanceName` / `providerID`) names it or its
//!   provider ID. That second case is the leftover of a replacement, or of a Create whose outcome was lost
//!   while the spec changed.
//!
//! **Why the minimum age protects an instance in flight.** The Proxy controller writes an instance's name to
//! the status *before* calling Create, so an instance being made is normally referenced by name before it
//! exists. The reference can still be missing for a moment: a status write computed from a stale copy that
//! dropped a `pending` entry, a Create answered after the controller moved on to another name, or a backend
//! that names instances itself (`primary-key: allocated-id`) before the provider ID reaches the status. The
//! minimum age (at least 60 s, 15 min by default) is what covers every such window: nothing younger is ever
//! touched, and by then the controller has either recorded the instance or abandoned it. The age is
//! measured with the backend's clock against ours, so it must also be far longer than any clock skew.
//!
//! A `Terminated` orphan is deleted again: Delete is idempotent, and a provider lists an instance as
//! `Terminated` while its teardown is unfinished (the AWS provider, while the instance's security group
//! remains), so the next sweep's Delete finishes a teardown that a provider restart cut off.
//!
//! A provider whose listing fails is skipped for the round with a warning: a failed listing is never
//! treated as empty, and the instances of a partial listing are never compared with the cluster.

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, SystemTime},
};

use kube::{Api, Client, ResourceExt, api::ListParams};
use provider_sdk::{
    ProviderError,
    model::{Instance, ListFilter},
};

use crate::{
    config::GcConfig,
    crd::Proxy,
    metrics::{Metrics, ProviderLabels},
    providers::{ProviderHandle, Providers},
};

/// Proxies per page when listing the cluster, so 10,000 Proxies never arrive in one response.
const PAGE_SIZE: u32 = 500;

#[derive(Debug, thiserror::Error)]
pub enum GcError {
    #[error("listing the instances of provider {provider}: {source}")]
    ListInstances {
        provider: String,
        #[source]
        source: ProviderError,
    },
    #[error("listing Proxies: {0}")]
    ListProxies(#[source] kube::Error),
}

/// What one sweep of one provider did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Instances the provider listed.
    pub listed: usize,
    /// Instances deleted (Delete answered OK).
    pub deleted: usize,
    /// Orphans spared because they are younger than the minimum age.
    pub spared_young: usize,
    /// Instances spared because their Proxy exists and references them.
    pub spared_owned: usize,
    /// Instances spared because they are unmarked, of another cluster, or already terminating; listing
    /// them at all is the provider's bug, so each is also logged.
    pub spared_other: usize,
    /// Deletes that failed; they are retried on the next sweep.
    pub errors: usize,
}

/// The instances one Proxy references.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct References {
    pub names: HashSet<String>,
    pub provider_ids: HashSet<String>,
}

impl References {
    fn contains(&self, instance: &Instance) -> bool {
        self.names.contains(&instance.name) || self.provider_ids.contains(instance.provider_id.as_str())
    }

    /// Every instance name and provider ID the Proxy's status mentions.
    pub fn of(proxy: &Proxy) -> Self {
        let mut references = Self::default();
        let Some(status) = &proxy.status else { return references };
        for reference in status
            .instance
            .iter()
            .chain(status.pending.iter())
            .chain(status.retiring.iter())
        {
            references.names.insert(reference.name.clone());
            references.provider_ids.extend(reference.provider_id.iter().cloned());
        }
        references.names.extend(status.instance_name.iter().cloned());
        references.provider_ids.extend(status.provider_id.iter().cloned());
        references
    }
}

/// The Proxies of the cluster, by UID, with what each references.
#[derive(Clone, Debug, Default)]
pub struct ClusterView {
    pub proxies: HashMap<String, References>,
}

impl ClusterView {
    /// Lists every Proxy in pages of [`PAGE_SIZE`]. The first page's read is consistent (served at the
    /// latest resource version, never from a possibly stale cache) and the continue token keeps the
    /// following pages on that same snapshot.
    pub async fn list(client: &Client) -> Result<Self, kube::Error> {
        let api: Api<Proxy> = Api::all(client.clone());
        let mut view = Self::default();
        let mut params = ListParams::default().limit(PAGE_SIZE);
        loop {
            let page = api.list(&params).await?;
            for proxy in &page.items {
                if let Some(uid) = proxy.uid() {
                    view.proxies.insert(uid, References::of(proxy));
                }
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => return Ok(view),
            }
        }
    }
}

/// Why an instance is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Orphaned {
    /// No Proxy with its UID exists.
    ProxyGone,
    /// Its Proxy exists but references other instances.
    NotReferenced,
}

impl Orphaned {
    pub fn as_str(self) -> &'static str {
        match self {
            Orphaned::ProxyGone => "proxy-gone",
            Orphaned::NotReferenced => "not-referenced",
        }
    }
}

/// Why an instance is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spared {
    /// No `managed` mark or no Proxy UID: not ours to judge.
    Unmarked,
    /// Marked by another cluster.
    ForeignCluster,
    /// An orphan, but younger than the minimum age.
    Young,
    /// Its Proxy references it.
    Owned,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Delete(Orphaned),
    Spare(Spared),
}

/// The whole deletion rule, as a pure function of the listed instance and the cluster's Proxies.
pub fn decide(
    instance: &Instance,
    cluster: &ClusterView,
    now: SystemTime,
    min_age: Duration,
    cluster_id: &str,
) -> Verdict {
    let marks = &instance.marks;
    if !marks.managed || marks.proxy_uid.is_empty() {
        return Verdict::Spare(Spared::Unmarked);
    }
    if marks.cluster_id != cluster_id {
        return Verdict::Spare(Spared::ForeignCluster);
    }
    let orphaned = match cluster.proxies.get(&marks.proxy_uid) {
        None => Orphaned::ProxyGone,
        Some(references) if references.contains(instance) => return Verdict::Spare(Spared::Owned),
        Some(_) => Orphaned::NotReferenced,
    };
    // A created_at in the future (clock skew) counts as age zero.
    if age(instance, now) < min_age {
        return Verdict::Spare(Spared::Young);
    }
    Verdict::Delete(orphaned)
}

fn age(instance: &Instance, now: SystemTime) -> Duration {
    now.duration_since(instance.created_at).unwrap_or_default()
}

/// One sweep of one provider: list its instances of this cluster, then the cluster's Proxies, then delete
/// each instance [`decide`] condemns.
pub async fn sweep(
    client: &Client,
    provider: &ProviderHandle,
    cluster_id: &str,
    min_age: Duration,
    metrics: &Metrics,
) -> Result<SweepReport, GcError> {
    // Taken before either read: an earlier "now" can only make an instance look younger.
    let now = SystemTime::now();
    let filter = ListFilter {
        cluster_id: cluster_id.to_owned(),
        proxy_uid: None,
    };
    let instances = provider
        .list_by_tag(&filter)
        .await
        .map_err(|source| GcError::ListInstances {
            provider: provider.name.clone(),
            source,
        })?;
    let cluster = ClusterView::list(client).await.map_err(GcError::ListProxies)?;

    let mut report = SweepReport {
        listed: instances.len(),
        ..SweepReport::default()
    };
    for instance in &instances {
        match decide(instance, &cluster, now, min_age, cluster_id) {
            Verdict::Spare(Spared::Young) => report.spared_young += 1,
            Verdict::Spare(Spared::Owned) => report.spared_owned += 1,
            Verdict::Spare(why @ (Spared::Unmarked | Spared::ForeignCluster)) => {
                report.spared_other += 1;
                tracing::warn!(
                    provider = %provider.name,
                    instance = %instance.name,
                    provider_id = %instance.provider_id,
                    spared = ?why,
                    "ListByTag returned an instance outside its filter; left alone"
                );
            }
            Verdict::Delete(why) => match provider.delete(&instance.provider_id).await {
                Ok(()) => {
                    report.deleted += 1;
                    metrics
                        .gc_deletions
                        .get_or_create(&ProviderLabels {
                            provider: provider.name.clone(),
                        })
                        .inc();
                    tracing::info!(
                        provider = %provider.name,
                        instance = %instance.name,
                        provider_id = %instance.provider_id,
                        proxy_uid = %instance.marks.proxy_uid,
                        age_s = age(instance, now).as_secs(),
                        why = why.as_str(),
                        "garbage-collected an orphaned instance"
                    );
                }
                Err(error) => {
                    report.errors += 1;
                    tracing::warn!(
                        provider = %provider.name,
                        instance = %instance.name,
                        provider_id = %instance.provider_id,
                        proxy_uid = %instance.marks.proxy_uid,
                        class = error.class().as_str(),
                        %error,
                        "deleting an orphaned instance failed; retrying next sweep"
                    );
                }
            },
        }
    }
    Ok(report)
}

/// Sweeps every provider every `interval_seconds` (the first round at once) until `shutdown` resolves. A
/// round cut off by shutdown is simply dropped: Delete is idempotent and the next leader sweeps again.
pub async fn run(
    client: Client,
    providers: Providers,
    cluster_id: String,
    config: GcConfig,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
) {
    let interval = Duration::from_secs(config.interval_seconds);
    let min_age = Duration::from_secs(config.min_age_seconds);
    let rounds = async {
        loop {
            for provider in providers.all() {
                match sweep(&client, provider, &cluster_id, min_age, &metrics).await {
                    Ok(report) => tracing::debug!(provider = %provider.name, ?report, "garbage collection swept"),
                    Err(error) => {
                        tracing::warn!(provider = %provider.name, %error, "garbage collection skipped this round")
                    }
                }
            }
            tokio::time::sleep(interval).await;
        }
    };
    tokio::select! {
        () = rounds => {}
        () = shutdown => tracing::info!("garbage collector stopped"),
    }
}

#[cfg(test)]
mod tests {
    use provider_sdk::model::{InstanceState, Marks, ProviderId};

    use super::*;

    const CLUSTER: &str = "prod-eu-1";
    const MIN_AGE: Duration = Duration::from_secs(900);
    const OWNER: &str = "6f1e1c2a-0000-4000-8000-000000000001";

    /// An instance of our cluster, owned by `OWNER`, `age` old at `now()`.
    fn instance(name: &str, age: Duration) -> Instance {
        Instance {
            provider_id: ProviderId::new("fake", name),
            name: name.to_owned(),
            state: InstanceState::Running,
            ipv4: None,
            created_at: now() - age,
            marks: Marks {
                managed: true,
                proxy_uid: OWNER.to_owned(),
                cluster_id: CLUSTER.to_owned(),
            },
        }
    }

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000_000)
    }

    const OLD: Duration = Duration::from_secs(3600);

    fn empty_cluster() -> ClusterView {
        ClusterView::default()
    }

    /// A cluster where `OWNER` exists and references `names`.
    fn cluster_referencing(names: &[&str]) -> ClusterView {
        let references = References {
            names: names.iter().map(|n| n.to_string()).collect(),
            ..References::default()
        };
        ClusterView {
            proxies: HashMap::from([(OWNER.to_owned(), references)]),
        }
    }

    fn verdict(instance: &Instance, cluster: &ClusterView) -> Verdict {
        decide(instance, cluster, now(), MIN_AGE, CLUSTER)
    }

    #[test]
    fn an_old_orphan_whose_proxy_is_gone_is_deleted() {
        assert_eq!(
            verdict(&instance("px-a", OLD), &empty_cluster()),
            Verdict::Delete(Orphaned::ProxyGone)
        );
    }

    #[test]
    fn an_orphan_younger_than_the_minimum_age_is_spared() {
        let young = instance("px-a", MIN_AGE - Duration::from_secs(1));
        assert_eq!(verdict(&young, &empty_cluster()), Verdict::Spare(Spared::Young));
    }

    #[test]
    fn an_orphan_exactly_the_minimum_age_old_is_deleted() {
        let borderline = instance("px-a", MIN_AGE);
        assert_eq!(
            verdict(&borderline, &empty_cluster()),
            Verdict::Delete(Orphaned::ProxyGone)
        );
    }

    #[test]
    fn an_instance_created_in_the_future_counts_as_young() {
        let mut skewed = instance("px-a", OLD);
        skewed.created_at = now() + Duration::from_secs(60);
        assert_eq!(verdict(&skewed, &empty_cluster()), Verdict::Spare(Spared::Young));
    }

    #[test]
    fn an_unmarked_instance_is_spared_however_old() {
        let mut unmarked = instance("px-a", OLD);
        unmarked.marks.managed = false;
        assert_eq!(verdict(&unmarked, &empty_cluster()), Verdict::Spare(Spared::Unmarked));
    }

    #[test]
    fn a_managed_instance_without_a_proxy_uid_is_spared() {
        let mut anonymous = instance("px-a", OLD);
        anonymous.marks.proxy_uid.clear();
        assert_eq!(verdict(&anonymous, &empty_cluster()), Verdict::Spare(Spared::Unmarked));
    }

    #[test]
    fn an_instance_of_another_cluster_is_spared_however_old() {
        let mut foreign = instance("px-a", OLD);
        foreign.marks.cluster_id = "prod-us-1".to_owned();
        assert_eq!(
            verdict(&foreign, &empty_cluster()),
            Verdict::Spare(Spared::ForeignCluster)
        );
    }

    #[test]
    fn a_terminated_orphan_is_deleted_again_to_finish_its_teardown() {
        let mut terminated = instance("px-a", OLD);
        terminated.state = InstanceState::Terminated;
        assert_eq!(
            verdict(&terminated, &empty_cluster()),
            Verdict::Delete(Orphaned::ProxyGone)
        );
        let mut young = instance("px-a", Duration::from_secs(1));
        young.state = InstanceState::Terminated;
        assert_eq!(verdict(&young, &empty_cluster()), Verdict::Spare(Spared::Young));
    }

    #[test]
    fn an_instance_its_proxy_references_by_name_is_spared() {
        assert_eq!(
            verdict(&instance("px-a", OLD), &cluster_referencing(&["px-a"])),
            Verdict::Spare(Spared::Owned)
        );
    }

    #[test]
    fn an_instance_its_proxy_references_by_provider_id_only_is_spared() {
        let mut cluster = cluster_referencing(&[]);
        cluster
            .proxies
            .get_mut(OWNER)
            .unwrap()
            .provider_ids
            .insert("fake://px-a".to_owned());
        assert_eq!(verdict(&instance("px-a", OLD), &cluster), Verdict::Spare(Spared::Owned));
    }

    #[test]
    fn a_leftover_of_a_replacement_is_deleted_once_old() {
        let cluster = cluster_referencing(&["px-new"]);
        assert_eq!(
            verdict(&instance("px-old", OLD), &cluster),
            Verdict::Delete(Orphaned::NotReferenced)
        );
        let young = instance("px-old", Duration::from_secs(10));
        assert_eq!(verdict(&young, &cluster), Verdict::Spare(Spared::Young));
    }

    #[test]
    fn another_proxys_reference_to_the_same_name_does_not_protect_an_orphan() {
        let references = References {
            names: HashSet::from(["px-a".to_owned()]),
            ..References::default()
        };
        let cluster = ClusterView {
            proxies: HashMap::from([("another-uid".to_owned(), references)]),
        };
        assert_eq!(
            verdict(&instance("px-a", OLD), &cluster),
            Verdict::Delete(Orphaned::ProxyGone)
        );
    }

    #[test]
    fn references_cover_the_serving_pending_and_retiring_instances() {
        use crate::crd::{InstanceRef, ProxySpec, ProxyStatus};
        let reference = |name: &str, id: Option<&str>| InstanceRef {
            name: name.to_owned(),
            spec_hash: "h".to_owned(),
            provider_id: id.map(str::to_owned),
        };
        let spec: ProxySpec = serde_json::from_value(serde_json::json!({"provider": "fake"})).unwrap();
        let mut proxy = Proxy::new("p", spec);
        proxy.status = Some(ProxyStatus {
            instance: Some(reference("serving", Some("fake://serving"))),
            pending: Some(reference("pending", None)),
            retiring: vec![reference("retiring", Some("fake://retiring-id"))],
            ..ProxyStatus::default()
        });
        let references = References::of(&proxy);
        let names: HashSet<String> = ["serving", "pending", "retiring"].map(String::from).into();
        let ids: HashSet<String> = ["fake://serving", "fake://retiring-id"].map(String::from).into();
        assert_eq!(
            references,
            References {
                names,
                provider_ids: ids
            }
        );
    }
}
