//! Check (contract §2.7): one target per configured region, `region/<name>`, probed with the credential,
//! verbs and scope of the real work: one page of DescribeInstances (credentials valid, endpoint reachable),
//! DescribeImages of the region's catalogue (every AMI exists), in per-Proxy group mode a DryRun
//! CreateSecurityGroup, and a DryRun RunInstances built by Create's own builder (tags, zone, subnet, shared
//! group) with the first image and the default type: a credential without a permission the real launch
//! needs (ec2:CreateTags among them) fails here, not on every Create. Regions are probed side by side.

use aws_sdk_ec2::{Client, operation::run_instances::builders::RunInstancesInputBuilder, types::Tag};
use provider_sdk::{check::*, model::CheckResult};

use crate::{
    create,
    error::{ApiFailure, Ec2Code, failure},
    placement::{GroupMode, Target},
    provider::Inner,
    security_group, tags,
};

pub async fn check(inner: &Inner) -> Vec<CheckResult> {
    let probes = inner.clients.iter().map(|(region, client)| async move {
        let target = format!("region/{region}");
        let result = match probe(inner, region, client).await {
            Ok(images) => CheckResult::ok(
                &target,
                format!("EC2 in {region} answers, the {images} catalogue images exist and a launch is permitted"),
            )
            .with_detail("images", images.to_string()),
            Err((step, failure)) => failed(&target, step, &failure),
        };
        result.with_detail("credentials", inner.credentials.describe())
    });
    futures::future::join_all(probes).await
}

/// The number of catalogue images, or the step that failed and why.
async fn probe(inner: &Inner, region: &str, client: &Client) -> Result<usize, (&'static str, ApiFailure)> {
    client
        .describe_instances()
        .filters(tags::filter(tags::MANAGED, "true"))
        .max_results(5)
        .send()
        .await
        .map_err(|e| ("DescribeInstances", failure(e)))?;
    let catalogue = &inner.config.regions[region].images;
    let amis: Vec<String> = catalogue.values().cloned().collect();
    let found = client
        .describe_images()
        .set_image_ids(Some(amis.clone()))
        .send()
        .await
        .map_err(|e| ("DescribeImages", failure(e)))?;
    let found: Vec<&str> = found.images().iter().filter_map(|i| i.image_id()).collect();
    let missing: Vec<&str> = amis
        .iter()
        .map(String::as_str)
        .filter(|ami| !found.contains(ami))
        .collect();
    if !missing.is_empty() {
        return Err((
            "DescribeImages",
            ApiFailure::Service {
                code: "InvalidAMIID.NotFound".to_owned(),
                message: format!("not found: {}", missing.join(", ")),
                status: 400,
            },
        ));
    }
    let target = dry_run_target(inner, region, &amis[0]);
    if let GroupMode::PerProxy { vpc_id } = &target.group {
        dry_run_group(client, vpc_id.as_deref()).await?;
    }
    dry_run_launch(client, &target).await?;
    Ok(amis.len())
}

/// The name the dry runs use: nothing of that name is ever made (an emulator's slip is undone at once).
const DRY_RUN_NAME: &str = "check-dry-run";

/// Where the dry run launches: the first catalogue image, the default type, the region's first zone and
/// its subnet, the region's group mode. The real launches differ only in these values.
fn dry_run_target(inner: &Inner, region: &str, image_id: &str) -> Target {
    let config = &inner.config.regions[region];
    let zone = config.zones.iter().next();
    Target {
        region: region.to_owned(),
        zone: zone.map(|(name, _)| name.clone()),
        subnet_id: zone.and_then(|(_, zone)| zone.subnet_id.clone()),
        machine_type: inner
            .config
            .default_machine_type
            .clone()
            .unwrap_or_else(|| inner.config.machine_types[0].clone()),
        image_id: image_id.to_owned(),
        group: GroupMode::of(config),
    }
}

/// The tags of a launch, with placeholder values: IAM may condition CreateTags on the keys.
fn dry_run_tags() -> Vec<Tag> {
    tags::marks_for(DRY_RUN_NAME, "check", "check", "check")
}

/// RunInstances exactly as Create builds it (tags, subnet, group), with `DryRun`.
async fn dry_run_launch(client: &Client, target: &Target) -> Result<(), (&'static str, ApiFailure)> {
    let answer = dry_run_launch_input(target).send_with(client).await.map_err(failure);
    match answer {
        Err(failure) if failure.is(Ec2Code::DryRunOperation) => Ok(()),
        // An emulator that ignores DryRun launched an instance: remove it again.
        Ok(answer) => {
            let ids: Vec<String> = answer
                .instances()
                .iter()
                .filter_map(|i| i.instance_id.clone())
                .collect();
            if !ids.is_empty() {
                let _ = client.terminate_instances().set_instance_ids(Some(ids)).send().await;
            }
            Ok(())
        }
        Err(failure) => Err(("RunInstances (DryRun)", failure)),
    }
}

fn dry_run_launch_input(target: &Target) -> RunInstancesInputBuilder {
    let group_id = match &target.group {
        GroupMode::Shared(id) => Some(id.as_str()),
        // The per-Proxy group does not exist before a Create; without one EC2 checks the VPC's default group.
        GroupMode::PerProxy { .. } => None,
    };
    create::launch_input(target, group_id, dry_run_tags(), None).dry_run(true)
}

/// CreateSecurityGroup as Create builds it, with `DryRun` (per-Proxy group mode only).
async fn dry_run_group(client: &Client, vpc_id: Option<&str>) -> Result<(), (&'static str, ApiFailure)> {
    let answer = security_group::create_input(DRY_RUN_NAME, vpc_id, dry_run_tags())
        .dry_run(true)
        .send_with(client)
        .await
        .map_err(failure);
    match answer {
        Err(failure) if failure.is(Ec2Code::DryRunOperation) => Ok(()),
        // An emulator that ignores DryRun made the group: remove it again.
        Ok(answer) => {
            let _ = client
                .delete_security_group()
                .set_group_id(answer.group_id)
                .send()
                .await;
            Ok(())
        }
        Err(failure) => Err(("CreateSecurityGroup (DryRun)", failure)),
    }
}

fn failed(target: &str, step: &str, failure: &ApiFailure) -> CheckResult {
    let code = failure.code();
    let reason = match (failure, &code) {
        (ApiFailure::Credentials(_), _) | (_, Some(Ec2Code::AuthFailure)) => REASON_UNAUTHENTICATED,
        (_, Some(Ec2Code::UnauthorizedOperation)) => REASON_PERMISSION_DENIED,
        (
            _,
            Some(Ec2Code::InstanceLimitExceeded | Ec2Code::VcpuLimitExceeded | Ec2Code::InsufficientInstanceCapacity),
        ) => REASON_QUOTA_EXHAUSTED,
        (_, Some(Ec2Code::InvalidAmi | Ec2Code::Misconfigured | Ec2Code::InvalidParameter)) => REASON_MISCONFIGURED,
        (ApiFailure::Timeout | ApiFailure::Network(_) | ApiFailure::Response(_), _) => REASON_UNREACHABLE,
        (_, Some(Ec2Code::Throttled | Ec2Code::ServerError)) => REASON_UNREACHABLE,
        (ApiFailure::Service { .. }, _) => REASON_MISCONFIGURED,
    };
    CheckResult::failed(target, reason, format!("{step}: {failure}")).with_detail("step", step)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(code: &str) -> ApiFailure {
        ApiFailure::Service {
            code: code.into(),
            message: "m".into(),
            status: 400,
        }
    }

    #[test]
    fn each_failure_gets_the_shared_reason_the_administrator_acts_on() {
        let rows = [
            (ApiFailure::Credentials("no file".into()), REASON_UNAUTHENTICATED),
            (service("AuthFailure"), REASON_UNAUTHENTICATED),
            (service("UnauthorizedOperation"), REASON_PERMISSION_DENIED),
            (service("VcpuLimitExceeded"), REASON_QUOTA_EXHAUSTED),
            (service("InvalidAMIID.NotFound"), REASON_MISCONFIGURED),
            (ApiFailure::Timeout, REASON_UNREACHABLE),
            (ApiFailure::Network("refused".into()), REASON_UNREACHABLE),
            (service("RequestLimitExceeded"), REASON_UNREACHABLE),
        ];
        for (failure, reason) in rows {
            let result = failed("region/eu-west-1", "DescribeInstances", &failure);
            assert_eq!((result.ok, result.reason.as_str()), (false, reason), "{failure}");
            assert_eq!(result.details["step"], "DescribeInstances");
        }
    }

    /// The dry run must ask for what the real launch asks for, or a role without ec2:CreateTags (or without
    /// the subnet or group) passes Check and fails every Create.
    #[test]
    fn the_dry_run_launch_is_create_s_launch_with_its_tags_subnet_and_group() {
        let target = Target {
            region: "eu-west-1".into(),
            zone: Some("eu-west-1a".into()),
            subnet_id: Some("subnet-0123abcd".into()),
            machine_type: "t3.micro".into(),
            image_id: "ami-0123abcd".into(),
            group: GroupMode::Shared("sg-0123abcd".into()),
        };
        let input = dry_run_launch_input(&target);
        assert_eq!(input.get_dry_run(), &Some(true));
        assert_eq!(input.get_subnet_id().as_deref(), Some("subnet-0123abcd"));
        assert_eq!(input.get_security_group_ids(), &Some(vec!["sg-0123abcd".to_owned()]));
        let specs = input.get_tag_specifications().clone().unwrap_or_default();
        let tagged = specs.first().map(|spec| spec.tags().to_vec()).unwrap_or_default();
        assert_eq!(tags::value(&tagged, tags::MANAGED), Some("true"), "{specs:?}");
        let real = create::launch_input(&target, Some("sg-0123abcd"), dry_run_tags(), None).dry_run(true);
        assert_eq!(input, real, "the dry run is Create's launch");
        let per_proxy = Target {
            group: GroupMode::PerProxy { vpc_id: None },
            ..target
        };
        assert_eq!(dry_run_launch_input(&per_proxy).get_security_group_ids(), &None);
    }

    #[test]
    fn the_dry_run_group_is_create_s_group_with_its_tags() {
        let input = security_group::create_input(DRY_RUN_NAME, Some("vpc-0123abcd"), dry_run_tags()).dry_run(true);
        assert_eq!(input.get_vpc_id().as_deref(), Some("vpc-0123abcd"));
        assert!(
            input
                .get_tag_specifications()
                .as_ref()
                .is_some_and(|specs| !specs.is_empty())
        );
    }
}
