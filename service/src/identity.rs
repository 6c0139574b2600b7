//! Roles, their mTLS identities, and who may call whom.
//!
//! Every role holds one leaf certificate, signed by the deployment's CA, whose only
//! subject alternative name is `<role>.sasha.internal`. The same certificate is the
//! role's server identity and its client identity. A gRPC server accepts a client
//! only when its chain verifies against the CA *and* its certificate is valid for
//! one of the roles allowed to call that server ([`Role::allowed_callers`]); the
//! check happens inside the TLS handshake, so a refused caller never reaches a
//! handler.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

/// One of the four processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    EdgeSandbox,
    StudioCore,
    DataWorker,
    McpGateway,
}

impl Role {
    /// Every role, in start-up order for `sasha up` (dependencies first).
    pub const ALL: [Role; 4] = [
        Role::DataWorker,
        Role::StudioCore,
        Role::McpGateway,
        Role::EdgeSandbox,
    ];

    /// The role's name: the `sasha serve` argument, the OTLP `service.name`, the
    /// certificate's role label.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::EdgeSandbox => "edge-sandbox",
            Role::StudioCore => "studio-core",
            Role::DataWorker => "data-worker",
            Role::McpGateway => "mcp-gateway",
        }
    }

    /// The DNS name in the role's certificate, and the TLS server name a client
    /// expects when it calls the role.
    pub fn dns_name(self) -> String {
        format!("{}.sasha.internal", self.as_str())
    }

    /// The roles whose certificates a gRPC server of this role accepts.
    /// data-worker is called by core and the gateway; core by the gateway,
    /// and by data-workers renewing their leases (`PlacementService.Renew`,
    /// the only call core serves them); the gateway and the edge serve no
    /// gRPC.
    pub fn allowed_callers(self) -> &'static [Role] {
        match self {
            Role::DataWorker => &[Role::StudioCore, Role::McpGateway],
            Role::StudioCore => &[Role::McpGateway, Role::DataWorker],
            Role::McpGateway | Role::EdgeSandbox => &[],
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;

    fn from_str(name: &str) -> Result<Role, String> {
        Role::ALL
            .into_iter()
            .find(|role| role.as_str() == name)
            .ok_or_else(|| {
                format!("unknown role {name:?}: expected edge-sandbox, studio-core, data-worker or mcp-gateway")
            })
    }
}

/// Why an identity could not be loaded or minted.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} holds no usable {what}")]
    Pem { path: PathBuf, what: &'static str },
    #[error("invalid TLS material: {0}")]
    Tls(#[from] rustls::Error),
    #[error("cannot build the client verifier: {0}")]
    Verifier(String),
    #[error("cannot mint certificates: {0}")]
    Mint(#[from] rcgen::Error),
}

/// Where a role finds its TLS material (production mounts these files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM file with the CA certificate every role trusts.
    pub ca: PathBuf,
    /// PEM file with this role's certificate (chain).
    pub cert: PathBuf,
    /// PEM file with this role's private key.
    pub key: PathBuf,
}

/// A role's loaded mTLS identity.
#[derive(Clone)]
pub struct Identity {
    roots: Arc<RootCertStore>,
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity").finish_non_exhaustive()
    }
}

fn read_text(path: &Path) -> Result<String, IdentityError> {
    std::fs::read_to_string(path).map_err(|source| IdentityError::Read {
        path: path.to_owned(),
        source,
    })
}

impl Identity {
    /// Loads and checks the CA, certificate and key.
    pub fn load(files: &TlsFiles) -> Result<Identity, IdentityError> {
        let ca_pem = read_text(&files.ca)?;
        let cert_pem = read_text(&files.cert)?;
        let key_pem = read_text(&files.key)?;
        let pem_error = |path: &Path, what| IdentityError::Pem {
            path: path.to_owned(),
            what,
        };
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            let cert = cert.map_err(|_| pem_error(&files.ca, "CA certificate"))?;
            roots.add(cert)?;
        }
        if roots.is_empty() {
            return Err(pem_error(&files.ca, "CA certificate"));
        }
        let identity = Identity {
            roots: Arc::new(roots),
            ca_pem,
            cert_pem,
            key_pem,
        };
        if identity.cert_chain().is_empty() {
            return Err(pem_error(&files.cert, "certificate"));
        }
        identity
            .private_key()
            .map_err(|_| pem_error(&files.key, "private key"))?;
        Ok(identity)
    }

    fn cert_chain(&self) -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .filter_map(Result::ok)
            .collect()
    }

    fn private_key(&self) -> Result<PrivateKeyDer<'static>, rustls::pki_types::pem::Error> {
        PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
    }

    /// The TLS configuration of a gRPC server run by `server`: it demands a client
    /// certificate from the CA that belongs to one of `server`'s allowed callers.
    pub fn server_config(&self, server: Role) -> Result<Arc<rustls::ServerConfig>, IdentityError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let inner =
            WebPkiClientVerifier::builder_with_provider(self.roots.clone(), provider.clone())
                .build()
                .map_err(|error| IdentityError::Verifier(error.to_string()))?;
        let verifier = Arc::new(RoleVerifier {
            inner,
            allowed: server.allowed_callers(),
        });
        let key = self
            .private_key()
            .map_err(|_| IdentityError::Verifier("private key unreadable".into()))?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.cert_chain(), key)?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }

    /// The TLS configuration of a gRPC client calling `server`: it presents this
    /// identity and accepts only a server certificate for `server`'s role.
    pub fn client_tls(&self, server: Role) -> tonic::transport::ClientTlsConfig {
        tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&self.ca_pem))
            .identity(tonic::transport::Identity::from_pem(
                &self.cert_pem,
                &self.key_pem,
            ))
            .domain_name(server.dns_name())
    }
}

/// Verifies a client's chain with webpki, then requires the end-entity certificate
/// to be valid for one of the allowed roles' DNS names.
/// The role whose certificate the caller of `request` presented in the mTLS
/// handshake (the verifier already checked it chains to the CA and is one of
/// the server's allowed callers); `None` without one.
pub fn peer_role<T>(request: &tonic::Request<T>) -> Option<Role> {
    let certificates = request.peer_certs()?;
    let leaf = certificates.first()?;
    let certificate = webpki::EndEntityCert::try_from(leaf).ok()?;
    Role::ALL.into_iter().find(|role| {
        ServerName::try_from(role.dns_name())
            .is_ok_and(|name| certificate.verify_is_valid_for_subject_name(&name).is_ok())
    })
}

#[derive(Debug)]
struct RoleVerifier {
    inner: Arc<dyn ClientCertVerifier>,
    allowed: &'static [Role],
}

impl ClientCertVerifier for RoleVerifier {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.inner
            .verify_client_cert(end_entity, intermediates, now)?;
        let certificate = webpki::EndEntityCert::try_from(end_entity).map_err(|_| {
            rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding)
        })?;
        let allowed = self.allowed.iter().any(|role| {
            ServerName::try_from(role.dns_name())
                .is_ok_and(|name| certificate.verify_is_valid_for_subject_name(&name).is_ok())
        });
        if !allowed {
            tracing::warn!(
                allowed = ?self.allowed.iter().map(|role| role.as_str()).collect::<Vec<_>>(),
                "refused a client certificate of a role that may not call this service"
            );
            return Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ));
        }
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A development PKI in one folder: `ca.pem`, and `<role>.pem` / `<role>-key.pem`
/// for every role. The CA's private key is never written: when anything is
/// missing the whole set is minted again, so no file outlives its CA.
#[derive(Debug, Clone)]
pub struct DevPki {
    dir: PathBuf,
}

impl DevPki {
    /// The files a role uses from this folder.
    pub fn files(&self, role: Role) -> TlsFiles {
        TlsFiles {
            ca: self.dir.join("ca.pem"),
            cert: self.dir.join(format!("{role}.pem")),
            key: self.dir.join(format!("{role}-key.pem")),
        }
    }

    /// Reuses the set in `dir` when it is complete, otherwise mints a new CA and a
    /// leaf per role into it. Returns the PKI and whether it was minted now.
    pub fn ensure(dir: &Path) -> Result<(DevPki, bool), IdentityError> {
        let pki = DevPki {
            dir: dir.to_owned(),
        };
        let complete = Role::ALL.into_iter().all(|role| {
            let files = pki.files(role);
            files.ca.is_file() && files.cert.is_file() && files.key.is_file()
        });
        if complete {
            return Ok((pki, false));
        }
        std::fs::create_dir_all(dir).map_err(|source| IdentityError::Write {
            path: dir.to_owned(),
            source,
        })?;
        let ca = mint_ca("Sasha development CA")?;
        write_file(&dir.join("ca.pem"), &ca.cert_pem, false)?;
        for role in Role::ALL {
            let leaf = ca.mint_leaf(role)?;
            let files = pki.files(role);
            write_file(&files.cert, &leaf.cert_pem, false)?;
            write_file(&files.key, &leaf.key_pem, true)?;
        }
        Ok((pki, true))
    }
}

/// The internal PKI of a deployment, as `sasha certs` writes it: `ca.pem`, and
/// `<role>/cert.pem` and `<role>/key.pem` for each role that speaks mTLS
/// ([`DeploymentPki::ROLES`]; edge-sandbox holds no credentials). Like
/// [`DevPki`], the CA's private key is never written, so nothing can mint
/// another identity from these files; rotating means minting a whole new set.
#[derive(Debug, Clone)]
pub struct DeploymentPki {
    dir: PathBuf,
}

impl DeploymentPki {
    /// The roles that hold a certificate: every gRPC client or server.
    pub const ROLES: [Role; 3] = [Role::DataWorker, Role::StudioCore, Role::McpGateway];

    /// The set in `dir` (which may not exist yet).
    pub fn at(dir: &Path) -> DeploymentPki {
        DeploymentPki {
            dir: dir.to_owned(),
        }
    }

    /// The files a role uses from this folder.
    pub fn files(&self, role: Role) -> TlsFiles {
        let role_dir = self.dir.join(role.as_str());
        TlsFiles {
            ca: self.dir.join("ca.pem"),
            cert: role_dir.join("cert.pem"),
            key: role_dir.join("key.pem"),
        }
    }

    /// Every file of the set, the CA first.
    pub fn paths(&self) -> Vec<PathBuf> {
        let mut paths = vec![self.dir.join("ca.pem")];
        for role in Self::ROLES {
            let files = self.files(role);
            paths.push(files.cert);
            paths.push(files.key);
        }
        paths
    }

    /// Mints a new CA and one leaf per role into the folder, replacing any
    /// file already there. Each file is written to a temporary name and
    /// renamed, so a reader never sees half a file; keys are created 0600,
    /// certificates 0644, folders 0755.
    pub fn mint(&self) -> Result<(), IdentityError> {
        let ca = mint_ca("Sasha internal CA")?;
        let mut files = vec![(self.dir.join("ca.pem"), ca.cert_pem.clone(), false)];
        for role in Self::ROLES {
            let leaf = ca.mint_leaf(role)?;
            let paths = self.files(role);
            files.push((paths.cert, leaf.cert_pem, false));
            files.push((paths.key, leaf.key_pem, true));
        }
        for (path, contents, secret) in files {
            if let Some(parent) = path.parent() {
                create_dir(parent)?;
            }
            replace_file(&path, &contents, secret)?;
        }
        Ok(())
    }
}

fn create_dir(dir: &Path) -> Result<(), IdentityError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(|source| IdentityError::Write {
            path: dir.to_owned(),
            source,
        })
}

/// Writes `contents` next to `path` under a temporary name with a fresh mode,
/// syncs it and renames it over `path`.
fn replace_file(path: &Path, contents: &str, secret: bool) -> Result<(), IdentityError> {
    let file_name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(".{file_name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    let written = write_file(&temporary, contents, secret).and_then(|()| {
        std::fs::File::open(&temporary)
            .and_then(|file| file.sync_all())
            .and_then(|()| std::fs::rename(&temporary, path))
            .map_err(|source| IdentityError::Write {
                path: path.to_owned(),
                source,
            })
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// A CA held in memory, able to sign role certificates.
pub struct CertificateAuthority {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    /// The CA certificate, PEM.
    pub cert_pem: String,
}

impl fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateAuthority")
            .finish_non_exhaustive()
    }
}

/// A minted leaf certificate and its key, PEM.
#[derive(Debug, Clone)]
pub struct MintedLeaf {
    pub cert_pem: String,
    pub key_pem: String,
}

/// Mints a new self-signed CA.
pub fn mint_ca(common_name: &str) -> Result<CertificateAuthority, IdentityError> {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, common_name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let key = rcgen::KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(CertificateAuthority {
        cert_pem: cert.pem(),
        issuer: rcgen::Issuer::new(params, key),
    })
}

impl CertificateAuthority {
    /// Mints the certificate of `role`: SAN `<role>.sasha.internal`, usable as
    /// both TLS server and TLS client.
    pub fn mint_leaf(&self, role: Role) -> Result<MintedLeaf, IdentityError> {
        let mut params = rcgen::CertificateParams::new(vec![role.dns_name()])?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, role.as_str());
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
        let key = rcgen::KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(MintedLeaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

fn write_file(path: &Path, contents: &str, secret: bool) -> Result<(), IdentityError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let error = |source| IdentityError::Write {
        path: path.to_owned(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if secret { 0o600 } else { 0o644 });
    let mut file = options.open(path).map_err(error)?;
    file.write_all(contents.as_bytes()).map_err(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_parse_and_name_their_certificates() {
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>().unwrap(), role);
            assert_eq!(role.dns_name(), format!("{role}.sasha.internal"));
        }
        assert!("admin".parse::<Role>().is_err());
        assert_eq!(
            Role::DataWorker.allowed_callers(),
            &[Role::StudioCore, Role::McpGateway]
        );
        assert_eq!(
            Role::StudioCore.allowed_callers(),
            &[Role::McpGateway, Role::DataWorker]
        );
    }

    #[test]
    fn dev_pki_is_minted_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let (pki, minted) = DevPki::ensure(dir.path()).unwrap();
        assert!(minted);
        let before = std::fs::read_to_string(pki.files(Role::StudioCore).cert).unwrap();
        let (pki, minted) = DevPki::ensure(dir.path()).unwrap();
        assert!(!minted);
        let after = std::fs::read_to_string(pki.files(Role::StudioCore).cert).unwrap();
        assert_eq!(before, after);
        for role in Role::ALL {
            let identity = Identity::load(&pki.files(role)).unwrap();
            assert!(identity.server_config(role).is_ok());
        }
        let key_mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(pki.files(Role::DataWorker).key)
                .unwrap()
                .permissions(),
        );
        assert_eq!(key_mode & 0o077, 0, "private keys are not world-readable");
    }

    #[test]
    fn deployment_pki_has_one_folder_per_role_and_replaces_files_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let pki = DeploymentPki::at(&dir.path().join("certs"));
        pki.mint().unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        for role in DeploymentPki::ROLES {
            let files = pki.files(role);
            assert!(files.cert.ends_with(format!("{role}/cert.pem")));
            assert_eq!(mode(&files.key), 0o600, "{role} key");
            assert_eq!(mode(&files.cert), 0o644, "{role} cert");
            let identity = Identity::load(&files).unwrap();
            assert!(identity.server_config(role).is_ok());
        }
        assert_eq!(pki.paths().len(), 7);
        let before = std::fs::read_to_string(pki.files(Role::StudioCore).key).unwrap();
        std::fs::set_permissions(
            pki.files(Role::StudioCore).key,
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        pki.mint().unwrap();
        let after = std::fs::read_to_string(pki.files(Role::StudioCore).key).unwrap();
        assert_ne!(before, after, "minted again");
        assert_eq!(mode(&pki.files(Role::StudioCore).key), 0o600);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("certs/studio-core"))
            .unwrap()
            .flatten()
            .map(|entry| entry.file_name())
            .collect();
        assert_eq!(leftovers.len(), 2, "no temporary files: {leftovers:?}");
    }

    #[test]
    fn loading_garbage_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (pki, _) = DevPki::ensure(dir.path()).unwrap();
        let mut files = pki.files(Role::McpGateway);
        std::fs::write(dir.path().join("junk.pem"), "not a pem").unwrap();
        files.key = dir.path().join("junk.pem");
        let error = Identity::load(&files).unwrap_err().to_string();
        assert!(error.contains("junk.pem"), "{error}");
        files.key = dir.path().join("missing.pem");
        let error = Identity::load(&files).unwrap_err().to_string();
        assert!(error.contains("missing.pem"), "{error}");
    }
}
