//! Get and ListByTag: read-only, so a dropped call leaves nothing behind. A terminated instance is gone
//! for Get (`NOT_FOUND`, contract §2.8: it holds nothing). ListByTag still lists it, `Terminated`, while
//! its security group remains, so that the garbage collector's Delete finishes a teardown a restart cut
//! off; once the group is gone it is left out.

use std::{collections::HashSet, sync::Arc};

use aws_sdk_ec2::{Client, types::Filter};
use futures::{StreamExt, TryStreamExt, stream};
use provider_sdk::{
    InstanceStream,
    model::{Instance, ListFilter, ProviderId},
};

use crate::{
    error::{AwsError, classify, failure},
    instances::{InstanceRef, Phase, to_instance},
    provider::Inner,
    security_group, tags,
};

/// DescribeInstances page size (EC2's maximum is 1000; the SDK's server pages by 256).
const PAGE: i32 = 256;

pub async fn get(inner: &Inner, id: &ProviderId) -> Result<Instance, AwsError> {
    let reference = InstanceRef::parse(id)?;
    let not_found = || AwsError::NotFound { id: id.to_string() };
    let Some(client) = inner.client(&reference.region) else {
        tracing::warn!(provider_id = %id, "the region is not configured; answering NOT_FOUND");
        return Err(not_found());
    };
    let ec2 = inner.describe(client, &reference).await?.ok_or_else(not_found)?;
    // EC2 shows a terminated instance for about an hour; it holds nothing any more, so it is gone. Its
    // security group, if the teardown has not removed it yet, keeps it in ListByTag instead.
    if Phase::of_instance(&ec2) == Phase::Terminated {
        return Err(not_found());
    }
    to_instance(&reference.region, &ec2)
}

/// Every configured region in turn, one page at a time, filtered on the marks by EC2 itself. A region that
/// fails ends the stream with its error (`list-partial: fail-whole`).
pub fn list(inner: Arc<Inner>, filter: ListFilter) -> InstanceStream {
    let regions: Vec<String> = inner.clients.keys().cloned().collect();
    stream::iter(regions)
        .map(move |region| list_region(inner.clone(), region, filter.clone()))
        .flatten()
        .map_err(classify)
        .boxed()
}

fn list_region(
    inner: Arc<Inner>,
    region: String,
    filter: ListFilter,
) -> impl futures::Stream<Item = Result<Instance, AwsError>> + Send {
    struct Cursor {
        inner: Arc<Inner>,
        region: String,
        filter: ListFilter,
        next_token: Option<String>,
        /// Names of the region's managed groups of this cluster, read before the first page.
        groups: Option<HashSet<String>>,
        done: bool,
    }
    let cursor = Cursor {
        inner,
        region,
        filter,
        next_token: None,
        groups: None,
        done: false,
    };
    stream::try_unfold(cursor, |mut c| async move {
        if c.done {
            return Ok(None);
        }
        let client = c
            .inner
            .client(&c.region)
            .expect("listing only configured regions")
            .clone();
        if c.groups.is_none() {
            c.groups = Some(managed_groups(&client, &c.region, &c.filter.cluster_id).await?);
        }
        tracing::debug!(region = %c.region, "DescribeInstances page");
        let filters = tags::list_filters(&c.filter.cluster_id, c.filter.proxy_uid.as_deref());
        let page = client
            .describe_instances()
            .set_filters(Some(filters))
            .max_results(PAGE)
            .set_next_token(c.next_token.take())
            .send()
            .await
            .map_err(|e| AwsError::api("DescribeInstances", &c.region)(failure(e)))?;
        c.next_token = page.next_token.filter(|t| !t.is_empty());
        c.done = c.next_token.is_none();
        let groups = c.groups.as_ref().expect("read above");
        let mut instances = Vec::new();
        for ec2 in page
            .reservations
            .unwrap_or_default()
            .into_iter()
            .flat_map(|r| r.instances.unwrap_or_default())
        {
            let instance = match to_instance(&c.region, &ec2) {
                Ok(instance) => instance,
                Err(error) => {
                    tracing::warn!(%error, "an instance without an ID; skipped");
                    continue;
                }
            };
            let gone = Phase::of_instance(&ec2) == Phase::Terminated
                && !groups.contains(&security_group::group_name(&instance.name));
            if !gone {
                instances.push(Ok(instance));
            }
        }
        Ok(Some((stream::iter(instances), c)))
    })
    .try_flatten()
}

/// The names of the region's security groups made by this provider for `cluster_id`.
async fn managed_groups(client: &Client, region: &str, cluster_id: &str) -> Result<HashSet<String>, AwsError> {
    let filters: Vec<Filter> = tags::list_filters(cluster_id, None);
    let mut names = HashSet::new();
    let mut pages = client
        .describe_security_groups()
        .set_filters(Some(filters))
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| AwsError::api("DescribeSecurityGroups", region)(failure(e)))?;
        names.extend(
            page.security_groups
                .unwrap_or_default()
                .into_iter()
                .filter_map(|g| g.group_name),
        );
    }
    Ok(names)
}
