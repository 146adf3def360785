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
    let phase = Phase::of_instance(&ec2);
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
            .map(|ec2| Phase::of_instance(&ec2));
        if matches!(phase, None | Some(Phase::Terminated)) {
            break;
        }
        if Instant::now() >= deadline {
            tracing::warn!(?phase, "the instance was not terminated within the teardown budget");
            return Ok(());
        }
        tokio::time::sleep(budgets.poll()).await;
    }
    loop {
        match remove_group(inner, client, &reference.region, name, vpc_id).await {
            Ok(Removal::Done) => return Ok(()),
            // A Create or Delete of the name holds its lock: ask again once it is done.
            Ok(Removal::Busy) if Instant::now() < deadline => {
                tracing::debug!(name, "the name's lock is busy; retrying");
                tokio::time::sleep(budgets.poll()).await;
            }
            Ok(Removal::Busy) => {
                tracing::warn!(
                    name,
                    "the name's lock stayed busy within the teardown budget; the group stays"
                );
                return Ok(());
            }
            // EC2 releases the network interface a little after `terminated`.
            Err(AwsError::Api { failure, .. })
                if failure.is(Ec2Code::DependencyViolation) && Instant::now() < deadline =>
            {
                tracing::debug!("the group is still in use; retrying");
                tokio::time::sleep(budgets.poll()).await;
            }
            Err(error) => return Err(error),
        }
    }
}

/// What one attempt at removing the group came to.
#[derive(Debug, PartialEq, Eq)]
enum Removal {
    /// Removed, absent, or kept for a live instance of the name.
    Done,
    /// The name's lock was held for the whole lock budget.
    Busy,
}

/// Removes the group unless a live instance of the name uses it, under the name's lock: a Create of the
/// name that found the group holds the lock until its instance is launched, so the check cannot pass
/// between that Create finding the group and its RunInstances.
async fn remove_group(
    inner: &Inner,
    client: &Client,
    region: &str,
    name: &str,
    vpc_id: Option<&str>,
) -> Result<Removal, AwsError> {
    let Some(_guard) = inner.locks.lock(name, inner.config.budgets.lock()).await else {
        return Ok(Removal::Busy);
    };
    // The name was Created again after this instance was terminated: the group is the successor's now.
    if crate::create::live_instance_named(client, region, name).await? {
        tracing::info!(name, "a live instance of this name uses the group; it stays");
        return Ok(Removal::Done);
    }
    security_group::delete(client, region, name, vpc_id).await?;
    Ok(Removal::Done)
}

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::types::Filter;

    use super::*;
    use crate::{
        create::moto,
        placement::{GroupMode, Target},
    };

    async fn groups_named(client: &Client, name: &str) -> usize {
        let filter = Filter::builder()
            .name("group-name")
            .values(security_group::group_name(name))
            .build();
        let answer = client.describe_security_groups().filters(filter).send().await.unwrap();
        answer.security_groups().len()
    }

    /// A Create of the name holds its lock from finding the group to launching into it: the teardown must
    /// not remove the group in between, and must remove it once the lock is free.
    #[tokio::test(flavor = "multi_thread")]
    async fn the_teardown_removes_the_group_only_under_the_name_s_lock() {
        let backend = moto::start();
        let inner = backend.inner.clone();
        let client = inner.client(moto::REGION).unwrap().clone();
        let target = Target {
            region: moto::REGION.into(),
            zone: None,
            subnet_id: None,
            machine_type: "t3.micro".into(),
            image_id: "ami-785db401".into(),
            group: GroupMode::PerProxy { vpc_id: None },
        };
        let made = crate::create::create(inner.clone(), target, moto::request("egress-lock"))
            .await
            .expect("Create");
        let reference = InstanceRef::parse(&made.provider_id).unwrap();
        terminate(&client, &reference).await.unwrap();
        let held = inner.locks.lock("egress-lock", Duration::from_secs(1)).await.unwrap();
        let task = {
            let inner = inner.clone();
            let reference = reference.clone();
            tokio::spawn(async move { teardown(&inner, &reference, "egress-lock", None).await })
        };
        // Several lock budgets (200 ms) and polls (50 ms) pass while a "Create" holds the lock.
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert_eq!(
            groups_named(&client, "egress-lock").await,
            1,
            "removed while the name was locked"
        );
        assert!(!task.is_finished(), "the teardown gave up on a busy lock");
        drop(held);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the teardown ends once the lock is free")
            .unwrap()
            .expect("teardown");
        assert_eq!(
            groups_named(&client, "egress-lock").await,
            0,
            "the group outlived the instance"
        );
    }
}
