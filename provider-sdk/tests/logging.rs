//! The daemon's logs: one structured line per call with the fields of contract §12.4, and never a sensitive
//! value (contract §8), whether the call succeeds, fails, panics or is cut off by its deadline.
//!
//! The server runs on tasks this test does not own, so the capturing subscriber is the process-wide
//! default; this binary holds only tests that want it.

mod support;

use std::{
    io,
    sync::{Arc, Mutex, OnceLock},
    time::{Duration, Instant},
};

use provider_sdk::{
    ProviderError,
    client::CallTimeouts,
    error::PermanentKind,
    model::{ListFilter, ProviderId},
    testing::{FAKE_PROVIDER_TYPE, FakeOptions, FakeProvider, Fault, Rpc},
};
use secrecy::{SecretBox, SecretString};
use support::{CLUSTER, UnixDaemon, create_request, create_request_with_secret};
use tracing_subscriber::{filter::LevelFilter, layer::SubscriberExt};

/// Log output kept in memory.
#[derive(Clone, Debug, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        String::from_utf8(bytes).expect("log output is UTF-8")
    }
}

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

struct Logs {
    /// Everything, at every level, in the daemon's JSON layout with span fields: where a leak would show.
    everything: Captured,
    /// Event fields only, so that a key found in a line is the event's own and not its span's.
    events: Captured,
}

fn logs() -> &'static Logs {
    static LOGS: OnceLock<Logs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs {
            everything: Captured::default(),
            events: Captured::default(),
        };
        let everything = logs.everything.clone();
        let events = logs.events.clone();
        let subscriber = tracing_subscriber::registry()
            .with(LevelFilter::TRACE)
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_writer(move || everything.clone()),
            )
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_span_list(false)
                    .with_writer(move || events.clone()),
            );
        tracing::subscriber::set_global_default(subscriber).expect("the only global subscriber");
        logs
    })
}

/// The per-call lines ("call finished" / "call failed") about `instance`.
fn call_lines(instance: &str) -> Vec<String> {
    let instance = format!("\"instance\":\"{instance}\"");
    logs()
        .events
        .text()
        .lines()
        .filter(|line| line.contains(&instance))
        .filter(|line| line.contains("\"message\":\"call finished\"") || line.contains("\"message\":\"call failed\""))
        .map(str::to_owned)
        .collect()
}

/// Waits for the line about `instance`: the server may log a moment after the client has its answer.
async fn the_call_line(instance: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut lines = call_lines(instance);
        if !lines.is_empty() {
            assert_eq!(lines.len(), 1, "one line per call: {lines:#?}");
            return lines.remove(0);
        }
        assert!(Instant::now() < deadline, "no per-call line for {instance}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn assert_fields(line: &str, fields: &[(&str, &str)]) {
    for (key, value) in fields {
        let pair = format!("\"{key}\":\"{value}\"");
        assert!(line.contains(&pair), "{pair} missing from {line}");
    }
    assert!(line.contains("\"duration_ms\":"), "no duration in {line}");
}

#[tokio::test]
async fn no_log_line_ever_shows_the_password_or_the_cloud_init() {
    logs();
    let sentinel = "sentinel-log-9d2f47e1-must-not-leak";
    let fake = FakeProvider::new(FakeOptions::default());
    let timeouts = CallTimeouts {
        // Long enough for a debug build on a busy 2-core machine; the hung Create below waits it out.
        create: Duration::from_secs(2),
        ..CallTimeouts::default()
    };
    let daemon = UnixDaemon::start_with_timeouts(fake.clone(), timeouts).await;
    let client = &daemon.client;
    let mut answers = Vec::new();

    let created = client
        .create(&create_request_with_secret("egress-secret-ok", sentinel))
        .await
        .expect("Create with sensitive fields");
    client
        .create(&create_request_with_secret("egress-secret-ok", sentinel))
        .await
        .expect("the same Create again");
    client.get(&created.provider_id).await.expect("Get");
    let filter = ListFilter {
        cluster_id: CLUSTER.to_owned(),
        proxy_uid: None,
    };
    client.list_by_tag(&filter).await.expect("ListByTag");

    fake.inject(
        Rpc::Create,
        Fault::Error(ProviderError::permanent(
            PermanentKind::PermissionDenied,
            "ACCESS_DENIED",
            "not allowed",
        )),
    );
    answers.push(
        client
            .create(&create_request_with_secret("egress-secret-denied", sentinel))
            .await
            .map(drop),
    );

    let mut bad_password = create_request_with_secret("egress-secret-badpw", sentinel);
    bad_password.proxy.auth.password = SecretString::from(format!("{sentinel}\u{7}"));
    answers.push(client.create(&bad_password).await.map(drop));

    let mut huge_cloud_init = create_request("egress-secret-huge");
    let document = sentinel.repeat(70 * 1024 / sentinel.len() + 1);
    huge_cloud_init.cloud_init = Some(SecretBox::new(document.into_bytes().into_boxed_slice()));
    answers.push(client.create(&huge_cloud_init).await.map(drop));

    let mut bad_port = create_request_with_secret("egress-secret-badport", sentinel);
    bad_port.proxy.port = 0;
    answers.push(client.create(&bad_port).await.map(drop));

    fake.inject(Rpc::Create, Fault::Panic);
    answers.push(
        client
            .create(&create_request_with_secret("egress-secret-panic", sentinel))
            .await
            .map(drop),
    );

    fake.inject(Rpc::Create, Fault::Hang);
    answers.push(
        client
            .create(&create_request_with_secret("egress-secret-hang", sentinel))
            .await
            .map(drop),
    );

    client.delete(&created.provider_id).await.expect("Delete");
    answers.push(client.get(&created.provider_id).await.map(drop));

    for answer in &answers {
        let error = answer.as_ref().expect_err("each of these calls fails");
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains(sentinel), "an error shows a secret: {shown}");
    }
    the_call_line("egress-secret-denied").await;
    the_call_line("egress-secret-badport").await;
    let everything = logs().everything.text();
    assert!(
        everything.contains("call finished") && everything.contains("call failed"),
        "the capture works"
    );
    if let Some(at) = everything.find(sentinel) {
        let start = everything[..at].rfind('\n').map_or(0, |i| i + 1);
        let end = everything[at..].find('\n').map_or(everything.len(), |i| at + i);
        panic!("a log line shows a secret: {}", &everything[start..end]);
    }
}

#[tokio::test]
async fn every_call_writes_one_line_with_provider_rpc_instance_class_and_duration() {
    logs();
    let fake = FakeProvider::new(FakeOptions::default());
    let daemon = UnixDaemon::start(fake.clone()).await;
    let client = &daemon.client;

    client.create(&create_request("egress-line-ok")).await.expect("Create");
    let ok = the_call_line("egress-line-ok").await;
    assert!(ok.contains("\"message\":\"call finished\""), "{ok}");
    assert_fields(
        &ok,
        &[
            ("provider", FAKE_PROVIDER_TYPE),
            ("rpc", "Create"),
            ("instance", "egress-line-ok"),
            ("class", "ok"),
        ],
    );

    let missing = ProviderId::new(FAKE_PROVIDER_TYPE, "egress-line-missing");
    client.get(&missing).await.expect_err("an absent instance");
    let not_found = the_call_line(missing.as_str()).await;
    assert!(not_found.contains("\"message\":\"call failed\""), "{not_found}");
    assert_fields(
        &not_found,
        &[
            ("provider", FAKE_PROVIDER_TYPE),
            ("rpc", "Get"),
            ("class", "not-found"),
            ("reason", "INSTANCE_NOT_FOUND"),
        ],
    );

    fake.inject(
        Rpc::Create,
        Fault::Error(ProviderError::quota("INSTANCE_LIMIT_EXCEEDED", "instances", "full")),
    );
    client
        .create(&create_request("egress-line-quota"))
        .await
        .expect_err("the injected quota error");
    let quota = the_call_line("egress-line-quota").await;
    assert!(quota.contains("\"message\":\"call failed\""), "{quota}");
    assert_fields(
        &quota,
        &[
            ("provider", FAKE_PROVIDER_TYPE),
            ("rpc", "Create"),
            ("instance", "egress-line-quota"),
            ("class", "quota"),
            ("reason", "INSTANCE_LIMIT_EXCEEDED"),
        ],
    );
}

#[tokio::test]
async fn a_call_cut_off_by_its_deadline_still_writes_its_line() {
    logs();
    let fake = FakeProvider::new(FakeOptions::default());
    let timeouts = CallTimeouts {
        get: Duration::from_millis(200),
        ..CallTimeouts::default()
    };
    let daemon = UnixDaemon::start_with_timeouts(fake.clone(), timeouts).await;
    let id = ProviderId::new(FAKE_PROVIDER_TYPE, "egress-line-hung");
    fake.inject(Rpc::Get, Fault::Hang);

    daemon
        .client
        .get(&id)
        .await
        .expect_err("the hung Get ends at its deadline");

    let line = the_call_line(id.as_str()).await;
    assert!(line.contains("\"message\":\"call failed\""), "{line}");
    assert_fields(
        &line,
        &[
            ("provider", FAKE_PROVIDER_TYPE),
            ("rpc", "Get"),
            ("class", "transient"),
            ("reason", "CANCELLED"),
        ],
    );
}
