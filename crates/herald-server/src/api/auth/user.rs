//! [`UserInfo`]: who made a request, as authentication found out. Inserted as a request
//! extension for every request that passed authentication, so the layers below
//! (authorization, admission, audit) and the handlers (`kubectl auth whoami`) read it from
//! there.

/// `system:masters`: members may do anything (kube-apiserver binds `cluster-admin` to it).
pub const MASTERS: &str = "system:masters";
/// `system:authenticated`: added to every user a credential identified.
pub const AUTHENTICATED: &str = "system:authenticated";
/// `system:unauthenticated`: the one group of [`ANONYMOUS`].
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// `system:anonymous`: the user of a request without credentials (`--anonymous-auth`).
pub const ANONYMOUS: &str = "system:anonymous";

/// The user a request runs as: kube-apiserver's `user.Info` (without `extra`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// The user name (`jane`, a certificate's CN, `system:anonymous`).
    pub name: String,
    /// The user's uid (the token file's third column; empty for certificates and anonymous).
    pub uid: String,
    /// The groups, `system:authenticated` (or `system:unauthenticated`) included.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// An authenticated user: `groups` plus `system:authenticated` (once, at the end, as
    /// kube-apiserver's `AuthenticatedGroupAdder` puts it).
    pub fn authenticated(
        name: impl Into<String>,
        uid: impl Into<String>,
        mut groups: Vec<String>,
    ) -> Self {
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.to_string());
        }
        UserInfo {
            name: name.into(),
            uid: uid.into(),
            groups,
        }
    }

    /// `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> Self {
        UserInfo {
            name: ANONYMOUS.to_string(),
            uid: String::new(),
            groups: vec![UNAUTHENTICATED.to_string()],
        }
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authenticated_group_added_once() {
        let u = UserInfo::authenticated("jane", "1", vec!["dev".into()]);
        assert_eq!(u.groups, ["dev", AUTHENTICATED]);
        let u = UserInfo::authenticated("jane", "1", vec![AUTHENTICATED.into()]);
        assert_eq!(u.groups, [AUTHENTICATED]);
        assert!(UserInfo::anonymous().in_group(UNAUTHENTICATED));
    }
}
