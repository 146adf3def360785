//! The address pool: the IPv4 addresses instances listen on and send from, parsed from the config's `pool`
//! entries (single addresses, inclusive ranges `a-b`, and CIDR blocks).

use std::{collections::BTreeMap, net::Ipv4Addr, ops::RangeInclusive};

use ipnet::Ipv4Net;
use provider_sdk::{config::ConfigViolation, model::is_routable};

/// The most addresses one pool may hold (a /16): more is a typo, and every Check walks the pool.
pub const MAX_POOL_SIZE: u64 = 1 << 16;

/// The pool's addresses, sorted and unique.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    addresses: Vec<Ipv4Addr>,
}

impl Pool {
    /// Parses every entry, reporting each bad one as a violation of `pool[i]`.
    pub fn parse(entries: &[String]) -> Result<Self, Vec<ConfigViolation>> {
        let mut violations = Vec::new();
        if entries.is_empty() {
            violations.push(ConfigViolation::new("pool", "[]", "must list at least one address"));
        }
        // Address -> index of the entry that brought it, to name overlaps.
        let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
        let mut total: u64 = 0;
        for (i, entry) in entries.iter().enumerate() {
            let field = format!("pool[{i}]");
            let range = match parse_entry(entry) {
                Ok(range) => range,
                Err(problem) => {
                    violations.push(ConfigViolation::new(field, entry, problem));
                    continue;
                }
            };
            let size = u64::from(*range.end()) - u64::from(*range.start()) + 1;
            total += size;
            if total > MAX_POOL_SIZE {
                let problem = format!("brings the pool to {total} addresses; a pool holds at most {MAX_POOL_SIZE}");
                violations.push(ConfigViolation::new(field, entry, problem));
                break;
            }
            if let Some(bad) = range.clone().map(Ipv4Addr::from).find(|ip| !is_routable(*ip)) {
                let problem = format!("contains {bad}, which is not a routable unicast address");
                violations.push(ConfigViolation::new(field, entry, problem));
                continue;
            }
            for address in range {
                if let Some(earlier) = seen.insert(address, i) {
                    let problem = format!("overlaps pool[{earlier}] at {}", Ipv4Addr::from(address));
                    violations.push(ConfigViolation::new(field, entry, problem));
                    break;
                }
            }
        }
        if violations.is_empty() {
            Ok(Self {
                addresses: seen.into_keys().map(Ipv4Addr::from).collect(),
            })
        } else {
            Err(violations)
        }
    }

    pub fn addresses(&self) -> &[Ipv4Addr] {
        &self.addresses
    }

    pub fn len(&self) -> usize {
        self.addresses.len()
    }

    pub fn is_empty(&self) -> bool {
        self.addresses.is_empty()
    }

    pub fn contains(&self, address: Ipv4Addr) -> bool {
        self.addresses.binary_search(&address).is_ok()
    }
}

/// One entry as an inclusive range of addresses (as integers).
///
/// A CIDR block leaves out its network and broadcast addresses when the prefix is /30 or shorter, as on an
/// on-link subnet; a routed subnet whose every address is usable is written as a range instead.
pub fn parse_entry(entry: &str) -> Result<RangeInclusive<u32>, String> {
    let entry = entry.trim();
    if entry.contains(':') {
        return Err("is IPv6; instances report one IPv4 address (contract §13), so the pool is IPv4 only".into());
    }
    if let Some((start, end)) = entry.split_once('-') {
        let start = parse_address(start.trim())?;
        let end = parse_address(end.trim())?;
        if start > end {
            return Err("is a range whose start is after its end".into());
        }
        return Ok(u32::from(start)..=u32::from(end));
    }
    if entry.contains('/') {
        let net: Ipv4Net = entry
            .parse()
            .map_err(|_| "is neither an IPv4 address, a range a-b, nor an IPv4 CIDR".to_owned())?;
        if net.network() != net.addr() {
            return Err(format!("has host bits set; the block is {}", net.trunc()));
        }
        let (first, last) = (u32::from(net.network()), u32::from(net.broadcast()));
        return Ok(if net.prefix_len() <= 30 {
            first + 1..=last - 1
        } else {
            first..=last
        });
    }
    let address = parse_address(entry)?;
    Ok(u32::from(address)..=u32::from(address))
}

fn parse_address(text: &str) -> Result<Ipv4Addr, String> {
    text.parse()
        .map_err(|_| "is neither an IPv4 address, a range a-b, nor an IPv4 CIDR".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(entries: &[&str]) -> Result<Pool, Vec<ConfigViolation>> {
        Pool::parse(&entries.iter().map(|e| e.to_string()).collect::<Vec<_>>())
    }

    fn addresses(entries: &[&str]) -> Vec<String> {
        pool(entries)
            .unwrap()
            .addresses()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn problems(entries: &[&str]) -> String {
        pool(entries)
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    }

    #[test]
    fn a_single_address_is_a_pool_of_one() {
        assert_eq!(addresses(&["10.1.2.3"]), ["10.1.2.3"]);
    }

    #[test]
    fn a_range_includes_both_ends() {
        assert_eq!(
            addresses(&["10.0.0.254-10.0.1.1"]),
            ["10.0.0.254", "10.0.0.255", "10.0.1.0", "10.0.1.1"]
        );
    }

    #[test]
    fn a_cidr_leaves_out_the_network_and_broadcast_addresses() {
        let listed = addresses(&["127.0.1.0/28"]);
        assert_eq!(listed.len(), 14);
        assert_eq!(listed.first().unwrap(), "127.0.1.1");
        assert_eq!(listed.last().unwrap(), "127.0.1.14");
    }

    #[test]
    fn a_slash_31_and_a_slash_32_keep_every_address() {
        assert_eq!(addresses(&["192.0.2.0/31"]), ["192.0.2.0", "192.0.2.1"]);
        assert_eq!(addresses(&["192.0.2.9/32"]), ["192.0.2.9"]);
    }

    #[test]
    fn entries_are_merged_in_address_order() {
        assert_eq!(
            addresses(&["10.0.0.9", "10.0.0.1-10.0.0.2"]),
            ["10.0.0.1", "10.0.0.2", "10.0.0.9"]
        );
    }

    #[test]
    fn an_empty_pool_is_refused() {
        assert!(problems(&[]).contains("pool: \"[]\" must list at least one address"));
    }

    #[test]
    fn bad_entries_are_named_with_their_index_and_value() {
        let text = problems(&["10.0.0.1", "banana", "10.0.0.9-10.0.0.3", "10.0.0.1/24", "fd00::/64"]);
        assert!(text.contains("pool[1]: \"banana\" is neither"), "{text}");
        assert!(
            text.contains("pool[2]: \"10.0.0.9-10.0.0.3\" is a range whose start"),
            "{text}"
        );
        assert!(
            text.contains("pool[3]: \"10.0.0.1/24\" has host bits set; the block is 10.0.0.0/24"),
            "{text}"
        );
        assert!(text.contains("pool[4]: \"fd00::/64\" is IPv6"), "{text}");
    }

    #[test]
    fn overlapping_entries_are_refused() {
        let text = problems(&["10.0.0.0/29", "10.0.0.5-10.0.0.9"]);
        assert!(
            text.contains("pool[1]: \"10.0.0.5-10.0.0.9\" overlaps pool[0] at 10.0.0.5"),
            "{text}"
        );
    }

    #[test]
    fn unroutable_addresses_are_refused() {
        assert!(problems(&["169.254.0.0/24"]).contains("not a routable unicast address"));
        assert!(problems(&["224.0.0.1"]).contains("224.0.0.1, which is not a routable"));
    }

    #[test]
    fn a_pool_larger_than_a_slash_16_is_refused() {
        assert!(problems(&["10.0.0.0/8"]).contains("a pool holds at most 65536"));
    }

    #[test]
    fn contains_answers_for_members_only() {
        let pool = pool(&["127.0.1.0/30"]).unwrap();
        assert!(pool.contains("127.0.1.1".parse().unwrap()));
        assert!(!pool.contains("127.0.1.0".parse().unwrap()));
    }
}
