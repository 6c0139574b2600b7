//! The streamed `/chat/completions` answer: server-sent events whose `data`
//! is a JSON chunk (`choices[0].delta.content`), ending with `data: [DONE]`.
//!
//! Tolerates what real servers send: CRLF or CR line ends, comment and
//! keep-alive lines, `event:`/`id:`/`retry:` fields, chunks with only a `role`,
//! empty or null content, chunks without choices (usage), and `finish_reason`.
//! Bounded: a line longer than [`MAX_LINE_BYTES`] is an error.
//!
//! Hand-written rather than `eventsource-stream` (0.2.3), which was measured
//! against this parser (release build, the same bytes fed in the same
//! chunks) and does not do the job here:
//!
//! - it cannot bound memory: its line buffer grows until a line ends, and
//!   after one invalid UTF-8 byte it holds every later byte until the body
//!   ends (it waits for the sequence to complete), so a bound would need a
//!   line splitter in front of it anyway;
//! - it copies the rest of its buffer for every line it takes off and
//!   parses the buffer again from the start for every chunk: 1 MiB of blank
//!   lines in 16 KiB chunks took it 5 to 6 s of CPU on the async thread
//!   (this parser 2 to 4 ms), one 1 MiB line in 1 KiB chunks 0.55 s (3 ms),
//!   and even a plain 20,000-event answer in 256 KiB chunks 130 ms (12 ms);
//! - it drops an event the body ends without a blank line after, which some
//!   servers do after `data: [DONE]` (see [`SseParser::finish`]), and fails
//!   where this parser reads lossily (invalid UTF-8 in a comment).

/// The longest accepted line of the event stream.
pub(crate) const MAX_LINE_BYTES: usize = 1024 * 1024;

/// What one event of the stream meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// A chunk: its content delta (possibly empty), its tool call deltas (the
    /// assistant's rounds; none for an app's chat) and whether it carried a
    /// `finish_reason`.
    Chunk {
        content: String,
        tool_calls: Vec<ToolCallDelta>,
        finished: bool,
    },
    /// `data: [DONE]`: the answer is complete.
    Done,
}

/// One piece of a streamed tool call (`delta.tool_calls[]`): the call's
/// `index` in the answer, its id and function name (in the first piece) and
/// a piece of its JSON arguments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ToolCallDelta {
    pub(crate) index: usize,
    pub(crate) id: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) arguments: String,
}

/// Why the stream cannot be read. The detail is for the log only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StreamError {
    #[error("an event stream line is longer than {MAX_LINE_BYTES} bytes")]
    LineTooLong,
    #[error("an event is not a chat completion chunk: {reason}")]
    Malformed { reason: String },
    #[error("the provider reported an error in the stream: {detail}")]
    Provider { detail: String },
}

/// Incremental parser: feed it the body's bytes as they arrive.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// The bytes of the current, unfinished line.
    line: Vec<u8>,
    /// The `data` lines of the current, undispatched event.
    data: Option<String>,
    /// The previous byte was a CR, so a following LF belongs to it.
    after_cr: bool,
}

impl SseParser {
    /// Consumes `bytes` and returns the events they completed.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<Vec<Event>, StreamError> {
        let mut events = Vec::new();
        for &byte in bytes {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    self.line(&line, &mut events)?;
                }
                _ => {
                    self.after_cr = false;
                    if self.line.len() >= MAX_LINE_BYTES {
                        return Err(StreamError::LineTooLong);
                    }
                    self.line.push(byte);
                }
            }
        }
        Ok(events)
    }

    /// The body ended: dispatches an event that was not followed by a blank
    /// line (some servers close right after `data: [DONE]`).
    pub(crate) fn finish(&mut self) -> Result<Vec<Event>, StreamError> {
        let mut events = Vec::new();
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() {
            self.line(&line, &mut events)?;
        }
        self.dispatch(&mut events)?;
        Ok(events)
    }

    fn line(&mut self, line: &[u8], events: &mut Vec<Event>) -> Result<(), StreamError> {
        if line.is_empty() {
            return self.dispatch(events);
        }
        let line = String::from_utf8_lossy(line);
        if line.starts_with(':') {
            return Ok(()); // a comment or keep-alive
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        if field == "data" {
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            }
        }
        Ok(())
    }

    fn dispatch(&mut self, events: &mut Vec<Event>) -> Result<(), StreamError> {
        if let Some(data) = self.data.take() {
            events.extend(parse_data(&data)?);
        }
        Ok(())
    }
}

/// One event's data: `[DONE]`, or a chat completion chunk.
fn parse_data(data: &str) -> Result<Option<Event>, StreamError> {
    let data = data.trim();
    if data.is_empty() {
        return Ok(None);
    }
    if data == "[DONE]" {
        return Ok(Some(Event::Done));
    }
    let chunk: serde_json::Value =
        serde_json::from_str(data).map_err(|error| StreamError::Malformed {
            reason: error.to_string(),
        })?;
    parse_chunk(&chunk)
}

/// One chat completion chunk, already parsed as JSON.
pub(crate) fn parse_chunk(chunk: &serde_json::Value) -> Result<Option<Event>, StreamError> {
    if let Some(error) = chunk.get("error") {
        return Err(StreamError::Provider {
            detail: bounded(&error.to_string()),
        });
    }
    let Some(object) = chunk.as_object() else {
        return Err(StreamError::Malformed {
            reason: "the chunk is not a JSON object".to_owned(),
        });
    };
    let choice = match object.get("choices") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Array(choices)) => choices.first(),
        Some(_) => {
            return Err(StreamError::Malformed {
                reason: "choices is not an array".to_owned(),
            });
        }
    };
    let Some(choice) = choice else {
        // A usage-only chunk, or an empty keep-alive object.
        return Ok(Some(Event::Chunk {
            content: String::new(),
            tool_calls: Vec::new(),
            finished: false,
        }));
    };
    let content = match choice.pointer("/delta/content") {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(_) => {
            return Err(StreamError::Malformed {
                reason: "delta.content is not a string".to_owned(),
            });
        }
    };
    let finished = choice
        .get("finish_reason")
        .is_some_and(|reason| !reason.is_null());
    let tool_calls = tool_call_deltas(choice.pointer("/delta/tool_calls"))?;
    Ok(Some(Event::Chunk {
        content,
        tool_calls,
        finished,
    }))
}

/// `delta.tool_calls`, checked piece by piece: each an object with an
/// integer `index`, an optional string `id`, and an optional `function` with
/// a string `name` and `arguments`.
fn tool_call_deltas(value: Option<&serde_json::Value>) -> Result<Vec<ToolCallDelta>, StreamError> {
    let malformed = |reason: &str| StreamError::Malformed {
        reason: reason.to_owned(),
    };
    let calls = match value {
        None | Some(serde_json::Value::Null) => return Ok(Vec::new()),
        Some(serde_json::Value::Array(calls)) => calls,
        Some(_) => return Err(malformed("delta.tool_calls is not an array")),
    };
    let text = |call: &serde_json::Value, pointer: &str| match call.pointer(pointer) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(malformed("a tool call field is not a string")),
    };
    calls
        .iter()
        .enumerate()
        .map(|(position, call)| {
            let index = match call.get("index") {
                None => position,
                Some(index) => index
                    .as_u64()
                    .and_then(|index| usize::try_from(index).ok())
                    .filter(|index| *index < 64)
                    .ok_or_else(|| malformed("a tool call index is not a small integer"))?,
            };
            Ok(ToolCallDelta {
                index,
                id: text(call, "/id")?,
                name: text(call, "/function/name")?,
                arguments: text(call, "/function/arguments")?.unwrap_or_default(),
            })
        })
        .collect()
}

/// Text shortened for a log line.
pub(crate) fn bounded(text: &str) -> String {
    const MAX: usize = 512;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(content: &str, finished: bool) -> Event {
        Event::Chunk {
            content: content.to_owned(),
            tool_calls: Vec::new(),
            finished,
        }
    }

    /// Feeds `input` in pieces of every size from 1 to its length, and checks
    /// that each split gives `expected`.
    fn check(input: &str, expected: &[Event]) {
        for size in 1..=input.len().max(1) {
            let mut parser = SseParser::default();
            let mut events = Vec::new();
            for piece in input.as_bytes().chunks(size) {
                events.extend(parser.push(piece).unwrap());
            }
            events.extend(parser.finish().unwrap());
            assert_eq!(events, expected, "split into pieces of {size}: {input:?}");
        }
    }

    #[test]
    fn tool_call_pieces_are_read_and_bad_ones_refused() {
        let data = r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c1","type":"function","function":{"name":"getDocs","arguments":"{\"sec"}}]},"finish_reason":null}]}"#;
        assert_eq!(
            parse_data(data).unwrap(),
            Some(Event::Chunk {
                content: String::new(),
                tool_calls: vec![ToolCallDelta {
                    index: 1,
                    id: Some("c1".into()),
                    name: Some("getDocs".into()),
                    arguments: "{\"sec".into(),
                }],
                finished: false,
            })
        );
        for bad in [
            r#"{"choices":[{"delta":{"tool_calls":{}}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":-1}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1000}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":7}}]}}]}"#,
        ] {
            assert!(
                matches!(parse_data(bad), Err(StreamError::Malformed { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn parses_the_openai_stream() {
        check(
            concat!(
                "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"},\"finish_reason\":null}]}\n\n",
                "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n",
                "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n",
                "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
                "data: [DONE]\n\n",
            ),
            &[
                chunk("", false),
                chunk("Hel", false),
                chunk("lo", false),
                chunk("", true),
                Event::Done,
            ],
        );
    }

    #[test]
    fn tolerates_crlf_comments_fields_and_keep_alives() {
        check(
            concat!(
                ": keep-alive\r\n\r\n",
                "event: message\r\nid: 1\r\nretry: 10\r\n",
                "data:{\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\n\r\n",
                ":\r\r",
                "data: {\"choices\":[{\"delta\":{\"content\":null}}]}\r\r",
                "data: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n",
                "data: {\"choices\":[{\"delta\":{\"content\":\"\"}}]}\n\n",
                "\n\n\n",
                "data: [DONE]",
            ),
            &[
                chunk("a", false),
                chunk("", false),
                chunk("", false),
                chunk("", false),
                Event::Done,
            ],
        );
    }

    #[test]
    fn multi_line_data_is_joined() {
        check(
            "data: {\"choices\":\ndata: [{\"delta\":{\"content\":\"x\"}}]}\n\n",
            &[chunk("x", false)],
        );
    }

    #[test]
    fn refuses_what_is_not_a_chunk() {
        let mut parser = SseParser::default();
        assert!(matches!(
            parser.push(b"data: <html>\n\n"),
            Err(StreamError::Malformed { .. })
        ));
        let mut parser = SseParser::default();
        assert!(matches!(
            parser.push(b"data: {\"choices\":[{\"delta\":{\"content\":7}}]}\n\n"),
            Err(StreamError::Malformed { .. })
        ));
        let mut parser = SseParser::default();
        assert!(matches!(
            parser.push(b"data: {\"error\":{\"message\":\"overloaded\"}}\n\n"),
            Err(StreamError::Provider { .. })
        ));
        let mut parser = SseParser::default();
        let long = vec![b'x'; MAX_LINE_BYTES + 1];
        assert_eq!(parser.push(&long), Err(StreamError::LineTooLong));
    }

    #[test]
    fn bounded_cuts_at_a_character_boundary() {
        let text = "é".repeat(600);
        let short = bounded(&text);
        assert!(short.len() <= 512 + '…'.len_utf8());
        assert!(short.ends_with('…'));
        assert_eq!(bounded("short"), "short");
    }
}
