//! Who a verified ID token says the person is, in Sasha's terms: the
//! provider subject, the user name (the configured claim, else
//! `preferred_username`, else `email`) and the groups (the configured claim:
//! a list of strings, or one string).
//!
//! What it must never do: read an unverified token, or guess a user name
//! from a claim the operator did not name (a display name is no identity).

use serde_json::Value;

use super::config::ProviderConfig;
use super::provider::VerifiedClaims;

/// The person a verified ID token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vouched {
    pub subject: String,
    pub username: String,
    pub groups: Vec<String>,
}

/// The claims of a verified token, or what is missing.
pub fn vouched(config: &ProviderConfig, claims: &VerifiedClaims) -> Result<Vouched, String> {
    let username = match &config.username_claim {
        Some(name) => string_claim(claims, name)
            .ok_or_else(|| format!("the provider's ID token has no {name} claim"))?,
        None => claims
            .preferred_username()
            .map(|name| name.as_str().to_owned())
            .or_else(|| claims.email().map(|email| email.as_str().to_owned()))
            .ok_or_else(|| {
                "the provider's ID token has neither a preferred_username nor an email claim"
                    .to_owned()
            })?,
    };
    let groups = match claims.additional_claims().claims.get(&config.groups_claim) {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|item| item.as_str().map(str::to_owned))
            .collect(),
        Some(Value::String(group)) => vec![group.clone()],
        _ => Vec::new(),
    };
    Ok(Vouched {
        subject: claims.subject().as_str().to_owned(),
        username: username.trim().to_owned(),
        groups,
    })
}

/// A string claim by name, standard or not.
fn string_claim(claims: &VerifiedClaims, name: &str) -> Option<String> {
    match name {
        "preferred_username" => claims.preferred_username().map(|v| v.as_str().to_owned()),
        "email" => claims.email().map(|v| v.as_str().to_owned()),
        "sub" => Some(claims.subject().as_str().to_owned()),
        _ => claims
            .additional_claims()
            .claims
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}
