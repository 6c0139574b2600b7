//! `APP.md`: YAML front matter (the manifest) followed by the Markdown
//! maintenance brief. Unknown fields anywhere are refused.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::yaml::YamlText;

pub use sasha_contract::data::{Access, TableDeclaration, WritePolicy};
use sasha_contract::ids::{MAX_ID_CHARS, is_kebab_id};

/// The manifest: the front matter of `APP.md`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Manifest {
    /// Lowercase kebab-case, at most 60 characters, equal to the folder name.
    pub id: String,
    pub name: String,
    pub description: String,
    pub version: String,
    #[serde(default)]
    pub theme: Theme,
    #[serde(default)]
    pub capabilities: Capabilities,
    /// Declared tables by name; only for data apps.
    #[serde(default)]
    pub tables: BTreeMap<String, TableDeclaration>,
    /// Declared actions, at most 20.
    #[serde(default)]
    pub actions: Vec<ActionDeclaration>,
}

/// The theme the platform supplies fallback tokens for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum Theme {
    #[default]
    #[serde(rename = "none")]
    None,
    #[serde(rename = "sasha-timesheet-v1")]
    SashaTimesheetV1,
}

/// What the app may ask the host for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    #[serde(default)]
    pub chat: bool,
    #[serde(default)]
    pub files: bool,
    #[serde(default)]
    pub data: DataCapability,
}

/// `data: false | read | read-write`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum DataCapability {
    #[default]
    #[serde(rename = "false")]
    None,
    #[serde(rename = "read")]
    Read,
    #[serde(rename = "read-write")]
    ReadWrite,
}

impl<'de> Deserialize<'de> for DataCapability {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Text(String),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Bool(false) => Ok(DataCapability::None),
            Raw::Text(text) if text == "read" => Ok(DataCapability::Read),
            Raw::Text(text) if text == "read-write" => Ok(DataCapability::ReadWrite),
            _ => Err(serde::de::Error::custom(
                "capabilities.data must be false, read or read-write",
            )),
        }
    }
}

/// One declared action.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ActionDeclaration {
    /// Lowercase kebab-case; the descriptor lives in `file`.
    pub id: String,
    /// Package-relative path, `actions/<id>.action.yaml`.
    pub file: String,
    /// Publishes the action to the model as `app__<app>__<action>`.
    #[serde(default)]
    pub expose_to_model: bool,
}

/// Where `APP.md`'s front matter lies, as byte offsets into the text after an
/// optional byte order mark.
struct FrontMatter {
    /// The YAML between the opening and closing `---` lines.
    yaml: std::ops::Range<usize>,
    /// The closing `---` line (with its line ending).
    closing: std::ops::Range<usize>,
}

/// Why `APP.md` has no front matter.
enum NoFrontMatter {
    /// The first line is not `---`.
    Opening,
    /// No line `---` closes the YAML.
    Closing,
}

/// The one reading of `APP.md`'s shape: a first line `---`, the YAML, a line
/// `---`, the brief. Offsets are into `text` with its byte order mark removed.
fn front_matter(text: &str) -> Result<FrontMatter, NoFrontMatter> {
    let opening = if text.starts_with("---\n") {
        4
    } else if text.starts_with("---\r\n") {
        5
    } else {
        return Err(NoFrontMatter::Opening);
    };
    let mut offset = opening;
    for line in text[opening..].split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            return Ok(FrontMatter {
                yaml: opening..offset,
                closing: offset..offset + line.len(),
            });
        }
        offset += line.len();
    }
    Err(NoFrontMatter::Closing)
}

/// `APP.md` with its manifest's `id` set to `id`: the first top-level `id:`
/// line of the front matter is replaced (without one, `id: <id>` becomes the
/// front matter's last line), so no line before it moves and the validator's
/// lines still point where the author wrote. `None` when the text has no
/// front matter, which the validator then reports. The platform names a
/// member app (see [`member_app_id`]) and writes that name here; whatever
/// else the YAML says about `id` is left for the validator to refuse.
pub fn with_manifest_id(text: &str, id: &str) -> Option<String> {
    let (bom, body) = match text.strip_prefix('\u{FEFF}') {
        Some(body) => ("\u{FEFF}", body),
        None => ("", text),
    };
    let found = front_matter(body).ok()?;
    let yaml = &body[found.yaml.clone()];
    let mut offset = found.yaml.start;
    let mut out = String::with_capacity(text.len() + id.len() + 8);
    out.push_str(bom);
    for line in yaml.split_inclusive('\n') {
        let is_id = line
            .strip_prefix("id")
            .and_then(|rest| rest.trim_start_matches([' ', '\t']).strip_prefix(':'))
            .is_some_and(|value| value.is_empty() || value.starts_with([' ', '\t', '\r', '\n']));
        if is_id {
            let ending = &line[line.trim_end_matches(['\r', '\n']).len()..];
            out.push_str(&body[..offset]);
            out.push_str(&format!("id: {id}{ending}"));
            out.push_str(&body[offset + line.len()..]);
            return Some(out);
        }
        offset += line.len();
    }
    let ending = if body.starts_with("---\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    out.push_str(&body[..found.closing.start]);
    out.push_str(&format!("id: {id}{ending}"));
    out.push_str(&body[found.closing.start..]);
    Some(out)
}

/// The prefix of every member app id, so a person reading one (in a tool
/// name, a URL, the moderators' list) sees which tier it belongs to.
pub const MEMBER_ID_PREFIX: &str = "member-";
/// Bytes of randomness in a member app id: 80 bits, 16 characters of
/// base32, so no id can be guessed before it exists and two never meet.
pub const MEMBER_ID_ENTROPY_BYTES: usize = 10;

/// A member app's id, made from `entropy` (fresh random bytes): the platform
/// names every member app, so nobody learns from a refused name that another
/// app holds it, and nobody takes a name a catalogue app will want. The id is
/// [`MEMBER_ID_PREFIX`] and the bytes in lowercase base32 (RFC 4648's
/// alphabet `a-z2-7`), which is an [`sasha_contract::AppId`].
pub fn member_app_id(entropy: [u8; MEMBER_ID_ENTROPY_BYTES]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut id = String::from(MEMBER_ID_PREFIX);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for byte in entropy {
        buffer = (buffer << 8) | u32::from(byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            id.push(char::from(ALPHABET[((buffer >> bits) & 31) as usize]));
        }
    }
    id
}

/// Splits `APP.md` into its manifest and brief and checks the manifest's own
/// fields. `folder` is the package folder's name, which the id must equal.
pub fn parse_app_md(
    text: &str,
    folder: &str,
    diagnostics: &mut crate::Diagnostics,
) -> Option<(Manifest, String)> {
    const FILE: &str = "APP.md";
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let found = match front_matter(text) {
        Ok(found) => found,
        Err(NoFrontMatter::Opening) => {
            diagnostics.push(
                FILE,
                Some(1),
                "MANIFEST_FRONT_MATTER",
                "APP.md must start with a line `---`, the YAML manifest, and a closing line `---`",
            );
            return None;
        }
        Err(NoFrontMatter::Closing) => {
            diagnostics.push(
                FILE,
                None,
                "MANIFEST_FRONT_MATTER",
                "the YAML manifest has no closing line `---`",
            );
            return None;
        }
    };
    let yaml = &text[found.yaml];
    let brief = text[found.closing.end..].to_owned();
    let manifest: Manifest = match parse_strict_yaml(yaml) {
        Ok(manifest) => manifest,
        Err(error) => {
            // The front matter starts on the file's second line.
            let line = YamlText::new(yaml)
                .error_line(&error)
                .map(|line| line.saturating_add(1));
            diagnostics.push(
                FILE,
                line,
                "MANIFEST_INVALID",
                format!("the manifest is invalid: {}", crate::yaml::reason(&error)),
            );
            return None;
        }
    };
    let before = diagnostics.len();
    if !is_kebab_id(&manifest.id) {
        diagnostics.push(FILE, None, "MANIFEST_ID", format!("id must be lowercase kebab-case starting with a letter, at most {MAX_ID_CHARS} characters (underscores are not allowed)"));
    } else if manifest.id != folder {
        diagnostics.push(
            FILE,
            None,
            "MANIFEST_ID_MISMATCH",
            format!(
                "id {:?} must equal the package folder name {:?}",
                manifest.id, folder
            ),
        );
    }
    for (field, value, max) in [
        ("name", &manifest.name, 80),
        ("description", &manifest.description, 500),
        ("version", &manifest.version, 40),
    ] {
        let chars = value.chars().count();
        if value.trim().is_empty() || chars > max {
            diagnostics.push(
                FILE,
                None,
                "MANIFEST_FIELD",
                format!("{field} must be 1 to {max} characters"),
            );
        } else if value
            .chars()
            .any(|c| c.is_control() || crate::source::is_invisible(c))
        {
            diagnostics.push(
                FILE,
                None,
                "MANIFEST_FIELD",
                format!("{field} must not contain control or invisible characters"),
            );
        }
    }
    if manifest.actions.len() > 20 {
        diagnostics.push(
            FILE,
            None,
            "MANIFEST_TOO_MANY_ACTIONS",
            "an app may declare at most 20 actions",
        );
    }
    (diagnostics.len() == before).then_some((manifest, brief))
}

/// Parses untrusted YAML strictly: YAML 1.2 booleans only (no `yes`/`on`),
/// duplicate keys and merge keys refused, within the parser's resource budgets.
/// Every YAML file of a package (the manifest, action descriptors) goes through
/// here.
pub fn parse_strict_yaml<T: serde::de::DeserializeOwned>(
    text: &str,
) -> Result<T, serde_saphyr::Error> {
    let options = serde_saphyr::options! {
        strict_booleans: true,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
        merge_keys: serde_saphyr::MergeKeyPolicy::Error,
        with_snippet: false,
    };
    serde_saphyr::from_str_with_options(text, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(code, line, reason)` of one diagnostic.
    type Found = (String, Option<u32>, String);

    fn parse(text: &str) -> (Option<Manifest>, Vec<Found>) {
        let mut diagnostics = crate::Diagnostics::new();
        let parsed = parse_app_md(text, "time-sheet", &mut diagnostics);
        let found = diagnostics
            .into_sorted()
            .into_iter()
            .map(|d| (d.code, d.line, d.reason))
            .collect();
        (parsed.map(|(manifest, _)| manifest), found)
    }

    const GOOD: &str = "---\nid: time-sheet\nname: Time Sheet\ndescription: Log hours\nversion: 1.0.0\ntheme: sasha-timesheet-v1\ncapabilities:\n  data: read-write\ntables:\n  entries:\n    access: owner\n    ownerField: created_by\n  projects:\n    access: shared\nactions:\n  - id: log-hours\n    file: actions/log-hours.action.yaml\n---\n# Brief\n";

    #[test]
    fn a_complete_manifest_parses() {
        let (manifest, found) = parse(GOOD);
        assert!(found.is_empty(), "{found:?}");
        let manifest = manifest.unwrap();
        assert_eq!(manifest.capabilities.data, DataCapability::ReadWrite);
        assert_eq!(
            manifest.tables["entries"].owner_field.as_deref(),
            Some("created_by")
        );
        assert_eq!(manifest.theme, Theme::SashaTimesheetV1);
        assert!(!manifest.actions[0].expose_to_model);
    }

    #[test]
    fn table_policies_parse_and_unknown_ones_are_refused() {
        let with = GOOD
            .replace(
                "  projects:\n    access: shared\n",
                "  projects:\n    access: shared\n    write: manage\n",
            )
            .replace(
                "    ownerField: created_by\n",
                "    ownerField: created_by\n    managersReadAll: true\n",
            );
        let (manifest, found) = parse(&with);
        assert!(found.is_empty(), "{found:?}");
        let manifest = manifest.unwrap();
        assert_eq!(manifest.tables["projects"].write, WritePolicy::Manage);
        assert!(manifest.tables["entries"].managers_read_all);
        assert_eq!(manifest.tables["entries"].write, WritePolicy::Use);
        let (manifest, found) = parse(&GOOD.replace(
            "  projects:\n    access: shared\n",
            "  projects:\n    access: shared\n    write: admins\n",
        ));
        assert!(manifest.is_none());
        assert!(!found.is_empty());
    }

    #[test]
    fn data_false_and_defaults() {
        let (manifest, found) = parse(
            "---\nid: time-sheet\nname: T\ndescription: D\nversion: '1'\ncapabilities: {data: false, chat: true}\n---\n",
        );
        assert!(found.is_empty(), "{found:?}");
        let manifest = manifest.unwrap();
        assert_eq!(manifest.capabilities.data, DataCapability::None);
        assert!(manifest.capabilities.chat);
        assert_eq!(manifest.theme, Theme::None);
    }

    #[test]
    fn unknown_fields_are_refused_everywhere() {
        for (yaml, line) in [
            (
                "id: time-sheet\nname: T\ndescription: D\nversion: '1'\nowner: x\n",
                6,
            ),
            (
                "id: time-sheet\nname: T\ndescription: D\nversion: '1'\ncapabilities:\n  network: true\n",
                7,
            ),
            (
                "id: time-sheet\nname: T\ndescription: D\nversion: '1'\ntables:\n  t:\n    access: shared\n    sql: x\n",
                9,
            ),
        ] {
            let (manifest, found) = parse(&format!("---\n{yaml}---\n"));
            assert!(manifest.is_none());
            assert_eq!(found.len(), 1, "{found:?}");
            assert_eq!(found[0].0, "MANIFEST_INVALID");
            assert_eq!(found[0].1, Some(line), "{found:?}");
            assert!(found[0].2.contains("unknown field"), "{found:?}");
        }
    }

    #[test]
    fn field_values_are_checked() {
        let cases = [
            ("id: Time_Sheet", "MANIFEST_ID"),
            ("id: other-app", "MANIFEST_ID_MISMATCH"),
            (
                "id: time-sheet\ncapabilities: {data: write}",
                "MANIFEST_INVALID",
            ),
            ("id: time-sheet\ntheme: dark", "MANIFEST_INVALID"),
            (
                "id: time-sheet\ncapabilities: {chat: 'yes'}",
                "MANIFEST_INVALID",
            ),
        ];
        for (fields, code) in cases {
            let (_, found) = parse(&format!(
                "---\n{fields}\nname: T\ndescription: D\nversion: '1'\n---\n"
            ));
            assert_eq!(
                found.first().map(|f| f.0.as_str()),
                Some(code),
                "{fields}: {found:?}"
            );
        }
        let (_, found) =
            parse("---\nid: time-sheet\nname: ''\ndescription: D\nversion: '1'\n---\n");
        assert_eq!(found[0].0, "MANIFEST_FIELD");
        let (_, found) = parse("no front matter");
        assert_eq!(found[0].0, "MANIFEST_FRONT_MATTER");
        let (_, found) = parse("---\nid: time-sheet\n");
        assert_eq!(found[0].0, "MANIFEST_FRONT_MATTER");
    }

    #[test]
    fn the_platform_sets_a_member_apps_id_where_it_stands() {
        // The id line is replaced in place: no other line moves.
        let set = with_manifest_id(GOOD, "member-abc").unwrap();
        assert_eq!(set, GOOD.replace("id: time-sheet\n", "id: member-abc\n"));
        let mut diagnostics = crate::Diagnostics::new();
        assert!(parse_app_md(&set, "member-abc", &mut diagnostics).is_some());
        assert!(diagnostics.is_empty());
        for (text, expected) in [
            // Line endings, quotes and comments: the whole line is the platform's.
            (
                "---\r\nname: T\r\nid : 'x' # mine\r\n---\r\n# B\r\n",
                Some("---\r\nname: T\r\nid: m\r\n---\r\n# B\r\n"),
            ),
            ("---\nid:\n---\n", Some("---\nid: m\n---\n")),
            // Without an id line it becomes the front matter's last line; an
            // action's id, a longer key and the brief are not the manifest's id.
            (
                "\u{FEFF}---\nactions:\n  - id: a\n    file: f\nidentity: x\n---\nid: brief\n",
                Some(
                    "\u{FEFF}---\nactions:\n  - id: a\n    file: f\nidentity: x\nid: m\n---\nid: brief\n",
                ),
            ),
            ("---\r\n---\r\n", Some("---\r\nid: m\r\n---\r\n")),
            // No front matter: left for the validator to refuse.
            ("# only Markdown\n", None),
            ("---\nid: x\n", None),
        ] {
            assert_eq!(with_manifest_id(text, "m").as_deref(), expected, "{text:?}");
        }
    }

    #[test]
    fn member_app_ids_are_app_ids_of_the_member_tier() {
        assert_eq!(member_app_id([0; 10]), "member-aaaaaaaaaaaaaaaa");
        assert_eq!(member_app_id([0xFF; 10]), "member-7777777777777777");
        let counted = member_app_id([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(counted, "member-aebagbafaydqqcik");
        for id in [member_app_id([0; 10]), member_app_id([0xFF; 10]), counted] {
            assert!(sasha_contract::AppId::parse(&id).is_ok(), "{id}");
        }
        for byte in 0..=u8::MAX {
            let id = member_app_id([byte; 10]);
            assert!(sasha_contract::AppId::parse(&id).is_ok(), "{id}");
        }
    }
}
