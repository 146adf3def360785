//! Shape checks for every value that enters through the wire (contract §2, "validation"). Each returns a
//! description that names the problem and, for non-sensitive values, the value, so the caller can put it
//! into a BadRequest field violation.

use std::net::IpAddr;

pub const MAX_PROXY_UID_LENGTH: usize = 64;
pub const MAX_CLUSTER_ID_LENGTH: usize = 63;
pub const MAX_PLACEMENT_LENGTH: usize = 255;
pub const MAX_CREDENTIAL_LENGTH: usize = 255;

fn is_label_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
}

pub fn instance_name(value: &str, max_len: u32) -> Result<(), String> {
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    if value.len() > max_len as usize {
        return Err(format!(
            "must be at most {max_len} characters, got {} in {value:?}",
            value.len()
        ));
    }
    let starts_with_letter = value.starts_with(|c: char| c.is_ascii_lowercase());
    if !starts_with_letter || value.ends_with('-') || !value.chars().all(is_label_char) {
        return Err(format!(
            "must be lowercase letters, digits and '-', start with a letter and not end with '-', got {value:?}"
        ));
    }
    Ok(())
}

pub fn proxy_uid(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    if value.len() > MAX_PROXY_UID_LENGTH || !value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(format!(
            "must be 1 to {MAX_PROXY_UID_LENGTH} letters, digits or '-', got {value:?}"
        ));
    }
    Ok(())
}

pub fn cluster_id(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    let shape_ok = value.chars().all(is_label_char) && !value.starts_with('-') && !value.ends_with('-');
    if value.len() > MAX_CLUSTER_ID_LENGTH || !shape_ok {
        return Err(format!(
            "must be 1 to {MAX_CLUSTER_ID_LENGTH} lowercase letters, digits or '-', not starting or ending with '-', got {value:?}"
        ));
    }
    Ok(())
}

pub fn port(value: u32) -> Result<u16, String> {
    match u16::try_from(value) {
        Ok(port) if port != 0 => Ok(port),
        _ => Err(format!("must be 1 to 65535, got {value}")),
    }
}

pub fn placement_field(value: &str) -> Result<(), String> {
    if value.len() > MAX_PLACEMENT_LENGTH {
        return Err(format!(
            "must be at most {MAX_PLACEMENT_LENGTH} characters, got {}",
            value.len()
        ));
    }
    if !value.chars().all(|c| c.is_ascii_graphic()) {
        return Err(format!("must be printable ASCII without spaces, got {value:?}"));
    }
    Ok(())
}

pub fn username(value: &str) -> Result<(), String> {
    if value.is_empty() || value.len() > MAX_CREDENTIAL_LENGTH {
        return Err(format!(
            "must be 1 to {MAX_CREDENTIAL_LENGTH} characters, got {}",
            value.len()
        ));
    }
    if value.contains(':') || value.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "must not contain ':', spaces or control characters, got {value:?}"
        ));
    }
    Ok(())
}

/// Never echoes the value: the password is sensitive.
pub fn password(value: &str) -> Result<(), String> {
    if value.is_empty() || value.len() > MAX_CREDENTIAL_LENGTH {
        return Err(format!("must be 1 to {MAX_CREDENTIAL_LENGTH} characters"));
    }
    if value.chars().any(|c| c.is_control()) {
        return Err("must not contain control characters".into());
    }
    Ok(())
}

/// A CIDR with its host bits zero, IPv4 or IPv6.
pub fn cidr(value: &str) -> Result<ipnet::IpNet, String> {
    let net: ipnet::IpNet = value
        .parse()
        .map_err(|_| format!("must be a CIDR such as 10.0.0.0/8 or 2001:db8::/32, got {value:?}"))?;
    if net.trunc() != net {
        return Err(format!(
            "has host bits set; did you mean {}? got {value:?}",
            net.trunc()
        ));
    }
    Ok(net)
}

pub fn provider_id(value: &str, provider_type: Option<&str>) -> Result<(), String> {
    let Some((kind, rest)) = value.split_once("://") else {
        return Err(format!("must look like <provider-type>://<id>, got {value:?}"));
    };
    if kind.is_empty() || !kind.chars().all(is_label_char) {
        return Err(format!("has an invalid provider type {kind:?} in {value:?}"));
    }
    if let Some(expected) = provider_type
        && kind != expected
    {
        return Err(format!(
            "belongs to provider type {kind:?}, not {expected:?}: {value:?}"
        ));
    }
    if rest.is_empty() || rest.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!("has an empty or unprintable id part in {value:?}"));
    }
    Ok(())
}

pub fn ipv4(value: &str) -> Result<Option<std::net::Ipv4Addr>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    match value.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => Ok(Some(ip)),
        _ => Err(format!("must be a dotted-quad IPv4 address, got {value:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_names_follow_the_label_rules() {
        assert!(instance_name("egress-a1b2", 63).is_ok());
        for bad in ["", "1abc", "Abc", "abc-", "a_b", "a.b"] {
            assert!(instance_name(bad, 63).is_err(), "{bad:?} accepted");
        }
        assert!(instance_name(&"a".repeat(64), 63).unwrap_err().contains("at most 63"));
    }

    #[test]
    fn cidrs_must_be_canonical() {
        assert!(cidr("10.0.0.0/8").is_ok());
        assert!(cidr("2001:db8::/32").is_ok());
        assert!(cidr("10.0.0.1/8").unwrap_err().contains("10.0.0.0/8"));
        assert!(cidr("banana").unwrap_err().contains("banana"));
    }

    #[test]
    fn ports_outside_the_range_are_named_with_their_value() {
        assert_eq!(port(8080), Ok(8080));
        assert!(port(0).unwrap_err().contains("got 0"));
        assert!(port(65536).unwrap_err().contains("got 65536"));
    }

    #[test]
    fn provider_ids_need_the_type_prefix() {
        assert!(provider_id("fake://abc", Some("fake")).is_ok());
        assert!(provider_id("fake://", None).is_err());
        assert!(provider_id("abc", None).is_err());
        assert!(provider_id("aws://i-1", Some("fake")).unwrap_err().contains("aws"));
    }

    #[test]
    fn password_errors_never_echo_the_password() {
        let error = password("bad\u{7}secret").unwrap_err();
        assert!(!error.contains("secret"));
    }
}
