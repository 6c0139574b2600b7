//! The browser runtime's error registry is `ErrorCode`'s, generated: this test
//! fails when `package/runtime/sasha-runtime.js` states a code, retryability
//! or default message the registry does not, and with `SASHA_REGENERATE=1`
//! rewrites the block from the registry instead.

use sasha_contract::ErrorCode;

const OPEN: &str = "  var REGISTRY = {\n";
const CLOSE: &str = "  };\n";

#[test]
fn runtime_registry_is_the_error_code_registry() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime/sasha-runtime.js");
    let source = std::fs::read_to_string(&path).unwrap();
    let start = source.find(OPEN).expect("the runtime declares REGISTRY") + OPEN.len();
    let end = start + source[start..].find(CLOSE).expect("REGISTRY is closed");
    let expected = ErrorCode::js_registry();
    if std::env::var_os("SASHA_REGENERATE").is_some() {
        let updated = format!("{}{expected}{}", &source[..start], &source[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert_eq!(
        &source[start..end],
        expected,
        "sasha-runtime.js's REGISTRY differs from ErrorCode; run SASHA_REGENERATE=1 cargo test -p sasha-package runtime_registry"
    );
}

#[test]
fn the_rendered_registry_names_every_code_once() {
    let rendered = ErrorCode::js_registry();
    assert_eq!(rendered.lines().count(), ErrorCode::ALL.len());
    for code in ErrorCode::ALL {
        let line = format!("    {}: [{}, ", code.as_str(), code.retryable());
        assert_eq!(rendered.matches(&line).count(), 1, "{line}");
    }
}
