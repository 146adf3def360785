//! Create (contract §2.3), idempotent by name. The steps, and what each finds on a retry:
//!
//! 1. the name's lock (one Create or Delete per name in this daemon);
//! 2. every configured region is searched for a live instance tagged `Name=<name>`: ours with the same
//!    fingerprint is returned as it is, ours being torn down is `INSTANCE_DELETING`, anything else is
//!    `NAME_IN_USE`;
//! 3. the security group is found by name or made (per-Proxy mode), and its rule added if missing;
//! 4. RunInstances with a ClientToken derived from the name, so that a retry EC2 has not yet made visible
//!    to step 2 (DescribeInstances is eventually consistent) gets the same instance back instead of a second.
//!    Its parameters depend only on the request, the target and the group, never on the clock: EC2 answers a
//!    token reused with other parameters with IdempotentParameterMismatch, after which the token's instance
//!    is looked up (`client-token` filter): live and ours is the answer, gone means the next generation;
//! 5. the created-at tag, with CreateTags, when the instance lacks it.
//!
//! A launch EC2 refuses removes the per-Proxy group step 3 made, unless a live instance of the name uses it.
//!
//! The whole of it runs in a spawned task (`provider::detached`), so a caller that gives up does not cut
//! it off between steps.

use std::{
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use aws_sdk_ec2::{
    Client,
    operation::run_instances::{RunInstancesInput, builders::RunInstancesInputBuilder},
    types::{Filter, Instance as Ec2Instance, Placement as Ec2Placement, ResourceType, Tag},
};
use provider_sdk::model::{CreateRequest, Instance};
use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};

use crate::{
    error::{ApiFailure, AwsError, Ec2Code, failure},
    instances::{Phase, to_instance},
    placement::{GroupMode, Target},
    provider::Inner,
    security_group, tags,
};

/// How many ClientTokens one name may use. A token EC2 remembers for an instance that was terminated
/// (the same name Created again after a Delete) answers that instance; the next token makes a new one.
const TOKEN_GENERATIONS: u32 = 4;

/// The idempotency token of the `generation`th instance named `name`: 64 hex characters, EC2's maximum.
pub fn client_token(name: &str, generation: u32) -> String {
    let digest = Sha256::digest(format!("egressproxies.dev/{name}/{generation}"));
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

pub async fn create(inner: Arc<Inner>, target: Target, request: CreateRequest) -> Result<Instance, AwsError> {
    let name = request.name.as_str();
    let _guard = inner
        .locks
        .lock(name, inner.config.budgets.lock())
        .await
        .ok_or_else(|| AwsError::Busy { name: name.to_owned() })?;
    if let Some(existing) = find_by_name(&inner, &request).await? {
        return Ok(existing);
    }
    let client = inner
        .client(&target.region)
        .expect("placement resolves only configured regions");
    let group_id = match &target.group {
        GroupMode::PerProxy { vpc_id } => {
            security_group::ensure(client, &target.region, vpc_id.as_deref(), &request).await?
        }
        GroupMode::Shared(id) => id.clone(),
    };
    let result = run(client, &target, &request, &group_id, inner.config.budgets.poll()).await;
    if let (Err(error), GroupMode::PerProxy { vpc_id }) = (&result, &target.group)
        && launch_refused(error)
    {
        remove_unused_group(client, &target.region, name, vpc_id.as_deref()).await;
    }
    result
}

/// The EC2 states of an instance that still holds its resources.
const LIVE: [&str; 5] = ["pending", "running", "stopping", "stopped", "shutting-down"];

/// The filters of "live instances named `name`".
fn live_filters(name: &str) -> Vec<Filter> {
    vec![
        tags::filter(tags::NAME, name),
        Filter::builder()
            .name("instance-state-name")
            .set_values(Some(LIVE.map(String::from).to_vec()))
            .build(),
    ]
}

/// Whether `region` has a live instance named `name` (the teardown asks before removing a group).
pub async fn live_instance_named(client: &Client, region: &str, name: &str) -> Result<bool, AwsError> {
    let answer = client
        .describe_instances()
        .set_filters(Some(live_filters(name)))
        .send()
        .await
        .map_err(|e| AwsError::api("DescribeInstances", region)(failure(e)))?;
    Ok(answer.reservations().iter().any(|r| !r.instances().is_empty()))
}

/// Step 2: the live instance of this name, in any configured region.
async fn find_by_name(inner: &Inner, request: &CreateRequest) -> Result<Option<Instance>, AwsError> {
    let name = request.name.as_str();
    let searches = inner.clients.iter().map(|(region, client)| async move {
        tracing::debug!(region, name, "DescribeInstances by name");
        let filters = live_filters(name);
        let mut found = Vec::new();
        let mut pages = client
            .describe_instances()
            .set_filters(Some(filters))
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| AwsError::api("DescribeInstances", region)(failure(e)))?;
            for reservation in page.reservations.unwrap_or_default() {
                found.extend(
                    reservation
                        .instances
                        .unwrap_or_default()
                        .into_iter()
                        .map(|i| (region.as_str(), i)),
                );
            }
        }
        Ok::<_, AwsError>(found)
    });
    let found: Vec<_> = futures::future::try_join_all(searches)
        .await?
        .into_iter()
        .flatten()
        .collect();
    let fingerprint = request.spec_fingerprint();
    let mut taken = None;
    for (region, ec2) in &found {
        let tags = ec2.tags();
        let marks = tags::marks(tags);
        let ours = marks.managed && marks.cluster_id == request.cluster_id;
        let same_spec = tags::value(tags, tags::SPEC) == Some(fingerprint.as_str());
        let phase = Phase::of_instance(ec2);
        let instance = to_instance(region, ec2)?;
        match (ours && same_spec, phase.is_going()) {
            (true, false) => {
                tracing::debug!(provider_id = %instance.provider_id, "found the instance of this name");
                // A Create cut off between its launch and the created-at tag: finish it.
                let client = inner.client(region).expect("searched regions are configured");
                stamp_created_at(client, region, ec2, inner.config.budgets.poll()).await?;
                return Ok(Some(instance));
            }
            (true, true) => {
                return Err(AwsError::Deleting {
                    name: name.to_owned(),
                    id: instance.provider_id.to_string(),
                });
            }
            (false, _) => {
                let why = match (marks.managed, ours) {
                    (false, _) => "an instance without the managed mark has it",
                    (true, false) => "an instance of another cluster has it",
                    (true, true) => "an instance with another spec has it",
                };
                taken = Some(format!("{why} ({})", instance.provider_id));
            }
        }
    }
    match taken {
        Some(why) => Err(AwsError::NameInUse {
            name: name.to_owned(),
            why,
        }),
        None => Ok(None),
    }
}

/// Step 4: RunInstances under the name's ClientTokens, one generation after another, until one answers a
/// live instance of this request.
async fn run(
    client: &Client,
    target: &Target,
    request: &CreateRequest,
    group_id: &str,
    poll: Duration,
) -> Result<Instance, AwsError> {
    let name = request.name.as_str();
    let region = target.region.as_str();
    let user_data = request
        .cloud_init
        .as_ref()
        .filter(|bytes| !bytes.expose_secret().is_empty())
        .map(|bytes| aws_smithy_types::base64::encode(bytes.expose_secret()));
    let tags = tags::for_request(request, name);
    for generation in 0..TOKEN_GENERATIONS {
        let token = client_token(name, generation);
        tracing::info!(region, name, generation, "RunInstances");
        let answer = launch_input(target, Some(group_id), tags.clone(), user_data.clone())
            .client_token(&token)
            .send_with(client)
            .await
            .map_err(failure);
        let holder = match answer {
            Ok(answer) => first_instance(answer.instances, region)?,
            // This token launched an instance with other parameters (another spec, group or AMI): what is
            // that instance now?
            Err(failure) if failure.is(Ec2Code::IdempotentParameterMismatch) => {
                tracing::info!(region, name, generation, "the token was used with other parameters");
                token_holder(client, region, &token).await?
            }
            Err(failure) => return Err(AwsError::api("RunInstances", region)(failure)),
        };
        match verdict(holder, request) {
            Verdict::Ours(ec2) => {
                stamp_created_at(client, region, &ec2, poll).await?;
                let instance = to_instance(region, &ec2)?;
                tracing::info!(provider_id = %instance.provider_id, "instance created");
                return Ok(instance);
            }
            Verdict::Taken(why) => {
                return Err(AwsError::NameInUse {
                    name: name.to_owned(),
                    why,
                });
            }
            Verdict::Spent => {
                tracing::info!(
                    region,
                    name,
                    generation,
                    "this token's instance is gone; trying the next"
                );
            }
        }
    }
    Err(tokens_exhausted(name))
}

/// RunInstances as Create sends it (without its ClientToken) and Check dry-runs it: everything in it comes
/// from the target, the group and the request, so a retry sends exactly what the first call sent.
pub fn launch_input(
    target: &Target,
    group_id: Option<&str>,
    tags: Vec<Tag>,
    user_data: Option<String>,
) -> RunInstancesInputBuilder {
    RunInstancesInput::builder()
        .image_id(&target.image_id)
        .instance_type(target.machine_type.as_str().into())
        .min_count(1)
        .max_count(1)
        .set_placement(
            target
                .zone
                .as_ref()
                .map(|zone| Ec2Placement::builder().availability_zone(zone).build()),
        )
        .set_subnet_id(target.subnet_id.clone())
        .set_security_group_ids(group_id.map(|id| vec![id.to_owned()]))
        .set_user_data(user_data)
        .tag_specifications(tags::specification(ResourceType::Instance, tags))
}

fn first_instance(instances: Option<Vec<Ec2Instance>>, region: &str) -> Result<Option<Ec2Instance>, AwsError> {
    match instances.unwrap_or_default().into_iter().next() {
        Some(ec2) => Ok(Some(ec2)),
        None => Err(AwsError::Unexpected {
            operation: "RunInstances",
            region: region.to_owned(),
            what: "an instance",
        }),
    }
}

/// The instance EC2 launched for `token`, preferring a live one; `None` once EC2 no longer shows it (EC2
/// remembers a token longer than it shows a terminated instance).
async fn token_holder(client: &Client, region: &str, token: &str) -> Result<Option<Ec2Instance>, AwsError> {
    tracing::debug!(region, "DescribeInstances by client token");
    let answer = client
        .describe_instances()
        .filters(Filter::builder().name("client-token").values(token).build())
        .send()
        .await
        .map_err(|e| AwsError::api("DescribeInstances", region)(failure(e)))?;
    let mut found: Vec<Ec2Instance> = answer
        .reservations
        .unwrap_or_default()
        .into_iter()
        .flat_map(|r| r.instances.unwrap_or_default())
        .collect();
    let live = found.iter().position(|ec2| !Phase::of_instance(ec2).is_going());
    Ok(live.map(|at| found.swap_remove(at)).or_else(|| found.pop()))
}

/// What one generation's token holds.
#[derive(Debug)]
enum Verdict {
    /// A live instance of this request: Create's answer.
    Ours(Box<Ec2Instance>),
    /// Nothing live: the next generation's token is free to make a new instance.
    Spent,
    /// A live instance that is not this request's: the name is in use.
    Taken(String),
}

/// Judges the instance a token holds. A RunInstances answer carries the instance's tags; an answer without
/// them (from a token used with these very parameters) is still this request's instance.
fn verdict(holder: Option<Ec2Instance>, request: &CreateRequest) -> Verdict {
    let Some(ec2) = holder else {
        return Verdict::Spent;
    };
    if Phase::of_instance(&ec2).is_going() {
        return Verdict::Spent;
    }
    let tags = ec2.tags();
    let marks = tags::marks(tags);
    let untagged = tags.is_empty();
    let same = marks.managed
        && marks.cluster_id == request.cluster_id
        && tags::value(tags, tags::SPEC) == Some(request.spec_fingerprint().as_str());
    if untagged || same {
        return Verdict::Ours(Box::new(ec2));
    }
    Verdict::Taken(format!(
        "the live instance {} holds the name's ClientToken with other marks or another spec",
        ec2.instance_id().unwrap_or("(no ID)")
    ))
}

/// Every generation's token names an instance that is gone: EC2 would answer each again for as long as it
/// remembers them, so retrying cannot help.
fn tokens_exhausted(name: &str) -> AwsError {
    AwsError::NameInUse {
        name: name.to_owned(),
        why: format!(
            "all {TOKEN_GENERATIONS} ClientTokens of the name belong to terminated instances, which EC2 \
             remembers for a while; Create it under another name"
        ),
    }
}

/// Writes the created-at tag (the instance's LaunchTime, which is its creation time until it is first
/// stopped) when the instance lacks it. Until written, `created_at` reads LaunchTime: the same value.
async fn stamp_created_at(client: &Client, region: &str, ec2: &Ec2Instance, poll: Duration) -> Result<(), AwsError> {
    if tags::value(ec2.tags(), tags::CREATED_AT).is_some() {
        return Ok(());
    }
    let Some(id) = ec2.instance_id() else {
        return Ok(());
    };
    let launched = ec2
        .launch_time()
        .and_then(|t| u64::try_from(t.secs()).ok())
        .map_or_else(SystemTime::now, |secs| UNIX_EPOCH + Duration::from_secs(secs));
    let mut attempts = 0;
    loop {
        attempts += 1;
        let result = client
            .create_tags()
            .resources(id)
            .tags(tags::created_at(launched))
            .send()
            .await
            .map_err(failure);
        match result {
            Ok(_) => return Ok(()),
            // EC2 may not know an instance for a moment after launching it.
            Err(failure) if failure.is(Ec2Code::InstanceNotFound) && attempts < STAMP_ATTEMPTS => {
                tokio::time::sleep(poll).await;
            }
            Err(failure) => return Err(AwsError::api("CreateTags", region)(failure)),
        }
    }
}

/// CreateTags tries on an instance EC2 does not know yet; a later Create of the name writes it otherwise.
const STAMP_ATTEMPTS: u32 = 3;

/// Whether EC2 surely launched nothing for this error: it refused the call with a 4xx code, or the name's
/// tokens are used up. A timeout, a broken connection or a 5xx may hide a launched instance.
fn launch_refused(error: &AwsError) -> bool {
    match error {
        AwsError::Api {
            failure: ApiFailure::Service { status, .. },
            ..
        } => *status < 500,
        AwsError::NameInUse { .. } => true,
        _ => false,
    }
}

/// After a refused launch, removes the per-Proxy group unless a live instance of the name uses it. The
/// caller holds the name's lock. A failure here is logged: the launch's own error is the answer.
async fn remove_unused_group(client: &Client, region: &str, name: &str, vpc_id: Option<&str>) {
    let cleanup = async {
        if live_instance_named(client, region, name).await? {
            return Ok(false);
        }
        security_group::delete(client, region, name, vpc_id)
            .await
            .map(|()| true)
    };
    match cleanup.await {
        Ok(true) => tracing::info!(region, name, "removed the security group of a launch EC2 refused"),
        Ok(false) => {}
        Err(error) => tracing::warn!(
            region,
            name,
            %error,
            "the security group of a refused launch stays; the next Create of the name reuses it"
        ),
    }
}

/// An [`Inner`] against a moto server of the test's own, for the unit tests of Create and the teardown.
#[cfg(test)]
pub(crate) mod moto {
    use std::{collections::HashSet, sync::Mutex};

    use egress_test_support::Moto;
    use provider_sdk::{locks::NameLocks, model::*};
    use secrecy::SecretString;

    use crate::{clients, config::AwsConfig, provider::Inner};

    pub const REGION: &str = "us-east-1";

    /// The moto server, the config's directory and the state; each lives as long as the test holds it.
    pub struct Backend {
        pub inner: std::sync::Arc<Inner>,
        _dir: tempfile::TempDir,
        _moto: Moto,
    }

    pub fn start() -> Backend {
        let moto = Moto::start();
        let dir = tempfile::tempdir().unwrap();
        let credentials = dir.path().join("credentials");
        std::fs::write(
            &credentials,
            "[default]\naws_access_key_id = AKIDEXAMPLE\naws_secret_access_key = s\n",
        )
        .unwrap();
        let config = format!(
            "endpointUrl: {}\nregions:\n  {REGION}:\n    images: {{ubuntu: ami-785db401}}\n\
             machineTypes: [t3.micro]\ncredentials:\n  sharedCredentialsFile: {}\n\
             budgets: {{pollMs: 50, lockMs: 200, maxAttempts: 1}}\n",
            moto.url(),
            credentials.display()
        );
        let path = dir.path().join("aws.yaml");
        std::fs::write(&path, config).unwrap();
        let config: AwsConfig = provider_sdk::config::load(Some(&path)).unwrap();
        let (credentials, clients) = clients::build(&config);
        let inner = Inner {
            config,
            clients,
            credentials,
            locks: NameLocks::default(),
            tearing_down: Mutex::new(HashSet::new()),
        };
        Backend {
            inner: std::sync::Arc::new(inner),
            _dir: dir,
            _moto: moto,
        }
    }

    pub fn request(name: &str) -> CreateRequest {
        CreateRequest {
            name: InstanceName::parse(name, DEFAULT_MAX_NAME_LENGTH).unwrap(),
            proxy_uid: "u1".into(),
            cluster_id: "c1".into(),
            placement: Placement::default(),
            proxy: ProxySettings {
                port: 3128,
                protocol: Protocol::Http,
                auth: ProxyAuth {
                    username: "u".into(),
                    password: SecretString::from("p"),
                },
                allowed_source_ranges: Vec::new(),
            },
            cloud_init: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::types::InstanceStateName;

    use super::*;

    #[test]
    fn client_tokens_are_stable_per_name_and_generation_and_fit_ec2_s_limit() {
        let token = client_token("egress-a", 0);
        assert_eq!(token.len(), 64);
        assert_eq!(token, client_token("egress-a", 0), "a retry sends the same token");
        assert_ne!(token, client_token("egress-b", 0));
        assert_ne!(token, client_token("egress-a", 1));
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    }

    fn target(group: GroupMode) -> Target {
        Target {
            region: moto::REGION.into(),
            zone: Some("us-east-1a".into()),
            subnet_id: None,
            machine_type: "t3.micro".into(),
            image_id: "ami-785db401".into(),
            group,
        }
    }

    /// A retry under the same ClientToken must send the same parameters, or EC2 answers
    /// IdempotentParameterMismatch: nothing in the launch may depend on the clock.
    #[test]
    fn a_retried_launch_sends_exactly_the_first_one_s_parameters() {
        let request = moto::request("egress-a");
        let build = || {
            launch_input(
                &target(GroupMode::PerProxy { vpc_id: None }),
                Some("sg-0123abcd"),
                tags::for_request(&request, "egress-a"),
                None,
            )
        };
        let first = build();
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(first, build());
        let specs = first.get_tag_specifications().clone().unwrap_or_default();
        assert!(
            specs[0].tags().iter().all(|t| t.key() != Some(tags::CREATED_AT)),
            "{specs:?}"
        );
    }

    fn ec2(state: InstanceStateName, tags: &[(&str, &str)]) -> Ec2Instance {
        let mut builder = Ec2Instance::builder()
            .instance_id("i-0123abcd")
            .state(aws_sdk_ec2::types::InstanceState::builder().name(state).build());
        for (key, value) in tags {
            builder = builder.tags(Tag::builder().key(*key).value(*value).build());
        }
        builder.build()
    }

    #[test]
    fn a_mismatched_token_s_instance_is_the_answer_when_live_and_ours_and_else_the_next_generation_or_in_use() {
        let request = moto::request("egress-a");
        let fingerprint = request.spec_fingerprint();
        let ours = [
            (tags::MANAGED, "true"),
            (tags::CLUSTER, "c1"),
            (tags::SPEC, fingerprint.as_str()),
        ];
        let other_spec = [(tags::MANAGED, "true"), (tags::CLUSTER, "c1"), (tags::SPEC, "other")];
        let verdict_of = |holder| verdict(holder, &request);
        assert!(matches!(verdict_of(None), Verdict::Spent));
        assert!(matches!(
            verdict_of(Some(ec2(InstanceStateName::Terminated, &ours))),
            Verdict::Spent
        ));
        assert!(matches!(
            verdict_of(Some(ec2(InstanceStateName::ShuttingDown, &ours))),
            Verdict::Spent
        ));
        assert!(matches!(
            verdict_of(Some(ec2(InstanceStateName::Pending, &ours))),
            Verdict::Ours(_)
        ));
        assert!(matches!(
            verdict_of(Some(ec2(InstanceStateName::Running, &[]))),
            Verdict::Ours(_)
        ));
        let taken = verdict_of(Some(ec2(InstanceStateName::Running, &other_spec)));
        assert!(
            matches!(&taken, Verdict::Taken(why) if why.contains("i-0123abcd")),
            "{taken:?}"
        );
    }

    #[test]
    fn used_up_tokens_are_a_permanent_error_naming_the_name() {
        let error = crate::error::classify(tokens_exhausted("egress-a"));
        assert_eq!(error.class(), provider_sdk::ErrorClass::Permanent);
        assert!(error.to_string().contains("egress-a"), "{error}");
    }

    #[test]
    fn only_a_refusal_with_an_ec2_code_below_500_proves_nothing_was_launched() {
        let service = |status| AwsError::Api {
            operation: "RunInstances",
            region: "us-east-1".into(),
            failure: ApiFailure::Service {
                code: "InvalidAMIID.NotFound".into(),
                message: "m".into(),
                status,
            },
        };
        assert!(launch_refused(&service(400)));
        assert!(launch_refused(&tokens_exhausted("egress-a")));
        assert!(!launch_refused(&service(503)));
        for failure in [ApiFailure::Timeout, ApiFailure::Network("reset".into())] {
            assert!(!launch_refused(&AwsError::api("RunInstances", "us-east-1")(failure)));
        }
    }

    async fn groups_named(client: &Client, name: &str) -> usize {
        let answer = client
            .describe_security_groups()
            .filters(
                Filter::builder()
                    .name("group-name")
                    .values(security_group::group_name(name))
                    .build(),
            )
            .send()
            .await
            .unwrap();
        answer.security_groups().len()
    }

    /// moto refuses a subnet it does not know after the group was made: the group must not stay behind.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_refused_launch_removes_the_group_it_made_and_answers_the_launch_s_error() {
        let backend = moto::start();
        let client = backend.inner.client(moto::REGION).unwrap().clone();
        let mut refused = target(GroupMode::PerProxy { vpc_id: None });
        refused.subnet_id = Some("subnet-0123abcd".into());
        let error = create(backend.inner.clone(), refused, moto::request("egress-refused"))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, AwsError::Api { operation: "RunInstances", failure, .. } if failure.code().is_some()),
            "{error}"
        );
        assert_eq!(groups_named(&client, "egress-refused").await, 0, "the group leaked");
        let made = create(
            backend.inner.clone(),
            target(GroupMode::PerProxy { vpc_id: None }),
            moto::request("egress-made"),
        )
        .await
        .expect("Create");
        assert_eq!(groups_named(&client, "egress-made").await, 1);
        let tagged = backend
            .inner
            .describe(
                &client,
                &crate::instances::InstanceRef::parse(&made.provider_id).unwrap(),
            )
            .await
            .unwrap()
            .unwrap();
        assert!(
            tags::value(tagged.tags(), tags::CREATED_AT).is_some(),
            "created-at is written after the launch"
        );
    }
}
