//! Client certificates → users, as kube-apiserver's x509 authenticator does: the leaf's
//! subject CommonName is the user name, its Organization values are the groups.
//!
//! The TLS layer verified the chain against `--client-ca-file` and handed it over as
//! [`VerifiedClientCertificates`]; this module only reads the leaf's subject.

use x509_parser::prelude::{FromDer, X509Certificate};

use super::user::UserInfo;
use crate::api::peer::VerifiedClientCertificates;

/// The user a verified client certificate names: CN = user name, O = groups (in the
/// certificate's order), plus `system:authenticated`; the uid is empty. `None` when the leaf
/// has no (UTF-8) CommonName or cannot be parsed: the certificate then identifies nobody and
/// the request is treated as one without credentials, as kube-apiserver does.
pub fn user_of(certificates: &VerifiedClientCertificates) -> Option<UserInfo> {
    let leaf = certificates.leaf()?;
    let (_, cert) = X509Certificate::from_der(leaf.as_ref()).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .filter(|cn| !cn.is_empty())?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(str::to_string)
        .collect();
    Some(UserInfo::authenticated(name, "", groups))
}
