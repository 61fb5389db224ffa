//! `herald serve`'s authentication and authorization flags, named and behaving as
//! kube-apiserver's (see `herald_server::api::auth`).

use std::path::PathBuf;

use herald_server::api::auth::{AuthOptions, AuthorizationMode};

/// The flags, flattened into `herald serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct AuthArgs {
    /// A CSV of bearer tokens, one `token,user,uid[,"group1,group2"]` per line
    /// (kube-apiserver's static token file). Read at start; a malformed line stops the start
    /// with the file and line.
    #[arg(long, value_name = "FILE")]
    pub token_auth_file: Option<PathBuf>,
    /// Let requests without credentials in as user `system:anonymous` in group
    /// `system:unauthenticated` (then subject to authorization) instead of answering 401.
    #[arg(long, value_name = "BOOL", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub anonymous_auth: bool,
    /// How requests are authorized: RBAC (the default once any credential is checked:
    /// client certificates over HTTPS, the default, --token-auth-file or --anonymous-auth) or
    /// AlwaysAllow (the default with --insecure-plain-http and no other flag).
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub authorization_mode: Option<AuthorizationMode>,
    /// YAML of rbac.authorization.k8s.io/v1 Role, ClusterRole, RoleBinding and
    /// ClusterRoleBinding objects (documents separated by ---, or a List) for
    /// --authorization-mode=RBAC. Checked for changes every 10 s; a change that does not
    /// parse keeps the last good rules and is logged.
    #[arg(long, value_name = "FILE")]
    pub authorization_rbac_file: Option<PathBuf>,
}

fn parse_mode(s: &str) -> Result<AuthorizationMode, String> {
    s.parse()
}

impl AuthArgs {
    /// The server settings of these flags.
    pub fn options(&self) -> AuthOptions {
        AuthOptions {
            token_auth_file: self.token_auth_file.clone(),
            anonymous_auth: self.anonymous_auth,
            authorization_mode: self.authorization_mode,
            authorization_rbac_file: self.authorization_rbac_file.clone(),
            ..AuthOptions::default()
        }
    }
}
