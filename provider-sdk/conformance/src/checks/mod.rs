//! The checks, run in order by [`run_all`]. Most share one instance made by the first Create check, so a
//! provider backed by a real cloud pays for few instances; each check says what it needs when that failed.

mod create;
mod delete;
mod errors;
mod info;
mod list;

use provider_sdk::proto;

use crate::{
    harness::Harness,
    report::{Outcome, Report},
};

/// `Err` fails the check with the text; `Ok` passes or skips it.
pub type CheckResult = Result<Outcome, String>;

macro_rules! ensure {
    ($condition:expr, $($why:tt)+) => {
        if !$condition {
            return Err(format!($($why)+));
        }
    };
}
pub(crate) use ensure;

/// State handed from check to check.
#[derive(Debug, Default)]
pub struct Shared {
    /// The instance made by `create.returns-the-instance`, with the request that made it.
    pub primary: Option<(proto::CreateRequest, proto::Instance)>,
}

impl Shared {
    fn primary(&self) -> Result<&(proto::CreateRequest, proto::Instance), String> {
        self.primary
            .as_ref()
            .ok_or_else(|| "needs the instance of create.returns-the-instance, which failed".to_owned())
    }
}

fn judge(result: CheckResult) -> Outcome {
    result.unwrap_or_else(Outcome::Failed)
}

/// Runs every check, then the cleanup, and returns the report.
pub async fn run_all(h: &Harness) -> Report {
    let mut report = Report::default();
    let mut shared = Shared::default();
    macro_rules! run {
        ($name:literal, $check:expr) => {{
            let started = std::time::Instant::now();
            let outcome = judge($check.await);
            report.record($name, outcome, started.elapsed());
        }};
    }
    run!("info.declares-every-axis", info::declares_every_axis(h));
    run!("health.reports-serving", info::health_reports_serving(h));
    run!(
        "validate.bad-fields-are-refused-before-any-backend-call",
        errors::bad_fields_are_refused(h)
    );
    run!(
        "create.returns-the-instance",
        create::returns_the_instance(h, &mut shared)
    );
    run!(
        "create.immediate-readiness-answers-running",
        create::immediate_readiness(h, &shared)
    );
    run!(
        "create.repeated-returns-the-same-instance",
        create::repeated_returns_the_same(h, &shared)
    );
    run!(
        "create.same-name-other-spec-is-refused",
        create::same_name_other_spec_is_refused(h, &shared)
    );
    run!("get.running-implies-ipv4", create::running_implies_ipv4(h, &shared));
    run!(
        "create.concurrent-same-name-makes-one-instance",
        create::concurrent_same_name_makes_one(h)
    );
    run!(
        "list.returns-instances-with-uid-and-created-at",
        list::returns_created_with_marks(h, &shared)
    );
    run!("list.excludes-other-clusters", list::excludes_other_clusters(h));
    run!(
        "ids.malformed-are-permanent-errors",
        delete::malformed_ids_are_permanent(h)
    );
    run!("delete.unknown-id-succeeds", delete::unknown_id_succeeds(h, &shared));
    run!(
        "get.after-delete-is-not-found",
        delete::get_after_delete_is_not_found(h, &shared)
    );
    run!("delete.twice-succeeds", delete::twice_succeeds(h, &shared));
    run!(
        "deadline.expired-returns-promptly",
        errors::expired_deadline_returns_promptly(h)
    );
    run!("check.results-in-stable-order", info::check_results_in_stable_order(h));
    run!(
        "errors.carry-error-info-with-the-contract-domain",
        errors::carry_error_info(h)
    );
    run!(
        "instances.keep-the-contract-in-every-answer",
        errors::answers_keep_the_contract(h)
    );
    run!("cleanup.leaves-nothing-behind", async {
        h.cleanup().await.map(|_| Outcome::Passed)
    });
    report
}
