//! The classification table test (contract §3.4) over captured EC2 error responses: each body is served
//! by a one-route HTTP server on 127.0.0.1, read by the real aws-sdk-ec2 client inside the provider (one
//! attempt, no retries), and classified by the provider's one `classify`. Covers what moto never answers
//! (Malformed IDs, capacity and limits, throttling, authorization failures) and the transport failures:
//! a refused connection, an endpoint that never answers, an answer that is not EC2's XML.

use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    time::Duration,
};

use egress_provider_aws::{AwsConfig, AwsProvider};
use provider_sdk::{ErrorClass, Provider, model::ProviderId};

/// Bodies in the shape EC2 answers (`Response/Errors/Error` with `Code` and `Message`, then `RequestID`),
/// messages as EC2 words them.
const CAPTURED: &[(u16, &str, &str, ErrorClass, &str)] = &[
    (
        400,
        "InvalidInstanceID.NotFound",
        "The instance ID 'i-0123456789abcdef0' does not exist",
        ErrorClass::NotFound,
        "INSTANCE_NOT_FOUND",
    ),
    (
        400,
        "InvalidInstanceID.Malformed",
        "Invalid id: \"i-0123456789abcdef0\" (expecting \"i-...\")",
        ErrorClass::Permanent,
        "MALFORMED_PROVIDER_ID",
    ),
    (
        500,
        "InsufficientInstanceCapacity",
        "We currently do not have sufficient t3.micro capacity in the Availability Zone you requested (us-east-1a). Our system will be working on provisioning additional capacity.",
        ErrorClass::Quota,
        "INSUFFICIENT_INSTANCE_CAPACITY",
    ),
    (
        400,
        "InstanceLimitExceeded",
        "You have requested more instances (21) than your current instance limit of 20 allows for the specified instance type.",
        ErrorClass::Quota,
        "INSTANCE_LIMIT_EXCEEDED",
    ),
    (
        400,
        "VcpuLimitExceeded",
        "You have requested more vCPU capacity than your current vCPU limit of 32 allows for the instance bucket that the specified instance type belongs to.",
        ErrorClass::Quota,
        "VCPU_LIMIT_EXCEEDED",
    ),
    (
        503,
        "RequestLimitExceeded",
        "Request limit exceeded.",
        ErrorClass::Transient,
        "THROTTLED",
    ),
    (400, "Throttling", "Rate exceeded", ErrorClass::Transient, "THROTTLED"),
    (
        403,
        "UnauthorizedOperation",
        "You are not authorized to perform this operation. Encoded authorization failure message: 4GIOHlTkIaWHQD0Q0m6XSnuUMCm-abcdefgh",
        ErrorClass::Permanent,
        "PERMISSION_DENIED",
    ),
    (
        401,
        "AuthFailure",
        "AWS was not able to validate the provided access credentials",
        ErrorClass::Permanent,
        "UNAUTHENTICATED",
    ),
    (
        400,
        "IdempotentParameterMismatch",
        "The client token you have provided is associated with a resource that is already deleted. Please use a different client token.",
        ErrorClass::Permanent,
        "NAME_IN_USE",
    ),
    (
        400,
        "InvalidAMIID.NotFound",
        "The image id '[ami-0123456789abcdef0]' does not exist",
        ErrorClass::Permanent,
        "IMAGE_UNAVAILABLE",
    ),
    (
        400,
        "InvalidAMIID.Malformed",
        "Invalid id: \"ami-xyz\" (expecting \"ami-...\")",
        ErrorClass::Permanent,
        "IMAGE_UNAVAILABLE",
    ),
    (
        400,
        "InvalidParameterValue",
        "Value (t9.huge) for parameter instanceType is invalid.",
        ErrorClass::Permanent,
        "BACKEND_REJECTED_REQUEST",
    ),
    (
        400,
        "DependencyViolation",
        "resource sg-0123456789abcdef0 has a dependent object",
        ErrorClass::Transient,
        "DEPENDENCY_VIOLATION",
    ),
    (
        500,
        "InternalError",
        "An internal error has occurred",
        ErrorClass::Transient,
        "BACKEND_UNAVAILABLE",
    ),
];

fn body(code: &str, message: &str) -> String {
    let message = message
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;");
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>7a62c49f-347e-4fc4-9331-6e8eEXAMPLE</RequestID></Response>"
    )
}

/// Serves `answer` (a whole HTTP response; `None` never answers) to every connection; returns the port.
fn serve(answer: Option<String>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let answer = answer.clone();
            std::thread::spawn(move || respond(stream, answer));
        }
    });
    port
}

fn respond(mut stream: TcpStream, answer: Option<String>) {
    let mut request = Vec::new();
    let mut byte = [0u8; 1];
    while !request.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
        request.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&request).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    let _ = stream.read_exact(&mut body);
    match answer {
        Some(answer) => {
            let _ = stream.write_all(answer.as_bytes());
        }
        None => std::thread::sleep(Duration::from_secs(30)),
    }
}

fn response(status: u16, body: &str) -> String {
    format!(
        "HTTP/1.1 {status} Status\r\nContent-Type: text/xml;charset=UTF-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// The provider against `port`, one attempt per call, budgets short enough for the silent server.
fn provider(port: u16, dir: &tempfile::TempDir) -> AwsProvider {
    let credentials = dir.path().join("credentials");
    std::fs::write(
        &credentials,
        "[default]\naws_access_key_id = AKIDEXAMPLE\naws_secret_access_key = s\n",
    )
    .unwrap();
    let text = format!(
        "endpointUrl: http://127.0.0.1:{port}\nregions:\n  us-east-1:\n    images: {{ubuntu: ami-785db401}}\n\
         machineTypes: [t3.micro]\ncredentials: {{sharedCredentialsFile: {}}}\n\
         budgets: {{maxAttempts: 1, connectMs: 500, attemptMs: 500, callMs: 1000}}\n",
        credentials.display()
    );
    let config: AwsConfig = provider_sdk::config::parse("classify.yaml", &text).unwrap();
    AwsProvider::new(config)
}

fn id() -> ProviderId {
    ProviderId::new("aws", "us-east-1/i-0123456789abcdef0")
}

#[tokio::test(flavor = "multi_thread")]
async fn captured_ec2_error_responses_map_to_their_class_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    for (status, code, message, class, reason) in CAPTURED {
        let port = serve(Some(response(*status, &body(code, message))));
        let error = provider(port, &dir).get(&id()).await.unwrap_err();
        if (error.class(), error.reason()) != (*class, *reason) {
            wrong.push(format!(
                "{code}: {:?} {} ({})",
                error.class(),
                error.reason(),
                error.message_with_causes()
            ));
        }
        if *class != ErrorClass::NotFound {
            let text = error.message_with_causes();
            assert!(
                text.contains(code) && text.contains("us-east-1"),
                "the code and region are named: {text}"
            );
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn quota_answers_name_what_ran_out_and_when_to_retry() {
    let dir = tempfile::tempdir().unwrap();
    let port = serve(Some(response(400, &body("VcpuLimitExceeded", "limit"))));
    let error = provider(port, &dir).get(&id()).await.unwrap_err();
    let provider_sdk::ProviderError::Quota { violations, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(violations[0].subject, "region/us-east-1/vcpus");
    assert!(error.retry_after().is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn transport_failures_are_transient_with_their_own_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let refused = provider(closed, &dir).get(&id()).await.unwrap_err();
    assert_eq!(
        (refused.class(), refused.reason()),
        (ErrorClass::Transient, "BACKEND_UNAVAILABLE"),
        "{refused}"
    );

    let silent = serve(None);
    let started = std::time::Instant::now();
    let timed_out = provider(silent, &dir).get(&id()).await.unwrap_err();
    assert_eq!(
        (timed_out.class(), timed_out.reason()),
        (ErrorClass::Transient, "DEADLINE_EXCEEDED"),
        "{timed_out}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the attempt budget bounded the call"
    );

    let garbage = serve(Some(response(200, "<html>captive portal</html>")));
    let unreadable = provider(garbage, &dir).get(&id()).await.unwrap_err();
    assert_eq!(unreadable.class(), ErrorClass::Transient, "{unreadable}");
}
