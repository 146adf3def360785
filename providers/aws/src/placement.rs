//! Placement (contract §2.1): region and zone are keys of the configured catalogue, the machine type is
//! passed through once it is one of `machineTypes`, and the image is a catalogue key that becomes the
//! region's AMI. Unknown values are refused together, naming field and value, before any EC2 call.

use provider_sdk::{error::FieldViolation, model::Placement};

use crate::{
    config::{AwsConfig, RegionConfig},
    error::AwsError,
};

/// Where and how one instance is launched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub region: String,
    pub zone: Option<String>,
    pub subnet_id: Option<String>,
    pub machine_type: String,
    pub image_id: String,
    pub group: GroupMode,
}

/// Which security group the instance joins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupMode {
    /// A group of its own, named after the instance, made in `vpc_id` (the default VPC when `None`).
    PerProxy { vpc_id: Option<String> },
    /// A group the administrator manages.
    Shared(String),
}

impl GroupMode {
    pub fn of(region: &RegionConfig) -> Self {
        match &region.shared_security_group_id {
            Some(group) => GroupMode::Shared(group.clone()),
            None => GroupMode::PerProxy {
                vpc_id: region.vpc_id.clone(),
            },
        }
    }
}

fn keys<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    keys.map(String::as_str).collect::<Vec<_>>().join(", ")
}

/// The one value of a catalogue, when `value` is empty and there is exactly one choice.
fn single<'a>(value: &'a str, mut choices: impl Iterator<Item = &'a String>) -> Option<&'a str> {
    if !value.is_empty() {
        return Some(value);
    }
    match (choices.next(), choices.next()) {
        (Some(only), None) => Some(only),
        _ => None,
    }
}

pub fn resolve(config: &AwsConfig, placement: &Placement) -> Result<Target, AwsError> {
    let mut problems = Vec::new();
    let mut problem = |field: &str, description: String| {
        problems.push(FieldViolation {
            field: field.to_owned(),
            description,
        })
    };
    let region_name = single(&placement.region, config.regions.keys());
    let region = match region_name.map(|name| (name, config.regions.get(name))) {
        Some((name, Some(region))) => Some((name, region)),
        Some((name, None)) => {
            let known = keys(config.regions.keys());
            problem(
                "placement.region",
                format!("{name:?} is not a configured region (configured: {known})"),
            );
            None
        }
        None => {
            let known = keys(config.regions.keys());
            problem(
                "placement.region",
                format!("is required: several regions are configured ({known})"),
            );
            None
        }
    };
    let machine_type = match placement.machine_type.as_str() {
        "" => config
            .default_machine_type
            .clone()
            .or_else(|| single("", config.machine_types.iter()).map(str::to_owned)),
        given => Some(given.to_owned()),
    };
    match &machine_type {
        Some(kind) if !config.machine_types.contains(kind) => problem(
            "placement.machine_type",
            format!(
                "{kind:?} is not an instance type this provider offers ({})",
                keys(config.machine_types.iter())
            ),
        ),
        Some(_) => {}
        None => problem(
            "placement.machine_type",
            format!(
                "is required: no default is configured ({})",
                keys(config.machine_types.iter())
            ),
        ),
    }
    let mut target = None;
    if let Some((name, region)) = region {
        let zone = match placement.zone.as_str() {
            // With vpcId every instance goes into a configured subnet, so a zone (and with it the subnet)
            // must be chosen.
            "" if region.vpc_id.is_some() && region.shared_security_group_id.is_none() => {
                let known = keys(region.zones.keys());
                problem(
                    "placement.zone",
                    format!("is required in {name}: its instances launch into the subnets of its VPC ({known})"),
                );
                None
            }
            // EC2 picks a zone when none is asked for.
            "" => None,
            zone if region.zones.contains_key(zone) => Some(zone.to_owned()),
            zone => {
                let known = keys(region.zones.keys());
                problem(
                    "placement.zone",
                    format!("{zone:?} is not a configured zone of {name} (configured: {known})"),
                );
                None
            }
        };
        let image = match single(&placement.image, region.images.keys()) {
            Some(key) => match region.images.get(key) {
                Some(ami) => Some(ami.clone()),
                None => {
                    let known = keys(region.images.keys());
                    problem(
                        "placement.image",
                        format!("{key:?} is not in the image catalogue of {name} (catalogue: {known})"),
                    );
                    None
                }
            },
            None => {
                let known = keys(region.images.keys());
                problem(
                    "placement.image",
                    format!("is required: {name} has several images ({known})"),
                );
                None
            }
        };
        if let (Some(image_id), Some(machine_type)) = (image, machine_type) {
            let subnet_id = zone.as_ref().and_then(|z| region.zones[z].subnet_id.clone());
            target = Some(Target {
                region: name.to_owned(),
                zone,
                subnet_id,
                machine_type,
                image_id,
                group: GroupMode::of(region),
            });
        }
    }
    match target {
        Some(target) if problems.is_empty() => Ok(target),
        _ => Err(AwsError::Invalid(problems)),
    }
}

#[cfg(test)]
mod tests {
    use provider_sdk::config::parse;

    use super::*;

    const CONFIG: &str = "regions:\n  us-east-1:\n    zones: {us-east-1a: {}, us-east-1b: {}}\n    images: {ubuntu: ami-785db401}\n  eu-west-1:\n    images: {ubuntu: ami-785db401, other: ami-1e749f67}\n    sharedSecurityGroupId: sg-0123456789abcdef0\nmachineTypes: [t3.micro, t3.small]\ndefaultMachineType: t3.micro\n";

    fn placement(region: &str, zone: &str, machine_type: &str, image: &str) -> Placement {
        Placement {
            region: region.into(),
            zone: zone.into(),
            machine_type: machine_type.into(),
            image: image.into(),
        }
    }

    fn config() -> AwsConfig {
        parse("aws.yaml", CONFIG).unwrap()
    }

    #[test]
    fn catalogue_keys_resolve_to_the_region_s_ami_and_single_choices_default() {
        let target = resolve(&config(), &placement("us-east-1", "us-east-1b", "", "")).unwrap();
        assert_eq!(target.image_id, "ami-785db401");
        assert_eq!(target.machine_type, "t3.micro", "the configured default");
        assert_eq!(target.zone.as_deref(), Some("us-east-1b"));
        assert_eq!(target.group, GroupMode::PerProxy { vpc_id: None });
        let shared = resolve(&config(), &placement("eu-west-1", "", "t3.small", "other")).unwrap();
        assert_eq!(shared.image_id, "ami-1e749f67");
        assert_eq!(shared.zone, None);
        assert_eq!(shared.group, GroupMode::Shared("sg-0123456789abcdef0".into()));
    }

    #[test]
    fn a_region_with_a_vpc_needs_a_zone_so_the_instance_lands_in_a_subnet() {
        let text = "regions:\n  us-east-1:\n    vpcId: vpc-0123456789abcdef0\n    zones: {us-east-1a: {subnetId: subnet-0123456789abcdef0}}\n    images: {ubuntu: ami-785db401}\nmachineTypes: [t3.micro]\n";
        let config: AwsConfig = parse("aws.yaml", text).unwrap();
        let error = resolve(&config, &placement("us-east-1", "", "", "")).unwrap_err();
        let AwsError::Invalid(fields) = &error else {
            panic!("{error:?}")
        };
        assert_eq!(fields[0].field, "placement.zone", "{fields:?}");
        assert!(fields[0].description.contains("us-east-1a"), "{fields:?}");
        let target = resolve(&config, &placement("us-east-1", "us-east-1a", "", "")).unwrap();
        assert_eq!(target.subnet_id.as_deref(), Some("subnet-0123456789abcdef0"));
    }

    #[test]
    fn unknown_values_are_refused_together_naming_field_and_value() {
        let error = resolve(&config(), &placement("us-east-1", "us-east-1z", "t9.huge", "debian")).unwrap_err();
        let AwsError::Invalid(fields) = &error else {
            panic!("{error:?}")
        };
        let named: Vec<&str> = fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(named, ["placement.machine_type", "placement.zone", "placement.image"]);
        let text = error.to_string();
        for value in ["\"us-east-1z\"", "\"t9.huge\"", "\"debian\""] {
            assert!(text.contains(value), "{value} in {text}");
        }
        let error = resolve(&config(), &placement("mars-north-1", "", "", ""))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("placement.region: \"mars-north-1\" is not a configured region"),
            "{error}"
        );
    }

    #[test]
    fn empty_fields_with_several_choices_are_required() {
        let error = resolve(&config(), &placement("", "", "", "")).unwrap_err().to_string();
        assert!(error.contains("placement.region: is required"), "{error}");
        let error = resolve(&config(), &placement("eu-west-1", "", "", ""))
            .unwrap_err()
            .to_string();
        assert!(error.contains("placement.image: is required"), "{error}");
    }
}
