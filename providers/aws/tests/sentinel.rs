//! The sentinel test (contract §7.3): one unique value is the secret access key and the session token in
//! the credentials file, the proxy password and the cloud-init document. Driven through success and the
//! error paths it can reach (a refused spec, a bad placement, an unparsable credentials file, a missing
//! one, an unreachable endpoint), it reaches EC2 only as the instance's user data, and never the daemon's
//! log lines (at trace level, the AWS SDK's own lines included), an answer, or an error message, in plain
//! text or base64.

mod common;

use std::time::Duration;

use aws_sdk_ec2::types::InstanceAttributeName;
use common::{Aws, request};
use egress_provider_aws::{AwsConfig, instances::InstanceRef};
use provider_sdk::model::{ListFilter, ProviderId};
use secrecy::{SecretBox, SecretString};

#[tokio::test(flavor = "multi_thread")]
async fn user_data_and_credentials_reach_ec2_only_as_user_data_and_never_logs_or_errors() {
    let sentinel = format!("SENTINEL-{}", std::process::id() as u64 * 7919 + 0x5e17);
    let encoded = aws_smithy_types::base64::encode(sentinel.as_bytes());
    let mut aws = Aws::new();
    std::fs::write(
        aws.credentials_file(),
        format!("[default]\naws_access_key_id = AKIDEXAMPLE\naws_secret_access_key = {sentinel}\naws_session_token = {sentinel}\n"),
    )
    .unwrap();
    let log = aws.dir.path().join("daemon.log");
    let daemon = aws.start_logging_to(&log, "trace");
    let client = aws.client();
    let mut seen = Vec::new();

    let cloud_init = format!("#cloud-config\n# {sentinel}\nruncmd: [echo {sentinel}]\n");
    let mut good = request("egress-sentinel");
    good.proxy.auth.password = SecretString::from(sentinel.clone());
    good.cloud_init = Some(SecretBox::new(cloud_init.as_bytes().into()));
    let created = client.create(&good).await.expect("Create");
    seen.push(format!("{created:?} {:?}", client.create(&good).await));
    let mut other_spec = good.clone();
    other_spec.proxy.port = 8080;
    seen.push(format!("{:?}", client.create(&other_spec).await));
    let mut bad_placement = good.clone();
    bad_placement.placement.image = "no-such-image".into();
    seen.push(format!("{:?}", client.create(&bad_placement).await));
    seen.push(format!("{:?}", client.get(&created.provider_id).await));
    let filter = ListFilter {
        cluster_id: good.cluster_id.clone(),
        proxy_uid: None,
    };
    seen.push(format!("{:?}", client.list_by_tag(&filter).await));
    seen.push(format!("{:?}", client.check().await));

    // The document reached EC2 byte for byte, as the instance's user data.
    let config: AwsConfig = provider_sdk::config::load(Some(&aws.config_file())).unwrap();
    let (_, ec2) = egress_provider_aws::clients::build(&config);
    let reference = InstanceRef::parse(&created.provider_id).unwrap();
    let attribute = ec2[&reference.region]
        .describe_instance_attribute()
        .instance_id(&reference.instance_id)
        .attribute(InstanceAttributeName::UserData)
        .send()
        .await
        .expect("DescribeInstanceAttribute");
    let delivered = attribute.user_data().and_then(|v| v.value()).unwrap_or_default();
    assert_eq!(delivered, aws_smithy_types::base64::encode(cloud_init.as_bytes()));

    client.delete(&created.provider_id).await.expect("Delete");
    common::wait_gone(&client, &created.provider_id).await;

    // A credentials file that does not parse, with the sentinel on the offending line.
    std::fs::write(
        aws.credentials_file(),
        format!("[default]\naws_secret_access_key {sentinel}\n"),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    seen.push(format!("{:?}", client.get(&created.provider_id).await));
    seen.push(format!("{:?}", client.check().await));
    seen.push(format!("{:?}", client.create(&good).await));
    // No credentials file at all.
    std::fs::remove_file(aws.credentials_file()).unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let check = client.check().await.expect("Check");
    assert!(check.iter().all(|r| r.reason == "UNAUTHENTICATED"), "{check:?}");
    seen.push(format!("{check:?} {:?}", client.list_by_tag(&filter).await));
    // EC2 unreachable.
    aws.write_credentials("AKIDEXAMPLE", &sentinel);
    aws.moto.kill();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let unreachable = ProviderId::new("aws", "us-east-1/i-0123456789abcdef0");
    seen.push(format!("{:?}", client.delete(&unreachable).await));
    let check = client.check().await.expect("Check");
    assert!(check.iter().all(|r| r.reason == "UNREACHABLE"), "{check:?}");
    seen.push(format!("{check:?}"));

    assert_eq!(daemon.stop(), Some(0));
    let logged = std::fs::read_to_string(&log).unwrap();
    // The SDK logs whole response bodies at trace (STS answers hold session credentials): those lines are
    // dropped by the daemon's telemetry whatever RUST_LOG says.
    assert!(
        logged.contains("saving request checkpoint"),
        "the SDK's other trace lines were captured"
    );
    assert!(
        !logged.contains("read HTTP response body"),
        "a response body was logged"
    );
    assert!(logged.contains("egress-sentinel"), "the log was captured: {logged}");
    assert!(
        logged.contains("UNAUTHENTICATED"),
        "the error paths were reached: {logged}"
    );
    // The document travels to EC2 base64-encoded inside a form-encoded body, so a logged request body would
    // show it in that shape rather than the sentinel's own encoding.
    let document = aws_smithy_types::base64::encode(cloud_init.as_bytes());
    let form_encoded = document.replace('+', "%2B").replace('/', "%2F").replace('=', "%3D");
    for secret in [&sentinel, &encoded, &document, &form_encoded] {
        assert!(!logged.contains(secret.as_str()), "the daemon logged {secret}");
        for answer in &seen {
            assert!(
                !answer.contains(secret.as_str()),
                "an answer carried {secret}: {answer}"
            );
        }
    }
}
