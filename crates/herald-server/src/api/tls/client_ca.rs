//! The client CA (`--client-ca-file`), swapped without a restart when its file changes, as
//! kube-apiserver reloads its client CA bundle.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use rustls::client::danger::HandshakeSignatureValid;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};

use super::reload::{Stamp, stamp};
use super::{Refresh, TlsError, provider, read_certificates};

/// What the file is called in messages.
const WHAT: &str = "client CA file";

/// Where the CAs come from.
enum Source {
    /// A PEM file, and how it looked when last read.
    File { path: PathBuf, seen: Mutex<Stamp> },
    /// Memory (the generated CA of the memory store): never changes.
    Fixed,
}

/// The CAs client certificates are verified against: a rustls [`ClientCertVerifier`] whose
/// roots can change while the server runs.
///
/// Made [`from_file`](Self::from_file), [`refresh`](Self::refresh) (called before every
/// handshake) compares the file's modification time, length and inode with what it last read
/// and loads it again only when they changed. A connection verifies its client certificate
/// against the CAs current at its handshake; connections already open keep their identity. A
/// file that changed but cannot be used (unreadable, no certificate in it) keeps the last good
/// CAs and logs why, once per change.
///
/// Client certificates stay optional (a connection without one is served, authentication
/// decides later); a chain that does not verify fails the handshake. The server sends no
/// list of acceptable CA names in its certificate request, so a client presents its
/// certificate whichever CA issued it, and the verification decides.
pub struct ReloadingClientCa {
    source: Source,
    current: RwLock<Arc<dyn ClientCertVerifier>>,
}

impl std::fmt::Debug for ReloadingClientCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("ReloadingClientCa");
        if let Source::File { path, .. } = &self.source {
            d.field("file", path);
        }
        d.finish_non_exhaustive()
    }
}

impl ReloadingClientCa {
    /// The CAs of the PEM file `path` (one certificate at least); reloaded when it changes.
    pub fn from_file(path: &Path) -> Result<Self, TlsError> {
        let seen = stamp(path);
        let verifier = load(path)?;
        Ok(ReloadingClientCa {
            source: Source::File {
                path: path.to_path_buf(),
                seen: Mutex::new(seen),
            },
            current: RwLock::new(verifier),
        })
    }

    /// Fixed CAs held in memory, never reloaded.
    pub fn fixed(cas: Vec<CertificateDer<'static>>) -> Result<Self, TlsError> {
        Ok(ReloadingClientCa {
            source: Source::Fixed,
            current: RwLock::new(verifier(cas)?),
        })
    }

    fn current(&self) -> Arc<dyn ClientCertVerifier> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Loads the file again if it changed since it was last read (see the [type
    /// docs](Self)).
    pub fn refresh(&self) -> Refresh {
        let Source::File { path, seen } = &self.source else {
            return Refresh::Unchanged;
        };
        // One handshake looks at a time; the others verify against what is there.
        let Ok(mut seen) = seen.try_lock() else {
            return Refresh::Unchanged;
        };
        let now = stamp(path);
        if now == *seen {
            return Refresh::Unchanged;
        }
        *seen = now;
        match load(path) {
            Ok(verifier) => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = verifier;
                tracing::info!(file = %path.display(), "reloaded the client CA file");
                Refresh::Reloaded
            }
            Err(e) => {
                tracing::warn!(
                    error = &e as &dyn std::error::Error,
                    "cannot reload the client CA file; still verifying against the last good CAs"
                );
                Refresh::KeptLastGood
            }
        }
    }
}

fn load(path: &Path) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let cas = read_certificates(path, WHAT)?;
    verifier(cas).map_err(|e| match e {
        TlsError::Config(error) => TlsError::Invalid {
            what: WHAT,
            path: path.to_path_buf(),
            reason: format!("its certificates cannot be used as CAs ({error})"),
        },
        other => other,
    })
}

fn verifier(cas: Vec<CertificateDer<'static>>) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let mut roots = RootCertStore::empty();
    for ca in cas {
        roots.add(ca).map_err(TlsError::Config)?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::Config(rustls::Error::General(e.to_string())))
}

impl ClientCertVerifier for ReloadingClientCa {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // The hints would borrow from CAs that may be swapped; none is allowed (RFC 8446
        // §4.2.4: the list is optional), and clients then offer what they have.
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current().supported_verify_schemes()
    }
}
