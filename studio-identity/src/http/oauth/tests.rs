//! Unit tests of the authorization server's rules: redirect URIs, repeated
//! parameters, scopes, parked requests, registration budgets and Basic
//! credentials.

use std::collections::BTreeSet;

use axum::http::{HeaderMap, HeaderValue, header};
use base64::Engine as _;
use sasha_proto::ErrorCode;

use super::consent::chosen_scopes;
use super::offered;
use super::params::{parse_params, redirect_matches, redirect_uri_problem, requested_scopes};
use super::token::basic_credentials;
use crate::authorization::{OAuthState, REGISTRATION_BUDGET};
use crate::throttle::ClientAddress;
use studio_store::{Scope, UserRole};

#[test]
fn redirect_uris_follow_the_native_app_rules() {
    for ok in [
        "https://client.example.com/callback",
        "http://127.0.0.1:33418/callback",
        "http://[::1]/cb",
        "http://localhost:8080/oauth/callback",
        "com.example.app:/oauth2redirect",
        "https://claude.ai/api/mcp/auth_callback?x=1",
    ] {
        assert_eq!(redirect_uri_problem(ok), None, "{ok}");
    }
    for bad in [
        "http://client.example.com/callback",
        "https://client.example.com/cb#frag",
        "https://user:pw@client.example.com/cb",
        "javascript:alert(1)",
        "data:text/html,hi",
        "file:///etc/passwd",
        "myapp:/cb",
        "/relative/callback",
        "http://127.0.0.2.example.com/cb",
    ] {
        assert!(redirect_uri_problem(bad).is_some(), "{bad}");
    }
    assert!(redirect_uri_problem(&format!("https://a.example/{}", "x".repeat(2000))).is_some());
}

#[test]
fn redirects_match_exactly_except_a_loopback_ip_port() {
    let registered = vec![
        "http://127.0.0.1/callback".to_owned(),
        "http://localhost:4000/cb".to_owned(),
        "https://app.example.com/cb".to_owned(),
        "http://[::1]:1/v6".to_owned(),
    ];
    assert!(redirect_matches(
        &registered,
        "http://127.0.0.1:51234/callback"
    ));
    assert!(redirect_matches(&registered, "http://127.0.0.1/callback"));
    assert!(redirect_matches(&registered, "http://[::1]:9999/v6"));
    assert!(redirect_matches(&registered, "https://app.example.com/cb"));
    assert!(redirect_matches(&registered, "http://localhost:4000/cb"));
    for refused in [
        "http://127.0.0.1:51234/callback/",
        "http://127.0.0.1:51234/other",
        "http://127.0.0.1:51234/callback?x=1",
        "http://localhost:4001/cb",
        "https://app.example.com/cb/",
        "https://app.example.com:8443/cb",
        "https://app.example.com/cb?extra=1",
        "https://127.0.0.1/callback",
        "http://evil.example/callback",
    ] {
        assert!(!redirect_matches(&registered, refused), "{refused}");
    }
}

#[test]
fn repeated_parameters_are_refused() {
    assert!(parse_params(b"a=1&b=2").is_ok());
    let error = parse_params(b"code=1&code=2").unwrap_err();
    assert_eq!(error.error, "invalid_request");
    assert!(error.description.contains("code"));
    // Empty values are absent.
    assert!(!parse_params(b"scope=").unwrap().contains_key("scope"));
}

#[test]
fn consent_scopes_follow_the_role() {
    let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        chosen_scopes(&names(&["apps:invoke", "apps:write"]), UserRole::Staff).unwrap(),
        BTreeSet::from([Scope::AppsInvoke, Scope::AppsWrite])
    );
    let member =
        chosen_scopes(&names(&["apps:invoke", "apps:write"]), UserRole::Member).unwrap_err();
    assert_eq!(member.code, ErrorCode::AccessDenied);
    // What MCP clients are offered, and a member may author apps.
    assert_eq!(offered().collect::<Vec<_>>(), Scope::MCP_CLIENT);
    assert_eq!(
        chosen_scopes(&names(&["apps:invoke", "apps:author"]), UserRole::Member).unwrap(),
        BTreeSet::from([Scope::AppsInvoke, Scope::AppsAuthor])
    );
    let alone = chosen_scopes(&names(&["apps:author"]), UserRole::Member).unwrap_err();
    assert_eq!(alone.code, ErrorCode::InputInvalid);
    assert_eq!(
        chosen_scopes(&names(&[]), UserRole::Admin)
            .unwrap_err()
            .code,
        ErrorCode::InputInvalid
    );
    assert_eq!(
        chosen_scopes(&names(&["chat:use"]), UserRole::Admin)
            .unwrap_err()
            .code,
        ErrorCode::InputInvalid
    );
    assert_eq!(
        chosen_scopes(&names(&["apps:write"]), UserRole::Admin)
            .unwrap_err()
            .code,
        ErrorCode::InputInvalid
    );
}

#[test]
fn requested_scopes_keep_only_what_mcp_clients_are_offered() {
    assert_eq!(
        requested_scopes(Some("openid apps:write chat:use apps:invoke")),
        BTreeSet::from([Scope::AppsInvoke, Scope::AppsWrite])
    );
    assert_eq!(requested_scopes(None), BTreeSet::from([Scope::AppsInvoke]));
}

#[tokio::test]
async fn registrations_are_budgeted_per_client_address() {
    let dir = tempfile::tempdir().unwrap();
    let store = studio_store::Store::open(&dir.path().join("core.sqlite")).unwrap();
    let state = OAuthState::new("http://localhost:3007", "http://localhost:3007");
    let address = |text: &str| ClientAddress::from_ip(Some(text.parse().unwrap()));
    for _ in 0..REGISTRATION_BUDGET.0 {
        let admitted = state.admit_registration(&store, address("192.0.2.1")).await;
        assert!(admitted.unwrap().is_ok());
    }
    let wait = state
        .admit_registration(&store, address("192.0.2.1"))
        .await
        .unwrap()
        .unwrap_err();
    assert!(wait <= REGISTRATION_BUDGET.1, "{wait:?}");
    // Another address, and the no-proxy address, have their own budgets.
    let other = state.admit_registration(&store, address("192.0.2.2")).await;
    assert!(other.unwrap().is_ok());
    let unproxied = state
        .admit_registration(&store, ClientAddress::from_ip(None))
        .await;
    assert!(unproxied.unwrap().is_ok());
}

#[test]
fn basic_credentials_are_form_decoded() {
    let mut headers = HeaderMap::new();
    let encoded = base64::engine::general_purpose::STANDARD.encode("my%20client:s%3Acret");
    headers.insert(
        header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Basic {encoded}")).unwrap(),
    );
    assert_eq!(
        basic_credentials(&headers).unwrap(),
        Some(("my client".to_owned(), "s:cret".to_owned()))
    );
}
