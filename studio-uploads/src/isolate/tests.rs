//! The parent's side of a conversion child, with `/bin/sh` scripts standing in
//! for children that misbehave: each ending becomes its refusal and nothing
//! of the child's output beyond its bounds is believed. The real child
//! (`sasha convert-document`) is driven by `tests/process/assist.rs`.

use std::time::Duration;

use super::*;

fn shell(script: &str, wall: Duration) -> Converter {
    Converter::command("/bin/sh", ["-c", script], wall)
}

const WALL: Duration = Duration::from_secs(20);

#[test]
fn a_child_that_never_answers_is_stopped_at_its_wall_limit() {
    // The wall limit is injected: a child that has not answered within 1 ms
    // is stopped (and `sleep 60` has not), so nothing here waits for it.
    let converter = shell("exec sleep 60", Duration::from_millis(1));
    assert_eq!(
        converter.convert(Some("pdf"), b"%PDF-1.7"),
        Err(Refusal::Exhausted)
    );
}

#[test]
fn a_child_killed_by_a_signal_is_exhausted() {
    for signal in ["SEGV", "ABRT", "KILL", "XCPU"] {
        let converter = shell(&format!("cat >/dev/null; kill -{signal} $$"), WALL);
        assert_eq!(
            converter.convert(Some("pdf"), b"%PDF-1.7"),
            Err(Refusal::Exhausted),
            "{signal}"
        );
    }
}

#[test]
fn a_child_that_fails_or_answers_nonsense_is_a_failed_conversion() {
    let oversized = format!("head -c {} /dev/zero", MAX_REPLY_BYTES + 10);
    for script in [
        "cat >/dev/null; exit 1",
        "cat >/dev/null; printf 'not a reply'",
        "cat >/dev/null",
        oversized.as_str(),
        // Never reads its input (the parent's write fails, nothing hangs).
        "exit 0",
    ] {
        assert_eq!(
            shell(script, WALL).convert(Some("txt"), &[b'a'; 1 << 20]),
            Err(Refusal::Failed),
            "{script}"
        );
    }
    let missing = Converter::command("/nonexistent/sasha", ["convert-document"], WALL);
    assert_eq!(missing.convert(Some("txt"), b"a"), Err(Refusal::Failed));
}

#[test]
fn a_childs_answer_is_taken_within_its_bounds() {
    // ConvertReply { markdown: "# Hi" } and { refused: "no\nway" }.
    let markdown = shell(r"cat >/dev/null; printf '\012\004# Hi'", WALL);
    assert_eq!(markdown.convert(Some("md"), b"# Hi"), Ok("# Hi".to_owned()));
    let refused = shell(r"cat >/dev/null; printf '\022\006no\nway'", WALL);
    assert_eq!(
        refused.convert(Some("md"), b"x"),
        Err(Refusal::Reported("noway".to_owned()))
    );
}
