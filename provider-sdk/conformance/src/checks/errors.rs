//! Input validation, deadlines, and the error and answer rules every call must keep.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use provider_sdk::{
    proto,
    status::{ERROR_DOMAIN, METADATA_PROVIDER},
};
use tonic::Code;
use tonic_types::StatusExt;

use super::{CheckResult, ensure};
use crate::{
    harness::{Harness, describe, with_deadline},
    report::Outcome,
};

/// How soon a call whose deadline has passed must come back.
const PROMPT: Duration = Duration::from_secs(2);

type Mutation = (&'static str, fn(&mut proto::CreateRequest, u32));

/// Each mutation breaks one field; the answer must be INVALID_ARGUMENT naming that field.
const BAD_FIELDS: &[Mutation] = &[
    ("name", |r, _| r.name.clear()),
    ("name", |r, _| r.name = "Upper-Case".into()),
    ("name", |r, max| r.name = "n".repeat(max as usize + 1)),
    ("cluster_id", |r, _| r.cluster_id.clear()),
    ("proxy.port", |r, _| proxy(r).port = 0),
    ("proxy.port", |r, _| proxy(r).port = 70_000),
    ("proxy.protocol", |r, _| proxy(r).protocol = 0),
    ("proxy.protocol", |r, _| proxy(r).protocol = 99),
    ("proxy.auth", |r, _| proxy(r).auth = None),
    ("proxy.auth.password", |r, _| {
        proxy(r).auth.as_mut().expect("auth").password.clear()
    }),
    ("proxy.allowed_source_ranges[0]", |r, _| {
        proxy(r).allowed_source_ranges = vec!["banana".into()]
    }),
    ("proxy.allowed_source_ranges[0]", |r, _| {
        proxy(r).allowed_source_ranges = vec!["10.0.0.1/8".into()]
    }),
    ("placement.region", |r, _| {
        r.placement.get_or_insert_default().region = "r".repeat(300)
    }),
];

fn proxy(request: &mut proto::CreateRequest) -> &mut proto::ProxySettings {
    request.proxy.get_or_insert_default()
}

pub async fn bad_fields_are_refused(h: &Harness) -> CheckResult {
    let max = h.info.limits.max_name_length;
    let mut problems = Vec::new();
    let mut uids = Vec::new();
    for (i, (field, mutate)) in BAD_FIELDS.iter().enumerate() {
        let uid = h.uid();
        let mut request = h.request(&h.name(&format!("bad{i}")), &uid, &h.cluster);
        mutate(&mut request, max);
        uids.push(uid);
        match h.create(request).await {
            Ok(instance) => problems.push(format!("bad {field} was accepted as {}", instance.provider_id)),
            Err(status) if status.code() != Code::InvalidArgument => {
                problems.push(describe(&format!("bad {field}: expected INVALID_ARGUMENT"), &status))
            }
            Err(status) => {
                let named: Vec<String> = status
                    .get_error_details()
                    .bad_request()
                    .map(|bad| bad.field_violations.iter().map(|v| v.field.clone()).collect())
                    .unwrap_or_default();
                if !named.iter().any(|f| f == field) {
                    problems.push(format!("bad {field}: BadRequest names {named:?}"));
                }
            }
        }
    }
    // Refused requests must have made nothing.
    for uid in &uids {
        let listed = h.list(&h.cluster, uid).await.map_err(|s| describe("ListByTag", &s))?;
        if !listed.is_empty() {
            problems.push(format!("a refused request left instance {}", listed[0].provider_id));
            listed.iter().for_each(|i| h.remember(&i.provider_id));
        }
    }
    ensure!(problems.is_empty(), "{}", problems.join("; "));
    Ok(Outcome::Passed)
}

/// A Create and a Get sent with a 1 ms deadline: whatever the answer, it comes back promptly. The Create
/// may have acted, so its name is cleaned up like any other.
pub async fn expired_deadline_returns_promptly(h: &Harness) -> CheckResult {
    let uid = h.uid();
    let request = h.request(&h.name("deadline"), &uid, &h.cluster);
    let mut client = h.raw();
    let started = Instant::now();
    let create = tokio::time::timeout(
        PROMPT * 5,
        client.create(with_deadline(request, Duration::from_millis(1))),
    )
    .await;
    let create_took = started.elapsed();
    let started = Instant::now();
    let get_request = proto::GetRequest {
        provider_id: format!("{}://{}", h.info.provider_type, h.name("deadline")),
    };
    let get = tokio::time::timeout(
        PROMPT * 5,
        client.get(with_deadline(get_request, Duration::from_millis(1))),
    )
    .await;
    let get_took = started.elapsed();
    for instance in h.list(&h.cluster, &uid).await.map_err(|s| describe("ListByTag", &s))? {
        h.remember(&instance.provider_id);
    }
    ensure!(
        create.is_ok() && create_took <= PROMPT,
        "Create with an expired deadline took {create_took:?}"
    );
    ensure!(
        get.is_ok() && get_took <= PROMPT,
        "Get with an expired deadline took {get_took:?}"
    );
    Ok(Outcome::Passed)
}

/// Every error the run received carries ErrorInfo with the contract's domain and a reason; RESOURCE_EXHAUSTED
/// also QuotaFailure. The run must have seen enough kinds of error for this to mean something.
pub async fn carry_error_info(h: &Harness) -> CheckResult {
    let errors = h.errors();
    let codes: BTreeSet<i32> = errors.iter().map(|(_, s)| s.code() as i32).collect();
    ensure!(
        codes.len() >= 3,
        "only {} kinds of error were observed; the earlier checks did not run",
        codes.len()
    );
    let mut problems = BTreeSet::new();
    for (rpc, status) in &errors {
        let details = status.get_error_details();
        match details.error_info() {
            None => problems.insert(format!("{rpc} {:?} without ErrorInfo", status.code())),
            Some(info) if info.domain != ERROR_DOMAIN => problems.insert(format!(
                "{rpc} {:?} with ErrorInfo domain {:?}",
                status.code(),
                info.domain
            )),
            Some(info) if info.reason.is_empty() => {
                problems.insert(format!("{rpc} {:?} with an empty reason", status.code()))
            }
            Some(info) if info.metadata.get(METADATA_PROVIDER) != Some(&h.info.provider_type) => {
                problems.insert(format!(
                    "{rpc} {:?}: ErrorInfo metadata {METADATA_PROVIDER:?} is {:?}, not {:?}",
                    status.code(),
                    info.metadata.get(METADATA_PROVIDER),
                    h.info.provider_type
                ))
            }
            Some(_) if status.code() == Code::ResourceExhausted && details.quota_failure().is_none() => {
                problems.insert(format!("{rpc} RESOURCE_EXHAUSTED without QuotaFailure"))
            }
            Some(_) => false,
        };
    }
    ensure!(
        problems.is_empty(),
        "{}",
        problems.into_iter().collect::<Vec<_>>().join("; ")
    );
    Ok(Outcome::Passed)
}

pub async fn answers_keep_the_contract(h: &Harness) -> CheckResult {
    let breaches = h.breaches();
    ensure!(breaches.is_empty(), "{}", breaches.join("; "));
    Ok(Outcome::Passed)
}
