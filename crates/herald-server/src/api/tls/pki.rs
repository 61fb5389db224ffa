//! Herald's own certificates, so that `herald serve` serves HTTPS with no flags (as k3s
//! does): a CA, a serving certificate it signed, and an admin client certificate it signed.
//!
//! | file (under `<data>/pki`) | what | valid for |
//! |---|---|---|
//! | `ca.crt`, `ca.key` | the CA, CN [`CA_NAME`] | [`CA_VALIDITY_YEARS`] |
//! | `serving.crt`, `serving.key` | the server's certificate: the listen address, `localhost`, `127.0.0.1`, `::1` | [`LEAF_VALIDITY_YEARS`] |
//! | `admin.crt`, `admin.key` | a client certificate, CN [`ADMIN_USER`], O [`ADMIN_GROUP`] | [`LEAF_VALIDITY_YEARS`] |
//!
//! Keys are ECDSA P-256 (PKCS#8 PEM). The directory is created `0700` and every file `0600`
//! ([`crate::files`]). [`Pki::load_or_create`] reuses what is there: the serving certificate
//! is made again when it does not cover the listen address, no longer verifies against the
//! CA, or has less than [`RENEW_BEFORE`] left; the admin certificate likewise. The CA is
//! made only when neither of its files exists. With the memory store, [`Pki::generate`]
//! makes them in memory only.
//!
//! The CA is also the default client CA, so the admin certificate authenticates; `herald
//! kubeconfig` (and `herald serve --write-kubeconfig`) put the CA and the admin credential
//! ([`AdminCredentials`]) in a kubeconfig.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use super::provider;
use crate::files;

/// The directory under the data directory that holds the files.
pub const PKI_DIR: &str = "pki";
/// The CA certificate's file name.
pub const CA_CERT_FILE: &str = "ca.crt";
/// The CA key's file name.
pub const CA_KEY_FILE: &str = "ca.key";
/// The serving certificate's file name.
pub const SERVING_CERT_FILE: &str = "serving.crt";
/// The serving key's file name.
pub const SERVING_KEY_FILE: &str = "serving.key";
/// The admin client certificate's file name.
pub const ADMIN_CERT_FILE: &str = "admin.crt";
/// The admin client key's file name.
pub const ADMIN_KEY_FILE: &str = "admin.key";
/// The CA's common name.
pub const CA_NAME: &str = "herald-ca";
/// The admin certificate's common name: its user name.
pub const ADMIN_USER: &str = "herald-admin";
/// The admin certificate's organization: its group, the one that may do anything.
pub const ADMIN_GROUP: &str = "system:masters";
/// How long the CA is valid.
pub const CA_VALIDITY_YEARS: i16 = 10;
/// How long the serving and admin certificates are valid.
pub const LEAF_VALIDITY_YEARS: i16 = 1;
/// A certificate with less than this left is made again at start.
pub const RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Why the certificates could not be made, read or written.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// A file or the directory could not be read or written.
    #[error("{} {}", if *.writing { "cannot write" } else { "cannot read" }, path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Writing (else reading).
        writing: bool,
        /// Why.
        #[source]
        error: std::io::Error,
    },
    /// A file is there but unusable, or one of a pair is missing.
    #[error("{}: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong and what to do.
        reason: String,
    },
    /// Making a key or a certificate failed.
    #[error("cannot make a certificate")]
    Generate(#[source] rcgen::Error),
}

/// What a kubeconfig needs to reach the server as the admin: the CA (to trust the server)
/// and the admin client certificate and key, all PEM. `Debug` shows no key.
#[derive(Clone)]
pub struct AdminCredentials {
    /// The CA certificate.
    pub ca_cert: String,
    /// The admin client certificate.
    pub client_cert: String,
    /// The admin client key.
    pub client_key: String,
}

impl std::fmt::Debug for AdminCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminCredentials").finish_non_exhaustive()
    }
}

impl AdminCredentials {
    /// Reads them from `pki_dir` (`<data>/pki` of a server that has started once).
    pub fn read(pki_dir: &Path) -> Result<AdminCredentials, PkiError> {
        let read = |name: &str| {
            let path = pki_dir.join(name);
            std::fs::read_to_string(&path).map_err(|error| PkiError::Io {
                path,
                writing: false,
                error,
            })
        };
        Ok(AdminCredentials {
            ca_cert: read(CA_CERT_FILE)?,
            client_cert: read(ADMIN_CERT_FILE)?,
            client_key: read(ADMIN_KEY_FILE)?,
        })
    }
}

/// The CA, the serving certificate and the admin certificate, PEM. `Debug` shows no key.
#[derive(Clone)]
pub struct Pki {
    ca_cert: String,
    serving_cert: String,
    serving_key: String,
    admin: AdminCredentials,
    /// Where they are stored (`None`: memory).
    dir: Option<PathBuf>,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// The CA: its key, and what issuing needs of it.
struct Ca {
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    key: KeyPair,
}

impl Pki {
    /// Makes a new CA, serving certificate (for `listen` and the loopback names) and admin
    /// certificate, in memory only.
    pub fn generate(listen: IpAddr) -> Result<Pki, PkiError> {
        let ca = new_ca()?;
        let serving = new_serving(&ca, listen)?;
        let admin = new_admin(&ca)?;
        Ok(Pki::of(ca.cert_pem, serving, admin, None))
    }

    /// The set, from the CA certificate and the two (certificate, key) pairs.
    fn of(
        ca_cert: String,
        (serving_cert, serving_key): (String, String),
        (client_cert, client_key): (String, String),
        dir: Option<PathBuf>,
    ) -> Pki {
        Pki {
            ca_cert: ca_cert.clone(),
            serving_cert,
            serving_key,
            admin: AdminCredentials {
                ca_cert,
                client_cert,
                client_key,
            },
            dir,
        }
    }

    /// Reuses the files in `dir` and makes what is missing or no longer good (see the
    /// [module docs](self)), writing it owner-only. `dir` is created `0700` if missing.
    pub fn load_or_create(dir: &Path, listen: IpAddr) -> Result<Pki, PkiError> {
        files::create_dir(dir).map_err(|error| PkiError::Io {
            path: dir.to_path_buf(),
            writing: true,
            error,
        })?;
        files::warn_if_shared(dir);
        let (ca, new_ca) = match load_ca(dir)? {
            Some(ca) => (ca, false),
            None => {
                let ca = new_ca()?;
                write(dir, CA_KEY_FILE, &ca.key.serialize_pem())?;
                write(dir, CA_CERT_FILE, &ca.cert_pem)?;
                tracing::info!(dir = %dir.display(), "made a new CA for the serving and admin certificates");
                (ca, true)
            }
        };
        let roots = roots(&ca)?;
        let serving = (!new_ca)
            .then(|| read_pair(dir, SERVING_CERT_FILE, SERVING_KEY_FILE))
            .flatten()
            .filter(|(cert, _)| serving_is_good(&roots, cert, listen));
        let serving = match serving {
            Some(pair) => pair,
            None => {
                let (cert, key) = new_serving(&ca, listen)?;
                write(dir, SERVING_KEY_FILE, &key)?;
                write(dir, SERVING_CERT_FILE, &cert)?;
                tracing::info!(dir = %dir.display(), %listen, "made a new serving certificate");
                (cert, key)
            }
        };
        let admin = (!new_ca)
            .then(|| read_pair(dir, ADMIN_CERT_FILE, ADMIN_KEY_FILE))
            .flatten()
            .filter(|(cert, _)| admin_is_good(&roots, cert));
        let admin = match admin {
            Some(pair) => pair,
            None => {
                let (cert, key) = new_admin(&ca)?;
                write(dir, ADMIN_KEY_FILE, &key)?;
                write(dir, ADMIN_CERT_FILE, &cert)?;
                (cert, key)
            }
        };
        Ok(Pki::of(
            ca.cert_pem,
            serving,
            admin,
            Some(dir.to_path_buf()),
        ))
    }

    /// The directory the files are in (`None`: memory only).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The CA certificate, PEM.
    pub fn ca_cert(&self) -> &str {
        &self.ca_cert
    }

    /// The CA certificate, DER (the default client CA).
    pub fn ca_der(&self) -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_slice_iter(self.ca_cert.as_bytes())
            .filter_map(Result::ok)
            .collect()
    }

    /// The serving certificate and key, DER.
    pub fn serving(
        &self,
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), PkiError> {
        let chain = CertificateDer::pem_slice_iter(self.serving_cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.invalid(SERVING_CERT_FILE, format!("not PEM ({e})")))?;
        let key = PrivateKeyDer::from_pem_slice(self.serving_key.as_bytes())
            .map_err(|e| self.invalid(SERVING_KEY_FILE, format!("not a PEM key ({e})")))?;
        Ok((chain, key))
    }

    /// The admin credential (with the CA) for a kubeconfig.
    pub fn admin(&self) -> &AdminCredentials {
        &self.admin
    }

    fn invalid(&self, name: &str, reason: String) -> PkiError {
        PkiError::Invalid {
            path: self
                .dir
                .as_deref()
                .unwrap_or(Path::new("<memory>"))
                .join(name),
            reason,
        }
    }
}

/// The names the serving certificate covers: `listen` (unless it is the unspecified
/// address, which no client connects to), `localhost`, `127.0.0.1` and `::1`.
pub fn serving_names(listen: IpAddr) -> Vec<SanType> {
    let mut ips = vec![
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(Ipv6Addr::LOCALHOST),
    ];
    if !listen.is_unspecified() && !ips.contains(&listen) {
        ips.insert(0, listen);
    }
    let mut names: Vec<SanType> = ips.into_iter().map(SanType::IpAddress).collect();
    if let Ok(localhost) = "localhost".try_into() {
        names.push(SanType::DnsName(localhost));
    }
    names
}

fn generate(e: rcgen::Error) -> PkiError {
    PkiError::Generate(e)
}

/// The CA's parameters: the same each time, so a CA read back from its files issues
/// certificates that verify against its certificate.
fn ca_params() -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name = name(CA_NAME, None);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p
}

fn name(cn: &str, org: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    if let Some(o) = org {
        dn.push(DnType::OrganizationName, o);
    }
    dn
}

/// Valid from yesterday (clocks differ) for `years`, with a random serial number.
fn validity(p: &mut CertificateParams, years: i16) {
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let at = |d: jiff::civil::Date| {
        rcgen::date_time_ymd(d.year().into(), d.month() as u8, d.day() as u8)
    };
    let start = today.yesterday().unwrap_or(today);
    let end = today
        .checked_add(jiff::Span::new().years(years))
        .unwrap_or(today);
    p.not_before = at(start);
    p.not_after = at(end);
    let mut serial: [u8; 16] = rand::random();
    serial[0] &= 0x7f;
    p.serial_number = Some(SerialNumber::from_slice(&serial));
}

fn new_ca() -> Result<Ca, PkiError> {
    let key = KeyPair::generate().map_err(generate)?;
    let mut params = ca_params();
    validity(&mut params, CA_VALIDITY_YEARS);
    let cert = params.self_signed(&key).map_err(generate)?;
    Ok(Ca {
        cert_pem: cert.pem(),
        cert_der: cert.der().clone(),
        key,
    })
}

fn issue(ca: &Ca, mut params: CertificateParams) -> Result<(String, String), PkiError> {
    validity(&mut params, LEAF_VALIDITY_YEARS);
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().map_err(generate)?;
    let issuer = Issuer::new(ca_params(), &ca.key);
    let cert = params.signed_by(&key, &issuer).map_err(generate)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn new_serving(ca: &Ca, listen: IpAddr) -> Result<(String, String), PkiError> {
    let mut p = CertificateParams::default();
    p.distinguished_name = name("herald", None);
    p.subject_alt_names = serving_names(listen);
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    issue(ca, p)
}

fn new_admin(ca: &Ca) -> Result<(String, String), PkiError> {
    let mut p = CertificateParams::default();
    p.distinguished_name = name(ADMIN_USER, Some(ADMIN_GROUP));
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    issue(ca, p)
}

fn write(dir: &Path, name: &str, text: &str) -> Result<(), PkiError> {
    let path = dir.join(name);
    files::write_private(&path, text.as_bytes()).map_err(|error| PkiError::Io {
        path,
        writing: true,
        error,
    })
}

/// The CA of `dir`: `None` when neither file exists; an error when one is missing or either
/// is unusable (a new CA would invalidate every kubeconfig handed out, so that is left to
/// whoever deletes the files).
fn load_ca(dir: &Path) -> Result<Option<Ca>, PkiError> {
    let cert_path = dir.join(CA_CERT_FILE);
    let key_path = dir.join(CA_KEY_FILE);
    let (cert_pem, key_pem) = match (read_opt(&cert_path)?, read_opt(&key_path)?) {
        (None, None) => return Ok(None),
        (Some(c), Some(k)) => (c, k),
        (c, _) => {
            let (missing, other) = if c.is_none() {
                (&cert_path, &key_path)
            } else {
                (&key_path, &cert_path)
            };
            return Err(PkiError::Invalid {
                path: missing.clone(),
                reason: format!(
                    "missing while {} exists; delete the whole {} directory to make a new CA (clients then need a new kubeconfig)",
                    other.display(),
                    dir.display()
                ),
            });
        }
    };
    let cert_der =
        CertificateDer::from_pem_slice(cert_pem.as_bytes()).map_err(|e| PkiError::Invalid {
            path: cert_path.clone(),
            reason: format!("not a PEM certificate ({e})"),
        })?;
    let key = KeyPair::from_pem(&key_pem).map_err(|e| PkiError::Invalid {
        path: key_path.clone(),
        reason: format!("not a usable PEM private key ({e})"),
    })?;
    let ca = Ca {
        cert_pem,
        cert_der,
        key,
    };
    // The key must be the certificate's: issue a throwaway leaf and verify it.
    let (probe, _) = new_admin(&ca)?;
    if !admin_is_good_at(&roots(&ca)?, &probe, UnixTime::now()) {
        return Err(PkiError::Invalid {
            path: key_path,
            reason: format!(
                "not the key of {}; delete the whole {} directory to make a new CA (clients then need a new kubeconfig)",
                cert_path.display(),
                dir.display()
            ),
        });
    }
    Ok(Some(ca))
}

fn read_opt(path: &Path) -> Result<Option<String>, PkiError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(PkiError::Io {
            path: path.to_path_buf(),
            writing: false,
            error,
        }),
    }
}

/// A certificate and key pair of `dir`, if both files are readable (else it is made again).
fn read_pair(dir: &Path, cert: &str, key: &str) -> Option<(String, String)> {
    let cert = std::fs::read_to_string(dir.join(cert)).ok()?;
    let key = std::fs::read_to_string(dir.join(key)).ok()?;
    // A key that does not parse, or is not the certificate's, means a new pair.
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<_, _>>()
        .ok()?;
    let der = PrivateKeyDer::from_pem_slice(key.as_bytes()).ok()?;
    rustls::sign::CertifiedKey::from_der(chain, der, &provider()).ok()?;
    Some((cert, key))
}

fn roots(ca: &Ca) -> Result<Arc<RootCertStore>, PkiError> {
    let mut roots = RootCertStore::empty();
    roots
        .add(ca.cert_der.clone())
        .map_err(|e| PkiError::Invalid {
            path: PathBuf::from(CA_CERT_FILE),
            reason: format!("not a usable CA certificate ({e})"),
        })?;
    Ok(Arc::new(roots))
}

/// The time a certificate must still be valid at to be kept.
fn renewal_horizon() -> UnixTime {
    let now = UnixTime::now().as_secs();
    UnixTime::since_unix_epoch(Duration::from_secs(now) + RENEW_BEFORE)
}

fn leaf(pem: &str) -> Option<CertificateDer<'static>> {
    CertificateDer::from_pem_slice(pem.as_bytes()).ok()
}

/// True when `cert` verifies against the CA as a server certificate for every name it must
/// cover, now and [`RENEW_BEFORE`] from now.
fn serving_is_good(roots: &Arc<RootCertStore>, cert: &str, listen: IpAddr) -> bool {
    let Some(leaf) = leaf(cert) else {
        return false;
    };
    let Ok(verifier) =
        WebPkiServerVerifier::builder_with_provider(roots.clone(), provider()).build()
    else {
        return false;
    };
    let mut names = vec![ServerName::IpAddress(
        IpAddr::V4(Ipv4Addr::LOCALHOST).into(),
    )];
    if !listen.is_unspecified() {
        names.push(ServerName::IpAddress(listen.into()));
    }
    if let Ok(n) = ServerName::try_from("localhost") {
        names.push(n);
    }
    names.iter().all(|name| {
        [UnixTime::now(), renewal_horizon()].iter().all(|at| {
            verifier
                .verify_server_cert(&leaf, &[], name, &[], *at)
                .is_ok()
        })
    })
}

fn admin_is_good(roots: &Arc<RootCertStore>, cert: &str) -> bool {
    admin_is_good_at(roots, cert, UnixTime::now())
        && admin_is_good_at(roots, cert, renewal_horizon())
}

fn admin_is_good_at(roots: &Arc<RootCertStore>, cert: &str, at: UnixTime) -> bool {
    let Some(leaf) = leaf(cert) else {
        return false;
    };
    WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
        .build()
        .is_ok_and(|v| v.verify_client_cert(&leaf, &[], at).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_serving_certificate_covers_the_loopback_names_and_the_listen_address() {
        let listen: IpAddr = "10.1.2.3".parse().unwrap();
        let pki = Pki::generate(listen).unwrap();
        let ca = Ca {
            cert_pem: pki.ca_cert.clone(),
            cert_der: leaf(&pki.ca_cert).unwrap(),
            key: KeyPair::generate().unwrap(),
        };
        let roots = roots(&ca).unwrap();
        assert!(serving_is_good(&roots, &pki.serving_cert, listen));
        assert!(serving_is_good(
            &roots,
            &pki.serving_cert,
            "::1".parse().unwrap()
        ));
        assert!(!serving_is_good(
            &roots,
            &pki.serving_cert,
            "10.9.9.9".parse().unwrap()
        ));
        assert!(admin_is_good(&roots, &pki.admin.client_cert));
        // The serving certificate is no client certificate, and the reverse.
        assert!(!admin_is_good(&roots, &pki.serving_cert));
        assert!(!serving_is_good(&roots, &pki.admin.client_cert, listen));
    }

    #[test]
    fn files_are_reused_and_the_serving_certificate_follows_the_listen_address() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pki");
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let first = Pki::load_or_create(&dir, lo).unwrap();
        let again = Pki::load_or_create(&dir, lo).unwrap();
        assert_eq!(first.ca_cert, again.ca_cert);
        assert_eq!(first.serving_cert, again.serving_cert);
        assert_eq!(first.admin.client_cert, again.admin.client_cert);
        let other = Pki::load_or_create(&dir, "10.0.0.7".parse().unwrap()).unwrap();
        assert_eq!(first.ca_cert, other.ca_cert, "the CA stays");
        assert_ne!(
            first.serving_cert, other.serving_cert,
            "a new serving certificate"
        );
        assert_eq!(first.admin.client_cert, other.admin.client_cert);
        let read = AdminCredentials::read(&dir).unwrap();
        assert_eq!(read.client_key, other.admin.client_key);
        assert_eq!(read.ca_cert, other.ca_cert);
    }

    #[cfg(unix)]
    #[test]
    fn keys_are_owner_only() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data").join("pki");
        Pki::load_or_create(&dir, "127.0.0.1".parse().unwrap()).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        for f in [
            CA_KEY_FILE,
            CA_CERT_FILE,
            SERVING_KEY_FILE,
            SERVING_CERT_FILE,
            ADMIN_KEY_FILE,
            ADMIN_CERT_FILE,
        ] {
            assert_eq!(mode(&dir.join(f)), 0o600, "{f}");
        }
    }

    #[test]
    fn a_ca_missing_half_or_with_a_foreign_key_is_an_error_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pki");
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        Pki::load_or_create(&dir, lo).unwrap();
        let other = tempfile::tempdir().unwrap();
        Pki::load_or_create(other.path(), lo).unwrap();
        std::fs::copy(other.path().join(CA_KEY_FILE), dir.join(CA_KEY_FILE)).unwrap();
        let e = Pki::load_or_create(&dir, lo).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "{}: not the key of",
                dir.join(CA_KEY_FILE).display()
            )),
            "{e}"
        );
        std::fs::remove_file(dir.join(CA_KEY_FILE)).unwrap();
        let e = Pki::load_or_create(&dir, lo).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "{}: missing while",
                dir.join(CA_KEY_FILE).display()
            )),
            "{e}"
        );
        std::fs::write(dir.join(CA_KEY_FILE), "garbage").unwrap();
        let e = Pki::load_or_create(&dir, lo).unwrap_err().to_string();
        assert!(e.contains("not a usable PEM private key"), "{e}");
        assert!(!e.contains("garbage"), "{e}");
    }
}
