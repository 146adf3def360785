//! The security group of one Proxy (`secondary-resources: explicit`): named after the instance, tagged
//! with the marks and the spec fingerprint in the creating call, opened on the proxy's port to the allowed
//! source ranges, found by name on every retry, and deleted by the teardown once the instance is
//! terminated (EC2 refuses to delete a group an instance still uses).

use aws_sdk_ec2::{
    Client,
    operation::create_security_group::{CreateSecurityGroupInput, builders::CreateSecurityGroupInputBuilder},
    types::{Filter, IpPermission, IpRange, Ipv6Range, ResourceType, SecurityGroup, Tag},
};
use ipnet::IpNet;
use provider_sdk::model::CreateRequest;

use crate::{
    error::{AwsError, Ec2Code, failure},
    tags,
};

/// EC2 refuses group names that start with `sg-`, which an instance name may: hence the prefix.
pub fn group_name(instance_name: &str) -> String {
    format!("egressproxies-{instance_name}")
}

/// The group named after `instance_name` in `vpc_id` (or any VPC of the region when `None`).
pub async fn find(
    client: &Client,
    region: &str,
    instance_name: &str,
    vpc_id: Option<&str>,
) -> Result<Option<SecurityGroup>, AwsError> {
    let mut filters = vec![
        Filter::builder()
            .name("group-name")
            .values(group_name(instance_name))
            .build(),
    ];
    if let Some(vpc) = vpc_id {
        filters.push(Filter::builder().name("vpc-id").values(vpc).build());
    }
    tracing::debug!(region, instance_name, "DescribeSecurityGroups");
    let answer = client
        .describe_security_groups()
        .set_filters(Some(filters))
        .send()
        .await
        .map_err(|e| AwsError::api("DescribeSecurityGroups", region)(failure(e)))?;
    Ok(answer.security_groups.unwrap_or_default().into_iter().next())
}

/// Finds or makes the request's group and makes sure its ingress rule is there; answers the group ID.
pub async fn ensure(
    client: &Client,
    region: &str,
    vpc_id: Option<&str>,
    request: &CreateRequest,
) -> Result<String, AwsError> {
    let name = request.name.as_str();
    let group = match find(client, region, name, vpc_id).await? {
        Some(group) => group,
        None => match create(client, region, vpc_id, request).await {
            Ok(id) => {
                authorize(client, region, &id, request).await?;
                return Ok(id);
            }
            // A concurrent Create (another daemon) made it first; take that one.
            Err(AwsError::Api { failure, .. }) if failure.is(Ec2Code::GroupDuplicate) => {
                find(client, region, name, vpc_id).await?.ok_or(AwsError::Unexpected {
                    operation: "DescribeSecurityGroups",
                    region: region.to_owned(),
                    what: "the group CreateSecurityGroup called a duplicate",
                })?
            }
            Err(error) => return Err(error),
        },
    };
    let tags = group.tags();
    let ours = tags::marks(tags);
    let same = ours.managed
        && ours.cluster_id == request.cluster_id
        && tags::value(tags, tags::SPEC) == Some(request.spec_fingerprint().as_str());
    if !same {
        return Err(AwsError::NameInUse {
            name: name.to_owned(),
            why: format!(
                "security group {} exists with other marks or another spec",
                group_name(name)
            ),
        });
    }
    let id = group.group_id().unwrap_or_default().to_owned();
    // A Create cut off between making the group and opening it left it closed: open it now.
    authorize(client, region, &id, request).await?;
    Ok(id)
}

async fn create(
    client: &Client,
    region: &str,
    vpc_id: Option<&str>,
    request: &CreateRequest,
) -> Result<String, AwsError> {
    let name = request.name.as_str();
    let mut tags = tags::for_request(request, &group_name(name));
    tags.push(tags::created_at(std::time::SystemTime::now()));
    tracing::info!(region, group = %group_name(name), "creating the security group");
    let answer = create_input(name, vpc_id, tags)
        .send_with(client)
        .await
        .map_err(|e| AwsError::api("CreateSecurityGroup", region)(failure(e)))?;
    answer.group_id.ok_or(AwsError::Unexpected {
        operation: "CreateSecurityGroup",
        region: region.to_owned(),
        what: "a group ID",
    })
}

/// CreateSecurityGroup of the group named after `instance_name`, as Create sends it and Check dry-runs it.
pub fn create_input(instance_name: &str, vpc_id: Option<&str>, tags: Vec<Tag>) -> CreateSecurityGroupInputBuilder {
    CreateSecurityGroupInput::builder()
        .group_name(group_name(instance_name))
        .description(format!(
            "egress proxy {instance_name}, managed by egress-proxies-operator"
        ))
        .set_vpc_id(vpc_id.map(str::to_owned))
        .tag_specifications(tags::specification(ResourceType::SecurityGroup, tags))
}

/// The ingress rule: TCP on the proxy's port from each allowed range (everywhere when none is given, the
/// proxy's credentials still required, contract §5.5).
pub fn permission(request: &CreateRequest) -> IpPermission {
    let port = i32::from(request.proxy.port);
    let ranges: Vec<IpNet> = if request.proxy.allowed_source_ranges.is_empty() {
        vec!["0.0.0.0/0".parse().expect("a CIDR"), "::/0".parse().expect("a CIDR")]
    } else {
        request.proxy.allowed_source_ranges.clone()
    };
    let mut permission = IpPermission::builder().ip_protocol("tcp").from_port(port).to_port(port);
    for range in ranges {
        permission = match range {
            IpNet::V4(v4) => permission.ip_ranges(IpRange::builder().cidr_ip(v4.to_string()).build()),
            IpNet::V6(v6) => permission.ipv6_ranges(Ipv6Range::builder().cidr_ipv6(v6.to_string()).build()),
        };
    }
    permission.build()
}

async fn authorize(client: &Client, region: &str, group_id: &str, request: &CreateRequest) -> Result<(), AwsError> {
    let result = client
        .authorize_security_group_ingress()
        .group_id(group_id)
        .ip_permissions(permission(request))
        .send()
        .await
        .map_err(failure);
    match result {
        Ok(_) => Ok(()),
        Err(failure) if failure.is(Ec2Code::PermissionDuplicate) => Ok(()),
        Err(failure) => Err(AwsError::api("AuthorizeSecurityGroupIngress", region)(failure)),
    }
}

/// Deletes the group named after `instance_name` when it carries the managed mark; absent is success.
pub async fn delete(client: &Client, region: &str, instance_name: &str, vpc_id: Option<&str>) -> Result<(), AwsError> {
    let Some(group) = find(client, region, instance_name, vpc_id).await? else {
        return Ok(());
    };
    if !tags::marks(group.tags()).managed {
        tracing::warn!(region, group = %group_name(instance_name), "a group of this name is not managed; left alone");
        return Ok(());
    }
    let result = client
        .delete_security_group()
        .set_group_id(group.group_id.clone())
        .send()
        .await
        .map_err(failure);
    match result {
        Ok(_) => {
            tracing::info!(region, group = %group_name(instance_name), "deleted the security group");
            Ok(())
        }
        Err(failure) if failure.is(Ec2Code::GroupNotFound) => Ok(()),
        Err(failure) => Err(AwsError::api("DeleteSecurityGroup", region)(failure)),
    }
}

#[cfg(test)]
mod tests {
    use provider_sdk::model::*;
    use secrecy::SecretString;

    use super::*;

    fn request(ranges: &[&str]) -> CreateRequest {
        CreateRequest {
            name: InstanceName::parse("sg-looking-name", 63).unwrap(),
            proxy_uid: "u".into(),
            cluster_id: "c".into(),
            placement: Placement::default(),
            proxy: ProxySettings {
                port: 3128,
                protocol: Protocol::Http,
                auth: ProxyAuth {
                    username: "u".into(),
                    password: SecretString::from("p"),
                },
                allowed_source_ranges: ranges.iter().map(|r| r.parse().unwrap()).collect(),
            },
            cloud_init: None,
        }
    }

    #[test]
    fn the_group_name_never_starts_with_sg_dash() {
        assert_eq!(group_name("sg-looking-name"), "egressproxies-sg-looking-name");
    }

    #[test]
    fn the_rule_opens_the_port_to_each_range_by_family_and_to_everyone_when_none_is_given() {
        let rule = permission(&request(&["10.0.0.0/8", "2001:db8::/32"]));
        assert_eq!(
            (rule.from_port(), rule.to_port(), rule.ip_protocol()),
            (Some(3128), Some(3128), Some("tcp"))
        );
        assert_eq!(rule.ip_ranges()[0].cidr_ip(), Some("10.0.0.0/8"));
        assert_eq!(rule.ipv6_ranges()[0].cidr_ipv6(), Some("2001:db8::/32"));
        let open = permission(&request(&[]));
        assert_eq!(open.ip_ranges()[0].cidr_ip(), Some("0.0.0.0/0"));
        assert_eq!(open.ipv6_ranges()[0].cidr_ipv6(), Some("::/0"));
    }
}
