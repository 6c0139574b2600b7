//! OAuth connections: codes (exchanged once, however many exchange one at
//! once), audience-bound tokens, rotation, reuse detection, consent and
//! revocation.

use super::*;

const RESOURCE: &str = "https://studio.example.com/mcp";
const REDIRECT: &str = "http://127.0.0.1:4567/callback";
/// RFC 7636 appendix B's verifier and its S256 challenge.
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

fn oauth_client(fixture: &Fixture) -> OAuthClient {
    fixture
        .store
        .oauth_register_client(
            "Test Client",
            &[REDIRECT.to_owned()],
            ClientAuthMethod::None,
        )
        .unwrap()
        .unwrap()
        .client
}

fn consent(fixture: &Fixture, client: &OAuthClient, user: &User, granted: &[Scope]) -> String {
    fixture
        .store
        .oauth_consent(&Consent {
            client_id: &client.client_id,
            user_id: &user.id,
            scopes: &scopes(granted),
            resource: RESOURCE,
            redirect_uri: REDIRECT,
            code_challenge: CHALLENGE,
        })
        .unwrap()
}

fn exchange(
    fixture: &Fixture,
    client: &OAuthClient,
    code: &str,
    verifier: &str,
) -> Result<IssuedTokens, OAuthRefusal> {
    fixture
        .store
        .oauth_exchange_code(&CodeExchange {
            client_id: &client.client_id,
            code,
            redirect_uri: REDIRECT,
            code_verifier: verifier,
            resource: Some(RESOURCE),
        })
        .unwrap()
}

fn refresh(
    fixture: &Fixture,
    client: &OAuthClient,
    token: &str,
    narrowed: Option<&[Scope]>,
) -> Result<IssuedTokens, OAuthRefusal> {
    let narrowed = narrowed.map(scopes);
    fixture
        .store
        .oauth_refresh(&client.client_id, token, narrowed.as_ref(), None)
        .unwrap()
}

fn no_connections(fixture: &Fixture, user: &User) -> bool {
    fixture
        .store
        .oauth_connections(&user.id)
        .unwrap()
        .is_empty()
}

fn live(fixture: &Fixture, access_token: &str) -> bool {
    fixture.store.token(access_token).unwrap().is_some()
}

#[test]
fn pkce_checks_the_rfc_7636_example() {
    assert!(pkce_matches(VERIFIER, CHALLENGE));
    assert!(!pkce_matches(&format!("{VERIFIER}x"), CHALLENGE));
    assert!(!pkce_matches("short", CHALLENGE));
    assert!(valid_code_challenge(CHALLENGE));
    assert!(!valid_code_challenge("plain-challenge"));
}

on_both! {
fn a_code_becomes_audience_bound_tokens_that_rotate() {
    let fixture = Fixture::new();
    let admin = fixture.user("ada", UserRole::Admin);
    let client = oauth_client(&fixture);
    let code = consent(
        &fixture,
        &client,
        &admin,
        &[Scope::AppsInvoke, Scope::AppsWrite],
    );
    let first = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    assert_eq!(first.scopes, scopes(&[Scope::AppsInvoke, Scope::AppsWrite]));
    assert_eq!(first.expires_in, OAUTH_ACCESS_TTL_SECONDS);
    assert!(first.refresh_token.starts_with(REFRESH_TOKEN_PREFIX));
    let principal = fixture.store.token(&first.access_token).unwrap().unwrap();
    assert_eq!(principal.kind, PrincipalKind::Access);
    assert_eq!(principal.audience.as_deref(), Some(RESOURCE));
    assert_eq!(principal.expires_at, START + OAUTH_ACCESS_TTL_SECONDS);
    // Nothing is stored in the clear.
    let stored: i64 = fixture
        .raw()
        .query_row(
            "SELECT count(*) FROM oauth_refresh_tokens WHERE secret_sha256 = ?1",
            [&first.refresh_token],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(stored, 0);

    // A refresh may narrow, rotates the refresh token, and keeps the old
    // access token until it expires.
    let second = refresh(
        &fixture,
        &client,
        &first.refresh_token,
        Some(&[Scope::AppsInvoke]),
    )
    .unwrap();
    assert_eq!(second.scopes, scopes(&[Scope::AppsInvoke]));
    assert_ne!(second.refresh_token, first.refresh_token);
    assert_ne!(second.access_token, first.access_token);
    assert!(live(&fixture, &second.access_token));
    // It never widens, not even back to what the connection once had.
    assert!(matches!(
        refresh(
            &fixture,
            &client,
            &second.refresh_token,
            Some(&[Scope::AppsInvoke, Scope::AppsWrite])
        ),
        Err(OAuthRefusal::InvalidScope(_))
    ));
    // The access token expires on time.
    fixture.advance(OAUTH_ACCESS_TTL_SECONDS);
    assert!(!live(&fixture, &second.access_token));
    let third = refresh(&fixture, &client, &second.refresh_token, None).unwrap();
    assert_eq!(third.scopes, scopes(&[Scope::AppsInvoke]));
    assert!(live(&fixture, &third.access_token));
    // Another resource is refused without spending the token.
    assert_eq!(
        fixture
            .store
            .oauth_refresh(
                &client.client_id,
                &third.refresh_token,
                None,
                Some("https://other.example/mcp")
            )
            .unwrap()
            .unwrap_err(),
        OAuthRefusal::InvalidTarget
    );
    assert!(refresh(&fixture, &client, &third.refresh_token, None).is_ok());
}
}

on_both! {
fn a_reused_refresh_token_revokes_the_whole_connection() {
    let fixture = Fixture::new();
    let staff = fixture.user("sam", UserRole::Staff);
    let client = oauth_client(&fixture);
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let first = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    let second = refresh(&fixture, &client, &first.refresh_token, None).unwrap();
    assert!(live(&fixture, &first.access_token) && live(&fixture, &second.access_token));
    // The spent token comes back (an attacker replaying a stolen copy, or the
    // legitimate client after the attacker used it first).
    assert!(matches!(
        refresh(&fixture, &client, &first.refresh_token, None),
        Err(OAuthRefusal::InvalidGrant(_))
    ));
    assert!(!live(&fixture, &first.access_token));
    assert!(!live(&fixture, &second.access_token));
    assert!(matches!(
        refresh(&fixture, &client, &second.refresh_token, None),
        Err(OAuthRefusal::InvalidGrant(_))
    ));
    assert!(no_connections(&fixture, &staff));
    let audit = fixture.store.audit_entries(None).unwrap();
    let revoked = audit
        .iter()
        .find(|entry| entry.action == oauth_action::REVOKED)
        .unwrap();
    assert_eq!(revoked.subject.as_deref(), Some(client.client_id.as_str()));
    assert_eq!(
        revoked.after.as_deref(),
        Some("a spent refresh token was presented again")
    );
}
}

on_both! {
fn a_code_works_once_and_only_with_its_own_proof() {
    let fixture = Fixture::new();
    let staff = fixture.user("sam", UserRole::Staff);
    let client = oauth_client(&fixture);
    let other = oauth_client(&fixture);

    // Reuse: the tokens of the first exchange die too.
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let tokens = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    assert!(matches!(
        exchange(&fixture, &client, &code, VERIFIER),
        Err(OAuthRefusal::InvalidGrant(_))
    ));
    assert!(!live(&fixture, &tokens.access_token));
    assert!(refresh(&fixture, &client, &tokens.refresh_token, None).is_err());

    // A wrong verifier spends the code: the right one no longer helps.
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let wrong = "x".repeat(43);
    assert!(matches!(
        exchange(&fixture, &client, &code, &wrong),
        Err(OAuthRefusal::InvalidGrant(_))
    ));
    assert!(exchange(&fixture, &client, &code, VERIFIER).is_err());

    // Another client, another redirect, another resource, or too late.
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    assert!(exchange(&fixture, &other, &code, VERIFIER).is_err());
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let redirected = fixture
        .store
        .oauth_exchange_code(&CodeExchange {
            client_id: &client.client_id,
            code: &code,
            redirect_uri: "http://127.0.0.1:4568/callback",
            code_verifier: VERIFIER,
            resource: None,
        })
        .unwrap();
    assert!(matches!(redirected, Err(OAuthRefusal::InvalidGrant(_))));
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let targeted = fixture
        .store
        .oauth_exchange_code(&CodeExchange {
            client_id: &client.client_id,
            code: &code,
            redirect_uri: REDIRECT,
            code_verifier: VERIFIER,
            resource: Some("https://other.example/mcp"),
        })
        .unwrap();
    assert_eq!(targeted.unwrap_err(), OAuthRefusal::InvalidTarget);
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    fixture.advance(OAUTH_CODE_TTL_SECONDS);
    assert!(exchange(&fixture, &client, &code, VERIFIER).is_err());
    assert!(no_connections(&fixture, &staff));
}
}

on_both! {
/// Eight replicas exchange one code at the same instant: exactly one token
/// pair is issued; every other exchange is a reuse, refused, and revokes the
/// connection as a reused code does.
fn racing_exchanges_of_one_code_issue_one_token_pair() {
    let fixture = Fixture::new();
    let staff = fixture.user("sam", UserRole::Staff);
    let client = oauth_client(&fixture);
    let handles = handles(&fixture, RACERS);
    for round in 0..3 {
        let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
        let answers = race(&handles, |_, store| {
            store
                .oauth_exchange_code(&CodeExchange {
                    client_id: &client.client_id,
                    code: &code,
                    redirect_uri: REDIRECT,
                    code_verifier: VERIFIER,
                    resource: Some(RESOURCE),
                })
                .map_err(|error| error.to_string())
        });
        let issued: Vec<&IssuedTokens> = answers
            .iter()
            .filter_map(|answer| answer.as_ref().unwrap().as_ref().ok())
            .collect();
        assert_eq!(issued.len(), 1, "round {round}: {answers:?}");
        for answer in &answers {
            assert!(
                matches!(answer, Ok(Ok(_) | Err(OAuthRefusal::InvalidGrant(_)))),
                "round {round}: {answer:?}"
            );
        }
        let access: i64 = fixture
            .raw()
            .query_row(
                "SELECT count(*) FROM tokens WHERE grant_id IS NOT NULL",
                (),
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(access, round + 1, "round {round}: one access token per code");
        // The reuses revoked the connection: its one pair is dead too.
        assert!(!live(&fixture, &issued[0].access_token));
        assert!(refresh(&fixture, &client, &issued[0].refresh_token, None).is_err());
    }
    assert!(no_connections(&fixture, &staff));
}
}

on_both! {
fn consent_follows_the_role_and_demotion_narrows_new_tokens() {
    let fixture = Fixture::new();
    let member = fixture.user("mia", UserRole::Member);
    let staff = fixture.user("sam", UserRole::Staff);
    let client = oauth_client(&fixture);
    let refused = fixture.store.oauth_consent(&Consent {
        client_id: &client.client_id,
        user_id: &member.id,
        scopes: &scopes(&[Scope::AppsInvoke, Scope::AppsWrite]),
        resource: RESOURCE,
        redirect_uri: REDIRECT,
        code_challenge: CHALLENGE,
    });
    assert!(matches!(
        refused,
        Err(StoreError::ScopeNotAllowed {
            scope: Scope::AppsWrite,
            ..
        })
    ));

    let code = consent(
        &fixture,
        &client,
        &staff,
        &[Scope::AppsInvoke, Scope::AppsWrite],
    );
    let tokens = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    fixture
        .raw()
        .execute(
            "UPDATE users SET role = 'member' WHERE id = ?1",
            [&staff.id],
        )
        .unwrap();
    let principal = fixture.store.token(&tokens.access_token).unwrap().unwrap();
    assert_eq!(principal.scopes, scopes(&[Scope::AppsInvoke]));
    let renewed = refresh(&fixture, &client, &tokens.refresh_token, None).unwrap();
    assert_eq!(renewed.scopes, scopes(&[Scope::AppsInvoke]));
}
}

on_both! {
fn people_see_and_revoke_only_their_own_connections() {
    let fixture = Fixture::new();
    let staff = fixture.user("sam", UserRole::Staff);
    let member = fixture.user("mia", UserRole::Member);
    let client = oauth_client(&fixture);
    // A consent whose code was never exchanged is not a connection.
    consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    assert!(no_connections(&fixture, &staff));
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let tokens = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    let listed = fixture.store.oauth_connections(&staff.id).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].client_name, "Test Client");
    assert_eq!(listed[0].scopes, ["apps:invoke"]);
    assert_eq!(listed[0].redirect_uri, REDIRECT);
    assert!(
        !fixture
            .store
            .oauth_revoke_connection(&member.id, &listed[0].id, &member.id)
            .unwrap()
    );
    assert!(live(&fixture, &tokens.access_token));
    assert!(
        fixture
            .store
            .oauth_revoke_connection(&staff.id, &listed[0].id, &staff.id)
            .unwrap()
    );
    assert!(
        !fixture
            .store
            .oauth_revoke_connection(&staff.id, &listed[0].id, &staff.id)
            .unwrap()
    );
    assert!(!live(&fixture, &tokens.access_token));
    assert!(refresh(&fixture, &client, &tokens.refresh_token, None).is_err());
}
}

on_both! {
fn clients_revoke_their_own_tokens_only() {
    let fixture = Fixture::new();
    let staff = fixture.user("sam", UserRole::Staff);
    let client = oauth_client(&fixture);
    let stranger = oauth_client(&fixture);
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let tokens = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    let minted = fixture
        .store
        .mint_token(
            &staff.id,
            TokenKind::Access,
            &scopes(&[Scope::AppsInvoke]),
            None,
        )
        .unwrap();
    // Another client's revocation, and a token minted by the operator, are ignored.
    fixture
        .store
        .oauth_revoke_token(&stranger.client_id, &tokens.refresh_token)
        .unwrap();
    fixture
        .store
        .oauth_revoke_token(&client.client_id, &minted)
        .unwrap();
    assert!(live(&fixture, &tokens.access_token) && live(&fixture, &minted));
    // An access token alone.
    fixture
        .store
        .oauth_revoke_token(&client.client_id, &tokens.access_token)
        .unwrap();
    assert!(!live(&fixture, &tokens.access_token));
    let renewed = refresh(&fixture, &client, &tokens.refresh_token, None).unwrap();
    // A refresh token: the whole connection.
    fixture
        .store
        .oauth_revoke_token(&client.client_id, &renewed.refresh_token)
        .unwrap();
    assert!(!live(&fixture, &renewed.access_token));
    assert!(no_connections(&fixture, &staff));
}
}

on_both! {
fn registration_cannot_fill_the_database() {
    let fixture = Fixture::new();
    let staff = fixture.user("sam", UserRole::Staff);
    let uris = [REDIRECT.to_owned()];
    let mut first = None;
    for _ in 0..MAX_UNCONSENTED_CLIENTS {
        let client = fixture
            .store
            .oauth_register_client("Flood", &uris, ClientAuthMethod::None)
            .unwrap()
            .unwrap();
        first.get_or_insert(client.client);
    }
    let refused = fixture
        .store
        .oauth_register_client("One more", &uris, ClientAuthMethod::None)
        .unwrap();
    assert_eq!(refused.unwrap_err(), OAuthRefusal::TooManyClients);
    // A consented client no longer counts against the limit and is kept.
    let kept = first.unwrap();
    consent(&fixture, &kept, &staff, &[Scope::AppsInvoke]);
    assert!(
        fixture
            .store
            .oauth_register_client("Now fits", &uris, ClientAuthMethod::None)
            .unwrap()
            .is_ok()
    );
    // A day later the unconsented ones are gone.
    fixture.advance(UNCONSENTED_CLIENT_TTL_SECONDS);
    assert!(
        fixture
            .store
            .oauth_register_client("Later", &uris, ClientAuthMethod::None)
            .unwrap()
            .is_ok()
    );
    let count: i64 = fixture
        .raw()
        .query_row("SELECT count(*) FROM oauth_clients", (), |row| row.get(0))
        .unwrap();
    assert_eq!(count, 2);
    assert!(
        fixture
            .store
            .oauth_client(&kept.client_id)
            .unwrap()
            .is_some()
    );
}
}

on_both! {
fn confidential_clients_get_a_secret_stored_only_as_a_hash() {
    let fixture = Fixture::new();
    let registered = fixture
        .store
        .oauth_register_client(
            "Server",
            &["https://app.example.com/cb".to_owned()],
            ClientAuthMethod::SecretBasic,
        )
        .unwrap()
        .unwrap();
    let secret = registered.client_secret.unwrap();
    assert!(secret.starts_with(CLIENT_SECRET_PREFIX));
    let id = &registered.client.client_id;
    assert!(
        fixture
            .store
            .oauth_client_secret_matches(id, &secret)
            .unwrap()
    );
    assert!(
        !fixture
            .store
            .oauth_client_secret_matches(id, "sasha_cs_wrong")
            .unwrap()
    );
    let public = oauth_client(&fixture);
    assert!(
        !fixture
            .store
            .oauth_client_secret_matches(&public.client_id, "")
            .unwrap()
    );
    assert_eq!(
        fixture.store.oauth_client(id).unwrap().unwrap().auth_method,
        ClientAuthMethod::SecretBasic
    );
}
}

on_both! {
fn a_refresh_token_expires_and_belongs_to_its_client() {
    let fixture = Fixture::new();
    let staff = fixture.user("sam", UserRole::Staff);
    let client = oauth_client(&fixture);
    let thief = oauth_client(&fixture);

    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let tokens = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    fixture.advance(OAUTH_REFRESH_TTL_SECONDS);
    assert!(matches!(
        refresh(&fixture, &client, &tokens.refresh_token, None),
        Err(OAuthRefusal::InvalidGrant(_))
    ));

    // Another client presenting it: a stolen token, so the connection ends.
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let tokens = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    assert!(matches!(
        refresh(&fixture, &thief, &tokens.refresh_token, None),
        Err(OAuthRefusal::InvalidGrant(_))
    ));
    assert!(!live(&fixture, &tokens.access_token));
    assert!(refresh(&fixture, &client, &tokens.refresh_token, None).is_err());
    // Not a refresh token at all.
    assert!(refresh(&fixture, &client, &tokens.access_token, None).is_err());
}
}

fn parked(state: Option<&str>) -> ParkedRequest {
    ParkedRequest {
        client_id: "sasha_client_x".into(),
        client_name: "Test Client".into(),
        redirect_uri: REDIRECT.into(),
        state: state.map(str::to_owned),
        code_challenge: CHALLENGE.into(),
        requested: scopes(&[Scope::AppsInvoke, Scope::AppsWrite]),
        expires_at: 0,
    }
}

on_both! {
/// A request parked through one studio-core is read and decided through
/// another over the same database (two replicas), once; its id is not stored.
fn a_parked_request_is_decided_once_by_any_replica() {
    let fixture = Fixture::new();
    let other = fixture.reopen();
    let id = fixture
        .store
        .park_oauth_request(&parked(Some("s-1")), 600, 10)
        .unwrap()
        .unwrap();
    let read = other.peek_oauth_request(&id).unwrap().unwrap();
    assert_eq!(read.state.as_deref(), Some("s-1"));
    assert_eq!(
        read.requested,
        scopes(&[Scope::AppsInvoke, Scope::AppsWrite])
    );
    assert_eq!(read.expires_at, START + 600);
    assert!(
        other.peek_oauth_request(&id).unwrap().is_some(),
        "peeking leaves it"
    );
    assert_eq!(other.take_oauth_request(&id).unwrap(), Some(read));
    assert_eq!(
        fixture.store.take_oauth_request(&id).unwrap(),
        None,
        "taken once"
    );
    assert_eq!(fixture.store.peek_oauth_request(&id).unwrap(), None);
    let stored: i64 = fixture
        .raw()
        .query_row(
            "SELECT count(*) FROM oauth_requests WHERE id_sha256 = ?1 OR client_id = ?1",
            [&id],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(stored, 0);
}
}

on_both! {
/// Parked requests are bounded, expire, and an expired one makes room.
fn parked_requests_are_bounded_and_expire() {
    let fixture = Fixture::new();
    let first = fixture
        .store
        .park_oauth_request(&parked(None), 600, 2)
        .unwrap()
        .unwrap();
    assert!(
        fixture
            .store
            .park_oauth_request(&parked(None), 600, 2)
            .unwrap()
            .is_some()
    );
    assert_eq!(
        fixture
            .store
            .park_oauth_request(&parked(None), 600, 2)
            .unwrap(),
        None,
        "the bound holds"
    );
    assert!(fixture.store.take_oauth_request(&first).unwrap().is_some());
    assert!(
        fixture
            .store
            .park_oauth_request(&parked(None), 600, 2)
            .unwrap()
            .is_some(),
        "taking one makes room"
    );
    let late = fixture.store.peek_oauth_request(&first).unwrap();
    assert_eq!(late, None);
    fixture.advance(600);
    assert!(
        fixture
            .store
            .park_oauth_request(&parked(None), 600, 2)
            .unwrap()
            .is_some(),
        "expired ones are cleared"
    );
    let waiting: i64 = fixture
        .raw()
        .query_row("SELECT count(*) FROM oauth_requests", (), |row| row.get(0))
        .unwrap();
    assert_eq!(waiting, 1);
}
}

on_both! {
/// A request past its expiry is neither shown nor decided.
fn an_expired_request_is_neither_read_nor_taken() {
    let fixture = Fixture::new();
    let id = fixture
        .store
        .park_oauth_request(&parked(None), 600, 10)
        .unwrap()
        .unwrap();
    fixture.advance(599);
    assert!(fixture.store.peek_oauth_request(&id).unwrap().is_some());
    fixture.advance(1);
    assert_eq!(fixture.store.peek_oauth_request(&id).unwrap(), None);
    assert_eq!(fixture.store.take_oauth_request(&id).unwrap(), None);
}
}
