//! The daemon against moto, for what the conformance suite cannot see: the security group's life and rule,
//! placement refused before any EC2 call, a name taken by an instance this provider did not make, the
//! listing scope over every region, and a bad config refused at start-up.

mod common;

use std::process::Command;

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use common::{Aws, MOTO_AMI, request, wait_gone};
use egress_provider_aws::security_group::group_name;
use provider_sdk::{ErrorClass, model::ListFilter};

async fn groups_named(aws: &Aws, name: &str) -> Vec<aws_sdk_ec2::types::SecurityGroup> {
    let answer = aws
        .ec2("us-east-1")
        .describe_security_groups()
        .filters(Filter::builder().name("group-name").values(group_name(name)).build())
        .send()
        .await
        .unwrap();
    answer.security_groups.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn each_proxy_gets_a_marked_group_open_on_its_port_that_goes_after_the_instance() {
    let aws = Aws::new();
    let _daemon = aws.start();
    let client = aws.client();
    let created = client.create(&request("egress-group")).await.expect("Create");
    let groups = groups_named(&aws, "egress-group").await;
    assert_eq!(groups.len(), 1);
    let group = &groups[0];
    let marks = egress_provider_aws::tags::marks(group.tags());
    assert!(marks.managed && marks.cluster_id == "aws-tests", "{marks:?}");
    let rule = &group.ip_permissions()[0];
    assert_eq!((rule.from_port(), rule.to_port()), (Some(3128), Some(3128)));
    assert_eq!(rule.ip_ranges()[0].cidr_ip(), Some("10.0.0.0/8"));

    client.delete(&created.provider_id).await.expect("Delete");
    wait_gone(&client, &created.provider_id).await;
    assert!(
        groups_named(&aws, "egress-group").await.is_empty(),
        "the group outlived the instance"
    );
    client.delete(&created.provider_id).await.expect("a second Delete");
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_placement_is_refused_naming_field_and_value_before_any_ec2_call() {
    let aws = Aws::new();
    let _daemon = aws.start();
    let client = aws.client();
    let mut bad = request("egress-bad");
    bad.placement.region = "mars-north-1".into();
    bad.placement.image = "debian".into();
    let error = client.create(&bad).await.unwrap_err();
    assert_eq!(
        (error.class(), error.reason()),
        (ErrorClass::Permanent, "INVALID_ARGUMENT")
    );
    assert!(error.to_string().contains("\"mars-north-1\""), "{error}");
    let mut bad = request("egress-bad");
    bad.placement.zone = "us-east-1z".into();
    bad.placement.machine_type = "t9.huge".into();
    let error = client.create(&bad).await.unwrap_err();
    let fields: Vec<&str> = error.field_violations().iter().map(|v| v.field.as_str()).collect();
    assert_eq!(fields, ["placement.machine_type", "placement.zone"], "{error}");
    assert!(
        groups_named(&aws, "egress-bad").await.is_empty(),
        "a refused request made a group"
    );
    let instances = aws.ec2("us-east-1").describe_instances().send().await.unwrap();
    assert!(
        instances.reservations().is_empty(),
        "a refused request made an instance"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_held_by_an_unmarked_instance_is_in_use_and_that_instance_is_never_listed() {
    let aws = Aws::new();
    let _daemon = aws.start();
    let client = aws.client();
    let name_only = TagSpecification::builder()
        .resource_type(ResourceType::Instance)
        .tags(Tag::builder().key("Name").value("egress-taken").build())
        .build();
    aws.ec2("eu-west-1")
        .run_instances()
        .image_id(MOTO_AMI)
        .instance_type("t3.micro".into())
        .min_count(1)
        .max_count(1)
        .tag_specifications(name_only)
        .send()
        .await
        .unwrap();
    let error = client.create(&request("egress-taken")).await.unwrap_err();
    assert_eq!(
        (error.class(), error.reason()),
        (ErrorClass::Permanent, "NAME_IN_USE"),
        "{error}"
    );
    assert!(error.to_string().contains("without the managed mark"), "{error}");
    let filter = ListFilter {
        cluster_id: "aws-tests".into(),
        proxy_uid: None,
    };
    assert!(client.list_by_tag(&filter).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn listing_covers_every_region_and_narrows_to_one_proxy() {
    let aws = Aws::new();
    let _daemon = aws.start();
    let client = aws.client();
    let east = client
        .create(&request("egress-east"))
        .await
        .expect("Create in us-east-1");
    let mut west = request("egress-west");
    west.placement.region = "eu-west-1".into();
    west.placement.zone = String::new();
    west.proxy_uid = "0b7f4d4e-2f4c-4a8e-9a0e-3c1d2e3f4a5b".into();
    let west = client.create(&west).await.expect("Create in eu-west-1");
    assert!(
        west.provider_id.as_str().starts_with("aws://eu-west-1/i-"),
        "{}",
        west.provider_id
    );
    let mut filter = ListFilter {
        cluster_id: "aws-tests".into(),
        proxy_uid: None,
    };
    let mut ids: Vec<String> = client
        .list_by_tag(&filter)
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.provider_id.to_string())
        .collect();
    ids.sort();
    let mut expected = [east.provider_id.to_string(), west.provider_id.to_string()];
    expected.sort();
    assert_eq!(ids, expected);
    filter.proxy_uid = Some("0b7f4d4e-2f4c-4a8e-9a0e-3c1d2e3f4a5b".into());
    let one = client.list_by_tag(&filter).await.unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].provider_id, west.provider_id);
    filter.cluster_id = "another-cluster".into();
    filter.proxy_uid = None;
    assert!(client.list_by_tag(&filter).await.unwrap().is_empty());
}

#[test]
fn a_bad_config_stops_the_daemon_with_code_64_naming_the_field_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("aws.yaml");
    std::fs::write(
        &config,
        "regions:\n  us-east-1:\n    images: {ubuntu: ami-nothex}\nmachineTypes: [t3.micro]\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_egress-provider-aws"))
        .args(["--config", config.to_str().unwrap(), "--listen"])
        .arg(format!("unix://{}", dir.path().join("s.sock").display()))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("regions.us-east-1.images.ubuntu: \"ami-nothex\""),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_create_cut_off_by_its_deadline_and_retried_leaves_exactly_one_instance() {
    let aws = Aws::new();
    let _daemon = aws.start();
    let endpoint = aws.endpoint().parse().unwrap();
    let hasty = provider_sdk::client::CallTimeouts {
        create: std::time::Duration::from_millis(1),
        ..Default::default()
    };
    let impatient = provider_sdk::client::ProviderClient::connect_lazy(&endpoint, None, hasty).unwrap();
    let request = request("egress-hasty");
    for _ in 0..3 {
        let _ = impatient.create(&request).await;
    }
    let created = aws.client().create(&request).await.expect("the patient retry");
    let filter = ListFilter {
        cluster_id: "aws-tests".into(),
        proxy_uid: Some(request.proxy_uid.clone()),
    };
    let listed = aws.client().list_by_tag(&filter).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].provider_id, created.provider_id);
    assert_eq!(groups_named(&aws, "egress-hasty").await.len(), 1);
}

/// The operator answers a lost instance (NOT_FOUND) by creating the same name again: the successor takes
/// over the group, and the old instance's Delete (from the garbage collector, which still lists it while
/// the group exists) leaves the group to the successor.
#[tokio::test(flavor = "multi_thread")]
async fn an_instance_terminated_behind_the_provider_s_back_is_gone_and_its_successor_keeps_the_group() {
    let aws = Aws::new();
    let _daemon = aws.start();
    let client = aws.client();
    let lost = client.create(&request("egress-lost")).await.expect("Create");
    let reference = egress_provider_aws::instances::InstanceRef::parse(&lost.provider_id).unwrap();
    aws.ec2("us-east-1")
        .terminate_instances()
        .instance_ids(&reference.instance_id)
        .send()
        .await
        .unwrap();
    let error = client.get(&lost.provider_id).await.unwrap_err();
    assert_eq!(error.class(), ErrorClass::NotFound, "{error}");
    let filter = ListFilter {
        cluster_id: "aws-tests".into(),
        proxy_uid: None,
    };
    let listed = client.list_by_tag(&filter).await.unwrap();
    assert_eq!(listed.len(), 1, "listed while its group remains: {listed:?}");
    assert_eq!(listed[0].state, provider_sdk::model::InstanceState::Terminated);

    let successor = client
        .create(&request("egress-lost"))
        .await
        .expect("the same name again");
    assert_ne!(successor.provider_id, lost.provider_id);
    assert_eq!(groups_named(&aws, "egress-lost").await.len(), 1, "the group is reused");
    client.delete(&lost.provider_id).await.expect("Delete of the lost one");
    assert_eq!(
        groups_named(&aws, "egress-lost").await.len(),
        1,
        "the successor's group stays"
    );
    client
        .delete(&successor.provider_id)
        .await
        .expect("Delete of the successor");
    wait_gone(&client, &successor.provider_id).await;
    assert!(
        groups_named(&aws, "egress-lost").await.is_empty(),
        "the group went with the last instance"
    );
    assert!(
        client.list_by_tag(&filter).await.unwrap().is_empty(),
        "nothing is listed any more"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shared_group_is_joined_as_it_is_and_never_deleted() {
    let aws = Aws::new();
    let shared = aws
        .ec2("us-east-1")
        .create_security_group()
        .group_name("admin-egress")
        .description("managed by the administrator")
        .send()
        .await
        .unwrap()
        .group_id
        .unwrap();
    let config = std::fs::read_to_string(aws.config_file()).unwrap();
    let config = config.replacen(
        &format!("images: {{ubuntu: {MOTO_AMI}}}\n"),
        &format!("images: {{ubuntu: {MOTO_AMI}}}\n    sharedSecurityGroupId: {shared}\n"),
        1,
    );
    std::fs::write(aws.config_file(), config).unwrap();
    let _daemon = aws.start();
    let client = aws.client();
    let created = client.create(&request("egress-shared")).await.expect("Create");
    let reference = egress_provider_aws::instances::InstanceRef::parse(&created.provider_id).unwrap();
    let described = aws
        .ec2("us-east-1")
        .describe_instances()
        .instance_ids(&reference.instance_id)
        .send()
        .await
        .unwrap();
    let instance = &described.reservations()[0].instances()[0];
    let groups: Vec<&str> = instance.security_groups().iter().filter_map(|g| g.group_id()).collect();
    assert_eq!(groups, [shared.as_str()]);
    assert!(
        groups_named(&aws, "egress-shared").await.is_empty(),
        "no group of its own"
    );
    client.delete(&created.provider_id).await.expect("Delete");
    wait_gone(&client, &created.provider_id).await;
    let left = aws
        .ec2("us-east-1")
        .describe_security_groups()
        .group_ids(&shared)
        .send()
        .await
        .unwrap();
    assert_eq!(left.security_groups().len(), 1, "the shared group stays");
}

#[tokio::test(flavor = "multi_thread")]
async fn check_names_a_catalogue_ami_the_region_lacks_and_passes_the_others() {
    let aws = Aws::new();
    let config = std::fs::read_to_string(aws.config_file()).unwrap();
    let config = config.replacen(
        &format!("  eu-west-1:\n    images: {{ubuntu: {MOTO_AMI}}}\n"),
        "  eu-west-1:\n    images: {ubuntu: ami-0123456789abcdef0}\n",
        1,
    );
    std::fs::write(aws.config_file(), config).unwrap();
    let _daemon = aws.start();
    let results = aws.client().check().await.expect("Check");
    let targets: Vec<(&str, bool, &str)> = results
        .iter()
        .map(|r| (r.target.as_str(), r.ok, r.reason.as_str()))
        .collect();
    assert_eq!(
        targets,
        [
            ("region/eu-west-1", false, "MISCONFIGURED"),
            ("region/us-east-1", true, "OK")
        ]
    );
    assert!(
        results[0].message.contains("ami-0123456789abcdef0"),
        "{}",
        results[0].message
    );
    assert_eq!(results[0].details["step"], "DescribeImages");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_id_in_a_region_no_longer_configured_is_deleted_as_absent_and_not_found() {
    let aws = Aws::new();
    let _daemon = aws.start();
    let client = aws.client();
    let elsewhere = provider_sdk::model::ProviderId::new("aws", "ap-south-1/i-0123456789abcdef0");
    client.delete(&elsewhere).await.expect("Delete answers OK");
    let error = client.get(&elsewhere).await.unwrap_err();
    assert_eq!(error.class(), ErrorClass::NotFound, "{error}");
}
