//! The sentinel test (contract §7.3) for the proxy password: driven through success and error paths, it
//! appears only in the instance's 0600 tinyproxy.conf, never in the daemon's log lines (at debug level),
//! error messages, the record, or tinyproxy's own logs. The host provider reads no credential, and
//! refuses cloud-init (max_cloud_init_bytes 0), so the password is the only sensitive value it holds.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{Host, free_port, request, wait_for_state};
use provider_sdk::model::{InstanceState, ListFilter, ProviderId};
use secrecy::SecretString;

#[tokio::test(flavor = "multi_thread")]
async fn the_password_appears_only_in_the_private_tinyproxy_config() {
    let sentinel = format!("SENTINEL-{}", rand::random::<u64>());
    let host = Host::new();
    let log = host.dir.path().join("daemon.log");
    let daemon = host.start_logging_to(&log);
    let client = host.client();
    let mut seen = Vec::new();

    let mut good = request("egress-sentinel", free_port(), &[]);
    good.proxy.auth.password = SecretString::from(sentinel.clone());
    let created = client.create(&good).await.expect("Create");
    wait_for_state(&client, &created.provider_id, InstanceState::Running).await;
    seen.push(format!("{:?}", client.create(&good).await));
    let mut other_spec = good.clone();
    other_spec.proxy.port = free_port();
    seen.push(format!("{:?}", client.create(&other_spec).await));
    let mut unparsable = request("egress-sentinel-bad", free_port(), &[]);
    unparsable.proxy.auth.password = SecretString::from(format!("{sentinel} with spaces"));
    seen.push(format!("{:?}", client.create(&unparsable).await));
    seen.push(format!("{:?}", client.get(&created.provider_id).await));
    let filter = ListFilter {
        cluster_id: good.cluster_id.clone(),
        proxy_uid: None,
    };
    seen.push(format!("{:?}", client.list_by_tag(&filter).await));
    seen.push(format!("{:?}", client.check().await));

    let dir = host.instance_dir("egress-sentinel");
    let conf = std::fs::read_to_string(dir.join("tinyproxy.conf")).unwrap();
    assert!(conf.contains(&sentinel), "tinyproxy needs the password in its config");
    let mode = std::fs::metadata(dir.join("tinyproxy.conf"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the config is private to the daemon's user");
    let dir_mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(dir_mode & 0o777, 0o700);
    for file in ["record.json", "tinyproxy.log", "stderr.log"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        assert!(!text.contains(&sentinel), "{file} holds the password");
    }

    client.delete(&created.provider_id).await.expect("Delete");
    seen.push(format!(
        "{:?}",
        client.delete(&ProviderId::new("host", "egress-sentinel")).await
    ));
    assert_eq!(daemon.stop(), Some(0));
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("egress-sentinel"), "the log was captured: {logged}");
    assert!(!logged.contains(&sentinel), "the daemon logged the password");
    for answer in seen {
        assert!(!answer.contains(&sentinel), "an answer carried the password: {answer}");
    }
}
