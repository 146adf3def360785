//! Delete (contract §2.5), `returns-early`: TerminateInstances, then a teardown task that waits for the
//! instance to be terminated and removes its security group (EC2 refuses to delete a group in use, and
//! answers DependencyViolation while the instance shuts down). Delete waits for the teardown a few seconds
//! (long enough on an emulator, where termination is immediate) and then lets it finish on its own. A
//! teardown cut off by a restart is begun again by the next Delete of the instance: the operator's, or the
//! garbage collector's, which still sees the instance in ListByTag while its group remains.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use aws_sdk_ec2::Client;
use provider_sdk::model::ProviderId;
use tracing::Instrument;

use crate::{
    error::{AwsError, Ec2Code, failure},
    instances::{InstanceRef, Phase},
    placement::GroupMode,
    provider::Inner,
    security_group, tags,
};

/// How long Delete waits for its teardown before answering.
const TEARDOWN_GRACE: Duration = Duration::from_secs(5);

pub async fn delete(inner: Arc<Inner>, id: &ProviderId) -> Result<(), AwsError> {
    let reference = InstanceRef::parse(id)?;
    let Some(client) = inner.client(&reference.region) else {
        tracing::warn!(provider_id = %id, "the region is not configured; nothing this daemon can delete");
        return Ok(());
    };
    if tearing_down(&inner, &reference.instance_id) {
        return Ok(());
    }
    let Some(ec2) = inner.describe(client, &reference).await? else {
        return Ok(());
    };
    let phase = Phase::of(ec2.state().and_then(|s| s.name()));
    if !phase.is_going() {
        terminate(client, &reference).await?;
    }
    let name = tags::value(ec2.tags(), tags::NAME).unwrap_or_default().to_owned();
    let managed = tags::marks(ec2.tags()).managed;
    if let (Some(GroupMode::PerProxy { vpc_id }), true, false) =
        (inner.group_mode(&reference.region), managed, name.is_empty())
    {
        // Spawned before any further await, so a caller that gives up now still gets its group removed.
        if let Some(teardown) = start_teardown(inner.clone(), reference, name, vpc_id) {
            let _ = tokio::time::timeout(TEARDOWN_GRACE, teardown).await;
        }
    }
    Ok(())
}

fn tearing_down(inner: &Inner, instance_id: &str) -> bool {
    inner
        .tearing_down
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains(instance_id)
}

async fn terminate(client: &Client, reference: &InstanceRef) -> Result<(), AwsError> {
    tracing::info!(provider_id = %reference.provider_id(), "terminating the instance");
    match client
        .terminate_instances()
        .instance_ids(&reference.instance_id)
        .send()
        .await
        .map_err(failure)
    {
        Ok(_) => Ok(()),
        Err(failure) if failure.is(Ec2Code::InstanceNotFound) => Ok(()),
        Err(failure) => Err(AwsError::api("TerminateInstances", &reference.region)(failure)),
    }
}

/// Clears the instance's entry in `tearing_down` when the teardown ends, however it ends.
struct Registered {
    inner: Arc<Inner>,
    instance_id: String,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.inner
            .tearing_down
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.instance_id);
    }
}

/// Starts the teardown unless one runs for this instance; its handle, which may be dropped.
fn start_teardown(
    inner: Arc<Inner>,
    reference: InstanceRef,
    name: String,
    vpc_id: Option<String>,
) -> Option<tokio::task::JoinHandle<()>> {
    let fresh = inner
        .tearing_down
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(reference.instance_id.clone());
    if !fresh {
        return None;
    }
    let registered = Registered {
        inner,
        instance_id: reference.instance_id.clone(),
    };
    Some(tokio::spawn(
        async move {
            if let Err(error) = teardown(&registered.inner, &reference, &name, vpc_id.as_deref()).await {
                tracing::warn!(%error, "the teardown stopped; the next Delete starts it again");
            }
            drop(registered);
        }
        .in_current_span(),
    ))
}

/// Waits (polling, within the teardown budget) for the instance to be terminated, then removes its group.
async fn teardown(inner: &Inner, reference: &InstanceRef, name: &str, vpc_id: Option<&str>) -> Result<(), AwsError> {
    let budgets = &inner.config.budgets;
    let deadline = Instant::now() + budgets.teardown();
    let client = inner
        .client(&reference.region)
        .expect("teardown starts only for configured regions");
    loop {
        let phase = inner
            .describe(client, reference)
            .await?
            .map(|ec2| Phase::of(ec2.state().and_then(|s| s.name())));
        if matches!(phase, None | Some(Phase::Terminated)) {
            break;
        }
        if Instant::now() >= deadline {
            tracing::warn!(?phase, "the instance was not terminated within the teardown budget");
            return Ok(());
        }
        tokio::time::sleep(budgets.poll()).await;
    }
    // The name was Created again after this instance was terminated: the group is the successor's now.
    if crate::create::live_instance_named(client, &reference.region, name).await? {
        tracing::info!(name, "a live instance of this name uses the group; it stays");
        return Ok(());
    }
    loop {
        match security_group::delete(client, &reference.region, name, vpc_id).await {
            // EC2 releases the network interface a little after `terminated`.
            Err(AwsError::Api { failure, .. })
                if failure.is(Ec2Code::DependencyViolation) && Instant::now() < deadline =>
            {
                tracing::debug!("the group is still in use; retrying");
                tokio::time::sleep(budgets.poll()).await;
            }
            other => return other,
        }
    }
}
