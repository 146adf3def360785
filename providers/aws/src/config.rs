//! The AWS provider's config block (contract §10): the regions it may create in, each with its zones,
//! image catalogue and network, the machine types it accepts, where credentials come from, and the budgets
//! of each backend call. Strict: unknown fields are refused, and every problem names its field and value.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use provider_sdk::config::{ConfigViolation, Validate};
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AwsConfig {
    /// The regions instances may be created in, and the whole scope of ListByTag and Check.
    pub regions: BTreeMap<String, RegionConfig>,
    /// EC2 instance types a Proxy may ask for; passed through to RunInstances.
    pub machine_types: Vec<String>,
    /// The type used when a Proxy leaves `placement.machineType` empty.
    #[serde(default)]
    pub default_machine_type: Option<String>,
    /// Sends every EC2 call here instead of the public regional endpoint: a VPC endpoint, or an emulator.
    #[serde(default)]
    pub endpoint_url: Option<String>,
    #[serde(default)]
    pub credentials: CredentialsConfig,
    #[serde(default)]
    pub budgets: Budgets,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RegionConfig {
    /// Availability zones a Proxy may name, each with an optional subnet to launch into.
    #[serde(default)]
    pub zones: BTreeMap<String, ZoneConfig>,
    /// Image catalogue: a key a Proxy names in `placement.image`, and the AMI it means in this region.
    pub images: BTreeMap<String, String>,
    /// A security group every instance of the region joins instead of a group of its own per Proxy.
    #[serde(default)]
    pub shared_security_group_id: Option<String>,
    /// The VPC of per-Proxy security groups; the region's default VPC when omitted. Required with subnets.
    #[serde(default)]
    pub vpc_id: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ZoneConfig {
    #[serde(default)]
    pub subnet_id: Option<String>,
}

/// Where credentials come from. Paths only: the files are read when used, so a rotated Secret is picked up.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CredentialsConfig {
    /// A shared credentials file (`aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`).
    #[serde(default)]
    pub shared_credentials_file: Option<PathBuf>,
    /// A shared config file (for example `role_arn` with `web_identity_token_file` or `source_profile`).
    #[serde(default)]
    pub config_file: Option<PathBuf>,
    /// The profile of those files; `default` when omitted.
    #[serde(default)]
    pub profile: Option<String>,
    /// A web identity token file (EKS IRSA, or any OIDC token) exchanged for `roleArn`'s credentials.
    #[serde(default)]
    pub web_identity_token_file: Option<PathBuf>,
    #[serde(default)]
    pub role_arn: Option<String>,
    /// How long credentials read from files are kept before the files are read again.
    #[serde(default = "default_refresh_seconds")]
    pub refresh_seconds: u64,
}

/// Per-call budgets (contract §1.5), all in milliseconds.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Budgets {
    /// Establishing one connection to the EC2 endpoint.
    #[serde(default = "default_connect_ms")]
    pub connect_ms: u64,
    /// One attempt of one EC2 call, from sending to the whole answer.
    #[serde(default = "default_attempt_ms")]
    pub attempt_ms: u64,
    /// One EC2 call with the SDK's retries (throttling, 5xx, network).
    #[serde(default = "default_call_ms")]
    pub call_ms: u64,
    /// Attempts per call, the first included.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// How long a Create or Delete waits for another call on the same instance name.
    #[serde(default = "default_lock_ms")]
    pub lock_ms: u64,
    /// How long the teardown after Delete waits for the instance to terminate before removing its group.
    #[serde(default = "default_teardown_ms")]
    pub teardown_ms: u64,
    /// Pause between two polls of that wait.
    #[serde(default = "default_poll_ms")]
    pub poll_ms: u64,
}

impl Default for CredentialsConfig {
    fn default() -> Self {
        Self {
            shared_credentials_file: None,
            config_file: None,
            profile: None,
            web_identity_token_file: None,
            role_arn: None,
            refresh_seconds: default_refresh_seconds(),
        }
    }
}

fn default_refresh_seconds() -> u64 {
    60
}
fn default_connect_ms() -> u64 {
    3_000
}
fn default_attempt_ms() -> u64 {
    10_000
}
fn default_call_ms() -> u64 {
    25_000
}
fn default_max_attempts() -> u32 {
    3
}
fn default_lock_ms() -> u64 {
    20_000
}
fn default_teardown_ms() -> u64 {
    900_000
}
fn default_poll_ms() -> u64 {
    2_000
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            connect_ms: default_connect_ms(),
            attempt_ms: default_attempt_ms(),
            call_ms: default_call_ms(),
            max_attempts: default_max_attempts(),
            lock_ms: default_lock_ms(),
            teardown_ms: default_teardown_ms(),
            poll_ms: default_poll_ms(),
        }
    }
}

impl Budgets {
    pub fn connect(&self) -> Duration {
        Duration::from_millis(self.connect_ms)
    }
    pub fn attempt(&self) -> Duration {
        Duration::from_millis(self.attempt_ms)
    }
    pub fn call(&self) -> Duration {
        Duration::from_millis(self.call_ms)
    }
    pub fn lock(&self) -> Duration {
        Duration::from_millis(self.lock_ms)
    }
    pub fn teardown(&self) -> Duration {
        Duration::from_millis(self.teardown_ms)
    }
    pub fn poll(&self) -> Duration {
        Duration::from_millis(self.poll_ms)
    }
}

/// Shapes of the values that end up in a providerID or an EC2 call. A region becomes a providerID
/// segment, so it can never hold a `/`.
mod shape {
    pub fn region(value: &str) -> bool {
        let parts: Vec<&str> = value.split('-').collect();
        parts.len() >= 3
            && parts
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
            && parts.last().is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
    }

    /// `us-east-1a`, `us-west-2-lax-1a` (Local Zones): the region's name, a dash-free suffix.
    pub fn zone_of(region: &str, zone: &str) -> bool {
        zone.strip_prefix(region).is_some_and(|rest| {
            !rest.is_empty()
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
    }

    /// `<prefix>-` and 8 or 17 lowercase hex digits, the two lengths EC2 has used.
    pub fn resource_id(prefix: &str, value: &str) -> bool {
        value
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|hex| {
                (hex.len() == 8 || hex.len() == 17)
                    && hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            })
    }

    /// `t3.micro`, `m7i-flex.large`, `u-6tb1.metal`.
    pub fn machine_type(value: &str) -> bool {
        let Some((family, size)) = value.split_once('.') else {
            return false;
        };
        let ok = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        };
        ok(family) && ok(size) && value.len() <= 64
    }

    /// Printable ASCII without spaces, as the SDK's request validation allows for placement values.
    pub fn catalogue_key(value: &str) -> bool {
        !value.is_empty() && value.len() <= 255 && value.bytes().all(|b| b.is_ascii_graphic())
    }
}

pub use shape::region as is_region;
pub use shape::resource_id as is_resource_id;

impl Validate for AwsConfig {
    fn validate(&self) -> Vec<ConfigViolation> {
        let mut v = Vec::new();
        if self.regions.is_empty() {
            v.push(ConfigViolation::new("regions", "{}", "must name at least one region"));
        }
        for (name, region) in &self.regions {
            let at = format!("regions.{name}");
            if !shape::region(name) {
                v.push(ConfigViolation::new(
                    &at,
                    name,
                    "is not an AWS region name such as eu-west-1",
                ));
            }
            for (zone, config) in &region.zones {
                if !shape::zone_of(name, zone) {
                    v.push(ConfigViolation::new(
                        format!("{at}.zones"),
                        zone,
                        format!("is not a zone of {name}"),
                    ));
                }
                if let Some(subnet) = &config.subnet_id {
                    if !shape::resource_id("subnet", subnet) {
                        v.push(ConfigViolation::new(
                            format!("{at}.zones.{zone}.subnetId"),
                            subnet,
                            "is not a subnet ID",
                        ));
                    }
                    if region.vpc_id.is_none() && region.shared_security_group_id.is_none() {
                        v.push(ConfigViolation::new(
                            format!("{at}.zones.{zone}.subnetId"),
                            subnet,
                            "needs the region's vpcId (or sharedSecurityGroupId): a per-Proxy group must be made in the subnet's VPC",
                        ));
                    }
                }
            }
            // Per-Proxy groups are made in vpcId; an instance launched without a subnet goes to the default
            // VPC, where EC2 refuses a group of another VPC. So with vpcId every zone needs its subnet.
            if region.vpc_id.is_some() && region.shared_security_group_id.is_none() {
                if region.zones.is_empty() {
                    v.push(ConfigViolation::new(
                        format!("{at}.zones"),
                        "{}",
                        "must name at least one zone with a subnetId when vpcId is set",
                    ));
                }
                for (zone, config) in &region.zones {
                    if config.subnet_id.is_none() {
                        v.push(ConfigViolation::new(
                            format!("{at}.zones.{zone}.subnetId"),
                            "",
                            "is required with the region's vpcId: without a subnet the instance would launch into \
                             the default VPC, where the per-Proxy group cannot be used",
                        ));
                    }
                }
            }
            if region.images.is_empty() {
                v.push(ConfigViolation::new(
                    format!("{at}.images"),
                    "{}",
                    "must name at least one image",
                ));
            }
            for (key, ami) in &region.images {
                if !shape::catalogue_key(key) {
                    v.push(ConfigViolation::new(
                        format!("{at}.images"),
                        key,
                        "is not a printable key without spaces",
                    ));
                }
                if !shape::resource_id("ami", ami) {
                    v.push(ConfigViolation::new(
                        format!("{at}.images.{key}"),
                        ami,
                        "is not an AMI ID (ami- and 8 or 17 hex digits)",
                    ));
                }
            }
            if let Some(group) = &region.shared_security_group_id
                && !shape::resource_id("sg", group)
            {
                v.push(ConfigViolation::new(
                    format!("{at}.sharedSecurityGroupId"),
                    group,
                    "is not a security group ID",
                ));
            }
            if let Some(vpc) = &region.vpc_id
                && !shape::resource_id("vpc", vpc)
            {
                v.push(ConfigViolation::new(format!("{at}.vpcId"), vpc, "is not a VPC ID"));
            }
        }
        if self.machine_types.is_empty() {
            v.push(ConfigViolation::new(
                "machineTypes",
                "[]",
                "must name at least one instance type",
            ));
        }
        for (i, kind) in self.machine_types.iter().enumerate() {
            if !shape::machine_type(kind) {
                v.push(ConfigViolation::new(
                    format!("machineTypes[{i}]"),
                    kind,
                    "is not an EC2 instance type such as t3.micro",
                ));
            }
        }
        if let Some(default) = &self.default_machine_type
            && !self.machine_types.contains(default)
        {
            v.push(ConfigViolation::new(
                "defaultMachineType",
                default,
                "is not one of machineTypes",
            ));
        }
        if let Some(url) = &self.endpoint_url
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            v.push(ConfigViolation::new(
                "endpointUrl",
                url,
                "must be an http:// or https:// URL",
            ));
        }
        v.extend(self.credentials.violations());
        v.extend(self.budgets.violations());
        v
    }
}

impl CredentialsConfig {
    fn violations(&self) -> Vec<ConfigViolation> {
        let mut v = Vec::new();
        let absolute = |field: &str, path: &Option<PathBuf>, v: &mut Vec<ConfigViolation>| {
            if let Some(path) = path
                && !path.is_absolute()
            {
                v.push(ConfigViolation::new(
                    format!("credentials.{field}"),
                    path,
                    "must be an absolute path",
                ));
            }
        };
        absolute("sharedCredentialsFile", &self.shared_credentials_file, &mut v);
        absolute("configFile", &self.config_file, &mut v);
        absolute("webIdentityTokenFile", &self.web_identity_token_file, &mut v);
        let files = self.shared_credentials_file.is_some() || self.config_file.is_some();
        match (&self.web_identity_token_file, &self.role_arn) {
            (Some(_), None) => v.push(ConfigViolation::new(
                "credentials.roleArn",
                "",
                "is required with webIdentityTokenFile",
            )),
            (None, Some(arn)) => v.push(ConfigViolation::new(
                "credentials.roleArn",
                arn,
                "needs webIdentityTokenFile",
            )),
            (Some(path), Some(_)) if files => v.push(ConfigViolation::new(
                "credentials.webIdentityTokenFile",
                path,
                "cannot be combined with sharedCredentialsFile or configFile: choose one source",
            )),
            _ => {}
        }
        if let Some(arn) = &self.role_arn
            && !(arn.starts_with("arn:aws") && arn.contains(":role/"))
        {
            v.push(ConfigViolation::new(
                "credentials.roleArn",
                arn,
                "is not an IAM role ARN",
            ));
        }
        if let Some(profile) = &self.profile {
            if !files {
                v.push(ConfigViolation::new(
                    "credentials.profile",
                    profile,
                    "needs sharedCredentialsFile or configFile",
                ));
            }
            if profile.is_empty()
                || !profile
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            {
                v.push(ConfigViolation::new(
                    "credentials.profile",
                    profile,
                    "must be letters, digits, '-', '_' or '.'",
                ));
            }
        }
        if !(1..=3600).contains(&self.refresh_seconds) {
            v.push(ConfigViolation::new(
                "credentials.refreshSeconds",
                self.refresh_seconds,
                "must be 1 to 3600",
            ));
        }
        v
    }
}

impl Budgets {
    fn violations(&self) -> Vec<ConfigViolation> {
        let mut v = Vec::new();
        let ranges = [
            ("connectMs", self.connect_ms, 100, 60_000),
            ("attemptMs", self.attempt_ms, 100, 120_000),
            ("callMs", self.call_ms, 100, 300_000),
            ("lockMs", self.lock_ms, 100, 120_000),
            ("teardownMs", self.teardown_ms, 1_000, 3_600_000),
            ("pollMs", self.poll_ms, 10, 60_000),
        ];
        for (field, value, min, max) in ranges {
            if !(min..=max).contains(&value) {
                v.push(ConfigViolation::new(
                    format!("budgets.{field}"),
                    value,
                    format!("must be {min} to {max}"),
                ));
            }
        }
        if self.call_ms < self.attempt_ms {
            v.push(ConfigViolation::new(
                "budgets.callMs",
                self.call_ms,
                "must be at least attemptMs",
            ));
        }
        if !(1..=10).contains(&self.max_attempts) {
            v.push(ConfigViolation::new(
                "budgets.maxAttempts",
                self.max_attempts,
                "must be 1 to 10",
            ));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use provider_sdk::config::parse;

    use super::*;

    const GOOD: &str = "regions:\n  us-east-1:\n    zones: {us-east-1a: {}}\n    images: {ubuntu: ami-785db401}\nmachineTypes: [t3.micro]\n";

    fn problems(text: &str) -> String {
        parse::<AwsConfig>("aws.yaml", text).unwrap_err().to_string()
    }

    #[test]
    fn the_moto_example_config_is_valid() {
        let text = include_str!("../../../examples/provider-aws-moto.yaml");
        let config = parse::<AwsConfig>("provider-aws-moto.yaml", text).unwrap();
        assert_eq!(config.endpoint_url.as_deref(), Some("http://127.0.0.1:5055"));
    }

    #[test]
    fn a_minimal_config_is_accepted_with_default_budgets() {
        let config = parse::<AwsConfig>("aws.yaml", GOOD).unwrap();
        assert_eq!(config.budgets.attempt(), Duration::from_secs(10));
        assert_eq!(config.credentials.refresh_seconds, 60);
    }

    #[test]
    fn unknown_fields_are_refused_by_name() {
        let error = problems(&format!("{GOOD}endpointURL: http://x\n"));
        assert!(error.contains("endpointURL"), "{error}");
    }

    #[test]
    fn bad_catalogue_values_are_named_with_their_field_and_value() {
        let text = "regions:\n  us-east-1/x:\n    images: {}\n  eu-west-1:\n    zones: {us-east-1a: {subnetId: subnet-12}}\n    images: {ubuntu: ami-XYZ}\n    sharedSecurityGroupId: group\nmachineTypes: [t3micro]\ndefaultMachineType: m5.large\nendpointUrl: ftp://x\n";
        let error = problems(text);
        for expected in [
            "regions.us-east-1/x: \"us-east-1/x\" is not an AWS region name",
            "regions.us-east-1/x.images: \"{}\" must name at least one image",
            "regions.eu-west-1.zones: \"us-east-1a\" is not a zone of eu-west-1",
            "regions.eu-west-1.zones.us-east-1a.subnetId: \"subnet-12\" is not a subnet ID",
            "regions.eu-west-1.images.ubuntu: \"ami-XYZ\" is not an AMI ID",
            "regions.eu-west-1.sharedSecurityGroupId: \"group\"",
            "machineTypes[0]: \"t3micro\"",
            "defaultMachineType: \"m5.large\" is not one of machineTypes",
            "endpointUrl: \"ftp://x\"",
        ] {
            assert!(error.contains(expected), "missing {expected:?} in {error}");
        }
    }

    #[test]
    fn a_subnet_needs_the_vpc_of_its_security_groups() {
        let text = "regions:\n  us-east-1:\n    zones: {us-east-1a: {subnetId: subnet-0123456789abcdef0}}\n    images: {u: ami-785db401}\nmachineTypes: [t3.micro]\n";
        assert!(problems(text).contains("needs the region's vpcId"));
        let fixed = text.replace("    images", "    vpcId: vpc-0123456789abcdef0\n    images");
        parse::<AwsConfig>("aws.yaml", &fixed).unwrap();
    }

    #[test]
    fn with_a_vpc_every_zone_needs_its_subnet() {
        let text = "regions:\n  us-east-1:\n    vpcId: vpc-0123456789abcdef0\n    zones: {us-east-1a: {subnetId: subnet-0123456789abcdef0}, us-east-1b: {}}\n    images: {u: ami-785db401}\nmachineTypes: [t3.micro]\n";
        let error = problems(text);
        assert!(error.contains("regions.us-east-1.zones.us-east-1b.subnetId"), "{error}");
        assert!(!error.contains("us-east-1a.subnetId"), "{error}");
        let no_zones = "regions:\n  us-east-1:\n    vpcId: vpc-0123456789abcdef0\n    images: {u: ami-785db401}\nmachineTypes: [t3.micro]\n";
        assert!(problems(no_zones).contains("must name at least one zone with a subnetId"));
        let shared = text.replace(
            "    images",
            "    sharedSecurityGroupId: sg-0123456789abcdef0\n    images",
        );
        parse::<AwsConfig>("aws.yaml", &shared).unwrap();
    }

    #[test]
    fn credential_sources_are_paths_and_cannot_be_mixed() {
        let error = problems(&format!(
            "{GOOD}credentials:\n  sharedCredentialsFile: creds\n  webIdentityTokenFile: /t\n  profile: 'a b'\n  refreshSeconds: 0\n"
        ));
        for expected in [
            "credentials.sharedCredentialsFile: \"creds\" must be an absolute path",
            "credentials.roleArn: \"\" is required with webIdentityTokenFile",
            "credentials.profile: \"a b\"",
            "credentials.refreshSeconds: 0",
        ] {
            assert!(error.contains(expected), "missing {expected:?} in {error}");
        }
        let error = problems(&format!(
            "{GOOD}credentials:\n  configFile: /c\n  webIdentityTokenFile: /t\n  roleArn: arn:aws:iam::123456789012:role/egress\n"
        ));
        assert!(error.contains("choose one source"), "{error}");
    }

    #[test]
    fn budgets_have_ranges() {
        let error = problems(&format!(
            "{GOOD}budgets: {{attemptMs: 5000, callMs: 1000, maxAttempts: 0, pollMs: 5}}\n"
        ));
        for expected in [
            "budgets.callMs: 1000 must be at least attemptMs",
            "budgets.maxAttempts: 0",
            "budgets.pollMs: 5",
        ] {
            assert!(error.contains(expected), "missing {expected:?} in {error}");
        }
    }

    #[test]
    fn a_missing_file_names_the_required_fields() {
        let error = provider_sdk::config::load::<AwsConfig>(None).unwrap_err().to_string();
        assert!(error.contains("regions"), "{error}");
    }

    #[test]
    fn id_shapes_accept_both_lengths_and_nothing_else() {
        assert!(is_resource_id("i", "i-0123abcd"));
        assert!(is_resource_id("i", "i-0123456789abcdef0"));
        for bad in [
            "i-0123ABCD",
            "i-0123abc",
            "i-",
            "ami-0123abcd",
            "i-0123456789abcdef0/",
            "i-../../etc",
        ] {
            assert!(!is_resource_id("i", bad), "{bad}");
        }
        assert!(is_region("us-gov-west-1") && is_region("eu-west-1"));
        assert!(!is_region("eu-west") && !is_region("EU-west-1") && !is_region("eu/west-1"));
    }
}
