//! The request parameters and redirect URI rules the endpoints share: form
//! parsing (a repeated parameter is refused), the registration and matching
//! rules for redirect URIs described in the module header, scope lists, and
//! building a redirect with OAuth's response parameters.
//!
//! This module must never loosen a rule: a redirect URI is matched exactly,
//! but for the port of a loopback IP literal, and nothing here trusts one.

use std::collections::{BTreeSet, HashMap};

use axum::http::{HeaderMap, header};

use super::{MAX_REDIRECT_URI_CHARS, OAuthError, offered};
use studio_store::Scope;

/// Parses `application/x-www-form-urlencoded` text; a repeated parameter is
/// refused (RFC 6749 §3.1) and empty values count as absent.
pub fn parse_params(raw: &[u8]) -> Result<HashMap<String, String>, OAuthError> {
    let mut params = HashMap::new();
    for (name, value) in url::form_urlencoded::parse(raw) {
        if value.is_empty() {
            continue;
        }
        if params
            .insert(name.clone().into_owned(), value.into_owned())
            .is_some()
        {
            return Err(OAuthError::new(
                "invalid_request",
                format!("the parameter {name} is repeated"),
            ));
        }
    }
    Ok(params)
}

/// Why a redirect URI cannot be registered, or `None` when it can.
pub fn redirect_uri_problem(text: &str) -> Option<&'static str> {
    if text.len() > MAX_REDIRECT_URI_CHARS {
        return Some("a redirect URI has at most 2000 characters");
    }
    let Ok(url) = url::Url::parse(text) else {
        return Some("a redirect URI must be an absolute URI");
    };
    if url.fragment().is_some() {
        return Some("a redirect URI must not have a fragment");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Some("a redirect URI must not carry user information");
    }
    match url.scheme() {
        "https" => url
            .host()
            .is_none()
            .then_some("an https redirect URI needs a host"),
        "http" => (!is_loopback(&url))
            .then_some("an http redirect URI must point at a loopback host (127.0.0.1, [::1] or localhost); use https otherwise"),
        "javascript" | "data" | "file" | "vbscript" | "about" | "blob" | "ftp" | "ws" | "wss"
        | "filesystem" => Some("that redirect URI scheme is not allowed"),
        scheme if scheme.contains('.') => None,
        _ => Some(
            "a private-use redirect URI scheme must be a reverse domain name, such as com.example.app",
        ),
    }
}

fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// Whether the requested redirect URI is one of the registered ones: exactly,
/// or, for an `http` loopback IP literal, exactly but for the port.
pub fn redirect_matches(registered: &[String], requested: &str) -> bool {
    if registered.iter().any(|uri| uri == requested) {
        return true;
    }
    let Ok(mut asked) = url::Url::parse(requested) else {
        return false;
    };
    let loopback_ip = |url: &url::Url| {
        let ip_literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            _ => false,
        };
        url.scheme() == "http" && ip_literal
    };
    if !loopback_ip(&asked) || asked.set_port(None).is_err() {
        return false;
    }
    registered.iter().any(|uri| {
        url::Url::parse(uri).is_ok_and(|mut known| {
            loopback_ip(&known) && known.set_port(None).is_ok() && known == asked
        })
    })
}

/// Parses a space-separated scope list; names Sasha does not offer to MCP
/// clients are ignored (the token response says what was granted).
pub(super) fn requested_scopes(text: Option<&str>) -> BTreeSet<Scope> {
    let mut scopes: BTreeSet<Scope> = text
        .unwrap_or_default()
        .split_ascii_whitespace()
        .filter_map(|name| name.parse().ok())
        .filter(|scope| offered().any(|offered| offered == *scope))
        .collect();
    if scopes.is_empty() {
        scopes.insert(Scope::AppsInvoke);
    }
    scopes
}

pub(super) fn scope_text(scopes: &BTreeSet<Scope>) -> String {
    scopes
        .iter()
        .map(|scope| scope.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `redirect_uri` with OAuth response parameters added to its query.
pub(super) fn redirect_with(redirect_uri: &str, params: &[(&str, &str)]) -> String {
    match url::Url::parse(redirect_uri) {
        Ok(mut url) => {
            {
                let mut query = url.query_pairs_mut();
                for (name, value) in params {
                    query.append_pair(name, value);
                }
            }
            url.into()
        }
        Err(_) => redirect_uri.to_owned(),
    }
}

pub(super) fn content_type_is(headers: &HeaderMap, expected: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|value| value.trim().eq_ignore_ascii_case(expected))
}

pub(super) fn redirect_host(redirect_uri: &str) -> String {
    url::Url::parse(redirect_uri)
        .ok()
        .map(|url| match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => format!("{}:", url.scheme()),
        })
        .unwrap_or_default()
}
