//! Driving one instance toward Running, and retiring old ones: the provider calls of a reconcile. Every
//! name is in the status before its Create, and every provider ID right after, so a crash at any step
//! resumes with the same instance.

use kube::runtime::events::EventType;
use provider_sdk::{
    ErrorClass, ProviderError,
    model::{CreateRequest, Instance, InstanceState, ListFilter, ProviderId},
};

use super::{Context, error::Error, status};
use crate::{
    crd::{InstanceRef, Proxy, ProxyStatus},
    providers::ProviderHandle,
};

/// Which instance of the status a step drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The serving instance.
    Serving,
    /// The replacement being made for a changed spec.
    Pending,
}

fn slot(status: &mut ProxyStatus, which: Slot) -> &mut Option<InstanceRef> {
    match which {
        Slot::Serving => &mut status.instance,
        Slot::Pending => &mut status.pending,
    }
}

pub fn provider_error(handle: &ProviderHandle, source: ProviderError) -> Error {
    Error::Provider {
        provider: handle.name.clone(),
        source: Box::new(source),
    }
}

/// What the instance in `which` is doing now.
#[derive(Debug)]
pub enum Progress {
    Running(Instance),
    /// Not serving yet (or any more): the reason and message for the Ready condition.
    Waiting {
        reason: &'static str,
        message: String,
    },
}

/// Creates the instance if the status has no provider ID for it, else reads it; recreates it when the
/// backend lost it.
pub async fn drive(
    proxy: &Proxy,
    status: &mut ProxyStatus,
    which: Slot,
    request: &CreateRequest,
    handle: &ProviderHandle,
    ctx: &Context,
) -> Result<Progress, Error> {
    let known = slot(status, which).as_ref().and_then(|r| r.provider_id.clone());
    let instance = match known {
        Some(id) => match handle
            .get(&ProviderId::parse_any(&id).map_err(|e| bad_id(&id, e))?)
            .await
        {
            Ok(instance) => instance,
            Err(error) if error.class() == ErrorClass::NotFound => {
                ctx.event(
                    proxy,
                    EventType::Warning,
                    "InstanceLost",
                    "Recreate",
                    format!("instance {id} is gone from the backend; creating it again"),
                )
                .await;
                create(proxy, status, which, request, handle, ctx).await?
            }
            Err(error) => return Err(provider_error(handle, error)),
        },
        None => create(proxy, status, which, request, handle, ctx).await?,
    };
    Ok(match instance.state {
        InstanceState::Running if instance.ipv4.is_some() => Progress::Running(instance),
        InstanceState::Running | InstanceState::Provisioning => Progress::Waiting {
            reason: "InstanceProvisioning",
            message: format!("instance {} is starting", instance.name),
        },
        InstanceState::Stopped => Progress::Waiting {
            reason: "InstanceStopped",
            message: format!("instance {} is stopped on the backend", instance.name),
        },
        InstanceState::Terminated => Progress::Waiting {
            reason: "InstanceTerminated",
            message: format!("instance {} is terminating on the backend", instance.name),
        },
    })
}

fn bad_id(id: &str, problem: String) -> Error {
    Error::spec(
        "status.instance.providerId",
        "MalformedProviderID",
        format!("{id:?}: {problem}"),
    )
}

async fn create(
    proxy: &Proxy,
    status: &mut ProxyStatus,
    which: Slot,
    request: &CreateRequest,
    handle: &ProviderHandle,
    ctx: &Context,
) -> Result<Instance, Error> {
    let instance = handle.create(request).await.map_err(|e| provider_error(handle, e))?;
    if let Some(reference) = slot(status, which) {
        reference.provider_id = Some(instance.provider_id.to_string());
    }
    // The ID goes to the status at once: the next reconcile reads this instance instead of creating.
    status::write(&ctx.proxies(proxy), &proxy_name(proxy), status).await?;
    ctx.event(
        proxy,
        EventType::Normal,
        "Created",
        "Create",
        format!("instance {} created on provider {}", instance.provider_id, handle.name),
    )
    .await;
    Ok(instance)
}

fn proxy_name(proxy: &Proxy) -> String {
    kube::ResourceExt::name_any(proxy)
}

/// Deletes the instances a replacement left behind, keeping in `status.retiring` those the backend has not
/// confirmed gone. Returns whether any remain.
pub async fn retire(
    proxy: &Proxy,
    status: &mut ProxyStatus,
    handle: &ProviderHandle,
    ctx: &Context,
) -> Result<bool, Error> {
    let mut remaining = Vec::new();
    let mut first_error = None;
    for old in std::mem::take(&mut status.retiring) {
        match delete_confirmed(proxy, &old, handle, ctx).await {
            Ok(true) => {
                ctx.event(
                    proxy,
                    EventType::Normal,
                    "Retired",
                    "Delete",
                    format!("old instance {} deleted", old.name),
                )
                .await;
            }
            Ok(false) => remaining.push(old),
            Err(error) => {
                remaining.push(old);
                first_error.get_or_insert(error);
            }
        }
    }
    status.retiring = remaining;
    match first_error {
        Some(error) => Err(error),
        None => Ok(!status.retiring.is_empty()),
    }
}

/// Deletes one instance; `true` once the backend says it does not exist. An instance whose Create never
/// answered is looked up by name among the Proxy's instances.
pub async fn delete_confirmed(
    proxy: &Proxy,
    reference: &InstanceRef,
    handle: &ProviderHandle,
    ctx: &Context,
) -> Result<bool, Error> {
    let ids = match &reference.provider_id {
        Some(id) => vec![ProviderId::parse_any(id).map_err(|e| bad_id(id, e))?],
        None => {
            let filter = ListFilter {
                cluster_id: ctx.cluster_id.clone(),
                proxy_uid: Some(kube::ResourceExt::uid(proxy).unwrap_or_default()),
            };
            let listed = handle
                .list_by_tag(&filter)
                .await
                .map_err(|e| provider_error(handle, e))?;
            listed
                .into_iter()
                .filter(|i| i.name == reference.name)
                .map(|i| i.provider_id)
                .collect()
        }
    };
    let mut gone = true;
    for id in ids {
        handle.delete(&id).await.map_err(|e| provider_error(handle, e))?;
        match handle.get(&id).await {
            Err(error) if error.class() == ErrorClass::NotFound => {}
            Ok(_) => gone = false,
            Err(error) => return Err(provider_error(handle, error)),
        }
    }
    Ok(gone)
}
