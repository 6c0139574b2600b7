//! Bounds on what one JSON request body may expand into once parsed, checked
//! in a single streaming pass before any parser builds a tree from it.
//!
//! A body's bytes are not its cost. Parsed into `serde_json::Value` (as rmcp
//! does with every `/mcp` body, through serde's untagged buffering), each
//! value costs its tree node, and a body of millions of tiny values such as
//! `[0,0,0,…]` expands about a hundredfold: 3.9 MB of them took mcp-gateway to
//! 465 MB. So every JSON body a role accepts from outside is first checked
//! here against three bounds — its bytes, its values, its nesting depth —
//! and refused as `APP_RESOURCE_LIMIT` (413) past any of them. Bytes after
//! parsing follow: a string never decodes to more bytes than it has in the
//! body, so a parsed body costs at most about
//! `max_bytes + max_values * PARSED_VALUE_COST` (see
//! [`JsonLimits::parsed_size_bound`]).
//!
//! Every bound lives here, as a named [`JsonLimits`], with the reason for its
//! numbers. The check must never allocate per value or build any tree: its
//! memory is its recursion (at most `max_depth` frames) and serde_json's one
//! scratch buffer for an escaped string. It does not judge syntax: a
//! malformed body passes, and the parser that runs next reports the error,
//! having stopped there, so it has built no more values than were counted.

use sasha_contract::tools::{MAX_MCP_MESSAGE_BYTES, MAX_MCP_UPLOAD_MESSAGE_BYTES};
use serde::Deserialize as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::{AppError, ErrorCode};

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// What one JSON body may hold. Object keys count as values (each becomes
/// an owned string in the parsed tree), and so do arrays and objects
/// themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonLimits {
    /// Most bytes of the body as received.
    pub max_bytes: usize,
    /// Most values (scalars, arrays, objects and object keys), counted over
    /// the whole body.
    pub max_values: usize,
    /// Deepest nesting of arrays and objects; a top-level scalar is depth 0,
    /// `[1]` is depth 1.
    pub max_depth: usize,
}

/// An upper estimate of what one parsed value costs in memory beyond its
/// string bytes, through rmcp's parse (serde's untagged `Content` buffer,
/// then `serde_json::Value` and its map or vector slot). Measured on
/// mcp-gateway: 465 MB for the 1.95 million values of a 3.9 MB array, about
/// 240 bytes each.
pub const PARSED_VALUE_COST: usize = 256;

/// Every `/mcp` body except a document upload (mcp-gateway).
///
/// - 4 MiB ([`MAX_MCP_MESSAGE_BYTES`], which the browser relays also
///   keep): the largest real request is a source tool's `write_file` with a
///   1 MiB text file as one JSON string, which escaping can double, plus
///   room.
/// - 10,000 values: a `tools/call` is its envelope and protocol `_meta` (a
///   few dozen values) and its arguments; the richest are the governed data
///   tools, which the grammar bounds far lower (20 `where` predicates, 50
///   `in` values, 50 selected columns, 50 properties per record): under a
///   thousand. Parsed, 10,000 values cost at most about 2.5 MB.
/// - depth 32: the envelope and `_meta` nest 4 deep, tool arguments a few
///   more; serde_json itself stops at 128.
pub const MCP_REQUEST: JsonLimits = JsonLimits {
    max_bytes: MAX_MCP_MESSAGE_BYTES,
    max_values: 10_000,
    max_depth: 32,
};

/// A `sasha__files_upload` call by a caller who may upload (mcp-gateway).
///
/// - 36 MiB ([`MAX_MCP_UPLOAD_MESSAGE_BYTES`]): 25 MiB of documents as
///   base64 (about 33.4 MiB) and the JSON around them.
/// - 1,000 values: at most 10 files of four fields each, the envelope and
///   `_meta`: under 200. The documents are one long string each, so an
///   upload is big in bytes and small in values.
/// - depth 32: as [`MCP_REQUEST`].
pub const MCP_UPLOAD: JsonLimits = JsonLimits {
    max_bytes: MAX_MCP_UPLOAD_MESSAGE_BYTES,
    max_values: 1_000,
    max_depth: 32,
};

/// The grammar arguments of one `DataService` request (data-worker): at most
/// the arguments of one MCP call, which its callers have bounded already;
/// data-worker checks again because it parses them into a tree itself.
pub const DATA_REQUEST: JsonLimits = MCP_REQUEST;

/// App Studio's source bodies (`/api/member-apps*`): one package as JSON.
///
/// - 3 MiB: a package is at most 1 MiB of files; as JSON strings they grow
///   by their escapes (a binary asset as base64 by a third).
/// - 2,000 values: a package holds at most a few hundred files.
/// - depth 8: `{files: {path: text | {base64}}}` is depth 3.
pub const MEMBER_APP_SOURCE: JsonLimits = JsonLimits {
    max_bytes: 3 * MIB,
    max_values: 2_000,
    max_depth: 8,
};

/// studio-core's JSON request bodies: `/api` (sign-in, a grant, an OAuth
/// consent) and OAuth client registration.
///
/// - 64 KiB: the largest is a client registration, which the OAuth module
///   already refuses above 16 KiB; a sign-in or a grant is a few hundred
///   bytes.
/// - 1,000 values: a registration names at most 10 redirect URIs and a
///   handful of metadata fields; a consent lists the scopes chosen.
/// - depth 8: every one of these bodies is an object of strings and arrays
///   of strings (depth 2).
pub const STUDIO_API: JsonLimits = JsonLimits {
    max_bytes: 64 * KIB,
    max_values: 1_000,
    max_depth: 8,
};

/// studio-core's SCIM bodies (`/scim/v2`, from the organisation's
/// directory).
///
/// - 256 KiB: the largest is a group PATCH or PUT naming its members; Entra
///   ID sends member changes in batches, and a person's body is a few
///   hundred bytes. 256 KiB holds a PUT of a few thousand members.
/// - 10,000 values: a member is an object of one to four strings (up to 9
///   values), so about a thousand members a request.
/// - depth 8: a PATCH nests `Operations[].value[].value` (depth 4).
pub const SCIM_REQUEST: JsonLimits = JsonLimits {
    max_bytes: 256 * KIB,
    max_values: 10_000,
    max_depth: 8,
};

impl JsonLimits {
    /// At most what a body within these limits costs once parsed: its bytes
    /// (strings never grow when decoded) and [`PARSED_VALUE_COST`] per value.
    pub const fn parsed_size_bound(&self) -> usize {
        self.max_bytes + self.max_values * PARSED_VALUE_COST
    }
}

/// Which bound a body broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JsonLimitError {
    #[error("the request body is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("the request body holds more than {limit} JSON values")]
    TooManyValues { limit: usize },
    #[error("the request body nests deeper than {limit} levels")]
    TooDeep { limit: usize },
}

impl JsonLimitError {
    /// The envelope a caller gets: `APP_RESOURCE_LIMIT` (413), naming the
    /// bound but nothing of the body.
    pub fn to_app_error(self) -> AppError {
        AppError::new(ErrorCode::ResourceLimit, self.to_string())
    }
}

/// Checks `body` against `limits` in one streaming pass, stopping at the
/// first bound broken. A body that is not JSON passes (see the module
/// comment); so does anything after its first value.
pub fn check(body: &[u8], limits: &JsonLimits) -> Result<(), JsonLimitError> {
    if body.len() > limits.max_bytes {
        return Err(JsonLimitError::TooLarge {
            limit: limits.max_bytes,
        });
    }
    let mut tally = Tally {
        limits: *limits,
        values: 0,
        broken: None,
    };
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let parsed = Node {
        tally: &mut tally,
        depth: 0,
    }
    .deserialize(&mut deserializer);
    match (parsed, tally.broken) {
        (Err(_), Some(broken)) => Err(broken),
        // A syntax error, or the whole value within bounds.
        _ => Ok(()),
    }
}

/// The running count of one check.
struct Tally {
    limits: JsonLimits,
    values: usize,
    /// The bound broken; the pass is then stopped through a serde error.
    broken: Option<JsonLimitError>,
}

impl Tally {
    /// Counts one more value; `Err` once past the bound.
    fn count<E: de::Error>(&mut self) -> Result<(), E> {
        self.values += 1;
        if self.values > self.limits.max_values {
            return Err(self.stop(JsonLimitError::TooManyValues {
                limit: self.limits.max_values,
            }));
        }
        Ok(())
    }

    /// Enters an array or object at `depth`; `Err` when that is too deep.
    fn enter<E: de::Error>(&mut self, depth: usize) -> Result<(), E> {
        if depth > self.limits.max_depth {
            return Err(self.stop(JsonLimitError::TooDeep {
                limit: self.limits.max_depth,
            }));
        }
        Ok(())
    }

    fn stop<E: de::Error>(&mut self, broken: JsonLimitError) -> E {
        self.broken = Some(broken);
        E::custom(broken)
    }
}

/// One value at `depth` (the nesting of its parent); visits its children
/// without keeping anything.
struct Node<'t> {
    tally: &'t mut Tally,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.tally.count()?;
        deserializer.deserialize_any(self)
    }
}

/// An object key: counted, its text skipped.
struct Key<'t> {
    tally: &'t mut Tally,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.tally.count()?;
        IgnoredAny::deserialize(deserializer).map(|_| ())
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Node { tally, depth } = self;
        let depth = depth + 1;
        tally.enter(depth)?;
        while seq
            .next_element_seed(Node {
                tally: &mut *tally,
                depth,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Node { tally, depth } = self;
        let depth = depth + 1;
        tally.enter(depth)?;
        while map.next_key_seed(Key { tally: &mut *tally })?.is_some() {
            map.next_value_seed(Node {
                tally: &mut *tally,
                depth,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: JsonLimits = JsonLimits {
        max_bytes: 1024,
        max_values: 10,
        max_depth: 3,
    };

    fn check_small(body: &str) -> Result<(), JsonLimitError> {
        check(body.as_bytes(), &SMALL)
    }

    #[test]
    fn values_are_counted_with_keys_arrays_and_objects() {
        // 1 array + 9 numbers.
        assert_eq!(check_small("[1,2,3,4,5,6,7,8,9]"), Ok(()));
        assert_eq!(
            check_small("[1,2,3,4,5,6,7,8,9,10]"),
            Err(JsonLimitError::TooManyValues { limit: 10 })
        );
        // The object, `a`, 1, `b`, the array, "x", "y", `c` and null: 9.
        assert_eq!(check_small(r#"{"a":1,"b":["x","y"],"c":null}"#), Ok(()));
        assert_eq!(
            check_small(r#"{"a":1,"b":["x","y"],"c":null,"d":true}"#),
            Err(JsonLimitError::TooManyValues { limit: 10 })
        );
        // Keys count: the object, 5 keys and 5 empty objects make 11.
        assert!(check_small(r#"{"a":{},"b":{},"c":{},"d":{},"e":{}}"#).is_err());
    }

    #[test]
    fn depth_is_the_nesting_of_arrays_and_objects() {
        assert_eq!(check_small("1"), Ok(()));
        assert_eq!(check_small("[[[1]]]"), Ok(()));
        assert_eq!(
            check_small("[[[[1]]]]"),
            Err(JsonLimitError::TooDeep { limit: 3 })
        );
        assert_eq!(
            check_small(r#"{"a":{"b":{"c":{}}}}"#),
            Err(JsonLimitError::TooDeep { limit: 3 })
        );
        // Far past serde_json's own recursion limit: still this bound.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(
            check(deep.as_bytes(), &MCP_REQUEST),
            Err(JsonLimitError::TooDeep { limit: 32 })
        );
    }

    #[test]
    fn bytes_are_bounded_before_anything_is_read() {
        let long = format!("\"{}\"", "a".repeat(2000));
        assert_eq!(
            check_small(&long),
            Err(JsonLimitError::TooLarge { limit: 1024 })
        );
    }

    #[test]
    fn the_tiny_value_bomb_is_refused_early() {
        let bomb = format!("[{}0]", "0,".repeat(1_950_000));
        assert_eq!(
            check(bomb.as_bytes(), &MCP_REQUEST),
            Err(JsonLimitError::TooManyValues { limit: 10_000 })
        );
        // Even when the body is not valid JSON after the bound.
        let cut = format!("[{}", "0,".repeat(20_000));
        assert_eq!(
            check(cut.as_bytes(), &MCP_REQUEST),
            Err(JsonLimitError::TooManyValues { limit: 10_000 })
        );
    }

    #[test]
    fn malformed_bodies_are_left_to_the_parser() {
        for body in ["", "{", "[1,2", "nope", "{\"a\" 1}", "[1] [2]"] {
            assert_eq!(check_small(body), Ok(()), "{body:?}");
        }
    }

    #[test]
    fn a_normal_mcp_call_passes() {
        let call = serde_json::json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {
                "name": "app__expense_log__expenses__list",
                "arguments": {
                    "where": (0..20).map(|i| serde_json::json!({"field": "amount", "op": "in", "value": (0..50).collect::<Vec<_>>(), "n": i})).collect::<Vec<_>>(),
                    "select": (0..50).map(|i| format!("c{i}")).collect::<Vec<_>>(),
                    "orderBy": [{"field": "spent_on", "direction": "desc"}],
                    "limit": 200,
                },
                "_meta": {
                    "progressToken": "p",
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}, "roots": {"listChanged": true}},
                    "io.modelcontextprotocol/clientInfo": {"name": "client", "version": "1"},
                },
            },
        });
        assert_eq!(check(call.to_string().as_bytes(), &MCP_REQUEST), Ok(()));
    }

    #[test]
    fn an_upload_of_ten_large_documents_passes() {
        let file = |i: usize| {
            serde_json::json!({
                "name": format!("report-{i}.pdf"), "type": "application/pdf", "size": 2_500_000,
                "dataBase64": "QUJD".repeat(870_000),
            })
        };
        let call = serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {
                "name": "sasha__files_upload",
                "arguments": {"files": (0..10).map(file).collect::<Vec<_>>()},
                "_meta": {"progressToken": "upload", "io.modelcontextprotocol/protocolVersion": "2026-07-28"},
            },
        })
        .to_string();
        assert!(call.len() > 33 * MIB, "{}", call.len());
        assert_eq!(check(call.as_bytes(), &MCP_UPLOAD), Ok(()));
        // The same body is far over the ordinary limit in bytes, and an
        // upload-sized array of numbers is refused for its values.
        assert!(matches!(
            check(call.as_bytes(), &MCP_REQUEST),
            Err(JsonLimitError::TooLarge { .. })
        ));
        let numbers = format!(
            r#"{{"method":"tools/call","params":{{"name":"sasha__files_upload","arguments":{{"files":[{}0]}}}}}}"#,
            "0,".repeat(15_000_000)
        );
        assert_eq!(
            check(numbers.as_bytes(), &MCP_UPLOAD),
            Err(JsonLimitError::TooManyValues { limit: 1_000 })
        );
    }

    #[test]
    fn studio_api_bodies_pass() {
        for body in [
            r#"{"username":"sam","password":"correct horse battery"}"#,
            r#"{"access":"use"}"#,
            r#"{"scopes":["apps:invoke","apps:write"]}"#,
            r#"{"client_name":"Claude","redirect_uris":["https://a.example/cb","http://127.0.0.1:9/cb"],"grant_types":["authorization_code","refresh_token"],"response_types":["code"],"token_endpoint_auth_method":"none"}"#,
        ] {
            assert_eq!(check(body.as_bytes(), &STUDIO_API), Ok(()), "{body}");
        }
    }

    #[test]
    fn what_a_bounded_body_costs_parsed_stays_small() {
        // The bounds are chosen so that no ordinary body can cost more than
        // a few MiB parsed, and an upload little more than its bytes.
        assert!(MCP_REQUEST.parsed_size_bound() < 8 * MIB);
        assert!(MCP_UPLOAD.parsed_size_bound() < 37 * MIB);
        assert!(STUDIO_API.parsed_size_bound() < MIB);
    }

    #[test]
    fn the_refusal_is_a_resource_limit_envelope() {
        let error = JsonLimitError::TooManyValues { limit: 10 }.to_app_error();
        assert_eq!(error.code, ErrorCode::ResourceLimit);
        assert_eq!(error.code.http_status().as_u16(), 413);
        assert!(
            error.message.contains("10 JSON values"),
            "{}",
            error.message
        );
    }
}
