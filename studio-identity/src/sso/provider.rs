//! The relying party: Studio's side of OpenID Connect with one provider,
//! through the `openidconnect` crate. The provider's discovery document and
//! keys are fetched once per process and kept for [`DISCOVERY_TTL`], and
//! fetched again at once when an ID token names a key they do not hold (the
//! provider rotated its keys). A sign-in is the authorization code flow with
//! PKCE (S256) and a nonce; the ID token's issuer, audience, expiry, nonce
//! and signature are checked by the crate.
//!
//! What it must never do: accept an ID token signed with a shared secret or
//! none (only the asymmetric algorithms of [`SIGNING_ALGS`]), read a claim
//! before the token is verified, or fetch the provider's keys more than once
//! per sign-in beyond the cached ones.

use std::sync::Arc;
use std::time::{Duration, Instant};

use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreClientAuthMethod, CoreErrorResponseType, CoreGenderClaim,
    CoreJsonWebKey, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm,
    CoreProviderMetadata, CoreResponseType, CoreRevocableToken, CoreRevocationErrorResponse,
    CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AdditionalClaims, AuthType, AuthenticationFlow, AuthorizationCode, ClaimsVerificationError,
    Client, ClientId, ClientSecret, CsrfToken, EmptyExtraTokenFields, EndpointMaybeSet,
    EndpointNotSet, EndpointSet, IdTokenClaims, IdTokenFields, IdTokenVerifier, IssuerUrl, Nonce,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RequestTokenError, Scope,
    SignatureVerificationError, StandardErrorResponse, StandardTokenResponse,
};
use serde::{Deserialize, Serialize};

use super::client::{ProviderClient, error_chain};
use super::config::ProviderConfig;

/// How long a fetched discovery document and its keys are used before they
/// are fetched again.
pub const DISCOVERY_TTL: Duration = Duration::from_secs(3600);

/// The ID-token signatures accepted: asymmetric only.
const SIGNING_ALGS: [CoreJwsSigningAlgorithm; 8] = [
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512,
    CoreJwsSigningAlgorithm::RsaSsaPssSha256,
    CoreJwsSigningAlgorithm::RsaSsaPssSha384,
    CoreJwsSigningAlgorithm::RsaSsaPssSha512,
    CoreJwsSigningAlgorithm::EcdsaP256Sha256,
    CoreJwsSigningAlgorithm::EcdsaP384Sha384,
];

/// The ID token's claims beyond the standard ones (the groups claim, a
/// configured user name claim), read only once the token is verified.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct OtherClaims {
    #[serde(flatten)]
    pub claims: serde_json::Map<String, serde_json::Value>,
}

impl AdditionalClaims for OtherClaims {}

/// The verified claims of an ID token.
pub type VerifiedClaims = IdTokenClaims<OtherClaims, CoreGenderClaim>;

type TokenFields = IdTokenFields<
    OtherClaims,
    EmptyExtraTokenFields,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;
type TokenResponse = StandardTokenResponse<TokenFields, CoreTokenType>;
type SsoClient = Client<
    OtherClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    TokenResponse,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// A sign-in sent to the provider: the browser goes to `url`; the rest is
/// kept with the attempt.
#[derive(Debug)]
pub struct Started {
    pub url: String,
    pub state: String,
    pub nonce: String,
    pub pkce_verifier: String,
}

/// Why a sign-in could not be finished with the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The provider could not be reached or answered garbage: retryable.
    Unreachable(String),
    /// The token endpoint refused the code (`invalid_grant` for a code used
    /// twice or expired), with its error and description.
    CodeRefused(String),
    /// The token response had no ID token.
    NoIdToken,
    /// The ID token failed a check.
    Token(TokenProblem, String),
}

/// Which check an ID token failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenProblem {
    Issuer,
    Audience,
    Expired,
    Nonce,
    Signature,
    Other,
}

/// A discovery document and the keys it names, as fetched at `at`.
struct Discovered {
    metadata: CoreProviderMetadata,
    at: Instant,
}

/// Studio as a client of one OpenID provider.
pub struct RelyingParty {
    config: ProviderConfig,
    http: ProviderClient,
    /// The store's clock in unix seconds, for the ID token's expiry.
    clock: Arc<dyn Fn() -> i64 + Send + Sync>,
    discovered: tokio::sync::Mutex<Option<Discovered>>,
}

impl std::fmt::Debug for RelyingParty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelyingParty")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RelyingParty {
    /// A relying party of `config`'s provider, checking expiry against
    /// `clock` (unix seconds).
    pub fn new(
        config: ProviderConfig,
        clock: Arc<dyn Fn() -> i64 + Send + Sync>,
    ) -> Result<RelyingParty, String> {
        Ok(RelyingParty {
            http: ProviderClient::new(&config.ca_certificates)?,
            config,
            clock,
            discovered: tokio::sync::Mutex::new(None),
        })
    }

    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The discovery document, fetched when none is held, when it is older
    /// than [`DISCOVERY_TTL`], or when `again` (a key it does not name).
    async fn metadata(&self, again: bool) -> Result<CoreProviderMetadata, Failure> {
        let mut held = self.discovered.lock().await;
        if let Some(discovered) = held.as_ref()
            && !again
            && discovered.at.elapsed() < DISCOVERY_TTL
        {
            return Ok(discovered.metadata.clone());
        }
        let issuer = IssuerUrl::new(self.config.issuer.clone())
            .map_err(|error| Failure::Unreachable(error.to_string()))?;
        let metadata = CoreProviderMetadata::discover_async(issuer, &self.http)
            .await
            .map_err(|error| Failure::Unreachable(error_chain(&error)))?;
        *held = Some(Discovered {
            metadata: metadata.clone(),
            at: Instant::now(),
        });
        Ok(metadata)
    }

    fn client(&self, metadata: CoreProviderMetadata) -> Result<SsoClient, Failure> {
        let redirect = RedirectUrl::new(self.config.redirect_uri.clone())
            .map_err(|error| Failure::Unreachable(error.to_string()))?;
        // client_secret_basic unless the provider takes only the body.
        let body_only = metadata
            .token_endpoint_auth_methods_supported()
            .is_some_and(|methods| {
                methods.contains(&CoreClientAuthMethod::ClientSecretPost)
                    && !methods.contains(&CoreClientAuthMethod::ClientSecretBasic)
            });
        let client = SsoClient::from_provider_metadata(
            metadata,
            ClientId::new(self.config.client_id.clone()),
            Some(ClientSecret::new(self.config.client_secret.clone())),
        )
        .set_redirect_uri(redirect);
        Ok(if body_only {
            client.set_auth_type(AuthType::RequestBody)
        } else {
            client
        })
    }

    /// Starts a sign-in: where to send the browser, and what to keep.
    pub async fn start(&self) -> Result<Started, Failure> {
        let client = self.client(self.metadata(false).await?)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(
                AuthenticationFlow::<CoreResponseType>::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        for scope in self.config.scopes.iter().filter(|scope| *scope != "openid") {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.url();
        Ok(Started {
            url: url.to_string(),
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
        })
    }

    /// Finishes a sign-in: exchanges `code` with the PKCE verifier and
    /// answers the ID token's verified claims. A token signed with a key the
    /// held keys do not name is checked once more against keys fetched now.
    pub async fn finish(
        &self,
        code: &str,
        pkce_verifier: &str,
        nonce: &str,
    ) -> Result<VerifiedClaims, Failure> {
        let metadata = self.metadata(false).await?;
        let client = self.client(metadata.clone())?;
        let response = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|error| Failure::Unreachable(error.to_string()))?
            .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier.to_owned()))
            .request_async(&self.http)
            .await
            .map_err(|error| match error {
                RequestTokenError::ServerResponse(refusal) => {
                    Failure::CodeRefused(match refusal.error_description() {
                        Some(description) => format!("{} ({description})", refusal.error()),
                        None => refusal.error().to_string(),
                    })
                }
                other => Failure::Unreachable(error_chain(&other)),
            })?;
        let Some(id_token) = openidconnect::TokenResponse::id_token(&response) else {
            return Err(Failure::NoIdToken);
        };
        let nonce = Nonce::new(nonce.to_owned());
        match id_token.claims(&self.verifier(&metadata), &nonce) {
            Ok(claims) => Ok(claims.clone()),
            Err(ClaimsVerificationError::SignatureVerification(
                SignatureVerificationError::NoMatchingKey,
            )) => {
                let rotated = self.metadata(true).await?;
                id_token
                    .claims(&self.verifier(&rotated), &nonce)
                    .cloned()
                    .map_err(problem)
            }
            Err(error) => Err(problem(error)),
        }
    }

    fn verifier(
        &self,
        metadata: &CoreProviderMetadata,
    ) -> IdTokenVerifier<'static, CoreJsonWebKey> {
        let clock = self.clock.clone();
        IdTokenVerifier::new_public_client(
            ClientId::new(self.config.client_id.clone()),
            // The configured issuer, not the document's: `iss` must be the
            // one the operator named.
            IssuerUrl::new(self.config.issuer.clone())
                .unwrap_or_else(|_| metadata.issuer().clone()),
            metadata.jwks().clone(),
        )
        .set_allowed_algs(SIGNING_ALGS)
        .set_time_fn(move || chrono::DateTime::from_timestamp(clock(), 0).unwrap_or_default())
    }
}

/// The failed check of a verification error.
fn problem(error: ClaimsVerificationError) -> Failure {
    let kind = match &error {
        ClaimsVerificationError::InvalidIssuer(_) => TokenProblem::Issuer,
        ClaimsVerificationError::InvalidAudience(_) => TokenProblem::Audience,
        ClaimsVerificationError::Expired(_) => TokenProblem::Expired,
        ClaimsVerificationError::InvalidNonce(_) => TokenProblem::Nonce,
        ClaimsVerificationError::SignatureVerification(_) => TokenProblem::Signature,
        _ => TokenProblem::Other,
    };
    Failure::Token(kind, error_chain(&error))
}
