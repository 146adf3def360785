//! The conformance suite against the real `egress-provider-aws` daemon over a unix socket: always backed
//! by a moto EC2 server on 127.0.0.1, and against real EC2 when `AWS_TEST_CONFIG` (a provider config for
//! a test account) and `AWS_TEST_PARAMS` (the suite's params: a placement from that config) are set
//! (`backend-test: integration-tag`). Real EC2 instances cost money and take minutes.

mod common;

use std::path::Path;

use provider_conformance::cli::assert_conforms;

/// Runs the suite against the daemon at `endpoint` and asserts that nothing failed.
async fn passes(endpoint: &str, params: &Path) {
    let report = assert_conforms(&["--endpoint", endpoint, "--params", params.to_str().unwrap()]).await;
    println!("{report}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_aws_daemon_passes_conformance_against_moto() {
    let aws = common::Aws::new();
    let daemon = aws.start();
    let params = aws.dir.path().join("conformance.yaml");
    std::fs::write(
        &params,
        "placement: {region: us-east-1, zone: us-east-1a, machineType: t3.micro, image: ubuntu}\n\
         allowedSourceRanges: [127.0.0.0/8]\nreadyTimeoutSeconds: 30\n\
         unknownProviderId: aws://us-east-1/i-0123456789abcdef0\n\
         malformedProviderIds: [aws://us-east-1/i-XYZ, aws://us-east-1/i-0123456789abcdef0/x, aws://us-east-1]\n",
    )
    .unwrap();
    passes(&aws.endpoint(), &params).await;
    assert_eq!(daemon.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_aws_daemon_passes_conformance_against_real_ec2_when_configured() {
    let (Some(config), Some(params)) = (std::env::var_os("AWS_TEST_CONFIG"), std::env::var_os("AWS_TEST_PARAMS"))
    else {
        eprintln!("skipped: set AWS_TEST_CONFIG and AWS_TEST_PARAMS to run the suite against real EC2");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("aws.sock");
    let endpoint = format!("unix://{}", socket.display());
    let mut daemon = std::process::Command::new(env!("CARGO_BIN_EXE_egress-provider-aws"))
        .arg("--config")
        .arg(&config)
        .args(["--listen", &endpoint])
        .spawn()
        .expect("egress-provider-aws starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !socket.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon did not serve within 20 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    passes(&endpoint, Path::new(&params)).await;
    let _ = daemon.kill();
    let _ = daemon.wait();
}
