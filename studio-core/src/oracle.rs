//! Models of studio-core's pure request rules, shared by the fuzz targets
//! in `fuzz/` (`oauth`, `paths`) and the property tests below: each `check_*`
//! runs one input through the rules as the endpoints apply them and panics,
//! naming the input, where a rule and its model disagree.
//!
//! The OAuth model is written from the RFCs, not from the code it checks:
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
//! Must never be part of a service build (only tests and the fuzz crate,
//! through feature `oracle`, compile it) and never touch the store or a
//! file: every rule checked here is a pure function.

use std::collections::HashMap;

use crate::source::check_path;
use sasha_contract::ids::is_kebab_id;
use studio_identity::oauth_rules::{
    parse_params, redirect_matches, redirect_uri_problem, registration,
};
use studio_uploads::names::{display_name, is_document_name, safe_stem, split_extension};

fn loopback_ip_http(url: &url::Url) -> bool {
    url.scheme() == "http"
        && match url.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            _ => false,
        }
}

/// A redirect URI accepted for registration is one the model accepts.
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

/// A requested redirect URI matched to a different registered one differs
/// from it only in the port of an `http` loopback IP literal.
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

/// The OAuth endpoints' rules on one request body: as form parameters, each
/// value as a redirect URI (and every pair as registered and requested), the
/// whole body as a redirect URI, and as a registration's JSON.
pub fn check_oauth(input: &[u8]) {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for (name, value) in url::form_urlencoded::parse(input) {
        if !value.is_empty() {
            *counts.entry(name.into_owned()).or_default() += 1;
        }
    }
    let repeated = counts.values().any(|n| *n > 1);
    match parse_params(input) {
        Ok(params) => {
            assert!(!repeated, "a repeated parameter was accepted: {input:?}");
            assert_eq!(params.len(), counts.len(), "{input:?}");
            assert!(params.values().all(|value| !value.is_empty()), "{input:?}");
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
            assert!(repeated, "refused without a repeat: {input:?}");
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
}

/// Path and id rules on one text: a source path the source tools accept has
/// only plain, non-dot segments and no absolute, home or backslash form; an
/// app id that passes is lowercase kebab-case; an upload's stored name is
/// always one the safe-name rule reads back.
pub fn check_paths(text: &str) {
    if let Ok(segments) = check_path(text) {
        assert!(
            !text.starts_with('/') && !text.starts_with('~') && !text.contains('\\'),
            "{text:?}"
        );
        for segment in segments {
            assert!(
                !segment.is_empty() && segment != "." && segment != "..",
                "{text:?}"
            );
        }
    }
    if is_kebab_id(text) {
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "{text:?}"
        );
        assert!(
            !text.starts_with('-') && !text.ends_with('-') && !text.contains("--"),
            "{text:?}"
        );
    }
    let shown = display_name(text);
    assert!(!shown.contains('/') && !shown.contains('\\'), "{shown:?}");
    let (stem, _) = split_extension(&shown);
    let stored = format!("{}.md", safe_stem(stem));
    assert!(is_document_name(&stored), "{text:?} became {stored:?}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Pieces the rules care about, so short joined inputs reach them far more
    /// often than random bytes would.
    const OAUTH_PIECES: &[&str] = &[
        "redirect_uri=",
        "client_id=",
        "state=",
        "=",
        "&",
        "%26",
        "%3D",
        "%",
        "+",
        "http://127.0.0.1",
        "http://127.0.0.2:1",
        "http://[::1]",
        "http://localhost",
        "http://LOCALHOST.",
        "http://example.com",
        "https://example.com",
        "https://",
        "com.example.app:",
        "myapp:",
        "javascript:",
        "data:",
        ":8080",
        ":0",
        "/cb",
        "/",
        "?a=b",
        "#f",
        "user:pw@",
        "@",
        "\\",
        "{\"redirect_uris\":[",
        "\"client_name\":",
        "\"",
        ",",
        "]",
        "}",
        "\u{0}",
        "é",
    ];

    const PATH_PIECES: &[&str] = &[
        "a",
        "app.js",
        "index.html",
        "/",
        ".",
        "..",
        "~",
        "\\",
        "%2e",
        ":",
        "-",
        "--",
        "*",
        " ",
        "\u{2215}",
        "\u{200b}",
        "\u{0}",
        "é",
        "CON",
        ".md",
        ".pdf",
        "x9",
    ];

    fn joined(pieces: &'static [&'static str]) -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(pieces), 0..12).prop_map(|parts| parts.concat())
    }

    /// A registration body: the right shape, with redirect URIs and a name
    /// built from the pieces.
    fn registration_body() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec(joined(OAUTH_PIECES), 0..12),
            joined(OAUTH_PIECES),
        )
            .prop_map(|(uris, name)| {
                serde_json::to_vec(&serde_json::json!({"redirect_uris": uris, "client_name": name}))
                    .unwrap()
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn oauth_rules_agree_with_the_rfc_model(
            input in prop_oneof![
                joined(OAUTH_PIECES).prop_map(String::into_bytes),
                registration_body(),
                prop::collection::vec(any::<u8>(), 0..64),
            ]
        ) {
            check_oauth(&input);
        }

        #[test]
        fn path_id_and_name_rules_hold(
            text in prop_oneof![joined(PATH_PIECES), any::<String>()]
        ) {
            check_paths(&text);
        }
    }

    /// The model is not vacuous: a repeated parameter is refused, a loopback
    /// redirect matches across ports and a registration is accepted.
    #[test]
    fn the_models_inputs_reach_both_answers() {
        assert!(parse_params(b"a=1&a=2").is_err());
        assert!(redirect_matches(
            &["http://127.0.0.1:1/cb".to_owned()],
            "http://127.0.0.1:2/cb"
        ));
        assert!(
            registration(br#"{"redirect_uris":["https://example.com/cb"],"client_name":"x"}"#)
                .is_ok()
        );
        check_oauth(b"redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb&state=s");
        check_paths("assets/icon.svg");
    }
}
