//! The confirmation matrix: every kind of change a model asks for (a table
//! write, a model-visible mutating action, a draft's publication, a member
//! app's share) × every outcome of asking the person: yes, no, cancel, an
//! accept without the form's `confirm: true`, a client that cannot be asked,
//! a sessionless answer redeemed twice, by another user or after it
//! expired, a legacy session's elicitation answered each way, and a chat
//! session, which is never asked. Each row asks about its own change and
//! checks whether it happened.

use serde_json::{Value, json};
use studio_store::{Scope, TokenKind, UserRole};

use crate::mcp::{
    Exchange, LEGACY, Mcp, confirmed_call, question_state, structured, tool_error, yes,
};
use crate::world::{PASSWORD, World, copy_dir, fixtures, root};

/// Every scope a staff user's connection may hold.
const EVERYTHING: [Scope; 4] = [
    Scope::ChatUse,
    Scope::AppsInvoke,
    Scope::AppsWrite,
    Scope::AppsAuthor,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    /// `app__expense_log__categories__create`.
    Row,
    /// `app__expense_model__add_expense`, an action exposed to the model.
    Action,
    /// `publishAppDraft` of `hello`.
    Publish,
    /// `shareMyApp` of the staff user's member app.
    Share,
}

const CHANGES: [Change; 4] = [Change::Row, Change::Action, Change::Publish, Change::Share];

/// The world: the fixtures, `expense-model` (expense-log with `add-expense`
/// exposed to the model), a category in it, and a member app of the staff
/// user's.
struct Setup {
    world: World,
    /// The member app the share rows share.
    member_app: String,
    /// The staff user's connection, for reading what happened.
    reader: String,
}

async fn setup() -> Setup {
    let packages = tempfile::tempdir().unwrap();
    let model = packages.path().join("expense-model");
    copy_dir(&fixtures().join("expense-log"), &model);
    let manifest = std::fs::read_to_string(model.join("APP.md"))
        .unwrap()
        .replace("id: expense-log", "id: expense-model")
        .replace(
            "  - id: add-expense\n    file: actions/add-expense.action.yaml\n",
            "  - id: add-expense\n    file: actions/add-expense.action.yaml\n    exposeToModel: true\n",
        );
    std::fs::write(model.join("APP.md"), manifest).unwrap();
    let world = World::with_packages(&[&model]).await;
    let reader = world.token(&world.staff, &EVERYTHING);
    // The page (the app's own UI) writes without asking.
    let mut page = world.studio_page(&world.session(&world.staff), "expense-model");
    let category = page
        .call(
            "app__expense_model__categories__create",
            json!({"values": {"name": "Travel"}}),
        )
        .await;
    assert_eq!(structured(&category)["id"], 1);
    let mut author = world.client(&reader).eliciting(|_| json!({}));
    let deployed = confirmed_call(
        &mut author,
        "deployMyApp",
        json!({"name": "Habit Log", "files": habit_log()}),
    )
    .await;
    let member_app = structured(&deployed)["app"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    Setup {
        world,
        member_app,
        reader,
    }
}

/// The habit log package as the member app tools take it.
fn habit_log() -> Value {
    let dir = root().join("tests/browser/apps/habit-log");
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

impl Setup {
    fn reader(&self) -> Mcp {
        self.world.client(&self.reader)
    }

    /// The tool of `change`, and the arguments of a fresh one named `label`.
    async fn fresh(&self, change: Change, label: &str) -> (&'static str, Value) {
        match change {
            Change::Row => (
                "app__expense_log__categories__create",
                json!({"values": {"name": label}}),
            ),
            Change::Action => (
                "app__expense_model__add_expense",
                json!({"spent_on": "2026-09-08", "amount": 1, "category_id": 1, "note": label}),
            ),
            Change::Publish => {
                // The draft's styles carry the label; the review gives what
                // the publication binds.
                let mut reader = self.reader();
                // The draft's file, or the live one a first draft write
                // starts from.
                let mut read = reader
                    .call(
                        "readAppFile",
                        json!({"app": "hello", "path": "styles.css", "draft": true}),
                    )
                    .await;
                if read.result()["isError"] == true {
                    assert_eq!(tool_error(&read)["details"]["cause"], "DRAFT_NOT_FOUND");
                    read = reader
                        .call("readAppFile", json!({"app": "hello", "path": "styles.css"}))
                        .await;
                }
                let read = structured(&read).clone();
                let written = reader
                    .call(
                        "writeAppFile",
                        json!({"app": "hello", "path": "styles.css", "draft": true,
                               "content": format!("/* {label} */\n{}", read["content"].as_str().unwrap()),
                               "expectedVersion": read["version"]}),
                    )
                    .await;
                structured(&written);
                let review = reader
                    .call("checkApp", json!({"app": "hello", "draft": true}))
                    .await;
                let draft = &structured(&review)["draft"];
                (
                    "publishAppDraft",
                    json!({"app": "hello", "expectedRevision": draft["baseRevision"], "contentHash": draft["contentHash"]}),
                )
            }
            Change::Share => {
                self.world
                    .store
                    .create_user(label, UserRole::Member, PASSWORD)
                    .unwrap();
                (
                    "shareMyApp",
                    json!({"app": self.member_app, "username": label}),
                )
            }
        }
    }

    /// How many changes named `label` happened.
    async fn happened(&self, change: Change, label: &str) -> usize {
        let mut reader = self.reader();
        match change {
            Change::Row => {
                let rows = reader
                    .call("app__expense_log__categories__list", json!({"limit": 200}))
                    .await;
                count(&structured(&rows)["rows"], "name", label)
            }
            Change::Action => {
                let rows = reader
                    .call("app__expense_model__expenses__list", json!({"limit": 200}))
                    .await;
                count(&structured(&rows)["rows"], "note", label)
            }
            Change::Publish => {
                let live = reader
                    .call("readAppFile", json!({"app": "hello", "path": "styles.css"}))
                    .await;
                usize::from(
                    structured(&live)["content"]
                        .as_str()
                        .unwrap()
                        .contains(&format!("/* {label} */")),
                )
            }
            Change::Share => {
                let apps = reader.call("listMyApps", json!({})).await;
                let app = structured(&apps)["apps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|app| app["id"] == self.member_app)
                    .unwrap()
                    .clone();
                usize::from(app["shares"].as_array().unwrap().contains(&json!(label)))
            }
        }
    }

    /// Where the person can make `change` themselves, which a platform or
    /// member refusal names.
    fn place(change: Change) -> Option<&'static str> {
        match change {
            Change::Row | Change::Action => None,
            Change::Publish => Some("Studio's Draft page"),
            Change::Share => Some("App Studio"),
        }
    }
}

fn count(rows: &Value, field: &str, label: &str) -> usize {
    rows.as_array()
        .unwrap()
        .iter()
        .filter(|row| row[field] == label)
        .count()
}

/// `APP_CONFIRMATION_REQUIRED`, never a question, naming where to go.
fn not_confirmed(exchange: &Exchange, change: Change) -> String {
    let result = exchange.result();
    assert_ne!(result["resultType"], "input_required", "{result}");
    let envelope = tool_error(exchange);
    assert_eq!(
        envelope["code"], "APP_CONFIRMATION_REQUIRED",
        "{change:?}: {envelope}"
    );
    envelope["message"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_sessionless_answer_runs_a_change_only_on_an_explicit_yes() {
    let setup = setup().await;
    let world = &setup.world;
    let staff = world.token(&world.staff, &EVERYTHING);
    let admin = world.token(&world.admin, &EVERYTHING);
    for change in CHANGES {
        let label = |row: &str| format!("{}{row}", format!("{change:?}").to_lowercase());
        let mut asking = world.client(&staff).eliciting(|_| json!({}));

        // Yes: it runs, once.
        let (tool, arguments) = setup.fresh(change, &label("yes")).await;
        let asked = asking.call(tool, arguments.clone()).await;
        let question = &asked.result()["inputRequests"]["confirm"]["params"];
        assert_eq!(question["mode"], "form", "{change:?}");
        assert!(question["message"].as_str().is_some_and(|m| !m.is_empty()));
        let state = question_state(&asked);
        let ran = asking.answer(tool, arguments.clone(), &state, yes()).await;
        structured(&ran);
        assert_eq!(setup.happened(change, &label("yes")).await, 1, "{change:?}");

        // Redeemed again, a data change replays its write and a share is
        // the same share: never a second change.
        if matches!(change, Change::Row | Change::Action | Change::Share) {
            let again = asking.answer(tool, arguments, &state, yes()).await;
            if change == Change::Row {
                assert_eq!(structured(&again)["id"], structured(&ran)["id"]);
            } else {
                structured(&again);
            }
            assert_eq!(setup.happened(change, &label("yes")).await, 1, "{change:?}");
        }

        // No, cancel, or an accept without the form's `confirm: true`: not
        // run; a no voids its token, so a yes sent after it runs nothing.
        for (row, answer) in [
            ("no", json!({"action": "decline"})),
            ("cancel", json!({"action": "cancel"})),
            ("empty", json!({"action": "accept"})),
            ("blank", json!({"action": "accept", "content": {}})),
            (
                "text",
                json!({"action": "accept", "content": {"confirm": "true"}}),
            ),
        ] {
            let (tool, arguments) = setup.fresh(change, &label(row)).await;
            let state = question_state(&asking.call(tool, arguments.clone()).await);
            let refused = asking.answer(tool, arguments.clone(), &state, answer).await;
            not_confirmed(&refused, change);
            if row == "no" {
                let late = asking.answer(tool, arguments, &state, yes()).await;
                not_confirmed(&late, change);
            }
            assert_eq!(
                setup.happened(change, &label(row)).await,
                0,
                "{change:?} {row}"
            );
        }

        // Another user's answer redeems nothing (and spends nothing: the
        // person's own yes still runs it).
        let (tool, arguments) = setup.fresh(change, &label("theirs")).await;
        let state = question_state(&asking.call(tool, arguments.clone()).await);
        let mut other = world.client(&admin).eliciting(|_| json!({}));
        let stolen = other.answer(tool, arguments.clone(), &state, yes()).await;
        assert!(
            not_confirmed(&stolen, change).contains("not valid for this call"),
            "{change:?}"
        );
        assert_eq!(setup.happened(change, &label("theirs")).await, 0);
        structured(&asking.answer(tool, arguments, &state, yes()).await);
        assert_eq!(setup.happened(change, &label("theirs")).await, 1);

        // An answer after the token's ten minutes runs nothing.
        let (tool, arguments) = setup.fresh(change, &label("late")).await;
        let state = question_state(&asking.call(tool, arguments.clone()).await);
        world.advance(10 * 60 + 1);
        let late = asking.answer(tool, arguments, &state, yes()).await;
        assert!(not_confirmed(&late, change).contains("not valid for this call"));
        assert_eq!(setup.happened(change, &label("late")).await, 0);

        // A client that cannot be asked is refused, told where the person
        // can make the change.
        let (tool, arguments) = setup.fresh(change, &label("blind")).await;
        let refused = world.client(&staff).call(tool, arguments).await;
        let message = not_confirmed(&refused, change);
        if let Some(place) = Setup::place(change) {
            assert!(message.contains(place), "{message}");
        }
        assert_eq!(setup.happened(change, &label("blind")).await, 0);
    }
}

#[tokio::test]
async fn a_session_client_is_asked_by_elicitation() {
    let setup = setup().await;
    let world = &setup.world;
    let staff = vec![(
        "authorization".to_owned(),
        format!("Bearer {}", world.token(&world.staff, &EVERYTHING)),
    )];
    for change in CHANGES {
        let label = |row: &str| format!("{}{row}", format!("{change:?}").to_lowercase());
        for (row, answer, runs) in [
            ("yes", Some(yes()), true),
            ("no", Some(json!({"action": "decline"})), false),
            ("cancel", Some(json!({"action": "cancel"})), false),
            (
                "blank",
                Some(json!({"action": "accept", "content": {}})),
                false,
            ),
            ("blind", None, false),
        ] {
            let mut client = Mcp::new(world.router(), staff.clone(), LEGACY);
            client = match answer {
                Some(answer) => {
                    // The answer as each row gives it, sent back through the
                    // call's open stream.
                    let respond: fn(&Value) -> Value = match row {
                        "yes" => |_| yes(),
                        "no" => |_| json!({"action": "decline"}),
                        "cancel" => |_| json!({"action": "cancel"}),
                        _ => |_| json!({"action": "accept", "content": {}}),
                    };
                    assert_eq!(respond(&Value::Null), answer);
                    client.eliciting(respond)
                }
                None => client,
            };
            let initialized = client.initialize().await;
            assert!(client.session.is_some(), "{:?}", initialized.body);
            let (tool, arguments) = setup.fresh(change, &label(row)).await;
            let called = client.call(tool, arguments).await;
            if runs {
                structured(&called);
            } else {
                let message = not_confirmed(&called, change);
                if let Some(place) = Setup::place(change) {
                    assert!(message.contains(place), "{message}");
                }
            }
            assert_eq!(
                setup.happened(change, &label(row)).await,
                usize::from(runs),
                "{change:?} {row}"
            );
        }
    }
}

/// A chat session's client is driven by its model: it is never asked, never
/// handed a token, and an answer it sends back is never redeemed, even one
/// to a question asked of the same user's other connection.
#[tokio::test]
async fn a_chat_session_never_confirms() {
    let setup = setup().await;
    let world = &setup.world;
    let chat = world.token_of(&world.staff, TokenKind::ChatSession, &EVERYTHING);
    let staff = world.token(&world.staff, &EVERYTHING);
    for change in CHANGES {
        let label = |row: &str| format!("{}{row}", format!("{change:?}").to_lowercase());
        let mut model = world
            .client(&chat)
            .eliciting(|_| json!({"action": "accept", "content": {"confirm": true}}));
        let (tool, arguments) = setup.fresh(change, &label("chat")).await;
        let refused = model.call(tool, arguments).await;
        let message = not_confirmed(&refused, change);
        assert!(!refused.body.to_string().contains("requestState"));
        match Setup::place(change) {
            Some(place) => assert!(message.contains(place), "{message}"),
            None => assert!(message.contains("Studio's assistant"), "{message}"),
        }
        assert_eq!(setup.happened(change, &label("chat")).await, 0);

        // The person's other connection was asked; the chat session sends
        // its answer back.
        let (tool, arguments) = setup.fresh(change, &label("relayed")).await;
        let mut person = world.client(&staff).eliciting(|_| json!({}));
        let state = question_state(&person.call(tool, arguments.clone()).await);
        let relayed = model.answer(tool, arguments, &state, yes()).await;
        not_confirmed(&relayed, change);
        assert_eq!(
            setup.happened(change, &label("relayed")).await,
            0,
            "{change:?}"
        );
    }
}
