//! From EC2's view of an instance to the contract's: the providerID `aws://<region>/<instance-id>`, the
//! state table (docs/aws-provider-spec.md, entry 9), the address, `created_at` and the marks.

use std::{
    net::Ipv4Addr,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use aws_sdk_ec2::types::{Instance as Ec2Instance, InstanceStateName};
use provider_sdk::model::{Instance, InstanceState, ProviderId, is_routable};

use crate::{
    config::{is_region, is_resource_id},
    error::AwsError,
    tags,
};

pub const PROVIDER_TYPE: &str = "aws";

/// A parsed providerID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceRef {
    pub region: String,
    pub instance_id: String,
}

impl InstanceRef {
    pub fn provider_id(&self) -> ProviderId {
        ProviderId::new(PROVIDER_TYPE, &format!("{}/{}", self.region, self.instance_id))
    }

    /// Exactly `<region>/<instance-id>`, each segment of its strict shape; no case folding, no decoding.
    pub fn parse(id: &ProviderId) -> Result<Self, AwsError> {
        let malformed = |problem: &str| AwsError::MalformedId {
            id: id.as_str().to_owned(),
            problem: format!("the part after aws:// must be <region>/<instance-id>: {problem}"),
        };
        let mut parts = id.rest().split('/');
        let (Some(region), Some(instance_id), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(malformed("expected exactly two segments"));
        };
        if !is_region(region) {
            return Err(malformed("the region is not an AWS region name"));
        }
        if !is_resource_id("i", instance_id) {
            return Err(malformed("the instance ID is not i- and 8 or 17 lowercase hex digits"));
        }
        Ok(Self {
            region: region.to_owned(),
            instance_id: instance_id.to_owned(),
        })
    }
}

/// What EC2 says about an instance's life, before the address is considered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Stopping,
    Stopped,
    ShuttingDown,
    Terminated,
    Unknown(String),
}

impl Phase {
    pub fn of(state: Option<&InstanceStateName>) -> Self {
        match state {
            Some(InstanceStateName::Pending) => Phase::Pending,
            Some(InstanceStateName::Running) => Phase::Running,
            Some(InstanceStateName::Stopping) => Phase::Stopping,
            Some(InstanceStateName::Stopped) => Phase::Stopped,
            Some(InstanceStateName::ShuttingDown) => Phase::ShuttingDown,
            Some(InstanceStateName::Terminated) => Phase::Terminated,
            Some(other) => Phase::Unknown(other.as_str().to_owned()),
            None => Phase::Unknown("(none)".to_owned()),
        }
    }

    /// The phase of an instance as DescribeInstances or RunInstances answered it.
    pub fn of_instance(ec2: &Ec2Instance) -> Self {
        Self::of(ec2.state().and_then(|s| s.name()))
    }

    /// Teardown has begun: the instance will never serve again.
    pub fn is_going(&self) -> bool {
        matches!(self, Phase::ShuttingDown | Phase::Terminated)
    }
}

/// The state table. `Running` needs a routable public IPv4; an EC2 state this table does not list is
/// `Stopped`, with a warn line (contract §5.2). EC2 reaches `stopping` and `stopped` only after running,
/// so a never-started instance is never `Stopped`.
pub fn state(phase: &Phase, ipv4: Option<Ipv4Addr>, instance_id: &str) -> InstanceState {
    match phase {
        Phase::Pending => InstanceState::Provisioning,
        Phase::Running if ipv4.is_some_and(is_routable) => InstanceState::Running,
        Phase::Running => InstanceState::Provisioning,
        Phase::Stopping | Phase::Stopped => InstanceState::Stopped,
        Phase::ShuttingDown | Phase::Terminated => InstanceState::Terminated,
        Phase::Unknown(name) => {
            tracing::warn!(instance_id, state = %name, "EC2 state this provider does not know; answering Stopped");
            InstanceState::Stopped
        }
    }
}

/// The contract's instance for an EC2 instance of `region`.
pub fn to_instance(region: &str, ec2: &Ec2Instance) -> Result<Instance, AwsError> {
    let instance_id = ec2.instance_id().ok_or(AwsError::Unexpected {
        operation: "DescribeInstances",
        region: region.to_owned(),
        what: "an instance ID",
    })?;
    let reference = InstanceRef {
        region: region.to_owned(),
        instance_id: instance_id.to_owned(),
    };
    let ipv4 = ec2.public_ip_address().and_then(|ip| ip.parse::<Ipv4Addr>().ok());
    let phase = Phase::of_instance(ec2);
    let tags = ec2.tags();
    Ok(Instance {
        provider_id: reference.provider_id(),
        name: tags::value(tags, tags::NAME).unwrap_or_default().to_owned(),
        state: state(&phase, ipv4, instance_id),
        ipv4,
        created_at: created_at(ec2),
        marks: tags::marks(tags),
    })
}

/// The created-at tag, else EC2's LaunchTime (for an instance this provider did not make), else the epoch.
fn created_at(ec2: &Ec2Instance) -> SystemTime {
    let tagged = tags::value(ec2.tags(), tags::CREATED_AT).and_then(|s| s.parse::<u64>().ok());
    let launched = ec2.launch_time().and_then(|t| u64::try_from(t.secs()).ok());
    UNIX_EPOCH + Duration::from_secs(tagged.or(launched).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::{
        primitives::DateTime,
        types::{InstanceState as Ec2State, Tag},
    };

    use super::*;
    use crate::error::classify;

    const IP: Option<Ipv4Addr> = Some(Ipv4Addr::new(54, 214, 57, 228));

    #[test]
    fn every_ec2_state_maps_by_the_table_and_unknown_is_stopped() {
        let rows = [
            (InstanceStateName::Pending, IP, InstanceState::Provisioning),
            (InstanceStateName::Running, IP, InstanceState::Running),
            (InstanceStateName::Stopping, IP, InstanceState::Stopped),
            (InstanceStateName::Stopped, None, InstanceState::Stopped),
            (InstanceStateName::ShuttingDown, IP, InstanceState::Terminated),
            (InstanceStateName::Terminated, None, InstanceState::Terminated),
            (InstanceStateName::from("hibernating"), IP, InstanceState::Stopped),
        ];
        for (name, ip, expected) in rows {
            assert_eq!(state(&Phase::of(Some(&name)), ip, "i-0123abcd"), expected, "{name:?}");
        }
        assert_eq!(state(&Phase::of(None), IP, "i-0123abcd"), InstanceState::Stopped);
    }

    /// moto assigns the public address at once; EC2 may not, which is the provisioning window.
    #[test]
    fn running_without_a_routable_public_address_is_still_provisioning() {
        let running = Phase::Running;
        assert_eq!(state(&running, None, "i-0123abcd"), InstanceState::Provisioning);
        let link_local = Some(Ipv4Addr::new(169, 254, 1, 1));
        assert_eq!(state(&running, link_local, "i-0123abcd"), InstanceState::Provisioning);
    }

    #[test]
    fn instances_read_back_marks_name_address_and_the_tagged_creation_time() {
        let ec2 = Ec2Instance::builder()
            .instance_id("i-0123456789abcdef0")
            .state(Ec2State::builder().name(InstanceStateName::Running).build())
            .public_ip_address("54.214.57.228")
            .launch_time(DateTime::from_secs(2_000_000_000))
            .tags(Tag::builder().key(tags::NAME).value("egress-a").build())
            .tags(Tag::builder().key(tags::MANAGED).value("true").build())
            .tags(Tag::builder().key(tags::CLUSTER).value("c1").build())
            .tags(Tag::builder().key(tags::CREATED_AT).value("1700000000").build())
            .build();
        let instance = to_instance("eu-west-1", &ec2).unwrap();
        assert_eq!(instance.provider_id.as_str(), "aws://eu-west-1/i-0123456789abcdef0");
        assert_eq!(instance.name, "egress-a");
        assert_eq!(instance.state, InstanceState::Running);
        assert_eq!(instance.ipv4, IP);
        assert_eq!(instance.created_at, UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        assert!(instance.marks.managed && instance.marks.cluster_id == "c1");
        let untagged = Ec2Instance::builder()
            .instance_id("i-0123abcd")
            .launch_time(DateTime::from_secs(2_000_000_000))
            .build();
        let instance = to_instance("eu-west-1", &untagged).unwrap();
        assert_eq!(instance.created_at, UNIX_EPOCH + Duration::from_secs(2_000_000_000));
        assert!(!instance.marks.managed);
    }

    #[test]
    fn ids_parse_only_as_region_slash_instance_id() {
        let parse = |id: &str| InstanceRef::parse(&ProviderId::parse_for(id, PROVIDER_TYPE).unwrap());
        let good = parse("aws://eu-west-1/i-0123456789abcdef0").unwrap();
        assert_eq!(
            (good.region.as_str(), good.instance_id.as_str()),
            ("eu-west-1", "i-0123456789abcdef0")
        );
        assert_eq!(good.provider_id().as_str(), "aws://eu-west-1/i-0123456789abcdef0");
        for bad in [
            "aws://eu-west-1",
            "aws://eu-west-1/",
            "aws://eu-west-1/i-0123456789abcdef0/",
            "aws://eu-west-1/i-0123456789ABCDEF0",
            "aws://eu-west-1/i-xyz",
            "aws://EU-west-1/i-0123abcd",
            "aws://../../etc/passwd",
            "aws://eu-west-1//i-0123abcd",
            "aws://eu-west-1/i-0123abcd%2F",
            "aws://i-0123abcd",
        ] {
            let error = classify(parse(bad).unwrap_err());
            assert_eq!(error.reason(), "MALFORMED_PROVIDER_ID", "{bad}");
            assert!(error.message_with_causes().contains(bad), "the ID is named: {bad}");
        }
    }
}
