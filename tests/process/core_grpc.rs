//! CoreService as the gateway uses it, over mTLS: a bearer token becomes a
//! principal, and apps, access, resources and the catalogue follow that
//! principal's grants, read fresh on every call.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

use common::core::CoreWorld;
use common::mcp::McpWorld;
use sasha_proto::convert::{FromWire, ToWire, scopes_to_wire};
use sasha_proto::pb;
use sasha_proto::{AppError, ErrorCode};
use sasha_service::identity::Identity;
use sasha_service::{Role, grpc};
use studio_store::{
    AppAccess, ClientAuthMethod, CodeExchange, Consent, PrincipalKind, Scope, TokenKind, UserRole,
};

#[tokio::test]
async fn principals_apps_access_resources_and_catalogue() {
    let world = McpWorld::start().await;
    let (harness, backends, store) = (&world.harness, &world.backends, &world.store);
    let (staff, member) = (&world.staff, &world.member);
    let invoke: BTreeSet<Scope> = [Scope::ChatUse, Scope::AppsInvoke].into_iter().collect();
    let chat_only: BTreeSet<Scope> = [Scope::ChatUse].into_iter().collect();
    let staff_token = world.staff_token.clone();
    let member_token = store
        .mint_token(&member.id, TokenKind::Access, &invoke, None)
        .unwrap();
    let staff_chat_only = store
        .mint_token(&staff.id, TokenKind::Access, &chat_only, None)
        .unwrap();

    let identity = Identity::load(&harness.tls(Role::McpGateway)).unwrap();
    let mut core = grpc::core_client(
        &format!("https://{}", backends.core.listener("grpc")),
        &identity,
    )
    .unwrap();
    let authenticate = |credential: &str| pb::AuthenticateRequest {
        kind: "bearer".into(),
        credential: credential.into(),
        resource: String::new(),
    };

    let principal = core
        .authenticate(authenticate(&staff_token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(principal.user_id, staff.id);
    assert_eq!(principal.role, UserRole::Staff.to_wire());
    assert_eq!(principal.kind, PrincipalKind::Access.to_wire());
    assert_eq!(
        principal.scopes,
        scopes_to_wire(&[Scope::ChatUse, Scope::AppsInvoke])
    );
    let garbage = core
        .authenticate(authenticate("sasha_at_nope"))
        .await
        .unwrap_err();
    assert_eq!(
        AppError::from_status(&garbage).code,
        ErrorCode::Unauthenticated
    );

    let listed = core
        .list_apps(pb::ListAppsRequest {
            principal: Some(principal.clone()),
        })
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<(String, AppAccess)> = listed
        .apps
        .iter()
        .map(|a| (a.id.clone(), AppAccess::from_wire(a.access).unwrap()))
        .collect();
    assert_eq!(
        ids,
        [
            ("expense-log".into(), AppAccess::Manage),
            ("hello".into(), AppAccess::Manage)
        ]
    );

    // Without apps:invoke nothing is listed, even for a manager.
    let chat_principal = core
        .authenticate(authenticate(&staff_chat_only))
        .await
        .unwrap()
        .into_inner();
    let listed_chat = core
        .list_apps(pb::ListAppsRequest {
            principal: Some(chat_principal),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(listed_chat.apps.is_empty());

    let member_principal = core
        .authenticate(authenticate(&member_token))
        .await
        .unwrap()
        .into_inner();
    let check = |principal: &pb::Principal, access: &str| pb::CheckAccessRequest {
        principal: Some(principal.clone()),
        app_id: "hello".into(),
        access: AppAccess::parse(access).unwrap().to_wire(),
    };
    assert!(
        core.check_access(check(&principal, "manage"))
            .await
            .unwrap()
            .into_inner()
            .allowed
    );
    assert!(
        !core
            .check_access(check(&member_principal, "use"))
            .await
            .unwrap()
            .into_inner()
            .allowed
    );

    // A grant is visible on the very next call, a revoke likewise.
    store
        .grant(
            "hello",
            &member.id,
            studio_store::AppAccess::Use,
            Some(&staff.id),
        )
        .unwrap();
    assert!(
        core.check_access(check(&member_principal, "use"))
            .await
            .unwrap()
            .into_inner()
            .allowed
    );
    assert!(
        !core
            .check_access(check(&member_principal, "manage"))
            .await
            .unwrap()
            .into_inner()
            .allowed
    );
    let hello = listed.apps.iter().find(|a| a.id == "hello").unwrap();
    let resource = core
        .get_resource(pb::GetResourceRequest {
            principal: Some(member_principal.clone()),
            app_id: "hello".into(),
            revision: hello.revision.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resource.uri, hello.resource_uri);
    assert_eq!(resource.mime_type, "text/html;profile=mcp-app");
    // `_meta.ui`: no declared CSP domains, no border, the source's digest.
    let meta = resource.meta.unwrap();
    assert!(meta.connect_domains.is_empty(), "{meta:?}");
    assert!(meta.resource_domains.is_empty(), "{meta:?}");
    assert!(meta.frame_domains.is_empty(), "{meta:?}");
    assert!(meta.base_uri_domains.is_empty(), "{meta:?}");
    assert!(!meta.prefers_border);
    assert_eq!(meta.source_digest.len(), 64, "{meta:?}");
    assert!(meta.source_digest.bytes().all(|b| b.is_ascii_hexdigit()));
    store.revoke("hello", &member.id, Some(&staff.id)).unwrap();
    let denied = core
        .get_resource(pb::GetResourceRequest {
            principal: Some(member_principal.clone()),
            app_id: "hello".into(),
            revision: hello.revision.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(AppError::from_status(&denied).code, ErrorCode::NotFound);
    let stale = core
        .get_resource(pb::GetResourceRequest {
            principal: Some(principal.clone()),
            app_id: "hello".into(),
            revision: "0".repeat(64),
        })
        .await
        .unwrap_err();
    assert_eq!(
        AppError::from_status(&stale).code,
        ErrorCode::RevisionUnavailable
    );

    // The catalogue carries the declared tables with columns and the compiled actions.
    let catalogue = core
        .get_catalogue(pb::CatalogueRequest {
            principal: Some(principal.clone()),
            app_id: "expense-log".into(),
            known_contract_hash: String::new(),
            preview: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    // Only the app asked for, never another one the caller may use.
    let ids: Vec<&str> = catalogue.apps.iter().map(|app| app.id.as_str()).collect();
    assert_eq!(ids, ["expense-log"]);
    let app = &catalogue.apps[0];
    assert_eq!(app.access, AppAccess::Manage.to_wire());
    // One app by id carries its data contract, unless the caller names the
    // current contract hash as one it already holds; a stale hash gets it.
    let hash = app.contract_hash.clone();
    assert!(!hash.is_empty());
    assert_eq!(app.contract.as_ref().unwrap().hash, hash);
    for (known, expect_contract) in [(hash.clone(), false), ("0".repeat(64), true)] {
        let again = core
            .get_catalogue(pb::CatalogueRequest {
                principal: Some(principal.clone()),
                app_id: "expense-log".into(),
                known_contract_hash: known,
                preview: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        let ids: Vec<&str> = again.apps.iter().map(|app| app.id.as_str()).collect();
        assert_eq!(ids, ["expense-log"]);
        assert_eq!(again.apps[0].contract.is_some(), expect_contract);
        assert_eq!(again.apps[0].contract_hash, hash);
    }
    let expenses = &app.tables["expenses"];
    assert_eq!(
        expenses.declaration.as_ref().unwrap().access,
        pb::Access::Owner as i32
    );
    assert!(expenses.columns.iter().any(|c| c.name == "amount"));
    let actions: Vec<&str> = app.actions.iter().map(|a| a.mcp_name.as_str()).collect();
    assert!(
        actions.contains(&"app__expense_log__category_totals"),
        "{actions:?}"
    );
    assert!(!catalogue.fingerprint.is_empty());
}

/// The MCP tools a staff caller sees for the fixture catalogue, computed from
/// core's live `GetCatalogue` answer, are golden (`UPDATE_EXPECT=1` rewrites).
#[tokio::test]
async fn the_tool_list_of_the_fixture_catalogue_is_golden() {
    let world = McpWorld::start().await;
    let (harness, backends) = (&world.harness, &world.backends);
    let token = world.staff_token.clone();
    let identity = Identity::load(&harness.tls(Role::McpGateway)).unwrap();
    let mut core = grpc::core_client(
        &format!("https://{}", backends.core.listener("grpc")),
        &identity,
    )
    .unwrap();
    let principal = core
        .authenticate(pb::AuthenticateRequest {
            kind: "bearer".into(),
            credential: token,
            resource: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let catalogue = core
        .get_catalogue(pb::CatalogueRequest {
            principal: Some(principal),
            app_id: String::new(),
            known_contract_hash: String::new(),
            preview: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    // Converted exactly as the gateway converts it where it is received,
    // and listed as a client reads the listing.
    let catalogue = mcp_gateway::catalogue::Catalogue::try_from(&catalogue).unwrap();
    let tools = serde_json::to_value(mcp_gateway::tools::tools_for(
        &catalogue,
        &mcp_gateway::tools::Caller {
            invokes: true,
            bound_app: None,
        },
    ))
    .unwrap();
    let tools = tools.as_array().unwrap();
    // Revisions change with the runtime; the golden file pins everything else.
    let mut text = serde_json::to_string_pretty(&tools).unwrap();
    for (id, app) in &catalogue.apps {
        text = text.replace(&app.revision, &format!("<{id}-revision>"));
    }
    text.push('\n');
    common::golden(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/packages/golden/tools.json"),
        &text,
    );
    let names: Vec<&str> = tools
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"app__expense_log__category_totals"));
    assert!(
        !names.contains(&"app__expense_log__add_expense"),
        "app-only actions are not listed to the model"
    );
}

/// An OAuth access token is accepted only by the resource it was issued for:
/// the gateway names its resource, and any other (or none) is refused. A
/// token minted by the operator has no audience and is accepted everywhere.
#[tokio::test]
async fn oauth_tokens_are_accepted_only_by_their_audience() {
    let world = CoreWorld::start().await;
    let staff = world.user("sam", UserRole::Staff);
    let resource = "https://studio.example.com/mcp";
    let redirect = "http://127.0.0.1:4567/callback";
    let verifier = "v".repeat(43);
    let challenge = {
        use base64::Engine as _;
        use sha2::Digest as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(&verifier))
    };
    let client = world
        .store
        .oauth_register_client("Client", &[redirect.to_owned()], ClientAuthMethod::None)
        .unwrap()
        .unwrap()
        .client;
    let scopes: BTreeSet<Scope> = [Scope::AppsInvoke].into();
    let code = world
        .store
        .oauth_consent(&Consent {
            client_id: &client.client_id,
            user_id: &staff.id,
            scopes: &scopes,
            resource,
            redirect_uri: redirect,
            code_challenge: &challenge,
        })
        .unwrap();
    let tokens = world
        .store
        .oauth_exchange_code(&CodeExchange {
            client_id: &client.client_id,
            code: &code,
            redirect_uri: redirect,
            code_verifier: &verifier,
            resource: Some(resource),
        })
        .unwrap()
        .unwrap();
    let minted = world
        .store
        .mint_token(&staff.id, TokenKind::Access, &scopes, None)
        .unwrap();
    let mut core = world.client();
    let mut authenticate = async |credential: &str, resource: &str| {
        core.authenticate(pb::AuthenticateRequest {
            kind: "bearer".into(),
            credential: credential.into(),
            resource: resource.into(),
        })
        .await
    };
    let principal = authenticate(&tokens.access_token, resource)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(principal.user_id, staff.id);
    assert_eq!(principal.scopes, scopes_to_wire(&[Scope::AppsInvoke]));
    for other in [
        "https://other.example/mcp",
        "https://studio.example.com",
        "",
    ] {
        let refused = authenticate(&tokens.access_token, other).await.unwrap_err();
        assert_eq!(
            AppError::from_status(&refused).code,
            ErrorCode::Unauthenticated,
            "{other:?}"
        );
    }
    for anywhere in [resource, "https://other.example/mcp", ""] {
        assert!(
            authenticate(&minted, anywhere).await.is_ok(),
            "{anywhere:?}"
        );
    }
}
