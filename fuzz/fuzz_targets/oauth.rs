//! The OAuth endpoints' request rules from arbitrary bytes, as the endpoints
//! apply them (`studio_core::oauth_rules`), each against a model written
//! here from the RFCs:
//!
//! - form parameters (RFC 6749 §3.1): accepted exactly when no name repeats
//!   with a value, and then no value is empty;
//! - a redirect URI accepted for registration parses as an absolute URL with
//!   no fragment and no user information, is `https` with a host, `http` on a
//!   loopback host, or a reverse-domain private scheme, and matches itself;
//! - a requested redirect URI matches a registered one only when equal, or
//!   both are `http` loopback IP literals equal but for the port;
//! - a registration accepted from a JSON body has 1 to 10 redirect URIs, each
//!   accepted on its own, and a printable name of at most 100 characters.
//!
//! Must never touch the store: every rule here is a pure function.

#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use studio_core::oauth_rules::{
    parse_params, redirect_matches, redirect_uri_problem, registration,
};

fn loopback_ip_http(url: &url::Url) -> bool {
    url.scheme() == "http"
        && match url.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            _ => false,
        }
}

fn check_redirect_uri(text: &str) {
    if redirect_uri_problem(text).is_some() {
        return;
    }
    let url = url::Url::parse(text).unwrap_or_else(|_| panic!("accepted unparsable {text:?}"));
    assert!(url.fragment().is_none(), "{text:?}");
    assert!(
        url.username().is_empty() && url.password().is_none(),
        "{text:?}"
    );
    match url.scheme() {
        "https" => assert!(url.host().is_some(), "{text:?}"),
        "http" => assert!(
            loopback_ip_http(&url)
                || url
                    .host_str()
                    .is_some_and(|host| host.eq_ignore_ascii_case("localhost")),
            "{text:?}"
        ),
        scheme => assert!(scheme.contains('.'), "{text:?}"),
    }
    assert!(redirect_matches(&[text.to_owned()], text), "{text:?}");
}

fn check_match(registered: &str, requested: &str) {
    if !redirect_matches(&[registered.to_owned()], requested) || registered == requested {
        return;
    }
    let (Ok(mut known), Ok(mut asked)) = (url::Url::parse(registered), url::Url::parse(requested))
    else {
        panic!("{requested:?} matched {registered:?} without both parsing");
    };
    assert!(
        loopback_ip_http(&known) && loopback_ip_http(&asked),
        "{requested:?} matched {registered:?}"
    );
    known.set_port(None).unwrap();
    asked.set_port(None).unwrap();
    assert_eq!(known, asked, "{requested:?} matched {registered:?}");
}

fuzz_target!(|input: &[u8]| {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for (name, value) in url::form_urlencoded::parse(input) {
        if !value.is_empty() {
            *counts.entry(name.into_owned()).or_default() += 1;
        }
    }
    let repeated = counts.values().any(|n| *n > 1);
    match parse_params(input) {
        Ok(params) => {
            assert!(!repeated, "a repeated parameter was accepted");
            assert_eq!(params.len(), counts.len());
            assert!(params.values().all(|value| !value.is_empty()));
            let values: Vec<&String> = params.values().collect();
            for value in &values {
                check_redirect_uri(value);
            }
            for registered in &values {
                for requested in &values {
                    check_match(registered, requested);
                }
            }
        }
        Err(error) => {
            assert!(repeated, "refused without a repeat");
            assert_eq!(error.error(), "invalid_request");
        }
    }
    if let Ok(text) = std::str::from_utf8(input) {
        check_redirect_uri(text);
    }
    if let Ok(client) = registration(input) {
        assert!((1..=10).contains(&client.redirect_uris.len()), "{client:?}");
        for uri in &client.redirect_uris {
            assert!(redirect_uri_problem(uri).is_none(), "{uri:?}");
        }
        assert!(!client.name.is_empty(), "{client:?}");
        assert!(client.name.chars().count() <= 100, "{client:?}");
        assert!(!client.name.chars().any(char::is_control), "{client:?}");
    }
});
