//! Round trips through the SDK against the floor: a bare tonic server answering `grpc.health.v1` Check over
//! the same transport, and the trait called in-process. The fake backend has zero latency, so the figures
//! are the SDK's own cost. Daemons log one JSON line per call, so the server side logs to a sink here too.
//!
//! cargo bench -p provider-sdk --features testing --bench round_trip
//! BENCH_CALLS (default 20000) sets the calls per measurement.

use std::{
    io,
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use provider_sdk::{
    Provider,
    client::{CallTimeouts, ClientTls, ProviderClient, ProviderEndpoint},
    model::*,
    server::{Listen, TlsFiles, bind},
    telemetry::LogFormat,
    testing::{FakeProvider, TestPki},
};
use secrecy::SecretString;
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::{Channel, Server, ServerTlsConfig, server::TcpIncoming};
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

const IN_FLIGHT: usize = 32;

/// Latencies of one measurement, in microseconds.
struct Sample {
    micros: Vec<f64>,
    wall: Duration,
}

impl Sample {
    fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.micros.clone();
        sorted.sort_by(f64::total_cmp);
        sorted[((sorted.len() - 1) as f64 * p).round() as usize]
    }

    fn per_second(&self) -> f64 {
        self.micros.len() as f64 / self.wall.as_secs_f64()
    }
}

/// Runs `call` `calls` times with `in_flight` concurrent callers.
async fn measure<F, Fut>(calls: usize, in_flight: usize, call: F) -> Sample
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    let started = Instant::now();
    let workers: Vec<_> = (0..in_flight)
        .map(|worker| {
            let call = call.clone();
            tokio::spawn(async move {
                let mut micros = Vec::with_capacity(calls / in_flight);
                for i in (worker..calls).step_by(in_flight) {
                    let t = Instant::now();
                    call(i).await;
                    micros.push(t.elapsed().as_secs_f64() * 1e6);
                }
                micros
            })
        })
        .collect();
    let mut micros = Vec::with_capacity(calls);
    for worker in workers {
        micros.extend(worker.await.expect("worker"));
    }
    Sample {
        micros,
        wall: started.elapsed(),
    }
}

fn request(name: &str) -> CreateRequest {
    CreateRequest {
        name: InstanceName::parse(name, 63).unwrap(),
        proxy_uid: "3f1c2a9e-bench".into(),
        cluster_id: "bench".into(),
        placement: Placement::default(),
        proxy: ProxySettings {
            port: 3128,
            protocol: Protocol::Http,
            auth: ProxyAuth {
                username: "bench".into(),
                password: SecretString::from("bench-password"),
            },
            allowed_source_ranges: vec!["127.0.0.0/8".parse().unwrap()],
        },
        cloud_init: None,
    }
}

enum Transport {
    Unix,
    MutualTls,
}

/// Starts the floor (health only) and the SDK server over `transport`; answers clients for both.
async fn start(
    transport: &Transport,
    fake: FakeProvider,
    dir: &std::path::Path,
    pki: &TestPki,
) -> (Channel, ProviderClient) {
    let (health_reporter, health) = tonic_health::server::health_reporter();
    health_reporter
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    let timeouts = CallTimeouts::default();
    match transport {
        Transport::Unix => {
            let floor_path = dir.join("floor.sock");
            let listener = UnixListener::bind(&floor_path).unwrap();
            tokio::spawn(
                Server::builder()
                    .add_service(health)
                    .serve_with_incoming(UnixListenerStream::new(listener)),
            );
            let ours_path = dir.join("ours.sock");
            let bound = bind(&Listen::Unix(ours_path.clone()), None, false).await.unwrap();
            tokio::spawn(bound.serve(fake, std::future::pending()));
            let floor =
                ProviderClient::connect_lazy(&ProviderEndpoint::Unix(floor_path), None, timeouts.clone()).unwrap();
            let ours = ProviderClient::connect_lazy(&ProviderEndpoint::Unix(ours_path), None, timeouts).unwrap();
            (floor.channel(), ours)
        }
        Transport::MutualTls => {
            let files = pki.write_to(dir).unwrap();
            let tls = TlsFiles {
                cert: files.server_cert,
                key: files.server_key,
                client_ca: files.ca,
            };
            let identity = tonic::transport::Identity::from_pem(&pki.server_cert_pem, &pki.server_key_pem);
            let ca = tonic::transport::Certificate::from_pem(&pki.ca_pem);
            let floor_tls = ServerTlsConfig::new().identity(identity).client_ca_root(ca);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let floor_addr = listener.local_addr().unwrap();
            let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
            let floor_server = Server::builder()
                .tcp_nodelay(true)
                .tls_config(floor_tls)
                .unwrap()
                .add_service(health);
            tokio::spawn(floor_server.serve_with_incoming(incoming));
            let bound = bind(&Listen::Tcp("127.0.0.1:0".parse().unwrap()), Some(&tls), false)
                .await
                .unwrap();
            let ours_addr = bound.address().trim_start_matches("tcp://").to_owned();
            tokio::spawn(bound.serve(fake, std::future::pending()));
            let client_tls: ClientTls = pki.client_tls();
            let https = |authority: String| ProviderEndpoint::Https { authority };
            let floor = ProviderClient::connect_lazy(
                &https(floor_addr.to_string()),
                Some(client_tls.clone()),
                timeouts.clone(),
            )
            .unwrap();
            let ours = ProviderClient::connect_lazy(&https(ours_addr), Some(client_tls), timeouts).unwrap();
            (floor.channel(), ours)
        }
    }
}

struct Row {
    what: String,
    sample: Sample,
}

fn print_rows(title: &str, rows: &[Row], floor_p50: f64, floor_rate: f64) {
    println!("\n### {title}\n");
    println!("| measurement | p50 µs | p99 µs | calls/s | p50 vs floor | calls/s vs floor |");
    println!("|---|---:|---:|---:|---:|---:|");
    for row in rows {
        let (p50, p99, rate) = (
            row.sample.percentile(0.5),
            row.sample.percentile(0.99),
            row.sample.per_second(),
        );
        println!(
            "| {} | {p50:.1} | {p99:.1} | {rate:.0} | {:.2}× | {:.2}× |",
            row.what,
            p50 / floor_p50,
            rate / floor_rate
        );
    }
}

async fn bench_transport(name: &str, transport: Transport, calls: usize, pki: &TestPki) {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeProvider::default();
    let (floor_channel, ours) = start(&transport, fake.clone(), dir.path(), pki).await;
    let existing = ours.create(&request("bench-existing")).await.expect("create");
    let id = existing.provider_id.clone();

    let floor = move |_| {
        let mut health = HealthClient::new(floor_channel.clone());
        async move {
            health
                .check(HealthCheckRequest { service: String::new() })
                .await
                .expect("health");
        }
    };
    let get = {
        let (ours, id) = (ours.clone(), id.clone());
        move |_| {
            let (ours, id) = (ours.clone(), id.clone());
            async move {
                ours.get(&id).await.expect("get");
            }
        }
    };
    let create = {
        let ours = ours.clone();
        move |i: usize| {
            let ours = ours.clone();
            async move {
                ours.create(&request(&format!("bench-{name_seed}-{i}", name_seed = "c")))
                    .await
                    .expect("create");
            }
        }
    };
    let floor = Arc::new(floor);
    let get = Arc::new(get);
    // Warm the connections and the allocator before measuring.
    let warm = calls / 10;
    measure(warm, 1, {
        let f = floor.clone();
        move |i| f(i)
    })
    .await;
    measure(warm, 1, {
        let g = get.clone();
        move |i| g(i)
    })
    .await;

    let floor_seq = measure(calls, 1, {
        let f = floor.clone();
        move |i| f(i)
    })
    .await;
    let get_seq = measure(calls, 1, {
        let g = get.clone();
        move |i| g(i)
    })
    .await;
    let create_seq = measure(calls, 1, create).await;
    let floor_par = measure(calls, IN_FLIGHT, {
        let f = floor.clone();
        move |i| f(i)
    })
    .await;
    let get_par = measure(calls, IN_FLIGHT, {
        let g = get.clone();
        move |i| g(i)
    })
    .await;

    let (floor_p50, floor_rate) = (floor_seq.percentile(0.5), floor_seq.per_second());
    print_rows(
        &format!("{name}: one call in flight"),
        &[
            Row {
                what: "floor: grpc.health.v1 Check".into(),
                sample: floor_seq,
            },
            Row {
                what: "Get through the SDK".into(),
                sample: get_seq,
            },
            Row {
                what: "Create (new instance) through the SDK".into(),
                sample: create_seq,
            },
        ],
        floor_p50,
        floor_rate,
    );
    let (floor_p50, floor_rate) = (floor_par.percentile(0.5), floor_par.per_second());
    print_rows(
        &format!("{name}: {IN_FLIGHT} calls in flight"),
        &[
            Row {
                what: "floor: grpc.health.v1 Check".into(),
                sample: floor_par,
            },
            Row {
                what: "Get through the SDK".into(),
                sample: get_par,
            },
        ],
        floor_p50,
        floor_rate,
    );
}

async fn bench_in_process(calls: usize) {
    let fake = FakeProvider::default();
    let id = fake.create(request("bench-existing")).await.unwrap().provider_id;
    let get = {
        let fake = fake.clone();
        move |_| {
            let (fake, id) = (fake.clone(), id.clone());
            async move {
                fake.get(&id).await.unwrap();
            }
        }
    };
    let create = move |i: usize| {
        let fake = fake.clone();
        async move {
            fake.create(request(&format!("bench-p-{i}"))).await.unwrap();
        }
    };
    let get = measure(calls, 1, get).await;
    let create = measure(calls, 1, create).await;
    println!("\n### in-process trait calls (no gRPC)\n");
    println!("| measurement | p50 µs | p99 µs | calls/s |");
    println!("|---|---:|---:|---:|");
    for (what, sample) in [("Get", get), ("Create (new instance)", create)] {
        println!(
            "| {what} | {:.2} | {:.2} | {:.0} |",
            sample.percentile(0.5),
            sample.percentile(0.99),
            sample.per_second()
        );
    }
}

fn main() {
    let calls: usize = std::env::var("BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    // The daemon's real logging, into a sink: its cost is part of every call.
    // The daemon's own telemetry (JSON lines, OpenTelemetry spans without an exporter), logging into a
    // sink: its cost is part of every call. BENCH_LOGS=0 leaves tracing off, to see that cost.
    let tracer_provider = provider_sdk::telemetry::tracer_provider("bench", None).expect("tracer provider");
    if std::env::var("BENCH_LOGS").as_deref() != Ok("0") {
        let subscriber = provider_sdk::telemetry::subscriber("bench", LogFormat::Json, io::sink, &tracer_provider);
        tracing::subscriber::set_global_default(subscriber).expect("subscriber");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let pki = TestPki::generate();
    println!(
        "provider-sdk round trips, {calls} calls per measurement, {} ({} cores)",
        now(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    runtime.block_on(async {
        bench_transport("unix socket", Transport::Unix, calls, &pki).await;
        bench_transport("TCP + mutual TLS", Transport::MutualTls, calls, &pki).await;
        bench_in_process(calls).await;
    });
}

fn now() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("unix time {secs}")
}
