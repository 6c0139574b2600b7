//! `createApp` through the gateway in front of real studio-core and
//! data-worker: who gets the tool, its
//! refusals (each with its envelope), and an app created from nothing that is
//! live at once: its opener and table tools appear, a row is written and read
//! back through them, the source tools work on it, members see nothing, and
//! the creation is audited.

use serde_json::{Value, json};
use studio_store::Scope;

use crate::mcp::{confirmed_create, structured, tool_error, tool_names};
use crate::world::{World as McpWorld, token};

const WRITER: [Scope; 3] = [Scope::ChatUse, Scope::AppsInvoke, Scope::AppsWrite];

fn text(exchange: &crate::mcp::Exchange) -> String {
    exchange.result()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn an_app_created_through_mcp_is_live_at_once() {
    let world = McpWorld::start().await;
    let writer = token(&world.store, &world.staff, &WRITER);
    // Declares elicitation, so a model-invoked row write can be confirmed.
    let mut client = world.client(&writer).eliciting(|_| json!({}));

    // Listed beside the source tools, strict about its arguments.
    let tools = client.request("tools/list", json!({})).await;
    let create = tools.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "createApp")
        .expect("createApp is listed for a writer")
        .clone();
    assert_eq!(create["inputSchema"]["additionalProperties"], false);
    assert_eq!(create["annotations"]["readOnlyHint"], false);

    // Refusals, each with its code and a message that says what to fix.
    let long_name = "n".repeat(81);
    let long_description = "d".repeat(301);
    let refusals: [(Value, &str, &str); 8] = [
        (
            json!({"app": "Expense Claims", "name": "Expense claims", "description": "Claims"}),
            "APP_INPUT_INVALID",
            "lowercase kebab-case",
        ),
        (
            json!({"app": "expense_claims", "name": "Expense claims", "description": "Claims"}),
            "APP_INPUT_INVALID",
            "lowercase kebab-case",
        ),
        (
            json!({"app": "expense-claims", "name": "Expense claims", "description": "Claims", "owner": "me"}),
            "APP_INPUT_INVALID",
            "owner",
        ),
        (
            json!({"app": "expense-claims", "name": long_name, "description": "Claims"}),
            "APP_INPUT_INVALID",
            "80",
        ),
        (
            json!({"app": "expense-claims", "name": "Expense claims", "description": long_description}),
            "APP_INPUT_INVALID",
            "/description",
        ),
        (
            json!({"app": "expense-claims", "name": "   ", "description": "Claims"}),
            "APP_INPUT_INVALID",
            "name must be 1 to 80 characters",
        ),
        (
            json!({"app": "expense-claims", "name": "Expense claims"}),
            "APP_INPUT_INVALID",
            "description",
        ),
        (
            json!({"app": "hello", "name": "Hello again", "description": "Taken"}),
            "APP_CONFLICT",
            "never reused",
        ),
    ];
    for (arguments, code, message) in refusals {
        let refused = client.call("createApp", arguments.clone()).await;
        let envelope = tool_error(&refused);
        assert_eq!(envelope["code"], code, "{arguments}: {envelope}");
        assert!(
            envelope["message"].as_str().unwrap().contains(message),
            "{arguments}: {envelope}"
        );
    }
    assert!(!world.path().join("docs/apps/expense-claims").exists());

    // Without apps:write the tool is not listed, and a call is "not found".
    let mut invoker = world.client(&world.staff_token);
    assert!(
        !tool_names(&invoker.request("tools/list", json!({})).await)
            .contains(&"createApp".to_owned())
    );
    let refused = invoker
        .call(
            "createApp",
            json!({"app": "sneaky", "name": "Sneaky", "description": "No"}),
        )
        .await;
    assert_eq!(refused.error()["code"], -32602);
    let member_token = token(
        &world.store,
        &world.member,
        &[Scope::ChatUse, Scope::AppsInvoke],
    );
    let mut member = world.client(&member_token);
    let refused = member
        .call(
            "createApp",
            json!({"app": "sneaky", "name": "Sneaky", "description": "No"}),
        )
        .await;
    assert_eq!(refused.error()["code"], -32602);
    assert!(!world.path().join("docs/apps/sneaky").exists());

    // Created with a table: valid, registered, managed by its creator.
    let created = client
        .call(
            "createApp",
            json!({"app": "expense-claims", "name": "Expense claims", "description": "Claims to reimburse", "withTable": true}),
        )
        .await;
    let result = structured(&created).clone();
    assert_eq!(result["app"], "expense-claims");
    assert_eq!(result["status"]["ok"], true, "{result}");
    assert_eq!(result["status"]["diagnostics"], json!([]));
    let revision = result["status"]["revision"].as_str().unwrap().to_owned();
    let said = text(&created);
    assert!(
        said.starts_with("Created the app expense-claims. Open it with open_app__expense_claims;"),
        "{said}"
    );
    assert!(said.ends_with(&format!(
        "The app validates; its live revision is {revision}."
    )));

    // Live on the very next listing: the opener and the table's tools.
    let listed = tool_names(&client.request("tools/list", json!({})).await);
    for name in [
        "open_app__expense_claims",
        "app__expense_claims__items__list",
        "app__expense_claims__items__create",
    ] {
        assert!(
            listed.contains(&name.to_owned()),
            "{name} missing: {listed:?}"
        );
    }
    let resources = client.request("resources/list", json!({})).await;
    assert!(
        resources.result()["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|resource| resource["uri"]
                == format!("ui://sasha/apps/expense-claims/revisions/{revision}")),
        "{}",
        resources.body
    );

    // Its table works: a confirmed create, read back, owned by the creator.
    let row = confirmed_create(
        &mut client,
        "app__expense_claims__items__create",
        json!({"values": {"title": "Train to Leeds"}, "idempotencyKey": "claim-1"}),
    )
    .await;
    assert_eq!(row["title"], "Train to Leeds", "{row}");
    let rows = client
        .call("app__expense_claims__items__list", json!({}))
        .await;
    let rows = structured(&rows)["rows"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["created_by"], world.staff.id.as_str());

    // The source tools take over from here.
    let listed = client
        .call("listAppFiles", json!({"app": "expense-claims"}))
        .await;
    let files: Vec<String> = structured(&listed)["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| file["path"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        files,
        [
            "APP.md",
            "app.js",
            "index.html",
            "migrations/001-initial.sql",
            "schema.sql",
            "styles.css"
        ]
    );
    assert_eq!(structured(&listed)["status"]["revision"], revision.as_str());

    // Members get nothing (first discovery grants admin and staff only).
    let member_tools = tool_names(&member.request("tools/list", json!({})).await);
    assert!(
        !member_tools
            .iter()
            .any(|name| name.contains("expense_claims")),
        "{member_tools:?}"
    );

    // Audited: who created it, with the revision, then the registration.
    let audit = world.store.audit_entries(Some("expense-claims")).unwrap();
    let created = audit
        .iter()
        .find(|entry| entry.action == "app.created")
        .expect("the creation is audited");
    assert_eq!(created.actor, world.staff.id);
    assert_eq!(created.after.as_deref(), Some(revision.as_str()));
    assert!(audit.iter().any(|entry| entry.action == "app.registered"));
    assert!(audit.iter().any(|entry| entry.action == "grant.changed"
        && entry.subject.as_deref() == Some(world.staff.id.as_str())
        && entry.after.as_deref() == Some("manage")));

    // Without a table: an app with no data and no table tools.
    let plain = client
        .call(
            "createApp",
            json!({"app": "welcome-page", "name": "Welcome <b>page</b>", "description": "Says \"hello\""}),
        )
        .await;
    assert_eq!(structured(&plain)["status"]["ok"], true, "{}", plain.body);
    let listed = tool_names(&client.request("tools/list", json!({})).await);
    assert!(listed.contains(&"open_app__welcome_page".to_owned()));
    assert!(
        !listed
            .iter()
            .any(|name| name.starts_with("app__welcome_page__"))
    );

    // And the id stays taken.
    let again = client
        .call(
            "createApp",
            json!({"app": "expense-claims", "name": "Again", "description": "Again"}),
        )
        .await;
    assert_eq!(tool_error(&again)["code"], "APP_CONFLICT");
}

/// The habit log package as the member app tools take it.
fn habit_log() -> Value {
    let dir = crate::world::root().join("tests/browser/apps/habit-log");
    let files: Vec<Value> = [
        "APP.md",
        "index.html",
        "styles.css",
        "app.js",
        "schema.sql",
        "migrations/001-initial.sql",
    ]
    .iter()
    .map(|path| json!({"path": path, "content": std::fs::read_to_string(dir.join(path)).unwrap()}))
    .collect();
    Value::Array(files)
}

#[tokio::test]
async fn a_member_deploys_their_own_app_through_mcp_after_saying_yes() {
    const AUTHOR: [Scope; 2] = [Scope::AppsInvoke, Scope::AppsAuthor];
    let world = McpWorld::start().await;
    let author = token(&world.store, &world.member, &AUTHOR);
    let mut client = world.client(&author).eliciting(|_| json!({}));

    // The member app tools, never the catalogue's source tools.
    let names = tool_names(&client.request("tools/list", json!({})).await);
    for tool in ["listMyApps", "checkMyApp", "deployMyApp", "deleteMyApp"] {
        assert!(names.iter().any(|name| name == tool), "{tool}: {names:?}");
    }
    for tool in [
        "listAppFiles",
        "writeAppFile",
        "createApp",
        "publishAppDraft",
    ] {
        assert!(!names.iter().any(|name| name == tool), "{tool}: {names:?}");
    }

    // A check with a shared table names the member tier's rule.
    let mut shared = habit_log();
    let manifest = shared[0]["content"].as_str().unwrap().replace(
        "    access: owner\n    ownerField: created_by\n",
        "    access: shared\n",
    );
    shared[0]["content"] = json!(manifest);
    let checked = client.call("checkMyApp", json!({"files": shared})).await;
    let checked = structured(&checked);
    assert_eq!(checked["ok"], false);
    assert_eq!(checked["diagnostics"][0]["code"], "MEMBER_TABLE_SHARED");

    // The deploy asks the person; a no stores nothing. A new app names no
    // id: the platform gives it one.
    let arguments = json!({"name": "Habit Log", "files": habit_log()});
    let asked = client.call("deployMyApp", arguments.clone()).await;
    let asked = asked.result().clone();
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let question = asked["inputRequests"]["confirm"]["params"]["message"]
        .as_str()
        .unwrap();
    assert!(
        question.contains("Deploy the new member app \"Habit Log\":"),
        "{question}"
    );
    let declined = client
        .request(
            "tools/call",
            json!({"name": "deployMyApp", "arguments": arguments, "requestState": asked["requestState"], "inputResponses": {"confirm": {"action": "decline"}}}),
        )
        .await;
    assert_eq!(tool_error(&declined)["code"], "APP_CONFIRMATION_REQUIRED");
    assert!(world.store.member_apps(None).unwrap().is_empty());

    // Yes: it is live at once for its author, with its own table tools.
    let deployed = crate::mcp::confirmed_call(&mut client, "deployMyApp", arguments).await;
    let deployed = structured(&deployed).clone();
    let id = deployed["app"]["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("member-"), "{id}");
    let tool_id = id.replace('-', "_");
    let revision = deployed["app"]["revision"].as_str().unwrap().to_owned();
    let names = tool_names(&client.request("tools/list", json!({})).await);
    assert!(
        names
            .iter()
            .any(|name| *name == format!("open_app__{tool_id}")),
        "{names:?}"
    );
    let row = confirmed_create(
        &mut client,
        &format!("app__{tool_id}__habits__create"),
        json!({"values": {"title": "Read"}}),
    )
    .await;
    assert_eq!(row["title"], "Read", "{row}");

    // Another member cannot change it, read it, or learn that it exists.
    let other = world
        .store
        .create_user(
            "ola",
            studio_store::UserRole::Member,
            "correct horse battery",
        )
        .unwrap();
    let other_token = token(&world.store, &other, &AUTHOR);
    let mut intruder = world.client(&other_token).eliciting(|_| json!({}));
    let mut refusals = Vec::new();
    for app in [id.as_str(), "no-such-app"] {
        let update = intruder
            .call(
                "deployMyApp",
                json!({"app": app, "name": "Mine", "files": habit_log(), "expectedRevision": revision}),
            )
            .await;
        let refused = tool_error(&update).clone();
        assert_eq!(refused["code"], "APP_ACCESS_DENIED", "{refused}");
        let read = intruder.call("readMyApp", json!({"app": app})).await;
        assert_eq!(tool_error(&read)["message"], refused["message"]);
        refusals.push(refused["message"].clone());
    }
    assert_eq!(refusals[0], refusals[1]);
    let names = tool_names(&intruder.request("tools/list", json!({})).await);
    assert!(
        !names.iter().any(|name| name.contains(&tool_id)),
        "{names:?}"
    );

    // Turned off: the building tools go, the app keeps working, deleting stays.
    world
        .store
        .set_member_apps_enabled(false, "operator")
        .unwrap();
    let names = tool_names(&client.request("tools/list", json!({})).await);
    for tool in ["checkMyApp", "deployMyApp", "revertMyApp"] {
        assert!(!names.iter().any(|name| name == tool), "{tool}: {names:?}");
    }
    let docs = client
        .call("getDocs", json!({"section": "member-apps"}))
        .await;
    assert_eq!(tool_error(&docs)["code"], "APP_NOT_FOUND");
    let rows = client
        .call(&format!("app__{tool_id}__habits__list"), json!({}))
        .await;
    assert_eq!(structured(&rows)["rows"][0]["title"], "Read");
    // Deleting takes every sharee's rows: the person is asked first, and
    // nothing goes until they say yes.
    let asked = client
        .call("deleteMyApp", json!({"app": id}))
        .await
        .result()
        .clone();
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let question = asked["inputRequests"]["confirm"]["params"]["message"]
        .as_str()
        .unwrap();
    assert!(question.contains("Delete the member app"), "{question}");
    let rows = client
        .call(&format!("app__{tool_id}__habits__list"), json!({}))
        .await;
    assert_eq!(structured(&rows)["rows"][0]["title"], "Read", "still there");
    let deleted = crate::mcp::confirmed_call(&mut client, "deleteMyApp", json!({"app": id})).await;
    assert_eq!(structured(&deleted)["deleted"], id.as_str());
    let names = tool_names(&client.request("tools/list", json!({})).await);
    assert!(
        !names.iter().any(|name| name.contains(&tool_id)),
        "{names:?}"
    );
}
