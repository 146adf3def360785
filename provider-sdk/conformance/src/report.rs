//! The outcome of each check and the report the CLI prints: one line per check, then the totals.

use std::{fmt, io, time::Duration};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed(String),
    /// The check does not apply to this provider's declared profiles; the text says why.
    Skipped(String),
}

#[derive(Clone, Debug)]
pub struct CheckReport {
    pub name: &'static str,
    pub outcome: Outcome,
    pub took: Duration,
}

#[derive(Clone, Debug, Default)]
pub struct Report {
    pub checks: Vec<CheckReport>,
}

impl Report {
    pub fn record(&mut self, name: &'static str, outcome: Outcome, took: Duration) {
        self.checks.push(CheckReport { name, outcome, took });
    }

    pub fn passed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Passed))
    }

    pub fn failed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Failed(_)))
    }

    pub fn skipped(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Skipped(_)))
    }

    fn count(&self, pick: impl Fn(&Outcome) -> bool) -> usize {
        self.checks.iter().filter(|c| pick(&c.outcome)).count()
    }

    /// The outcome of one check by name, for tests of the suite itself.
    pub fn outcome(&self, name: &str) -> Option<&Outcome> {
        self.checks.iter().find(|c| c.name == name).map(|c| &c.outcome)
    }

    /// One line per check, then the totals.
    pub fn write(&self, out: &mut impl io::Write) -> io::Result<()> {
        for check in &self.checks {
            writeln!(out, "{check}")?;
        }
        writeln!(
            out,
            "{} passed, {} failed, {} skipped",
            self.passed(),
            self.failed(),
            self.skipped()
        )
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            Outcome::Passed => write!(f, "PASS {} ({} ms)", self.name, self.took.as_millis()),
            Outcome::Failed(why) => write!(f, "FAIL {} ({} ms): {why}", self.name, self.took.as_millis()),
            Outcome::Skipped(why) => write!(f, "SKIP {}: {why}", self.name),
        }
    }
}
