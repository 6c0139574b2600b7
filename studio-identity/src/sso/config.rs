//! How Studio signs people in, as the operator configured it: the OpenID
//! provider (`SASHA_OIDC_*`), how its groups map to roles
//! (`SASHA_SSO_*_GROUPS`, [`GroupRoles`]), and whether passwords still work
//! (`SASHA_SSO_ONLY`, `SASHA_SSO_BREAK_GLASS_ADMIN`). Read once at boot; an
//! invalid combination stops it with one line naming the variable.
//!
//! What it must never do: let a provider setting stand without its issuer
//! (it would be silently ignored), turn passwords off without a provider, or
//! keep the client secret anywhere but this value (never logged).

use std::fmt;
use std::path::Path;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use sasha_service::config::{ConfigError, Env, Origin};

use crate::group_roles::GroupRoles;

/// The path the provider sends the browser back to, on the Studio origin.
pub const CALLBACK_PATH: &str = "/auth/oidc/callback";
/// The scopes asked for when `SASHA_OIDC_SCOPES` is unset.
pub const DEFAULT_SCOPES: &str = "openid profile email";
/// The claim that carries groups when `SASHA_OIDC_GROUPS_CLAIM` is unset.
pub const DEFAULT_GROUPS_CLAIM: &str = "groups";
/// The button's provider name when `SASHA_OIDC_PROVIDER_NAME` is unset.
pub const DEFAULT_PROVIDER_NAME: &str = "single sign-on";
/// The longest provider name shown on the sign-in button.
const MAX_PROVIDER_NAME_CHARS: usize = 64;
/// The largest client secret file read.
const MAX_SECRET_FILE_BYTES: u64 = 8 * 1024;

/// The variables that mean something only with `SASHA_OIDC_ISSUER` (the
/// group lists do not: SCIM provisioning reads them too).
const NEEDS_ISSUER: [&str; 8] = [
    "SASHA_OIDC_CLIENT_ID",
    "SASHA_OIDC_CA_FILE",
    "SASHA_OIDC_CLIENT_SECRET_FILE",
    "SASHA_OIDC_SCOPES",
    "SASHA_OIDC_GROUPS_CLAIM",
    "SASHA_OIDC_USERNAME_CLAIM",
    "SASHA_OIDC_PROVIDER_NAME",
    "SASHA_SSO_ONLY",
];

/// How people sign in to this Studio.
#[derive(Clone, Default)]
pub struct SignInConfig {
    /// The OpenID provider, when one is configured.
    pub provider: Option<ProviderConfig>,
    /// Who may still sign in with a password.
    pub passwords: PasswordPolicy,
    /// Which role the organisation's groups give (`SASHA_SSO_*_GROUPS`): the
    /// provider's groups claim at each sign-in, SCIM memberships at each
    /// change. Read here only, even without a provider, for SCIM.
    pub group_roles: GroupRoles,
}

/// Who may sign in with a password.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PasswordPolicy {
    /// Everyone with a password (no provider, or SSO alongside passwords).
    #[default]
    Everyone,
    /// Only the named break-glass admin (`SASHA_SSO_ONLY`); `None` when
    /// none was named (then only `sasha admin` recovers a broken provider).
    BreakGlassOnly(Option<String>),
}

impl PasswordPolicy {
    /// Whether `username` may sign in with a password.
    pub fn admits(&self, username: &str) -> bool {
        match self {
            PasswordPolicy::Everyone => true,
            PasswordPolicy::BreakGlassOnly(admin) => admin
                .as_deref()
                .is_some_and(|admin| admin.to_lowercase() == username.to_lowercase()),
        }
    }
}

/// One OpenID provider, a confidential client of it.
#[derive(Clone)]
pub struct ProviderConfig {
    /// `SASHA_OIDC_ISSUER`, exactly as the provider's `iss` says it.
    pub issuer: String,
    pub client_id: String,
    /// Read from `SASHA_OIDC_CLIENT_SECRET_FILE`.
    pub client_secret: String,
    /// `<SASHA_PUBLIC_ORIGIN>/auth/oidc/callback`.
    pub redirect_uri: String,
    /// Asked for at the authorization endpoint; always holds `openid`.
    pub scopes: Vec<String>,
    /// The ID-token claim whose strings are the person's groups.
    pub groups_claim: String,
    /// The claim that is the Sasha user name; `None`: `preferred_username`,
    /// then `email`.
    pub username_claim: Option<String>,
    /// Shown on the sign-in button: "Sign in with <name>".
    pub provider_name: String,
    /// `SASHA_OIDC_CA_FILE`'s certificates, trusted beside the public web's
    /// roots: a provider behind the organisation's own certificate authority.
    pub ca_certificates: Vec<CertificateDer<'static>>,
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &"(hidden)")
            .field("redirect_uri", &self.redirect_uri)
            .field("scopes", &self.scopes)
            .field("groups_claim", &self.groups_claim)
            .field("username_claim", &self.username_claim)
            .field("provider_name", &self.provider_name)
            .field("ca_certificates", &self.ca_certificates.len())
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for SignInConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignInConfig")
            .field("provider", &self.provider)
            .field("passwords", &self.passwords)
            .field("group_roles", &self.group_roles)
            .finish()
    }
}

impl SignInConfig {
    /// Reads the `SASHA_OIDC_*` and `SASHA_SSO_*` variables for Studio at
    /// `studio`.
    pub fn from_env(env: &dyn Env, studio: &Origin) -> Result<SignInConfig, ConfigError> {
        let group_roles = GroupRoles::from_env(env)?;
        let break_glass = env.var("SASHA_SSO_BREAK_GLASS_ADMIN");
        let Some(issuer) = env.var("SASHA_OIDC_ISSUER") else {
            if let Some(var) = NEEDS_ISSUER.into_iter().find(|var| env.var(var).is_some()) {
                return Err(ConfigError::new(
                    var,
                    "is set but SASHA_OIDC_ISSUER is not: set the provider's issuer too, or unset it",
                ));
            }
            if break_glass.is_some() {
                return Err(ConfigError::new(
                    "SASHA_SSO_BREAK_GLASS_ADMIN",
                    "names the one admin who may still use a password when SASHA_SSO_ONLY is on, and it is not",
                ));
            }
            return Ok(SignInConfig {
                group_roles,
                ..SignInConfig::default()
            });
        };
        let provider = ProviderConfig {
            issuer: issuer_url(issuer.trim())?,
            client_id: required(env, "SASHA_OIDC_CLIENT_ID")?,
            client_secret: read_secret_file(&required(env, "SASHA_OIDC_CLIENT_SECRET_FILE")?)?,
            redirect_uri: format!("{}{CALLBACK_PATH}", studio.as_str()),
            scopes: scopes(env.var("SASHA_OIDC_SCOPES").as_deref())?,
            groups_claim: claim_name(env, "SASHA_OIDC_GROUPS_CLAIM")?
                .unwrap_or_else(|| DEFAULT_GROUPS_CLAIM.to_owned()),
            username_claim: claim_name(env, "SASHA_OIDC_USERNAME_CLAIM")?,
            provider_name: provider_name(env.var("SASHA_OIDC_PROVIDER_NAME"))?,
            ca_certificates: ca_certificates(env.var("SASHA_OIDC_CA_FILE").as_deref())?,
        };
        if !group_roles.is_configured() {
            return Err(ConfigError::new(
                "SASHA_SSO_MEMBER_GROUPS",
                "with SASHA_OIDC_ISSUER set, name the groups that give a role (SASHA_SSO_ADMIN_GROUPS, SASHA_SSO_STAFF_GROUPS or SASHA_SSO_MEMBER_GROUPS; '*' in the member list admits everyone the provider vouches for), or nobody can sign in",
            ));
        }
        let passwords = if sasha_service::config::switch(env, "SASHA_SSO_ONLY", false)? {
            let admin = break_glass.map(|name| name.trim().to_owned());
            if let Some(name) = &admin {
                studio_store::validate_username(name).map_err(|error| {
                    ConfigError::new("SASHA_SSO_BREAK_GLASS_ADMIN", error.to_string())
                })?;
            }
            PasswordPolicy::BreakGlassOnly(admin)
        } else {
            if break_glass.is_some() {
                return Err(ConfigError::new(
                    "SASHA_SSO_BREAK_GLASS_ADMIN",
                    "names the one admin who may still use a password when SASHA_SSO_ONLY is on, and it is not",
                ));
            }
            PasswordPolicy::Everyone
        };
        Ok(SignInConfig {
            provider: Some(provider),
            passwords,
            group_roles,
        })
    }
}

fn required(env: &dyn Env, var: &'static str) -> Result<String, ConfigError> {
    env.var(var)
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
        .ok_or_else(|| ConfigError::new(var, "is required when SASHA_OIDC_ISSUER is set"))
}

/// The issuer: an absolute https URL (http only on a loopback address, for a
/// provider run beside Studio in development), no query, fragment or
/// credentials, kept as written (its `iss` must match it exactly).
fn issuer_url(text: &str) -> Result<String, ConfigError> {
    let var = "SASHA_OIDC_ISSUER";
    let url = url::Url::parse(text)
        .map_err(|_| ConfigError::new(var, format!("{text:?} is not an absolute URL")))?;
    let loopback = matches!(
        url.host(),
        Some(url::Host::Ipv4(ip)) if ip.is_loopback()
    ) || matches!(url.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback())
        || url.host_str() == Some("localhost");
    if url.scheme() != "https" && !(url.scheme() == "http" && loopback) {
        return Err(ConfigError::new(
            var,
            format!("{text:?} must be https (http only on a loopback address)"),
        ));
    }
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return Err(ConfigError::new(
            var,
            format!("{text:?} must have no query, fragment or credentials"),
        ));
    }
    Ok(text.to_owned())
}

/// The client secret: the file's trimmed content, not empty.
/// The PEM certificates of `SASHA_OIDC_CA_FILE`; none when it is unset.
fn ca_certificates(path: Option<&str>) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let var = "SASHA_OIDC_CA_FILE";
    let Some(path) = path.map(str::trim) else {
        return Ok(Vec::new());
    };
    let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect)
        .map_err(|error| ConfigError::new(var, format!("cannot read {path}: {error}")))?;
    if certificates.is_empty() {
        return Err(ConfigError::new(
            var,
            format!("{path} holds no PEM certificate"),
        ));
    }
    Ok(certificates)
}

fn read_secret_file(path: &str) -> Result<String, ConfigError> {
    let var = "SASHA_OIDC_CLIENT_SECRET_FILE";
    let size = std::fs::metadata(Path::new(path))
        .map_err(|error| ConfigError::new(var, format!("cannot read {path}: {error}")))?
        .len();
    if size > MAX_SECRET_FILE_BYTES {
        return Err(ConfigError::new(
            var,
            format!(
                "{path} holds {size} bytes; a client secret has at most {MAX_SECRET_FILE_BYTES}"
            ),
        ));
    }
    let secret = std::fs::read_to_string(path)
        .map_err(|error| ConfigError::new(var, format!("cannot read {path}: {error}")))?;
    let secret = secret.trim();
    if secret.is_empty() {
        return Err(ConfigError::new(var, format!("{path} is empty")));
    }
    Ok(secret.to_owned())
}

/// Space-separated scopes, which must include `openid`.
fn scopes(text: Option<&str>) -> Result<Vec<String>, ConfigError> {
    let scopes: Vec<String> = text
        .unwrap_or(DEFAULT_SCOPES)
        .split_ascii_whitespace()
        .map(str::to_owned)
        .collect();
    if !scopes.iter().any(|scope| scope == "openid") {
        return Err(ConfigError::new(
            "SASHA_OIDC_SCOPES",
            "must include openid (space-separated, e.g. \"openid profile email\")",
        ));
    }
    if let Some(bad) = scopes.iter().find(|scope| {
        !scope
            .chars()
            .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\')
    }) {
        return Err(ConfigError::new(
            "SASHA_OIDC_SCOPES",
            format!("{bad:?} is not a scope"),
        ));
    }
    Ok(scopes)
}

fn claim_name(env: &dyn Env, var: &'static str) -> Result<Option<String>, ConfigError> {
    let Some(name) = env.var(var).map(|name| name.trim().to_owned()) else {
        return Ok(None);
    };
    if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
        return Err(ConfigError::new(
            var,
            format!("{name:?} is not a claim name"),
        ));
    }
    Ok(Some(name))
}

fn provider_name(name: Option<String>) -> Result<String, ConfigError> {
    let Some(name) = name.map(|name| name.trim().to_owned()) else {
        return Ok(DEFAULT_PROVIDER_NAME.to_owned());
    };
    if name.chars().count() > MAX_PROVIDER_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(ConfigError::new(
            "SASHA_OIDC_PROVIDER_NAME",
            format!(
                "is shown on the sign-in button: one line of at most {MAX_PROVIDER_NAME_CHARS} characters"
            ),
        ));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn studio() -> Origin {
        Origin::parse("https://studio.example.com").unwrap()
    }

    /// A complete provider configuration, its secret in `dir`.
    fn complete(dir: &Path) -> Vec<(&'static str, String)> {
        let secret = dir.join("secret");
        std::fs::write(&secret, "  s3cret\n").unwrap();
        vec![
            (
                "SASHA_OIDC_ISSUER",
                "https://login.example.com/tenant/v2.0".to_owned(),
            ),
            ("SASHA_OIDC_CLIENT_ID", "studio".to_owned()),
            (
                "SASHA_OIDC_CLIENT_SECRET_FILE",
                secret.to_str().unwrap().to_owned(),
            ),
            ("SASHA_SSO_MEMBER_GROUPS", "staff-all".to_owned()),
        ]
    }

    fn read(pairs: &[(&'static str, String)]) -> Result<SignInConfig, ConfigError> {
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        SignInConfig::from_env(&env(&pairs), &studio())
    }

    #[test]
    fn nothing_set_is_passwords_only() {
        let config = SignInConfig::from_env(&env(&[]), &studio()).unwrap();
        assert!(config.provider.is_none());
        assert_eq!(config.passwords, PasswordPolicy::Everyone);
    }

    #[test]
    fn a_complete_provider_reads_with_its_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let config = read(&complete(dir.path())).unwrap();
        let provider = config.provider.unwrap();
        assert_eq!(provider.client_secret, "s3cret");
        assert_eq!(
            provider.redirect_uri,
            "https://studio.example.com/auth/oidc/callback"
        );
        assert_eq!(provider.scopes, ["openid", "profile", "email"]);
        assert_eq!(provider.groups_claim, "groups");
        assert_eq!(provider.username_claim, None);
        assert_eq!(provider.provider_name, DEFAULT_PROVIDER_NAME);
        assert!(!format!("{provider:?}").contains("s3cret"));
    }

    #[test]
    fn invalid_combinations_name_their_variable() {
        let dir = tempfile::tempdir().unwrap();
        let cases: Vec<(Vec<(&'static str, String)>, &str)> = vec![
            (
                vec![("SASHA_OIDC_CLIENT_ID", "x".into())],
                "SASHA_OIDC_CLIENT_ID",
            ),
            (vec![("SASHA_SSO_ONLY", "1".into())], "SASHA_SSO_ONLY"),
            (
                vec![("SASHA_SSO_BREAK_GLASS_ADMIN", "root".into())],
                "SASHA_SSO_BREAK_GLASS_ADMIN",
            ),
            (
                {
                    let mut c = complete(dir.path());
                    c.retain(|(k, _)| *k != "SASHA_OIDC_CLIENT_SECRET_FILE");
                    c
                },
                "SASHA_OIDC_CLIENT_SECRET_FILE",
            ),
            (
                {
                    let mut c = complete(dir.path());
                    c.retain(|(k, _)| *k != "SASHA_SSO_MEMBER_GROUPS");
                    c
                },
                "SASHA_SSO_MEMBER_GROUPS",
            ),
            (
                {
                    let mut c = complete(dir.path());
                    c[0].1 = "http://login.example.com".into();
                    c
                },
                "SASHA_OIDC_ISSUER",
            ),
            (
                {
                    let mut c = complete(dir.path());
                    c.push(("SASHA_OIDC_SCOPES", "profile email".into()));
                    c
                },
                "SASHA_OIDC_SCOPES",
            ),
            (
                {
                    let mut c = complete(dir.path());
                    c.push(("SASHA_SSO_ONLY", "yes please".into()));
                    c
                },
                "SASHA_SSO_ONLY",
            ),
            (
                {
                    let mut c = complete(dir.path());
                    c.push(("SASHA_SSO_BREAK_GLASS_ADMIN", "root".into()));
                    c
                },
                "SASHA_SSO_BREAK_GLASS_ADMIN",
            ),
            (
                vec![("SASHA_OIDC_CA_FILE", "/etc/ssl/corp.pem".into())],
                "SASHA_OIDC_CA_FILE",
            ),
            (
                {
                    let mut c = complete(dir.path());
                    c.push(("SASHA_OIDC_CA_FILE", "/nonexistent/corp.pem".into()));
                    c
                },
                "SASHA_OIDC_CA_FILE",
            ),
            (
                {
                    let not_pem = dir.path().join("not.pem");
                    std::fs::write(&not_pem, "no certificate here\n").unwrap();
                    let mut c = complete(dir.path());
                    c.push(("SASHA_OIDC_CA_FILE", not_pem.to_str().unwrap().to_owned()));
                    c
                },
                "SASHA_OIDC_CA_FILE",
            ),
        ];
        for (pairs, var) in cases {
            let error = read(&pairs).unwrap_err();
            assert_eq!(error.var, var, "{error}");
        }
    }

    #[test]
    fn sso_only_names_its_break_glass_admin() {
        let dir = tempfile::tempdir().unwrap();
        let mut pairs = complete(dir.path());
        pairs.push(("SASHA_SSO_ONLY", "1".into()));
        pairs.push(("SASHA_SSO_BREAK_GLASS_ADMIN", "Root".into()));
        let config = read(&pairs).unwrap();
        assert!(config.passwords.admits("root"));
        assert!(!config.passwords.admits("pam"));
        // A loopback provider may be plain http (development, tests).
        pairs[0].1 = "http://127.0.0.1:8080".into();
        assert!(read(&pairs).is_ok());
    }
}
