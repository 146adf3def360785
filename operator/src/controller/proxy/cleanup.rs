//! The delete side: every instance the Proxy ever had (serving, pending, retiring, and anything the
//! provider lists under its UID) is deleted, and the finalizer goes only once the backend confirms that
//! none is left.

use std::sync::Arc;

use kube::{ResourceExt, runtime::controller::Action, runtime::events::EventType};
use provider_sdk::model::ListFilter;

use super::{Context, error::Error, instance};
use crate::crd::{Proxy, ProxyPhase};

pub async fn cleanup(proxy: Arc<Proxy>, ctx: Arc<Context>) -> Result<Action, Error> {
    let mut status = proxy.status.clone().unwrap_or_default();
    let known: Vec<_> = status
        .instance
        .iter()
        .chain(status.pending.iter())
        .chain(status.retiring.iter())
        .cloned()
        .collect();
    if known.is_empty() {
        ctx.record_phase(&proxy.uid().unwrap_or_default(), None);
        return Ok(Action::await_change());
    }
    let handle = ctx.providers.get(&proxy.spec.provider).ok_or_else(|| {
        Error::spec(
            "spec.provider",
            "ProviderNotFound",
            format!(
                "{:?} is not configured, so its instances cannot be deleted; restore it, or remove the finalizer to abandon them",
                proxy.spec.provider
            ),
        )
    })?;
    if status.phase != Some(ProxyPhase::Deleting) {
        status.phase = Some(ProxyPhase::Deleting);
        super::status::write(&ctx.proxies(&proxy), &proxy.name_any(), &status).await?;
    }
    let mut remaining = 0;
    for reference in &known {
        if !instance::delete_confirmed(&proxy, reference, &handle, &ctx).await? {
            remaining += 1;
        }
    }
    // Anything else marked with this Proxy's UID, such as a Create answered after a crash.
    let filter = ListFilter {
        cluster_id: ctx.cluster_id.clone(),
        proxy_uid: Some(proxy.uid().unwrap_or_default()),
    };
    for stray in handle
        .list_by_tag(&filter)
        .await
        .map_err(|e| instance::provider_error(&handle, e))?
    {
        handle
            .delete(&stray.provider_id)
            .await
            .map_err(|e| instance::provider_error(&handle, e))?;
        remaining += 1;
    }
    if remaining > 0 {
        return Err(Error::StillDeleting { remaining });
    }
    ctx.event(
        &proxy,
        EventType::Normal,
        "Deleted",
        "Delete",
        format!("all instances deleted on provider {}", handle.name),
    )
    .await;
    ctx.record_phase(&proxy.uid().unwrap_or_default(), None);
    Ok(Action::await_change())
}
