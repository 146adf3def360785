//! The EC2 tags that carry an instance's name, its marks (contract §2.4) and its spec fingerprint, on the
//! instance and on its security group. The marks are set in the creating call itself (`TagSpecifications`), so
//! no instance or group exists without them (`gc-mark: native-labels`); an instance's created-at follows.

use std::time::{SystemTime, UNIX_EPOCH};

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use provider_sdk::model::{CreateRequest, Marks};

pub const NAME: &str = "Name";
pub const MANAGED: &str = "egressproxies.dev/managed";
pub const PROXY_UID: &str = "egressproxies.dev/proxy-uid";
pub const CLUSTER: &str = "egressproxies.dev/cluster";
/// `CreateRequest::spec_fingerprint()`: tells "the same Create again" from "the name with another spec".
pub const SPEC: &str = "egressproxies.dev/spec";
/// Unix seconds of the instance's first launch, written once with CreateTags after RunInstances (never in
/// its TagSpecifications: a retry under the same ClientToken must send the same parameters, or EC2 answers
/// IdempotentParameterMismatch). EC2's LaunchTime moves on every start of a stopped instance, and
/// `created_at` must never move (contract §4.5), hence the tag.
pub const CREATED_AT: &str = "egressproxies.dev/created-at";

/// The tags of everything made for `request`, named `name`: they depend on the request alone, so that a
/// retried RunInstances sends exactly what the first one sent.
pub fn for_request(request: &CreateRequest, name: &str) -> Vec<Tag> {
    marks_for(
        name,
        &request.proxy_uid,
        &request.cluster_id,
        &request.spec_fingerprint(),
    )
}

/// The name and mark tags, from their values.
pub fn marks_for(name: &str, proxy_uid: &str, cluster_id: &str, spec: &str) -> Vec<Tag> {
    [
        (NAME, name),
        (MANAGED, "true"),
        (PROXY_UID, proxy_uid),
        (CLUSTER, cluster_id),
        (SPEC, spec),
    ]
    .into_iter()
    .map(|(key, value)| Tag::builder().key(key).value(value).build())
    .collect()
}

/// The created-at tag for `time`, in Unix seconds.
pub fn created_at(time: SystemTime) -> Tag {
    let secs = time.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    Tag::builder().key(CREATED_AT).value(secs.to_string()).build()
}

pub fn specification(kind: ResourceType, tags: Vec<Tag>) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .set_tags(Some(tags))
        .build()
}

/// The value of `key` among `tags`.
pub fn value<'a>(tags: &'a [Tag], key: &str) -> Option<&'a str> {
    tags.iter().find(|t| t.key() == Some(key)).and_then(Tag::value)
}

/// The marks as EC2 holds them: read back, never echoed from a request.
pub fn marks(tags: &[Tag]) -> Marks {
    Marks {
        managed: value(tags, MANAGED) == Some("true"),
        proxy_uid: value(tags, PROXY_UID).unwrap_or_default().to_owned(),
        cluster_id: value(tags, CLUSTER).unwrap_or_default().to_owned(),
    }
}

/// A server-side filter on one tag's value.
pub fn filter(key: &str, value: &str) -> Filter {
    Filter::builder().name(format!("tag:{key}")).values(value).build()
}

/// The filters of ListByTag: managed, this cluster, and the Proxy when given.
pub fn list_filters(cluster_id: &str, proxy_uid: Option<&str>) -> Vec<Filter> {
    let mut filters = vec![filter(MANAGED, "true"), filter(CLUSTER, cluster_id)];
    if let Some(uid) = proxy_uid {
        filters.push(filter(PROXY_UID, uid));
    }
    filters
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_read_from_tags_and_missing_ones_are_unmarked() {
        let tags = vec![
            Tag::builder().key(MANAGED).value("true").build(),
            Tag::builder().key(CLUSTER).value("c1").build(),
            Tag::builder().key(PROXY_UID).value("u1").build(),
        ];
        let marks = marks(&tags);
        assert!(marks.managed);
        assert_eq!((marks.cluster_id.as_str(), marks.proxy_uid.as_str()), ("c1", "u1"));
        let unmarked = super::marks(&[Tag::builder().key(NAME).value("x").build()]);
        assert!(!unmarked.managed && unmarked.cluster_id.is_empty());
        let not_true = super::marks(&[Tag::builder().key(MANAGED).value("yes").build()]);
        assert!(!not_true.managed, "only \"true\" marks an instance as managed");
    }

    /// A time in the tags would make a retried RunInstances differ from the first: IdempotentParameterMismatch.
    #[test]
    fn the_launch_tags_depend_on_the_request_alone() {
        let tags = marks_for("egress-a", "u1", "c1", "f1");
        assert_eq!(tags, marks_for("egress-a", "u1", "c1", "f1"));
        assert_eq!(value(&tags, SPEC), Some("f1"));
        assert_eq!(value(&tags, CREATED_AT), None, "created-at is written after the launch");
        let written = created_at(UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000));
        assert_eq!((written.key(), written.value()), (Some(CREATED_AT), Some("1700000000")));
    }
}
