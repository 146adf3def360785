//! Check (contract §2.7): one target per configured region, `region/<name>`, probed with the credential,
//! verbs and scope of the real work: one page of DescribeInstances (credentials valid, endpoint reachable),
//! DescribeImages of the region's catalogue (every AMI exists), and a DryRun RunInstances with the first
//! image and the default type (the credential may launch). Regions are probed side by side.

use aws_sdk_ec2::Client;
use provider_sdk::{check::*, model::CheckResult};

use crate::{
    error::{ApiFailure, Ec2Code, failure},
    provider::Inner,
    tags,
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
    let machine_type = inner
        .config
        .default_machine_type
        .clone()
        .unwrap_or_else(|| inner.config.machine_types[0].clone());
    let dry_run = client
        .run_instances()
        .dry_run(true)
        .image_id(&amis[0])
        .instance_type(machine_type.as_str().into())
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .map_err(failure);
    match dry_run {
        Err(failure) if failure.is(Ec2Code::DryRunOperation) => Ok(amis.len()),
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
            Ok(amis.len())
        }
        Err(failure) => Err(("RunInstances (DryRun)", failure)),
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
}
