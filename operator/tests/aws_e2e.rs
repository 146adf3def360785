//! The operator and the AWS provider, both as shipped binaries, against the real kube-apiserver and a
//! moto EC2 server: the sample provider config (`examples/provider-aws-moto.yaml`, pointed at this test's
//! moto) and the sample Proxy (`examples/proxy-aws.yaml`, applied with kubectl as it is) run from apply to
//! delete, and nothing is left on the backend afterwards: no instance and no security group.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

mod shipped;

use egress_operator::crd::{Proxy, ProxyPhase};
use egress_test_support::{ControlPlane, Moto};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use provider_sdk::{
    client::{CallTimeouts, ProviderClient, ProviderEndpoint},
    model::ListFilter,
};

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// The sample config with this test's moto endpoint and credentials file in place of the sample's.
fn provider_config(moto: &Moto, credentials: &Path) -> String {
    let sample = std::fs::read_to_string(repo_file("examples/provider-aws-moto.yaml")).unwrap();
    let replaced = sample
        .replace("http://127.0.0.1:5055", &moto.url())
        .replace("/tmp/moto-credentials", &credentials.display().to_string());
    assert_ne!(
        replaced, sample,
        "the sample config names moto's endpoint and a credentials file"
    );
    replaced
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sample_proxy_runs_on_ec2_through_the_operator_and_leaves_nothing_behind() {
    let plane = ControlPlane::shared().await.expect("control plane");
    plane.install_crds(&egress_operator::crd::all()).await.unwrap();
    let ns = plane.namespace("aws").await.unwrap();
    let moto = Moto::start();
    let dir = tempfile::tempdir().unwrap();

    let credentials = dir.path().join("credentials");
    std::fs::write(
        &credentials,
        "[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n",
    )
    .unwrap();
    let aws_config = dir.path().join("aws.yaml");
    std::fs::write(&aws_config, provider_config(&moto, &credentials)).unwrap();
    let socket = dir.path().join("aws.sock");
    let _provider = shipped::start_provider("egress-provider-aws", Some(&aws_config), &socket);
    let config = shipped::operator_config(dir.path(), "e2e-aws", "aws", "aws", &socket);
    let _operator = shipped::start_operator(plane, &config, ns.name(), "127.0.0.1:0");

    let kubectl = |args: &[&str]| {
        let output = plane.kubectl().args(["-n", ns.name()]).args(args).output().unwrap();
        assert!(
            output.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    kubectl(&["apply", "-f", repo_file("examples/proxy-aws.yaml").to_str().unwrap()]);
    kubectl(&["wait", "--for=condition=Ready", "proxy/office-egress", "--timeout=90s"]);

    let proxies: Api<Proxy> = ns.api();
    let status = proxies.get("office-egress").await.unwrap().status.unwrap();
    assert_eq!(status.phase, Some(ProxyPhase::Running));
    let provider_id = status.provider_id.clone().unwrap();
    assert!(provider_id.starts_with("aws://us-east-1/i-"), "{provider_id}");
    let ip = status.ip.clone().expect("a public IPv4 in the status");
    assert_eq!(status.endpoint.as_deref(), Some(format!("http://{ip}:3128").as_str()));
    // Once Ready, the Secret names the instance at every moment: the reconciles that follow (woken by the
    // operator's own writes, reading a cached Proxy) must not rewrite it without the endpoint.
    let secrets: Api<Secret> = ns.api();
    let mut endpoint = String::new();
    for _ in 0..30 {
        let secret = secrets.get("office-egress-proxy").await.expect("the consumer Secret");
        let data = secret.data.unwrap_or_default();
        let value = data
            .get("endpoint")
            .expect("the Secret lost its endpoint key after Ready");
        endpoint = String::from_utf8(value.0.clone()).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        endpoint.ends_with(&format!("@{ip}:3128")),
        "the Secret's endpoint names the instance"
    );

    let provider = ProviderClient::connect_lazy(
        &format!("unix://{}", socket.display())
            .parse::<ProviderEndpoint>()
            .unwrap(),
        None,
        CallTimeouts::default(),
    )
    .unwrap();
    let cluster = ListFilter {
        cluster_id: "e2e-aws".into(),
        proxy_uid: None,
    };
    let listed = provider.list_by_tag(&cluster).await.expect("ListByTag");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].provider_id.to_string(), provider_id);

    kubectl(&["delete", "proxy", "office-egress", "--timeout=60s"]);
    // The instance is terminated at once; its security group goes once EC2 says `terminated`. ListByTag
    // lists a terminated instance while its group remains, so an empty list means both are gone.
    let mut left = listed;
    for _ in 0..100 {
        left = provider.list_by_tag(&cluster).await.expect("ListByTag");
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        left.is_empty(),
        "left on the backend after the Proxy was deleted: {left:?}"
    );
}
