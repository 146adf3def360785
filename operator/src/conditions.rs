//! Kubernetes-convention conditions, shared by the controllers: one setter that keeps a condition's
//! transition time while its status stays the same.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Sets the condition `type_`, replacing an earlier one of that type.
pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    value: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: Time,
) {
    let value = if value { "True" } else { "False" };
    let previous = conditions.iter().position(|c| c.type_ == type_);
    let last_transition_time = previous
        .map(|i| &conditions[i])
        .filter(|c| c.status == value)
        .map_or(now, |c| c.last_transition_time.clone());
    let condition = Condition {
        type_: type_.to_owned(),
        status: value.to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: generation,
        last_transition_time,
    };
    match previous {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    #[test]
    fn the_transition_time_moves_only_when_the_status_changes() {
        let (t1, t2) = (
            Time(Timestamp::from_second(1_000).unwrap()),
            Time(Timestamp::from_second(2_000).unwrap()),
        );
        let mut conditions = Vec::new();
        set(
            &mut conditions,
            "Ready",
            false,
            "Starting",
            "a".into(),
            Some(1),
            t1.clone(),
        );
        set(
            &mut conditions,
            "Ready",
            false,
            "StillStarting",
            "b".into(),
            Some(2),
            t2.clone(),
        );
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, t1);
        assert_eq!(conditions[0].reason, "StillStarting");
        set(
            &mut conditions,
            "Ready",
            true,
            "Running",
            "c".into(),
            Some(2),
            t2.clone(),
        );
        assert_eq!(conditions[0].last_transition_time, t2);
    }
}
