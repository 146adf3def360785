//! The proof that the Proxy carries traffic: its address and credentials are read back the way a
//! consumer would (the Proxy's status and the Secret the operator wrote), then one request goes through it
//! without credentials (must be refused with 407) and one with them (must reach the local server, which
//! must see the instance's address as the source).

use std::net::{IpAddr, SocketAddr};

use anyhow::{Context, Result, bail, ensure};
use base64::{Engine, engine::general_purpose::STANDARD};
use egress_test_support::ProxiedGet;

use super::{NAMESPACE, PROXY, cluster::Cluster};

/// What the requests showed.
#[derive(Debug)]
pub struct Seen {
    pub endpoint: SocketAddr,
    pub source: IpAddr,
}

pub async fn prove(cluster: &Cluster, echo_port: u16) -> Result<Seen> {
    let ip: IpAddr = cluster
        .kubectl(&["get", "proxy", PROXY, "-n", NAMESPACE, "-o", "jsonpath={.status.ip}"])?
        .trim()
        .parse()
        .context("the Proxy's status.ip")?;
    let port: u16 = cluster
        .kubectl(&["get", "proxy", PROXY, "-n", NAMESPACE, "-o", "jsonpath={.spec.port}"])?
        .trim()
        .parse()
        .context("the Proxy's spec.port")?;
    let secret = format!("{PROXY}-proxy");
    let username = secret_key(cluster, &secret, "username")?;
    let password = secret_key(cluster, &secret, "password")?;
    let endpoint = SocketAddr::new(ip, port);

    let anonymous = ProxiedGet::new(endpoint, echo_port)
        .send()
        .await
        .with_context(|| format!("a request through {endpoint}"))?;
    println!("   without credentials: {}", describe(anonymous.status));
    ensure!(
        anonymous.status == Some(407),
        "the proxy must ask for credentials (407), it answered {:?}",
        anonymous.status
    );

    let answer = ProxiedGet::new(endpoint, echo_port)
        .credentials(&username, &password)
        .send()
        .await
        .with_context(|| format!("a request through {endpoint}"))?;
    println!(
        "   with the credentials from Secret {secret}: {} — the server at 127.0.0.1:{echo_port} saw the request \
         come from {}",
        describe(answer.status),
        answer.body
    );
    let Some(200) = answer.status else {
        bail!("the request with credentials failed: {answer:?}");
    };
    let source: IpAddr = answer.body.trim().parse().context("the echo server's answer")?;
    ensure!(
        source == ip,
        "the request left from {source}, not from the instance's address {ip}"
    );
    Ok(Seen { endpoint, source })
}

fn secret_key(cluster: &Cluster, secret: &str, key: &str) -> Result<String> {
    let encoded = cluster.kubectl(&[
        "get",
        "secret",
        secret,
        "-n",
        NAMESPACE,
        "-o",
        &format!("jsonpath={{.data.{key}}}"),
    ])?;
    let bytes = STANDARD
        .decode(encoded.trim())
        .with_context(|| format!("Secret {secret} key {key} is not base64"))?;
    String::from_utf8(bytes).with_context(|| format!("Secret {secret} key {key} is not UTF-8"))
}

fn describe(status: Option<u16>) -> String {
    match status {
        Some(200) => "200 OK".into(),
        Some(407) => "407 Proxy Authentication Required".into(),
        Some(code) => code.to_string(),
        None => "no HTTP answer".into(),
    }
}
