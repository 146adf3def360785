//! The Proxy controller: a finalizer, then the apply or cleanup side. Watches Proxies (filtered to changes
//! of generation, deletion and finalizers, so its own status writes do not wake it) and the objects it
//! manages (Secrets, Services, EndpointSlices with its label).

mod apply;
mod cleanup;
pub mod credentials;
pub mod error;
mod expose;
#[cfg(test)]
mod fixtures;
mod instance;
pub mod naming;
mod request;
pub mod status;
#[cfg(test)]
mod tests;

use std::{
    collections::HashMap,
    hash::{DefaultHasher, Hash, Hasher},
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::api::{
    core::v1::{Secret, Service},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{
        Controller, WatchStreamExt,
        controller::{self, Action},
        events::{Event, EventType, Recorder, Reporter},
        finalizer::{Event as FinalizerEvent, finalizer},
        predicates, reflector, watcher,
    },
};

pub use self::error::Error;
use crate::{
    crd::{FINALIZER, Proxy},
    metrics::{ControllerLabels, ErrorLabels, Metrics},
    providers::Providers,
};

const CONTROLLER: &str = "proxy";

/// Proxies reconciled at once; the others wait in the controller's queue. Each reconcile in flight holds
/// an apiserver connection while it writes (the kube client speaks HTTP/1.1, one request per connection),
/// so without a bound 10,000 Proxies applied at once open thousands of TLS connections, the apiserver
/// answers them 504 after its 60 s timeout, the client retries, and almost nothing reaches Running
/// (docs/benchmarks.md, "Operator at scale"). Provider calls have their own cap per provider below this.
const MAX_CONCURRENT_RECONCILES: u16 = 64;

/// What every reconcile shares.
pub struct Context {
    pub client: Client,
    pub providers: Providers,
    pub cluster_id: String,
    pub metrics: Metrics,
    recorder: Recorder,
    /// Consecutive failures per Proxy UID, for the backoff.
    failures: Mutex<HashMap<String, u32>>,
    /// Per Proxy UID: no provider call before this instant while the generation stays the same. Watch
    /// events of owned objects would otherwise wake a Proxy in backoff and call the provider again.
    not_before: Mutex<HashMap<String, (Option<i64>, std::time::Instant)>>,
    /// The phase last written for each Proxy UID, so the `egress_proxies{phase}` gauge moves with it.
    phases: Mutex<HashMap<String, crate::crd::ProxyPhase>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("cluster_id", &self.cluster_id)
            .finish_non_exhaustive()
    }
}

impl Context {
    pub fn new(client: Client, providers: Providers, cluster_id: String, metrics: Metrics) -> Self {
        let reporter = Reporter {
            controller: "egress-operator".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            providers,
            cluster_id,
            metrics,
            failures: Mutex::default(),
            not_before: Mutex::default(),
            phases: Mutex::default(),
        }
    }

    pub fn proxies(&self, proxy: &Proxy) -> Api<Proxy> {
        Api::namespaced(self.client.clone(), &proxy.namespace().unwrap_or_default())
    }

    /// Publishes an Event on the Proxy; a failure to publish is logged, never fatal.
    pub async fn event(&self, proxy: &Proxy, type_: EventType, reason: &str, action: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &proxy.object_ref(&())).await {
            tracing::warn!(%error, proxy = %proxy.name_any(), reason, "publishing an event failed");
        }
    }

    fn count_failure(&self, uid: &str) -> u32 {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let count = failures.entry(uid.to_owned()).or_default();
        *count = count.saturating_add(1);
        *count - 1
    }

    fn forget_failures(&self, uid: &str) {
        self.failures.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
        self.not_before.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
    }

    /// Moves the Proxy from its previous phase to `phase` in the gauge; `None` when it is gone.
    pub(crate) fn record_phase(&self, uid: &str, phase: Option<crate::crd::ProxyPhase>) {
        use crate::metrics::PhaseLabels;
        let mut phases = self.phases.lock().unwrap_or_else(|p| p.into_inner());
        let previous = match phase {
            Some(phase) => phases.insert(uid.to_owned(), phase),
            None => phases.remove(uid),
        };
        if previous == phase {
            return;
        }
        if let Some(previous) = previous {
            self.metrics
                .proxies_by_phase
                .get_or_create(&PhaseLabels {
                    phase: previous.as_str(),
                })
                .dec();
        }
        if let Some(phase) = phase {
            self.metrics
                .proxies_by_phase
                .get_or_create(&PhaseLabels { phase: phase.as_str() })
                .inc();
        }
    }

    /// Holds provider calls for this Proxy until `delay` has passed, unless its generation changes.
    fn hold(&self, uid: &str, generation: Option<i64>, delay: Duration) {
        let until = std::time::Instant::now() + delay;
        self.not_before
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uid.to_owned(), (generation, until));
    }

    /// The time left in a hold for this generation, if any.
    fn held(&self, uid: &str, generation: Option<i64>) -> Option<Duration> {
        let holds = self.not_before.lock().unwrap_or_else(|p| p.into_inner());
        let (held_generation, until) = holds.get(uid)?;
        (*held_generation == generation)
            .then(|| until.saturating_duration_since(std::time::Instant::now()))
            .filter(|d| !d.is_zero())
    }
}

/// Wakes the controller for spec changes, deletion and finalizer changes, and not for status writes.
fn meaningful_change(proxy: &Proxy) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    predicates::generation(proxy).hash(&mut hasher);
    proxy.meta().deletion_timestamp.is_some().hash(&mut hasher);
    proxy.finalizers().hash(&mut hasher);
    Some(hasher.finish())
}

pub async fn reconcile(proxy: Arc<Proxy>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.metrics
        .reconciles
        .get_or_create(&ControllerLabels { controller: CONTROLLER })
        .inc();
    let api = ctx.proxies(&proxy);
    finalizer(&api, FINALIZER, proxy, |event| async {
        match event {
            FinalizerEvent::Apply(proxy) => apply::apply(proxy, ctx.clone()).await,
            FinalizerEvent::Cleanup(proxy) => cleanup::cleanup(proxy, ctx.clone()).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

/// Errors reaching here are Kubernetes API failures or a deletion still under way; provider errors are
/// handled inside `apply` so their status is written.
pub fn error_policy(proxy: Arc<Proxy>, error: &Error, ctx: Arc<Context>) -> Action {
    let class = error.class();
    ctx.metrics
        .reconcile_errors
        .get_or_create(&ErrorLabels {
            controller: CONTROLLER,
            class: class.as_str(),
        })
        .inc();
    if let Error::Finalizer(inner) = error
        && let kube::runtime::finalizer::Error::CleanupFailed(Error::StillDeleting { .. }) = inner.as_ref()
    {
        return Action::requeue(Duration::from_secs(2));
    }
    tracing::warn!(proxy = %proxy.name_any(), namespace = ?proxy.namespace(), class = class.as_str(), %error, "reconcile failed");
    let failures = ctx.count_failure(&proxy.uid().unwrap_or_default());
    match error::retry_after(class, failures, None) {
        Some(delay) => Action::requeue(delay),
        // A spec problem met during cleanup (provider gone): look again now and then.
        None => Action::requeue(Duration::from_secs(60)),
    }
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

/// Runs the controller until the stream ends (on shutdown). `namespace` limits it to one namespace.
pub async fn run(ctx: Arc<Context>, namespace: Option<String>) {
    let client = ctx.client.clone();
    let ns = namespace.as_deref();
    let proxies: Api<Proxy> = api(&client, ns);
    let managed = watcher::Config::default().labels(&format!("{}={}", expose::MANAGED_BY.0, expose::MANAGED_BY.1));
    let (reader, writer) = reflector::store();
    let stream = watcher(proxies, watcher::Config::default().any_semantic())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(meaningful_change, Default::default());
    Controller::for_stream(stream, reader)
        .with_config(controller::Config::default().concurrency(MAX_CONCURRENT_RECONCILES))
        .owns(api::<Secret>(&client, ns), managed.clone())
        .owns(api::<Service>(&client, ns), managed.clone())
        .owns(api::<EndpointSlice>(&client, ns), managed)
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile stream");
            }
        })
        .await;
}
