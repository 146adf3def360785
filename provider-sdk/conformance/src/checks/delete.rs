//! Delete and provider IDs: not-found after delete, repeated and unknown deletes, malformed IDs.

use tonic::Code;

use super::{CheckResult, Shared, ensure};
use crate::{
    harness::{Harness, describe},
    report::Outcome,
};

pub async fn get_after_delete_is_not_found(h: &Harness, shared: &Shared) -> CheckResult {
    let (_, instance) = shared.primary()?;
    h.delete(&instance.provider_id)
        .await
        .map_err(|s| describe("Delete", &s))?;
    h.wait_gone(&instance.provider_id).await?;
    Ok(Outcome::Passed)
}

pub async fn twice_succeeds(h: &Harness, shared: &Shared) -> CheckResult {
    let (_, instance) = shared.primary()?;
    for attempt in ["second", "third"] {
        h.delete(&instance.provider_id)
            .await
            .map_err(|s| describe(&format!("the {attempt} Delete"), &s))?;
    }
    Ok(Outcome::Passed)
}

/// An ID of the provider's own shape for an instance that never existed: the params give one, or one is
/// derived from a real ID that embeds the instance name.
pub async fn unknown_id_succeeds(h: &Harness, shared: &Shared) -> CheckResult {
    let unknown = match (&h.params.unknown_provider_id, shared.primary.as_ref()) {
        (Some(id), _) => id.clone(),
        (None, Some((_, instance))) if instance.provider_id.contains(&instance.name) => {
            let at = instance.provider_id.rfind(&instance.name).unwrap_or_default();
            let mut id = instance.provider_id.clone();
            id.replace_range(at..at + instance.name.len(), &h.name("ghost"));
            id
        }
        (None, Some(_)) => {
            return Ok(Outcome::Skipped(
                "provider IDs do not embed the name (allocated-id); give unknownProviderId in --params".into(),
            ));
        }
        (None, None) => {
            return Err("needs the instance of create.returns-the-instance, which failed".into());
        }
    };
    h.delete(&unknown)
        .await
        .map_err(|s| describe(&format!("Delete {unknown}"), &s))?;
    match h.get(&unknown).await {
        Err(status) if status.code() == Code::NotFound => Ok(Outcome::Passed),
        Err(status) => Err(describe(&format!("Get {unknown}: expected NOT_FOUND"), &status)),
        Ok(_) => Err(format!("Get {unknown} found an instance that was never made")),
    }
}

pub async fn malformed_ids_are_permanent(h: &Harness) -> CheckResult {
    let kind = &h.info.provider_type;
    let other = if kind == "other" { "another" } else { "other" };
    let mut ids = vec![
        String::new(),
        "no-scheme".to_owned(),
        format!("{kind}://"),
        format!("{other}://{}", h.name("x")),
        format!("{kind}://../../etc/passwd"),
        format!("{kind}://a b"),
    ];
    ids.extend(h.params.malformed_provider_ids.iter().cloned());
    let mut wrong = Vec::new();
    for id in &ids {
        for (rpc, result) in [("Get", h.get(id).await.map(drop)), ("Delete", h.delete(id).await)] {
            match result {
                Err(status) if status.code() == Code::InvalidArgument => {}
                Err(status) => wrong.push(format!("{rpc} {id:?}: {:?}", status.code())),
                Ok(()) => wrong.push(format!("{rpc} {id:?}: OK")),
            }
        }
    }
    ensure!(
        wrong.is_empty(),
        "malformed IDs must be INVALID_ARGUMENT: {}",
        wrong.join(", ")
    );
    Ok(Outcome::Passed)
}
