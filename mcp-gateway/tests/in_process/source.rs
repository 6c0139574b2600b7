//! The app source tools through MCP: who gets them, the repair loop (a broken
//! app loses its opener and gets it back), versions and conflicts, the audit
//! trail, and every path attack of the security catalogue's section (e) against
//! every tool that takes a path: nothing is read or written outside the package.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::{Value, json};
use studio_store::{AppAccess, Scope, TokenKind};

use crate::mcp::{Exchange, Mcp, confirmed_create, structured, tool_error, tool_names};
use crate::world::World as McpWorld;

fn writer_token(world: &McpWorld) -> String {
    let scopes: BTreeSet<Scope> = [Scope::ChatUse, Scope::AppsInvoke, Scope::AppsWrite]
        .into_iter()
        .collect();
    world
        .store
        .mint_token(&world.staff.id, TokenKind::Access, &scopes, None)
        .unwrap()
}

fn package(world: &McpWorld, app: &str) -> PathBuf {
    world.path().join("docs/apps").join(app)
}

fn status(exchange: &Exchange) -> Value {
    structured(exchange)["status"].clone()
}

fn text(exchange: &Exchange) -> String {
    exchange.result()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn version_of(client: &mut Mcp, app: &str, path: &str) -> String {
    let read = client
        .call("readAppFile", json!({"app": app, "path": path}))
        .await;
    structured(&read)["version"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn only_privileged_writers_get_the_source_tools() {
    let world = McpWorld::start().await;
    let writer = writer_token(&world);
    let listed = tool_names(&world.client(&writer).request("tools/list", json!({})).await);
    for name in [
        "listAppFiles",
        "readAppFile",
        "writeAppFile",
        "editAppFile",
        "deleteAppFile",
        "checkApp",
        "getDocs",
        "suggestImprovement",
    ] {
        assert!(listed.contains(&name.to_owned()), "{name} missing");
    }
    // Without apps:write the tools are absent, and a call is "not found".
    let mut invoker = world.client(&world.staff_token);
    let listed = tool_names(&invoker.request("tools/list", json!({})).await);
    assert!(!listed.contains(&"listAppFiles".to_owned()));
    assert!(listed.contains(&"getDocs".to_owned()));
    let refused = invoker.call("listAppFiles", json!({"app": "hello"})).await;
    assert_eq!(refused.error()["code"], -32602);
    assert!(
        refused.error()["message"]
            .as_str()
            .unwrap()
            .contains("listAppFiles not found")
    );
    // Without manage (use only), and for an unknown app: the same refusal.
    let mut client = world.client(&writer);
    world
        .store
        .grant("hello", &world.staff.id, AppAccess::Use, None)
        .unwrap();
    let use_only = client.call("listAppFiles", json!({"app": "hello"})).await;
    let unknown = client
        .call("listAppFiles", json!({"app": "no-such-app"}))
        .await;
    assert_eq!(tool_error(&use_only)["code"], "APP_ACCESS_DENIED");
    assert_eq!(tool_error(&unknown)["code"], "APP_ACCESS_DENIED");
    assert_eq!(
        tool_error(&use_only)["message"],
        tool_error(&unknown)["message"]
    );
    // Strict arguments.
    for bad in [
        json!({"app": "Hello"}),
        json!({"app": "hello", "extra": 1}),
        json!({}),
    ] {
        let refused = client.call("listAppFiles", bad.clone()).await;
        assert_eq!(tool_error(&refused)["code"], "APP_INPUT_INVALID", "{bad}");
    }
    // A member can never hold apps:write.
    let scopes: BTreeSet<Scope> = [Scope::AppsInvoke, Scope::AppsWrite].into_iter().collect();
    assert!(
        world
            .store
            .mint_token(&world.member.id, TokenKind::Access, &scopes, None)
            .is_err()
    );
    // getDocs serves its sections.
    let contents = client.call("getDocs", json!({})).await;
    assert!(text(&contents).contains("apps-authoring"));
    let authoring = client
        .call("getDocs", json!({"section": "apps-authoring"}))
        .await;
    assert!(text(&authoring).contains("listAppFiles"));
}

#[tokio::test]
async fn a_broken_app_is_repaired_through_the_source_tools() {
    let world = McpWorld::start().await;
    let mut client = world.client(&writer_token(&world));
    let before = tool_names(&client.request("tools/list", json!({})).await);
    assert!(before.contains(&"open_app__hello".to_owned()));

    // Break it through the tools: the write is accepted, the status says why.
    let listed = client.call("listAppFiles", json!({"app": "hello"})).await;
    assert_eq!(status(&listed)["ok"], true);
    let files = structured(&listed)["files"].as_array().unwrap().clone();
    assert!(files.iter().any(|file| file["path"] == "app.js"));
    assert!(text(&listed).ends_with(&format!(
        "The app validates; its live revision is {}.",
        status(&listed)["revision"].as_str().unwrap()
    )));
    let version = version_of(&mut client, "hello", "app.js").await;
    let original = std::fs::read_to_string(package(&world, "hello").join("app.js")).unwrap();
    let broken = client
        .call(
            "writeAppFile",
            json!({"app": "hello", "path": "app.js", "content": "function (", "expectedVersion": version}),
        )
        .await;
    assert_eq!(status(&broken)["ok"], false);
    let diagnostics = status(&broken)["diagnostics"].as_array().unwrap().clone();
    assert!(
        diagnostics.iter().any(|d| d["file"] == "app.js"),
        "{diagnostics:?}"
    );
    assert!(text(&broken).contains("does not validate"));
    // Live at once: the opener is gone, the source tools stay.
    let during = tool_names(&client.request("tools/list", json!({})).await);
    assert!(!during.contains(&"open_app__hello".to_owned()));
    assert!(during.contains(&"listAppFiles".to_owned()));

    // Repair: list (not ok) → read → edit → check (ok) → the opener is back.
    let listed = client.call("listAppFiles", json!({"app": "hello"})).await;
    assert_eq!(status(&listed)["ok"], false);
    let read = client
        .call("readAppFile", json!({"app": "hello", "path": "app.js"}))
        .await;
    assert_eq!(structured(&read)["content"], "function (");
    let version = structured(&read)["version"].as_str().unwrap().to_owned();
    let edited = client
        .call(
            "editAppFile",
            json!({"app": "hello", "path": "app.js", "oldString": "function (", "newString": original, "expectedVersion": version}),
        )
        .await;
    assert_eq!(status(&edited)["ok"], true, "{}", text(&edited));
    let checked = client.call("checkApp", json!({"app": "hello"})).await;
    assert_eq!(status(&checked)["ok"], true);
    let after = tool_names(&client.request("tools/list", json!({})).await);
    assert!(after.contains(&"open_app__hello".to_owned()));

    // Every change is audited with hashes only.
    let audit = world.store.audit_entries(Some("hello")).unwrap();
    let changes: Vec<_> = audit
        .iter()
        .filter(|entry| entry.action == "app-source.changed")
        .collect();
    assert_eq!(changes.len(), 2);
    let text_of_audit = format!("{audit:?}");
    assert!(
        !text_of_audit.contains("function ("),
        "content never reaches the audit"
    );
    assert_eq!(changes[0].actor, world.staff.id);
}

#[tokio::test]
async fn versions_conflicts_limits_and_protected_files() {
    let world = McpWorld::start().await;
    let mut client = world.client(&writer_token(&world));
    let version = version_of(&mut client, "hello", "styles.css").await;
    // A new file needs no version; an existing one does.
    let created = client
        .call(
            "writeAppFile",
            json!({"app": "hello", "path": "notes/readme.md", "content": "# Notes\n"}),
        )
        .await;
    assert_eq!(structured(&created)["path"], "notes/readme.md");
    let unversioned = client
        .call(
            "writeAppFile",
            json!({"app": "hello", "path": "styles.css", "content": "body {}"}),
        )
        .await;
    assert_eq!(tool_error(&unversioned)["code"], "APP_CONFLICT");
    // Two writers with the same version: exactly one wins.
    let (mut first, mut second) = (
        world.client(&writer_token(&world)),
        world.client(&writer_token(&world)),
    );
    let (a, b) = tokio::join!(
        first.call(
            "writeAppFile",
            json!({"app": "hello", "path": "styles.css", "content": "body { color: red; }", "expectedVersion": version}),
        ),
        second.call(
            "writeAppFile",
            json!({"app": "hello", "path": "styles.css", "content": "body { color: blue; }", "expectedVersion": version}),
        )
    );
    let wins = [&a, &b]
        .iter()
        .filter(|exchange| exchange.result()["isError"] != true)
        .count();
    assert_eq!(wins, 1, "{:?} {:?}", a.body, b.body);
    let loser = if a.result()["isError"] == true {
        &a
    } else {
        &b
    };
    assert_eq!(tool_error(loser)["code"], "APP_CONFLICT");
    // Edit needs exactly one match.
    let version = version_of(&mut client, "hello", "notes/readme.md").await;
    let none = client
        .call(
            "editAppFile",
            json!({"app": "hello", "path": "notes/readme.md", "oldString": "absent", "newString": "x", "expectedVersion": version}),
        )
        .await;
    assert_eq!(tool_error(&none)["code"], "APP_INPUT_INVALID");
    // APP.md cannot be deleted; other files can, with their version.
    let manifest = version_of(&mut client, "hello", "APP.md").await;
    let refused = client
        .call(
            "deleteAppFile",
            json!({"app": "hello", "path": "APP.md", "expectedVersion": manifest}),
        )
        .await;
    assert_eq!(tool_error(&refused)["code"], "APP_INPUT_INVALID");
    let deleted = client
        .call(
            "deleteAppFile",
            json!({"app": "hello", "path": "notes/readme.md", "expectedVersion": version}),
        )
        .await;
    assert_eq!(structured(&deleted)["version"], Value::Null);
    assert!(!package(&world, "hello").join("notes/readme.md").exists());
    // Limits: a file over 1 MiB, a binary extension.
    let huge = "a".repeat(1024 * 1024 + 1);
    let too_big = client
        .call(
            "writeAppFile",
            json!({"app": "hello", "path": "big.txt", "content": huge}),
        )
        .await;
    assert!(too_big.result()["isError"] == true || too_big.body.get("error").is_some());
    let binary = client
        .call(
            "writeAppFile",
            json!({"app": "hello", "path": "tool.exe", "content": "MZ"}),
        )
        .await;
    assert_eq!(tool_error(&binary)["code"], "APP_INPUT_INVALID");
}

/// Every path of the security catalogue's section (e), against every tool that
/// takes a path.
#[tokio::test]
async fn path_attacks_never_leave_the_package() {
    let world = McpWorld::start().await;
    let mut client = world.client(&writer_token(&world));
    let outside = world.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "outside").unwrap();
    // A symlinked folder and file planted in the package.
    let hello = package(&world, "hello");
    std::os::unix::fs::symlink(&outside, hello.join("lib")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), hello.join("link.txt")).unwrap();
    let attacks = [
        "../x.txt",
        "a/../../x.txt",
        "a/..",
        "....//x.txt",
        "..;/x.txt",
        "/etc/passwd",
        "//srv/x.txt",
        "\\\\srv\\share.txt",
        "C:/x.txt",
        "C:x.txt",
        "file:///x.txt",
        "~/x.txt",
        "..%2fx.txt",
        "%2e%2e/x.txt",
        "..%252f.txt",
        "%c0%ae%c0%ae/x.txt",
        "\u{ff0e}\u{ff0e}\u{ff0f}x.txt",
        "a\u{2215}b.txt",
        "..\\x.txt",
        "a\u{0}.html",
        "a\n.html",
        "a\u{202e}.html",
        "a\u{200b}.html",
        "a\u{7f}.html",
        "CON",
        "con.html",
        "NUL.txt",
        "COM1.js",
        "LPT9.txt",
        "COM\u{b9}.txt",
        "CONIN$.txt",
        "aux/x.txt",
        "trailing.txt.",
        "trailing.txt ",
        "a.html::$DATA",
        "a:b.txt",
        "a*b.txt",
        "a?.txt",
        "a<b.txt",
        "a|b.txt",
        "a\"b.txt",
        "",
        ".",
        "a//b.txt",
        "dir/",
        ".git/config",
        "../hello/index.html",
        "lib/x.js",
        "link.txt",
    ];
    let long_segment = format!("{}.txt", "a".repeat(300));
    let deep = format!("{}x.txt", "d/".repeat(200));
    let long_path = format!("{}.txt", "abcd/".repeat(1000));
    let mut attacks: Vec<String> = attacks.iter().map(|s| (*s).to_owned()).collect();
    attacks.extend([long_segment, deep, long_path]);
    let version = "0".repeat(64);
    for path in &attacks {
        for (tool, arguments) in [
            ("readAppFile", json!({"app": "hello", "path": path})),
            (
                "writeAppFile",
                json!({"app": "hello", "path": path, "content": "pwned"}),
            ),
            (
                "editAppFile",
                json!({"app": "hello", "path": path, "oldString": "outside", "newString": "pwned", "expectedVersion": version}),
            ),
            (
                "deleteAppFile",
                json!({"app": "hello", "path": path, "expectedVersion": version}),
            ),
        ] {
            let answer = client.call(tool, arguments).await;
            let result = answer.result();
            assert_eq!(
                result["isError"], true,
                "{tool} {path:?} was accepted: {result}"
            );
        }
    }
    // Collisions by case and normalisation.
    for path in ["App.js", "APP.js", "Styles.css"] {
        let answer = client
            .call(
                "writeAppFile",
                json!({"app": "hello", "path": path, "content": "x"}),
            )
            .await;
        assert_eq!(tool_error(&answer)["code"], "APP_CONFLICT", "{path}");
    }
    // Nothing outside changed; no file appeared outside the package.
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "outside"
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
    assert!(!world.path().join("docs/x.txt").exists());
    assert!(!world.path().join("docs/apps/x.txt").exists());
    // The listing shows neither link.
    let listed = client.call("listAppFiles", json!({"app": "hello"})).await;
    let paths: Vec<&str> = structured(&listed)["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| file["path"].as_str().unwrap())
        .collect();
    assert!(
        !paths
            .iter()
            .any(|p| p.starts_with("lib") || *p == "link.txt"),
        "{paths:?}"
    );
}

/// Editing a migration the live database already applied is reported as drift
/// in the status, before the next data operation fails.
#[tokio::test]
async fn an_edited_applied_migration_is_reported_as_drift() {
    let world = McpWorld::start().await;
    let mut client = world.client(&writer_token(&world));
    // A first data call opens the database and applies the migrations.
    let listed = client
        .call("app__expense_log__categories__list", json!({}))
        .await;
    structured(&listed);
    let checked = client.call("checkApp", json!({"app": "expense-log"})).await;
    assert_eq!(status(&checked)["ok"], true, "{}", text(&checked));
    let path = "migrations/001-initial.sql";
    let read = client
        .call("readAppFile", json!({"app": "expense-log", "path": path}))
        .await;
    let content = structured(&read)["content"].as_str().unwrap().to_owned();
    let version = structured(&read)["version"].as_str().unwrap().to_owned();
    let edited = client
        .call(
            "writeAppFile",
            json!({"app": "expense-log", "path": path, "content": format!("-- edited after it ran\n{content}"), "expectedVersion": version}),
        )
        .await;
    let status = status(&edited);
    assert_eq!(status["ok"], false, "{}", text(&edited));
    let diagnostics = status["diagnostics"].as_array().unwrap();
    assert!(
        diagnostics
            .iter()
            .any(|d| d["code"] == "APP_MIGRATION_DRIFT" && d["file"] == path),
        "{diagnostics:?}"
    );
}

/// Issue 21: a manage holder cannot widen who reads rows that exist by
/// editing the manifest, neither directly nor by breaking the package first;
/// an empty table may change freely, and narrowing is always allowed.
#[tokio::test]
async fn a_change_that_widens_who_reads_existing_rows_is_refused() {
    const APP: &str = "expense-log";
    const OWNER: &str = "  expenses:\n    access: owner\n    ownerField: created_by\n";
    let world = McpWorld::start().await;
    let mut client = world.client(&writer_token(&world)).eliciting(|_| json!({}));
    let client = &mut client;
    let manifest = std::fs::read_to_string(package(&world, APP).join("APP.md")).unwrap();
    assert!(manifest.contains(OWNER), "{manifest}");
    // The variants also drop the app-only create action, which stamps
    // created_by and would make them invalid (an invalid package activates
    // nothing, so it is no widening).
    let variant = |replacement: &str| {
        manifest.replace(OWNER, replacement).replace(
            "  - id: add-expense\n    file: actions/add-expense.action.yaml\n",
            "",
        )
    };
    let shared = variant("  expenses:\n    access: shared\n");
    let renamed = variant("  expenses:\n    access: owner\n    ownerField: note\n");
    let write = async |client: &mut Mcp, content: &str| {
        let version = version_of(client, APP, "APP.md").await;
        client
            .call(
                "writeAppFile",
                json!({"app": APP, "path": "APP.md", "content": content, "expectedVersion": version}),
            )
            .await
    };

    // No row yet: nothing to expose, so the table may become shared and back.
    let widened = write(client, &shared).await;
    assert_eq!(status(&widened)["ok"], true, "{}", text(&widened));
    let narrowed = write(client, &manifest).await;
    assert_eq!(status(&narrowed)["ok"], true, "{}", text(&narrowed));

    // One private row.
    let category = confirmed_create(
        client,
        "app__expense_log__categories__create",
        json!({"values": {"name": "Travel"}}),
    )
    .await;
    confirmed_create(
        client,
        "app__expense_log__expenses__create",
        json!({"values": {"spent_on": "2026-12-01", "amount": 9.5, "category_id": category["id"]}}),
    )
    .await;

    let on_disk = || std::fs::read_to_string(package(&world, APP).join("APP.md")).unwrap();
    for (what, content) in [
        ("made shared", &shared),
        ("scoped by another field", &renamed),
    ] {
        let refused = write(client, content).await;
        let error = tool_error(&refused);
        assert_eq!(error["code"], "APP_ACCESS_DENIED", "{what}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains("table expenses") && message.contains("created_by"),
            "{what}: {message}"
        );
        assert_eq!(
            error["details"]["diagnostics"][0]["code"], "DATA_READ_WIDENED",
            "{what}: {error}"
        );
        assert_eq!(
            on_disk(),
            manifest,
            "{what}: the refused write changed nothing"
        );
    }

    // Breaking the package first hides nothing: the policy of the last valid
    // revision is what a change is compared with.
    let broken = write(client, "---\nnot: [valid\n---\n").await;
    assert_eq!(status(&broken)["ok"], false, "{}", text(&broken));
    let refused = write(client, &shared).await;
    assert_eq!(tool_error(&refused)["code"], "APP_ACCESS_DENIED");
    // Restoring the original is a narrowing, and allowed.
    let restored = write(client, &manifest).await;
    assert_eq!(status(&restored)["ok"], true, "{}", text(&restored));
    // An edit is checked like a write.
    let without_action = variant(OWNER);
    let same_policy = write(client, &without_action).await;
    assert_eq!(status(&same_policy)["ok"], true, "{}", text(&same_policy));
    let edit_version = version_of(client, APP, "APP.md").await;
    let edited = client
        .call(
            "editAppFile",
            json!({"app": APP, "path": "APP.md", "oldString": "access: owner\n    ownerField: created_by", "newString": "access: shared", "expectedVersion": edit_version}),
        )
        .await;
    assert_eq!(tool_error(&edited)["code"], "APP_ACCESS_DENIED");
    assert_eq!(on_disk(), without_action);
}

/// Binary assets through the tools: written and read as base64 (text reads
/// unchanged), listed as editable, inlined into the resource once referenced,
/// and refused when the base64 or the bytes are not what the path needs.
#[tokio::test]
async fn binary_assets_are_read_and_written_as_base64() {
    use base64::Engine as _;
    let base64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let world = McpWorld::start().await;
    let mut client = world.client(&writer_token(&world));
    let logo =
        std::fs::read(crate::world::root().join("tests/packages/valid/brand-card/assets/logo.png"))
            .unwrap();

    let written = client
        .call(
            "writeAppFile",
            json!({"app": "hello", "path": "assets/logo.png", "content": base64(&logo), "encoding": "base64"}),
        )
        .await;
    assert_eq!(status(&written)["ok"], true, "{}", text(&written));
    assert_eq!(
        std::fs::read(package(&world, "hello").join("assets/logo.png")).unwrap(),
        logo
    );
    let read = client
        .call(
            "readAppFile",
            json!({"app": "hello", "path": "assets/logo.png"}),
        )
        .await;
    assert_eq!(structured(&read)["encoding"], "base64");
    assert_eq!(structured(&read)["content"], base64(&logo));
    assert_eq!(structured(&read)["bytes"], logo.len());
    assert_eq!(
        structured(&read)["version"],
        structured(&written)["version"]
    );
    // A text file reads exactly as before: no encoding field.
    let app_js = client
        .call("readAppFile", json!({"app": "hello", "path": "app.js"}))
        .await;
    assert!(
        structured(&app_js).get("encoding").is_none(),
        "{}",
        structured(&app_js)
    );
    let listed = client.call("listAppFiles", json!({"app": "hello"})).await;
    let entry = structured(&listed)["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|file| file["path"] == "assets/logo.png")
        .unwrap()
        .clone();
    assert_eq!(entry["editable"], true);
    assert_eq!(entry["bytes"], logo.len());

    // Referenced from the markup, it is inlined into the new revision.
    let version = version_of(&mut client, "hello", "index.html").await;
    let edited = client
        .call(
            "editAppFile",
            json!({"app": "hello", "path": "index.html", "oldString": "src=\"assets/logo.svg\"", "newString": "src=\"assets/logo.png\"", "expectedVersion": version}),
        )
        .await;
    assert_eq!(status(&edited)["ok"], true, "{}", text(&edited));
    let revision = status(&edited)["revision"].as_str().unwrap().to_owned();
    let uri = format!("ui://sasha/apps/hello/revisions/{revision}");
    let resource = client.request("resources/read", json!({"uri": uri})).await;
    let html = resource.result()["contents"][0]["text"].as_str().unwrap();
    assert!(
        html.contains(&format!("src=\"data:image/png;base64,{}\"", base64(&logo))),
        "the PNG is inlined"
    );
    assert!(html.contains("img-src data:; font-src data:;"));

    // Refusals: nothing is written.
    let current = version_of(&mut client, "hello", "assets/logo.png").await;
    let refusals = [
        (
            json!({"content": "not base64!", "encoding": "base64"}),
            "BASE64_INVALID",
        ),
        (
            json!({"content": base64(b"plain text"), "encoding": "base64"}),
            "ASSET_IMAGE_INVALID",
        ),
        (
            json!({"content": base64(&logo[..logo.len() / 2]), "encoding": "base64"}),
            "ASSET_IMAGE_INVALID",
        ),
        (json!({"content": base64(&logo)}), "ENCODING_REQUIRED"),
    ];
    for (arguments, cause) in refusals {
        let mut arguments = arguments;
        arguments["app"] = json!("hello");
        arguments["path"] = json!("assets/logo.png");
        arguments["expectedVersion"] = json!(current);
        let refused = client.call("writeAppFile", arguments).await;
        let error = tool_error(&refused);
        assert_eq!(error["code"], "APP_INPUT_INVALID", "{cause}: {error}");
        assert_eq!(error["details"]["cause"], cause, "{error}");
    }
    let not_for_text = client
        .call(
            "writeAppFile",
            json!({"app": "hello", "path": "notes.txt", "content": base64(b"hi"), "encoding": "base64"}),
        )
        .await;
    assert_eq!(
        tool_error(&not_for_text)["details"]["cause"],
        "ENCODING_NOT_FOR_TEXT"
    );
    // The schema knows only base64.
    let unknown = client
        .call(
            "writeAppFile",
            json!({"app": "hello", "path": "assets/logo.png", "content": "x", "encoding": "hex"}),
        )
        .await;
    assert_eq!(tool_error(&unknown)["code"], "APP_INPUT_INVALID");
    let edit = client
        .call(
            "editAppFile",
            json!({"app": "hello", "path": "assets/logo.png", "oldString": "PNG", "newString": "GIF", "expectedVersion": current}),
        )
        .await;
    assert_eq!(tool_error(&edit)["details"]["cause"], "BINARY_NOT_EDITABLE");
    assert_eq!(
        std::fs::read(package(&world, "hello").join("assets/logo.png")).unwrap(),
        logo
    );
    assert!(!package(&world, "hello").join("notes.txt").exists());
}
