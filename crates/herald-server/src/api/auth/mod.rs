//! Authentication and authorization, kube-apiserver's way, in front of every route:
//! HTTP → **authn → authz** → admission → routes.
//!
//! **Authentication** ([`AuthOptions`]) tries, in kube-apiserver's order:
//!
//! 1. a client certificate the TLS layer verified against `--client-ca-file`
//!    ([`VerifiedClientCertificates`](crate::api::peer::VerifiedClientCertificates), when
//!    [`AuthOptions::client_certificates`] is on): CN = user, O = groups ([`certificate`]);
//! 2. a bearer token (`Authorization: Bearer …`) from `--token-auth-file` ([`token`]);
//! 3. with `--anonymous-auth`, a request without credentials is `system:anonymous` in
//!    `system:unauthenticated`.
//!
//! Every identified user also gets `system:authenticated`. A wrong token, or no credential
//! without `--anonymous-auth`, is **401** with kube-apiserver's `Status` (`message` and
//! `reason` both `Unauthorized`, which kubectl prints as `error: You must be logged in to the
//! server (Unauthorized)`). `/healthz`, `/livez`, `/readyz` (with their sub-paths) and
//! `/version` are open to everyone, credentials or not, and skip authorization; `/metrics`
//! and everything else need a credential. The `Authorization` header is removed once read
//! and no token is ever logged. The user travels down as a [`UserInfo`] request extension.
//!
//! With **no authenticator configured** (no token file, no client CA, no anonymous flag),
//! every request is `system:anonymous` and the default authorization is `AlwaysAllow`: the
//! open server Herald has always been.
//!
//! **Authorization** ([`AuthorizationMode`]): `AlwaysAllow`, or `RBAC` (the default once an
//! authenticator is configured) with rules from `--authorization-rbac-file` ([`rbac`]),
//! polled for changes ([`reload`]). A denial is **403** with kube-apiserver's message
//! ([`forbidden`]). The verb, resource, namespace and name come from the request
//! ([`attributes`]).
//!
//! `kubectl auth can-i` and `kubectl auth whoami` are answered by [`reviews`].
//!
//! A layer outside this one learns the user and the decision (with its reason) through an
//! [`AuthOutcome`] it puts in the request's extensions ([`outcome`]): the audit log does.

pub mod attributes;
pub mod certificate;
pub mod layer;
pub mod outcome;
pub mod rbac;
pub mod reload;
pub mod reviews;
pub mod token;
pub mod user;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use herald_core::status::{ApiError, Reason};

pub use attributes::Attributes;
pub use layer::AuthLayer;
pub use outcome::{Admitted, AuthOutcome, Decision};
pub use rbac::{RbacFileError, RbacPolicy};
pub use reload::RbacRules;
pub use token::{TokenFile, TokenFileError};
pub use user::UserInfo;

/// How requests are authorized (`--authorization-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Everything is allowed to everyone authentication let in.
    AlwaysAllow,
    /// RBAC rules from `--authorization-rbac-file`, plus the bootstrap roles.
    Rbac,
}

impl std::str::FromStr for AuthorizationMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "AlwaysAllow" => Ok(AuthorizationMode::AlwaysAllow),
            "RBAC" => Ok(AuthorizationMode::Rbac),
            other => Err(format!(
                "unknown authorization mode {other:?}: use RBAC or AlwaysAllow"
            )),
        }
    }
}

/// Authentication and authorization settings (`herald serve`'s kube-apiserver flags).
/// `Default` configures nothing: every request is `system:anonymous` and allowed.
#[derive(Debug, Clone)]
pub struct AuthOptions {
    /// `--token-auth-file`: the static token CSV.
    pub token_auth_file: Option<PathBuf>,
    /// Whether client certificates identify users (on when `--client-ca-file` is given;
    /// the TLS layer inserts the verified chain).
    pub client_certificates: bool,
    /// `--anonymous-auth`: requests without credentials are `system:anonymous` instead of
    /// 401.
    pub anonymous_auth: bool,
    /// `--authorization-mode`; `None` = `RBAC` when an authenticator is configured,
    /// `AlwaysAllow` when none is.
    pub authorization_mode: Option<AuthorizationMode>,
    /// `--authorization-rbac-file`: Role, ClusterRole, RoleBinding and ClusterRoleBinding
    /// objects in YAML. Without it, RBAC grants only the bootstrap roles.
    pub authorization_rbac_file: Option<PathBuf>,
    /// How often the RBAC file's modification time and size are checked (default 10 s); a
    /// change is applied at most this long after it was written.
    pub rbac_reload_interval: Duration,
}

impl Default for AuthOptions {
    fn default() -> Self {
        AuthOptions {
            token_auth_file: None,
            client_certificates: false,
            anonymous_auth: false,
            authorization_mode: None,
            authorization_rbac_file: None,
            rbac_reload_interval: Duration::from_secs(10),
        }
    }
}

impl AuthOptions {
    /// Whether any authenticator is configured.
    pub fn authenticates(&self) -> bool {
        self.token_auth_file.is_some() || self.client_certificates || self.anonymous_auth
    }

    /// The authorization mode in effect (see [`AuthOptions::authorization_mode`]).
    pub fn mode(&self) -> AuthorizationMode {
        self.authorization_mode.unwrap_or(if self.authenticates() {
            AuthorizationMode::Rbac
        } else {
            AuthorizationMode::AlwaysAllow
        })
    }
}

/// Why authentication or authorization could not be set up (a one-line message naming the
/// file and line).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The token file is unreadable or malformed.
    #[error(transparent)]
    TokenFile(#[from] TokenFileError),
    /// The RBAC file is unreadable or malformed.
    #[error(transparent)]
    RbacFile(#[from] RbacFileError),
}

/// How requests are authenticated.
#[derive(Debug)]
pub enum Authentication {
    /// No authenticator is configured: every request is `system:anonymous`.
    Open,
    /// Credentials are checked.
    Required {
        /// The token file's users, if one was given.
        tokens: Option<TokenFile>,
        /// Whether verified client certificates identify users.
        certificates: bool,
        /// Whether a request without credentials is `system:anonymous`.
        anonymous: bool,
    },
}

/// How authenticated requests are authorized.
#[derive(Debug, Clone)]
pub enum Authorization {
    /// Everything is allowed.
    AlwaysAllow,
    /// RBAC rules (reloadable).
    Rbac(RbacRules),
}

impl Authorization {
    /// Whether `user` may do what `attrs` asks.
    pub fn allows(&self, user: &UserInfo, attrs: &Attributes) -> bool {
        match self {
            Authorization::AlwaysAllow => true,
            Authorization::Rbac(rules) => rules.current().allows(user, attrs),
        }
    }

    /// The decision on what `attrs` asks of `user`, with its reason (empty for
    /// `AlwaysAllow`; see [`RbacPolicy::decide`] for RBAC's).
    pub fn decide(&self, user: &UserInfo, attrs: &Attributes) -> Decision {
        match self {
            Authorization::AlwaysAllow => Decision::allow(String::new()),
            Authorization::Rbac(rules) => rules.current().decide(user, attrs),
        }
    }
}

/// Authentication and authorization as configured: what the [`AuthLayer`] and the
/// [`reviews`] endpoints consult. Built once at start ([`Auth::new`]).
#[derive(Debug)]
pub struct Auth {
    /// The authenticators.
    pub authentication: Authentication,
    /// The authorizer.
    pub authorization: Authorization,
}

impl Auth {
    /// Reads the token and RBAC files of `options` (without starting the RBAC file's
    /// reloader: see [`reload::spawn`]). Errors name the file and line.
    pub fn new(options: &AuthOptions) -> Result<Arc<Auth>, AuthError> {
        let authentication = if options.authenticates() {
            Authentication::Required {
                tokens: options
                    .token_auth_file
                    .as_deref()
                    .map(TokenFile::read)
                    .transpose()?,
                certificates: options.client_certificates,
                anonymous: options.anonymous_auth,
            }
        } else {
            Authentication::Open
        };
        let authorization = match options.mode() {
            AuthorizationMode::AlwaysAllow => Authorization::AlwaysAllow,
            AuthorizationMode::Rbac => {
                Authorization::Rbac(RbacRules::load(options.authorization_rbac_file.clone())?)
            }
        };
        Ok(Arc::new(Auth {
            authentication,
            authorization,
        }))
    }

    /// Everything open and allowed (no authenticator, `AlwaysAllow`).
    pub fn open() -> Arc<Auth> {
        Arc::new(Auth {
            authentication: Authentication::Open,
            authorization: Authorization::AlwaysAllow,
        })
    }
}

/// kube-apiserver's 401: `{"kind":"Status",…,"message":"Unauthorized","reason":
/// "Unauthorized","code":401}`.
pub fn unauthorized() -> ApiError {
    ApiError::new(401, Reason::Unauthorized, "Unauthorized")
}

/// kube-apiserver's 403 for a request `user` may not make, word for word:
///
/// - `events is forbidden: User "jane" cannot list resource "events" in API group "" in the
///   namespace "prod"`
/// - `events.events.k8s.io "x" is forbidden: User "jane" cannot get resource "events" in
///   API group "events.k8s.io" in the namespace "prod"`
/// - `events is forbidden: User "jane" cannot list resource "events" in API group "" at the
///   cluster scope`
/// - `forbidden: User "jane" cannot get path "/metrics"`
///
/// The `Status` details name the group, the resource (as `kind`) and the object.
pub fn forbidden(user: &UserInfo, a: &Attributes) -> ApiError {
    let who = &user.name;
    let Some(resource) = &a.resource else {
        let mut e = ApiError::new(
            403,
            Reason::Forbidden,
            format!(
                "forbidden: User {who:?} cannot {} path {:?}",
                a.verb, a.path
            ),
        );
        e.group = Some(String::new());
        return e;
    };
    let full = if a.subresource.is_empty() {
        resource.clone()
    } else {
        format!("{resource}/{}", a.subresource)
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace {:?}", a.namespace)
    };
    let why = format!(
        "User {who:?} cannot {} resource {full:?} in API group {:?} {scope}",
        a.verb, a.api_group
    );
    let qualified = if a.api_group.is_empty() {
        resource.clone()
    } else {
        format!("{resource}.{}", a.api_group)
    };
    let message = if a.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} {:?} is forbidden: {why}", a.name)
    };
    let mut e = ApiError::new(403, Reason::Forbidden, message);
    e.group = Some(a.api_group.clone());
    e.kind = Some(resource.clone());
    e.name = (!a.name.is_empty()).then(|| a.name.clone());
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn msg(method: Method, path: &str) -> String {
        let jane = UserInfo::authenticated("jane", "", vec![]);
        forbidden(&jane, &Attributes::from_request(&method, path, None)).message
    }

    #[test]
    fn forbidden_messages_match_kube_apiserver() {
        assert_eq!(
            msg(Method::GET, "/api/v1/namespaces/prod/events"),
            r#"events is forbidden: User "jane" cannot list resource "events" in API group "" in the namespace "prod""#
        );
        assert_eq!(
            msg(Method::GET, "/api/v1/events"),
            r#"events is forbidden: User "jane" cannot list resource "events" in API group "" at the cluster scope"#
        );
        assert_eq!(
            msg(
                Method::DELETE,
                "/apis/events.k8s.io/v1/namespaces/prod/events/x"
            ),
            r#"events.events.k8s.io "x" is forbidden: User "jane" cannot delete resource "events" in API group "events.k8s.io" in the namespace "prod""#
        );
        assert_eq!(
            msg(Method::GET, "/metrics"),
            r#"forbidden: User "jane" cannot get path "/metrics""#
        );
    }

    #[test]
    fn default_mode_follows_authenticators() {
        assert_eq!(
            AuthOptions::default().mode(),
            AuthorizationMode::AlwaysAllow
        );
        let o = AuthOptions {
            anonymous_auth: true,
            ..AuthOptions::default()
        };
        assert_eq!(o.mode(), AuthorizationMode::Rbac);
        assert!("rbac".parse::<AuthorizationMode>().is_err());
    }
}
