//! Event names and the DNS-1123 rules Kubernetes applies to names and namespaces.

use jiff::Timestamp;

/// The longest DNS-1123 subdomain (object names, event names).
pub const DNS1123_SUBDOMAIN_MAX_LEN: usize = 253;
/// The longest DNS-1123 label (namespaces).
pub const DNS1123_LABEL_MAX_LEN: usize = 63;

/// The namespace an event goes to when the object it is about has none (cluster-scoped objects).
pub const DEFAULT_NAMESPACE: &str = "default";

/// True when `s` is a DNS-1123 subdomain: at most 253 characters of lowercase alphanumerics,
/// `-` and `.`, where every dot-separated label starts and ends with an alphanumeric.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= DNS1123_SUBDOMAIN_MAX_LEN
        && s.split('.').all(|label| is_label_shape(label, usize::MAX))
}

/// True when `s` is a DNS-1123 label: at most 63 lowercase alphanumerics or `-`, starting and
/// ending with an alphanumeric (the rule for namespace names).
pub fn is_dns1123_label(s: &str) -> bool {
    is_label_shape(s, DNS1123_LABEL_MAX_LEN)
}

fn is_label_shape(label: &str, max: usize) -> bool {
    let b = label.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= max
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter().all(|&c| alnum(c) || c == b'-')
}

/// The name client-go gives a new event: `<object name>.<lowercase hex of unix nanoseconds>`,
/// or a random UUID when that is not a valid DNS-1123 subdomain (an IPv6 address, upper case,
/// a name that is already 253 characters long).
///
/// ```
/// use herald_core::naming::event_name;
/// let t = jiff::Timestamp::from_nanosecond(105_999_103_295_324_396).unwrap();
/// assert_eq!(event_name("test-pod", t), "test-pod.178959f726d80ec");
/// assert!(herald_core::naming::is_dns1123_subdomain(&event_name("Test.POD", t)));
/// ```
pub fn event_name(object_name: &str, at: Timestamp) -> String {
    let mut name = String::new();
    push_event_name(&mut name, object_name, at);
    name
}

/// Appends [`event_name`]`(object_name, at)` to `out` (what was in `out` stays in front), for
/// a caller that keeps the name in a buffer of its own instead of a `String` of its own.
///
/// ```
/// use herald_core::naming::push_event_name;
/// let t = jiff::Timestamp::from_nanosecond(105_999_103_295_324_396).unwrap();
/// let mut buf = String::from("note|");
/// push_event_name(&mut buf, "test-pod", t);
/// assert_eq!(buf, "note|test-pod.178959f726d80ec");
/// ```
pub fn push_event_name(out: &mut String, object_name: &str, at: Timestamp) {
    use std::fmt::Write as _;
    let start = out.len();
    // Writing to a String cannot fail.
    let _ = write!(out, "{object_name}.{:x}", at.as_nanosecond());
    if !is_dns1123_subdomain(&out[start..]) {
        out.truncate(start);
        let mut uuid = uuid::Uuid::encode_buffer();
        out.push_str(uuid::Uuid::new_v4().hyphenated().encode_lower(&mut uuid));
    }
}

/// The namespace an event about an object in `object_namespace` is stored in.
pub fn event_namespace(object_namespace: Option<&str>) -> &str {
    match object_namespace {
        Some(ns) if !ns.is_empty() => ns,
        _ => DEFAULT_NAMESPACE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_event_name_matches_client_go() {
        let t = Timestamp::from_nanosecond(105_999_103_295_324_396).unwrap();
        assert_eq!(event_name("test-pod", t), "test-pod.178959f726d80ec");
        for bad in [
            "x".repeat(300),
            "test.POD".to_string(),
            "test.pod/invalid!chars?".to_string(),
            "--test.pod/invalid!chars?".to_string(),
            String::new(),
        ] {
            let name = event_name(&bad, t);
            assert!(is_dns1123_subdomain(&name), "{bad:?} gave {name:?}");
            assert!(
                uuid::Uuid::parse_str(&name).is_ok(),
                "{bad:?} should fall back to a UUID"
            );
        }
    }

    #[test]
    fn dns_rules() {
        assert!(is_dns1123_subdomain("a.b-c.0"));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(!is_dns1123_subdomain("-a"));
        assert!(!is_dns1123_subdomain("2001:db8::123"));
        assert!(is_dns1123_label("kube-system"));
        assert!(!is_dns1123_label("a.b"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert_eq!(event_namespace(None), "default");
        assert_eq!(event_namespace(Some("")), "default");
        assert_eq!(event_namespace(Some("ns1")), "ns1");
    }
}
