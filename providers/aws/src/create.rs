//! Create (contract §2.3), idempotent by name. The steps, and what each finds on a retry:
//!
//! 1. the name's lock (one Create or Delete per name in this daemon);
//! 2. every configured region is searched for a live instance tagged `Name=<name>`: ours with the same
//!    fingerprint is returned as it is, ours being torn down is `INSTANCE_DELETING`, anything else is
//!    `NAME_IN_USE`;
//! 3. the security group is found by name or made (per-Proxy mode), and its rule added if missing;
//! 4. RunInstances with a ClientToken derived from the name, so that a retry EC2 has not yet made visible
//!    to step 2 (DescribeInstances is eventually consistent) gets the same instance back instead of a second.
//!
//! The whole of it runs in a spawned task (`provider::detached`), so a caller that gives up does not cut
//! it off between steps.

use std::{sync::Arc, time::SystemTime};

use aws_sdk_ec2::{
    Client,
    types::{Filter, InstanceStateName, Placement as Ec2Placement, ResourceType},
};
use provider_sdk::model::{CreateRequest, Instance};
use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};

use crate::{
    error::{AwsError, failure},
    instances::{Phase, to_instance},
    placement::{GroupMode, Target},
    provider::Inner,
    security_group, tags,
};

/// How many ClientTokens one name may use. A token EC2 remembers for an instance that was terminated
/// (the same name Created again after a Delete) answers that instance; the next token makes a new one.
const TOKEN_GENERATIONS: u32 = 4;

/// The idempotency token of the `generation`th instance named `name`: 64 hex characters, EC2's maximum.
pub fn client_token(name: &str, generation: u32) -> String {
    let digest = Sha256::digest(format!("egressproxies.dev/{name}/{generation}"));
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

pub async fn create(inner: Arc<Inner>, target: Target, request: CreateRequest) -> Result<Instance, AwsError> {
    let name = request.name.as_str();
    let _guard = inner
        .locks
        .lock(name, inner.config.budgets.lock())
        .await
        .ok_or_else(|| AwsError::Busy { name: name.to_owned() })?;
    if let Some(existing) = find_by_name(&inner, &request).await? {
        return Ok(existing);
    }
    let client = inner
        .client(&target.region)
        .expect("placement resolves only configured regions");
    let group_id = match &target.group {
        GroupMode::PerProxy { vpc_id } => {
            security_group::ensure(client, &target.region, vpc_id.as_deref(), &request).await?
        }
        GroupMode::Shared(id) => id.clone(),
    };
    run(client, &target, &request, &group_id).await
}

/// The EC2 states of an instance that still holds its resources.
const LIVE: [&str; 5] = ["pending", "running", "stopping", "stopped", "shutting-down"];

/// The filters of "live instances named `name`".
fn live_filters(name: &str) -> Vec<Filter> {
    vec![
        tags::filter(tags::NAME, name),
        Filter::builder()
            .name("instance-state-name")
            .set_values(Some(LIVE.map(String::from).to_vec()))
            .build(),
    ]
}

/// Whether `region` has a live instance named `name` (the teardown asks before removing a group).
pub async fn live_instance_named(client: &Client, region: &str, name: &str) -> Result<bool, AwsError> {
    let answer = client
        .describe_instances()
        .set_filters(Some(live_filters(name)))
        .send()
        .await
        .map_err(|e| AwsError::api("DescribeInstances", region)(failure(e)))?;
    Ok(answer.reservations().iter().any(|r| !r.instances().is_empty()))
}

/// Step 2: the live instance of this name, in any configured region.
async fn find_by_name(inner: &Inner, request: &CreateRequest) -> Result<Option<Instance>, AwsError> {
    let name = request.name.as_str();
    let searches = inner.clients.iter().map(|(region, client)| async move {
        tracing::debug!(region, name, "DescribeInstances by name");
        let filters = live_filters(name);
        let mut found = Vec::new();
        let mut pages = client
            .describe_instances()
            .set_filters(Some(filters))
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| AwsError::api("DescribeInstances", region)(failure(e)))?;
            for reservation in page.reservations.unwrap_or_default() {
                found.extend(
                    reservation
                        .instances
                        .unwrap_or_default()
                        .into_iter()
                        .map(|i| (region.as_str(), i)),
                );
            }
        }
        Ok::<_, AwsError>(found)
    });
    let found: Vec<_> = futures::future::try_join_all(searches)
        .await?
        .into_iter()
        .flatten()
        .collect();
    let fingerprint = request.spec_fingerprint();
    let mut taken = None;
    for (region, ec2) in &found {
        let tags = ec2.tags();
        let marks = tags::marks(tags);
        let ours = marks.managed && marks.cluster_id == request.cluster_id;
        let same_spec = tags::value(tags, tags::SPEC) == Some(fingerprint.as_str());
        let phase = Phase::of(ec2.state().and_then(|s| s.name()));
        let instance = to_instance(region, ec2)?;
        match (ours && same_spec, phase.is_going()) {
            (true, false) => {
                tracing::debug!(provider_id = %instance.provider_id, "found the instance of this name");
                return Ok(Some(instance));
            }
            (true, true) => {
                return Err(AwsError::Deleting {
                    name: name.to_owned(),
                    id: instance.provider_id.to_string(),
                });
            }
            (false, _) => {
                let why = match (marks.managed, ours) {
                    (false, _) => "an instance without the managed mark has it",
                    (true, false) => "an instance of another cluster has it",
                    (true, true) => "an instance with another spec has it",
                };
                taken = Some(format!("{why} ({})", instance.provider_id));
            }
        }
    }
    match taken {
        Some(why) => Err(AwsError::NameInUse {
            name: name.to_owned(),
            why,
        }),
        None => Ok(None),
    }
}

/// Step 4.
async fn run(client: &Client, target: &Target, request: &CreateRequest, group_id: &str) -> Result<Instance, AwsError> {
    let name = request.name.as_str();
    let region = target.region.as_str();
    let user_data = request
        .cloud_init
        .as_ref()
        .filter(|bytes| !bytes.expose_secret().is_empty())
        .map(|bytes| aws_smithy_types::base64::encode(bytes.expose_secret()));
    let tags = tags::for_request(request, name, SystemTime::now());
    for generation in 0..TOKEN_GENERATIONS {
        tracing::info!(region, name, generation, "RunInstances");
        let answer = client
            .run_instances()
            .image_id(&target.image_id)
            .instance_type(target.machine_type.as_str().into())
            .min_count(1)
            .max_count(1)
            .client_token(client_token(name, generation))
            .set_placement(
                target
                    .zone
                    .as_ref()
                    .map(|zone| Ec2Placement::builder().availability_zone(zone).build()),
            )
            .set_subnet_id(target.subnet_id.clone())
            .security_group_ids(group_id)
            .set_user_data(user_data.clone())
            .tag_specifications(tags::specification(ResourceType::Instance, tags.clone()))
            .send()
            .await
            .map_err(|e| AwsError::api("RunInstances", region)(failure(e)))?;
        let Some(ec2) = answer.instances.unwrap_or_default().into_iter().next() else {
            return Err(AwsError::Unexpected {
                operation: "RunInstances",
                region: region.to_owned(),
                what: "an instance",
            });
        };
        let going = matches!(
            ec2.state().and_then(|s| s.name()),
            Some(InstanceStateName::ShuttingDown | InstanceStateName::Terminated)
        );
        if !going {
            let instance = to_instance(region, &ec2)?;
            tracing::info!(provider_id = %instance.provider_id, "instance created");
            return Ok(instance);
        }
        tracing::info!(
            region,
            name,
            generation,
            "this token belongs to a terminated instance; trying the next"
        );
    }
    Err(AwsError::Deleting {
        name: name.to_owned(),
        id: format!("every ClientToken of {name} names a terminated instance"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_tokens_are_stable_per_name_and_generation_and_fit_ec2_s_limit() {
        let token = client_token("egress-a", 0);
        assert_eq!(token.len(), 64);
        assert_eq!(token, client_token("egress-a", 0), "a retry sends the same token");
        assert_ne!(token, client_token("egress-b", 0));
        assert_ne!(token, client_token("egress-a", 1));
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    }
}
