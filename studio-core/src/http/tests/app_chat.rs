//! `CoreService.Chat` in process, through two studio-core replicas on one
//! core database, each with its own chat service: the proxy balances turns
//! without affinity, so a chat's next turn on the other replica continues
//! the conversation the first kept in the database. The provider is the fake
//! (`tests/common/fake_llm.rs`) echoing how many user turns it was sent. With
//! the assistant's router tests, as both run turns against that fake.

use std::sync::Arc;

use futures::StreamExt as _;
use sasha_proto::pb::core_service_server::CoreService;
use sasha_proto::pb::{self, chat_event::Event};
use studio_assistant::apps::{AppCatalogue as _, CatalogueApp};
use studio_assistant::provider::{ChatConfig, ChatService};
use studio_store::PrincipalKind;
use tonic::Request;

use crate::Core;
use crate::grpc::{CoreGrpc, EntryCache};
use crate::test_world::{WRITER, World, on_both_databases};

use super::fake_llm::{Behaviour, FakeLlm};

/// The example app that declares `chat: true`.
const APP: &str = "document-summariser";

/// Puts the example `APP` into the world's `DOCS_ROOT/apps`.
fn add_example(world: &World) {
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(APP);
    let to = world.apps().join(APP);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// One turn of the admin's Studio session through `core`'s `Chat`: the
/// final text, or the error's code.
async fn turn(core: &Arc<Core>, world: &World, prompt: &str, new_session: bool) -> String {
    let Some(CatalogueApp::Valid(app)) = core.catalogue.app(APP) else {
        panic!("{APP} is not in the catalogue");
    };
    let grpc = CoreGrpc {
        core: core.clone(),
        entries: Arc::new(EntryCache::default()),
    };
    let mut events = grpc
        .chat(Request::new(pb::ChatRequest {
            principal: Some(World::as_kind(
                World::principal(&world.admin, &WRITER),
                PrincipalKind::Session,
            )),
            app_id: APP.to_owned(),
            revision: app.revision,
            prompt: prompt.to_owned(),
            new_session,
        }))
        .await
        .unwrap()
        .into_inner();
    let mut last = None;
    while let Some(event) = events.next().await {
        if let Some(Event::FinalText(text)) = event.unwrap().event {
            last = Some(text);
        }
    }
    last.expect("the turn ended with its final text")
}

on_both_databases! {
#[tokio::test]
async fn a_chat_continues_on_the_other_replica(database) {
    let fake = FakeLlm::start(Behaviour::Echo).await;
    let chat = || ChatService::new(Some(ChatConfig::new(&fake.base_url, "fake").unwrap()));
    let world = World::with_chat_on(database, chat());
    add_example(&world);
    crate::registry::refresh_catalogue(&world.core).await;
    let replica = world.replica_with_chat(chat());
    crate::registry::refresh_catalogue(&replica).await;

    let first = turn(&world.core, &world, "Summarise the plan", true).await;
    assert_eq!(first, "Turn 1: Summarise the plan [documents: none]");
    // The next turn lands on the other replica, and continues the chat.
    let second = turn(&replica, &world, "And the risks?", false).await;
    assert_eq!(second, "Turn 2: And the risks? [documents: none]");
    let sent: Vec<(String, String)> = fake.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| {
            (
                message["role"].as_str().unwrap().to_owned(),
                message["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        sent[1..],
        [
            ("user".to_owned(), "Summarise the plan".to_owned()),
            ("assistant".to_owned(), first.clone()),
            ("user".to_owned(), "And the risks?".to_owned()),
        ]
    );
    // And back: the first replica sees what the second added.
    let third = turn(&world.core, &world, "Which first?", false).await;
    assert_eq!(third, "Turn 3: Which first? [documents: none]");
    // A new session on either starts over for both.
    let fresh = turn(&replica, &world, "Start over", true).await;
    assert_eq!(fresh, "Turn 1: Start over [documents: none]");
    let after = turn(&world.core, &world, "Go on", false).await;
    assert_eq!(after, "Turn 2: Go on [documents: none]");
}
}
