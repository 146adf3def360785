//! The apply side of a Proxy reconcile: one serving instance that matches the spec, reachable through the
//! Service, with credentials in the consumer Secret. A changed spec makes the replacement first and moves
//! traffic only once it runs (make before break); old instances are deleted after.

use std::{sync::Arc, time::Duration};

use k8s_openapi::{api::core::v1::Secret, apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{Api, ResourceExt, runtime::controller::Action, runtime::events::EventType};
use provider_sdk::ErrorClass;

use super::{
    Context, credentials,
    error::{Error, retry_after},
    expose,
    instance::{self, Progress, Slot},
    naming::{self, SpecInputs},
    request,
    status::{self, INSTANCE_CREATED, QUOTA_EXCEEDED, READY, UP_TO_DATE, set_condition},
};
use crate::crd::{InstanceRef, Proxy, ProxyPhase, ProxyStatus};

/// How often a Proxy is looked at while its instance starts.
const PROVISIONING_POLL: Duration = Duration::from_secs(2);
/// How often a running instance is checked for loss on the backend.
const RUNNING_RESYNC: Duration = Duration::from_secs(300);
/// How long a replaced instance keeps serving after the status, the Service and the Secret name its
/// successor, so that readers of the old endpoint (a lagging watch, a connection in flight) can move. The
/// old instance is never retired in the pass that publishes the new one: the status is written first.
const RETIRE_GRACE: Duration = Duration::from_secs(5);
/// How often a spec that names a missing Secret is looked at again; no provider call is made meanwhile.
const SPEC_RECHECK: Duration = Duration::from_secs(60);

pub async fn apply(proxy: Arc<Proxy>, ctx: Arc<Context>) -> Result<Action, Error> {
    let mut status = proxy.status.clone().unwrap_or_default();
    let generation = proxy.metadata.generation;
    // A permanent provider error is not retried until the spec changes (no hot loop, no extra calls).
    let failed_here = status.observed_generation == generation && status.phase == Some(ProxyPhase::Failed);
    if failed_here
        && status
            .last_error
            .as_ref()
            .is_some_and(|e| e.class == ErrorClass::Permanent.as_str())
    {
        return Ok(Action::await_change());
    }
    let uid = proxy.uid().unwrap_or_default();
    // In backoff after a transient or quota error: wake-ups from owned objects do not cut it short.
    if let Some(left) = ctx.held(&uid, generation) {
        return Ok(Action::requeue(left));
    }
    status.observed_generation = generation;
    match progress(&proxy, &mut status, &ctx).await {
        Ok(action) => {
            ctx.forget_failures(&uid);
            status.last_error = None;
            set_condition(&mut status, QUOTA_EXCEEDED, false, "WithinQuota", "");
            status::write(&ctx.proxies(&proxy), &proxy.name_any(), &status).await?;
            ctx.record_phase(&uid, status.phase);
            Ok(action)
        }
        Err(error) => {
            let failures = ctx.count_failure(&uid);
            let class = error.class();
            let reason_changed = status.last_error.as_ref().is_none_or(|e| e.reason != error.reason());
            status::record_error(&mut status, &error);
            let spec_error = matches!(error, Error::Spec { .. });
            if class == ErrorClass::Permanent && !spec_error {
                status.phase = Some(ProxyPhase::Failed);
            } else if status.phase.is_none() || status.phase == Some(ProxyPhase::Failed) {
                // A retryable error after an earlier permanent one: no longer stopped, just not there yet.
                status.phase = Some(ProxyPhase::Pending);
            }
            status::write(&ctx.proxies(&proxy), &proxy.name_any(), &status).await?;
            ctx.record_phase(&uid, status.phase);
            if reason_changed {
                ctx.event(&proxy, EventType::Warning, "Failed", "Reconcile", error.to_string())
                    .await;
            }
            tracing::warn!(proxy = %proxy.name_any(), namespace = ?proxy.namespace(), class = class.as_str(), reason = %error.reason(), %error, "reconcile failed");
            let hint = match &error {
                Error::Provider { source, .. } => source.retry_after(),
                _ => None,
            };
            let delay = match (spec_error, retry_after(class, failures, hint)) {
                (true, _) => Some(SPEC_RECHECK),
                (false, delay) => delay,
            };
            Ok(match delay {
                Some(delay) => {
                    ctx.hold(&uid, generation, delay);
                    Action::requeue(delay)
                }
                None => Action::await_change(),
            })
        }
    }
}

async fn progress(proxy: &Proxy, status: &mut ProxyStatus, ctx: &Context) -> Result<Action, Error> {
    let handle = ctx.providers.get(&proxy.spec.provider).ok_or_else(|| {
        Error::spec(
            "spec.provider",
            "ProviderNotFound",
            format!(
                "{:?} is not configured; configured providers: {}",
                proxy.spec.provider,
                ctx.providers.names().join(", ")
            ),
        )
    })?;
    let info = ctx
        .providers
        .info(&handle)
        .await
        .map_err(|e| instance::provider_error(&handle, e))?;
    if info.provider_type != handle.provider_type {
        return Err(Error::spec(
            "spec.provider",
            "ProviderTypeMismatch",
            format!(
                "provider {:?} is configured as type {:?} but its daemon says {:?}",
                handle.name, handle.provider_type, info.provider_type
            ),
        ));
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &proxy.namespace().unwrap_or_default());
    let credentials = credentials::resolve(proxy, &secrets).await?;
    let cloud_init = request::cloud_init_source(proxy, &secrets).await?;
    let hash = SpecInputs {
        spec: &proxy.spec,
        auth_version: &credentials.version,
        cloud_init_version: &cloud_init.version,
    }
    .hash();
    let uid = proxy.uid().unwrap_or_default();
    let desired = InstanceRef {
        name: naming::instance_name(&uid, &hash, info.limits.max_name_length),
        spec_hash: hash.clone(),
        provider_id: None,
    };
    // Generated credentials are stored before any Create, so no instance ever carries a password that was
    // not kept. Otherwise the Secret is written only next to a running instance (below): a rewrite here,
    // from a cached status that may predate the instance's address, would drop the `endpoint` key for a
    // moment, and changed user credentials must not reach consumers before an instance accepts them.
    if credentials.newly_generated {
        let current_ip = status.ip.as_deref().and_then(|ip| ip.parse().ok());
        status.secret_name = Some(expose::write_secret(&ctx.client, proxy, &credentials, current_ip).await?);
    }

    // The name is in the status before any Create, so a crash between Create and the next status write
    // still finds this instance again.
    let which = match (&status.instance, &status.pending) {
        (None, _) => {
            status.instance = Some(desired.clone());
            status.phase = Some(ProxyPhase::Provisioning);
            status::write(&ctx.proxies(proxy), &proxy.name_any(), status).await?;
            Slot::Serving
        }
        (Some(serving), pending) if serving.spec_hash == hash => {
            // The spec went back to what serves: a half-made replacement is retired.
            if let Some(stale) = pending.clone() {
                status.pending = None;
                status.retiring.push(stale);
            }
            Slot::Serving
        }
        (Some(_), pending) => {
            if pending.as_ref().is_none_or(|p| p.spec_hash != hash) {
                if let Some(stale) = status.pending.take() {
                    status.retiring.push(stale);
                }
                status.pending = Some(desired.clone());
                status.phase = Some(ProxyPhase::Replacing);
                status::write(&ctx.proxies(proxy), &proxy.name_any(), status).await?;
            }
            Slot::Pending
        }
    };
    let name = match which {
        Slot::Serving => status.instance.as_ref(),
        Slot::Pending => status.pending.as_ref(),
    }
    .map(|r| r.name.clone())
    .unwrap_or_default();
    let create = request::build(proxy, &name, &ctx.cluster_id, &info, &credentials, &cloud_init)?;
    let progress = instance::drive(proxy, status, which, &create, &handle, ctx).await?;
    set_condition(
        status,
        INSTANCE_CREATED,
        true,
        "InstanceCreated",
        format!("instance {name} exists"),
    );

    let action = match progress {
        Progress::Waiting { reason, message } => {
            if which == Slot::Serving {
                status.phase = Some(ProxyPhase::Provisioning);
                set_condition(status, READY, false, reason, message);
            }
            set_condition(
                status,
                UP_TO_DATE,
                which == Slot::Serving,
                reason_for(which),
                "replacement starting",
            );
            Action::requeue(PROVISIONING_POLL)
        }
        Progress::Running(instance) => {
            if which == Slot::Pending {
                let old = status.instance.take();
                status.instance = status.pending.take();
                status.retiring.extend(old);
                ctx.event(
                    proxy,
                    EventType::Normal,
                    "Replaced",
                    "Replace",
                    format!("traffic moved to instance {}", instance.provider_id),
                )
                .await;
            }
            let ip = instance.ipv4.expect("Running carries an IPv4");
            let was_ready = status::condition_is(status, READY, true);
            status.service_name = Some(expose::write_service(&ctx.client, proxy, ip).await?);
            status.secret_name = Some(expose::write_secret(&ctx.client, proxy, &credentials, Some(ip)).await?);
            status.phase = Some(ProxyPhase::Running);
            status.provider_id = Some(instance.provider_id.to_string());
            status.instance_name = Some(instance.name.clone());
            status.ip = Some(ip.to_string());
            status.endpoint = Some(format!("{}://{ip}:{}", proxy.spec.protocol.scheme(), proxy.spec.port));
            status.spec_hash = Some(hash);
            status.created_at = Some(Time(
                Timestamp::try_from(instance.created_at).unwrap_or_else(|_| Timestamp::now()),
            ));
            set_condition(
                status,
                READY,
                true,
                "InstanceRunning",
                format!("serving on {}", status.endpoint.clone().unwrap_or_default()),
            );
            set_condition(
                status,
                UP_TO_DATE,
                true,
                "SpecApplied",
                "the serving instance matches the spec",
            );
            if !was_ready {
                ctx.event(
                    proxy,
                    EventType::Normal,
                    "Ready",
                    "Reconcile",
                    format!("serving on {ip}:{}", proxy.spec.port),
                )
                .await;
            }
            Action::requeue(RUNNING_RESYNC)
        }
    };
    if !status.retiring.is_empty() {
        if let Some(wait) = retire_wait(status, Timestamp::now()) {
            return Ok(Action::requeue(wait));
        }
        if instance::retire(proxy, status, &handle, ctx).await? {
            return Ok(Action::requeue(PROVISIONING_POLL));
        }
    }
    Ok(action)
}

/// What is left of [`RETIRE_GRACE`] since the serving instance became up to date (the swap), or `None`
/// when retiring may start. Without an up-to-date serving instance nothing was swapped in, and what
/// retires was never published.
fn retire_wait(status: &ProxyStatus, now: Timestamp) -> Option<Duration> {
    let swapped_at = status
        .conditions
        .iter()
        .find(|c| c.type_ == UP_TO_DATE && c.status == "True")?
        .last_transition_time
        .0;
    let since = Duration::try_from(now.duration_since(swapped_at)).unwrap_or_default();
    RETIRE_GRACE.checked_sub(since).filter(|left| !left.is_zero())
}

fn reason_for(which: Slot) -> &'static str {
    match which {
        Slot::Serving => "SpecApplied",
        Slot::Pending => "ReplacementStarting",
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::SignedDuration;

    use super::*;

    fn swapped_at(at: Timestamp, value: bool) -> ProxyStatus {
        let mut status = ProxyStatus::default();
        crate::conditions::set(
            &mut status.conditions,
            UP_TO_DATE,
            value,
            "R",
            String::new(),
            None,
            Time(at),
        );
        status
    }

    #[test]
    fn retiring_waits_for_the_grace_after_the_swap() {
        let swap = Timestamp::now();
        let status = swapped_at(swap, true);
        assert_eq!(
            retire_wait(&status, swap),
            Some(RETIRE_GRACE),
            "never in the pass that swaps"
        );
        let later = swap.checked_add(SignedDuration::from_secs(2)).unwrap();
        assert_eq!(retire_wait(&status, later), Some(RETIRE_GRACE - Duration::from_secs(2)));
        let after = swap.checked_add(SignedDuration::from_secs(5)).unwrap();
        assert_eq!(retire_wait(&status, after), None);
    }

    #[test]
    fn what_was_never_published_retires_at_once() {
        let now = Timestamp::now();
        assert_eq!(retire_wait(&swapped_at(now, false), now), None);
        assert_eq!(retire_wait(&ProxyStatus::default(), now), None);
    }
}
