//! The Document Summariser example (`examples/document-summariser`) end to end
//! in real Chromium: `sasha up` with chat pointing at a local fake
//! OpenAI-compatible provider (`common::fake_llm`, echoing word by word), a
//! .docx and a .pdf generated here (`common::documents`), and
//! `tests/browser/summariser.mjs` uploading them, watching the summary stream,
//! and provoking the per-file refusals, the upload limits and `APP_BUSY`.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::time::Duration;

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::documents;
use common::fake_llm::{Behaviour, FakeLlm};
use common::{UpProcess, browser_artifacts, copy_dir, free_port, root};

const APP: &str = "document-summariser";

#[tokio::test]
async fn the_summariser_uploads_and_streams_in_chromium() {
    browser::require();
    let fake = FakeLlm::start(Behaviour::Echo).await;
    let state = tempfile::tempdir().unwrap();
    copy_dir(
        &root().join("examples").join(APP),
        &state.path().join("docs/apps").join(APP),
    );
    let files = tempfile::tempdir().unwrap();
    let write = |name: &str, data: Vec<u8>| std::fs::write(files.path().join(name), data).unwrap();
    write(
        "brief.docx",
        documents::docx(&[
            "Project brief",
            "Ship the beta in March with two pilot customers.",
        ]),
    );
    write(
        "report.pdf",
        documents::text_pdf(&["Quarterly report", "Revenue grew by 12 percent."]),
    );
    write(
        "notes.txt",
        [&b"\x7fELF\x02\x01\x01\0"[..], &[0u8; 256]].concat(),
    );
    write("locked.pdf", documents::encrypted_pdf());

    let port = free_port();
    let up = UpProcess::start_with(
        state.path(),
        port,
        &[
            ("SASHA_BUNDLED_APPS", "off"),
            ("SASHA_CHAT_BASE_URL", &fake.base_url),
            ("SASHA_CHAT_MODEL", "fake-model"),
        ],
    )
    .await;
    let admin: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    let artifacts = browser_artifacts().join("summariser");
    let output = BrowserScript::start(
        "summariser",
        &[
            ("STUDIO_URL", &format!("http://localhost:{port}")),
            ("ADMIN_USER", &admin["username"].as_str().unwrap()),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("DOCUMENTS", &files.path()),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(Duration::from_secs(90), up_stderr_tail(&up))
    .await;
    assert!(output.contains("checks passed"), "{output}");

    // The provider saw the documents' converted text, not their bytes.
    let requests = fake.requests();
    let summary = requests
        .iter()
        .find(|request| {
            request
                .to_string()
                .contains("Documents: @brief.md @report.md")
        })
        .expect("the summary request reached the provider");
    let sent = summary.to_string();
    assert!(sent.contains("Ship the beta in March with two pilot customers."));
    assert!(sent.contains("Revenue grew by 12 percent."));
    // Only the two good documents were stored, as Markdown, in the core
    // database.
    let store = common::core_database::core_store(state.path());
    let stored: Vec<String> = store
        .users()
        .unwrap()
        .iter()
        .flat_map(|user| store.upload_names(&user.id).unwrap())
        .collect();
    assert_eq!(stored, ["brief.md", "report.md"]);
    println!("screenshots in {}", artifacts.display());
}
