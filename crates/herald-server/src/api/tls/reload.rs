//! The serving certificate, swapped without a restart when its files change.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::{TlsError, provider, read_certificates, read_private_key};

/// What [`ReloadingCertificate::refresh`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// The files are as they were last looked at (or the certificate has no files, or
    /// another handshake is looking at them right now): nothing was read.
    Unchanged,
    /// The files changed and the new pair is served from now on.
    Reloaded,
    /// The files changed but the new pair is unusable (unreadable, not PEM, a key that does
    /// not match the certificate…): the last good pair is still served, and the reason was
    /// logged as a warning. The pair is read again at its next change.
    KeptLastGood,
}

/// How a file looked: enough to see that it was written or replaced (a rename gives a new
/// inode; a write in place changes the modification time or the length). `None`: missing.
pub(super) type Stamp = Option<(SystemTime, u64, u64)>;

pub(super) fn stamp(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some((meta.modified().ok()?, meta.len(), inode))
}

/// Where the pair comes from.
enum Source {
    /// Files, and how they looked when last read.
    Files {
        cert_file: PathBuf,
        key_file: PathBuf,
        seen: Mutex<(Stamp, Stamp)>,
    },
    /// Memory (the memory store's generated certificate): never changes.
    Fixed,
}

/// The serving certificate and its key, a rustls [`ResolvesServerCert`] that every handshake
/// asks.
///
/// Made [`from_files`](Self::from_files), it is reloaded without a restart: before each
/// handshake, [`refresh`](Self::refresh) compares the two files' modification time, length
/// and inode with what it last read (two `stat` calls, no reading) and loads the pair again
/// only when one changed. So a new handshake serves the files as they are now, connections
/// already open keep the certificate they started with, and nothing polls in the background.
/// A reload that fails keeps the last good pair and logs why (the file and the reason, never
/// key material), once per change of the files: when a tool writes the certificate and then
/// the key, the first look may see a mismatched pair and the next one (after the key is
/// written) loads both.
pub struct ReloadingCertificate {
    source: Source,
    current: RwLock<Arc<CertifiedKey>>,
}

impl std::fmt::Debug for ReloadingCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("ReloadingCertificate");
        if let Source::Files {
            cert_file,
            key_file,
            ..
        } = &self.source
        {
            d.field("cert_file", cert_file).field("key_file", key_file);
        }
        d.finish_non_exhaustive()
    }
}

impl ReloadingCertificate {
    /// Loads the PEM pair: `cert_file` (the certificate, then any intermediates) and
    /// `key_file` (its key). An error names the file and says what is wrong.
    pub fn from_files(cert_file: &Path, key_file: &Path) -> Result<Self, TlsError> {
        let seen = (stamp(cert_file), stamp(key_file));
        let key = load(cert_file, key_file)?;
        Ok(ReloadingCertificate {
            source: Source::Files {
                cert_file: cert_file.to_path_buf(),
                key_file: key_file.to_path_buf(),
                seen: Mutex::new(seen),
            },
            current: RwLock::new(Arc::new(key)),
        })
    }

    /// A pair held in memory, never reloaded.
    pub fn fixed(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<Self, TlsError> {
        let key = CertifiedKey::from_der(chain, key, &provider()).map_err(TlsError::Config)?;
        Ok(ReloadingCertificate {
            source: Source::Fixed,
            current: RwLock::new(Arc::new(key)),
        })
    }

    /// The pair served now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Loads the files again if they changed since they were last read (see the
    /// [type docs](Self)).
    pub fn refresh(&self) -> Refresh {
        let Source::Files {
            cert_file,
            key_file,
            seen,
        } = &self.source
        else {
            return Refresh::Unchanged;
        };
        // One handshake looks at a time; the others serve what is there.
        let Ok(mut seen) = seen.try_lock() else {
            return Refresh::Unchanged;
        };
        let now = (stamp(cert_file), stamp(key_file));
        if now == *seen {
            return Refresh::Unchanged;
        }
        *seen = now;
        match load(cert_file, key_file) {
            Ok(key) => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
                tracing::info!(
                    cert_file = %cert_file.display(),
                    "reloaded the serving certificate"
                );
                Refresh::Reloaded
            }
            Err(e) => {
                tracing::warn!(
                    error = &e as &dyn std::error::Error,
                    "cannot reload the serving certificate; still serving the last good one"
                );
                Refresh::KeptLastGood
            }
        }
    }
}

impl ResolvesServerCert for ReloadingCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// Reads and checks the pair: both PEM, the key matching the leaf certificate.
fn load(cert_file: &Path, key_file: &Path) -> Result<CertifiedKey, TlsError> {
    let chain = read_certificates(cert_file, "TLS certificate file")?;
    let key = read_private_key(key_file)?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => TlsError::Invalid {
            what: "TLS private key file",
            path: key_file.to_path_buf(),
            reason: format!(
                "it is not the key of the certificate in {}",
                cert_file.display()
            ),
        },
        rustls::Error::InvalidCertificate(e) => TlsError::Invalid {
            what: "TLS certificate file",
            path: cert_file.to_path_buf(),
            reason: format!("its first certificate is not a valid X.509 certificate ({e:?})"),
        },
        other => TlsError::Invalid {
            what: "TLS private key file",
            path: key_file.to_path_buf(),
            reason: format!("the key cannot be used ({other})"),
        },
    })
}
