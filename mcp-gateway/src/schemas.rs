//! Compiled JSON Schema validators for tool calls: each tool's input schema
//! (and an action's result schema) compiled once per app revision and tool,
//! the platform's and member tools' once per process, and the check of a
//! value against one, whose failure names where it is.
//!
//! A revision names exact bytes (every source byte, and so every declared
//! table and compiled action), so a validator found under its app, revision
//! and tool is the one its schema would compile to; the schema is built only
//! when none is cached. An app without a revision is never cached.
//!
//! What it must never do: judge a value by a validator compiled for another
//! schema, or cache anything a caller's access decides (who may call a tool
//! is decided on every call, before its arguments are checked).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sasha_proto::{AppError, ErrorCode};
use serde_json::Value;

/// Which schema of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// What the tool takes.
    Input,
    /// What an action returns (its `resultSchema`).
    Result,
}

impl Part {
    /// How a failure names the value: "the input is not valid: …".
    fn what(self) -> &'static str {
        match self {
            Part::Input => "input",
            Part::Result => "result",
        }
    }
}

/// Whose schema: a tool of one app revision, or a platform or member tool
/// (the same for the life of the process).
#[derive(Debug, Clone, Copy)]
pub enum SchemaKey<'a> {
    App {
        app: &'a str,
        revision: &'a str,
        tool: &'a str,
        part: Part,
    },
    Platform(&'static str),
}

type Compiled = Arc<jsonschema::Validator>;

/// One app revision's validators, by tool name: `[input, result]`.
type RevisionValidators = HashMap<String, [Option<Compiled>; 2]>;

#[derive(Default)]
struct Cache {
    /// By app id, then revision.
    apps: HashMap<String, HashMap<String, RevisionValidators>>,
    platform: HashMap<&'static str, Compiled>,
    /// Validators held, to bound the cache.
    held: usize,
}

impl Cache {
    fn get(&self, key: SchemaKey<'_>) -> Option<Compiled> {
        match key {
            SchemaKey::App {
                app,
                revision,
                tool,
                part,
            } => self.apps.get(app)?.get(revision)?.get(tool)?[part as usize].clone(),
            SchemaKey::Platform(tool) => self.platform.get(tool).cloned(),
        }
    }

    fn insert(&mut self, key: SchemaKey<'_>, validator: Compiled) {
        if self.held >= Validators::CAPACITY {
            *self = Cache::default();
        }
        self.held += 1;
        match key {
            SchemaKey::App {
                app,
                revision,
                tool,
                part,
            } => {
                self.apps
                    .entry(app.to_owned())
                    .or_default()
                    .entry(revision.to_owned())
                    .or_default()
                    .entry(tool.to_owned())
                    .or_default()[part as usize] = Some(validator);
            }
            SchemaKey::Platform(tool) => {
                self.platform.insert(tool, validator);
            }
        }
    }
}

/// The validators this replica compiled; emptied when it holds
/// [`Validators::CAPACITY`].
#[derive(Default)]
pub struct Validators(Mutex<Cache>);

impl std::fmt::Debug for Validators {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self.0.lock().map_or(0, |cache| cache.held);
        f.debug_struct("Validators").field("held", &held).finish()
    }
}

impl Validators {
    pub const CAPACITY: usize = 4096;

    /// Validates `instance` against the schema `key` names, compiling
    /// `schema()` only when no validator is cached for it; the first few
    /// failures become one `APP_INPUT_INVALID` naming where they are.
    pub fn validate(
        &self,
        key: SchemaKey<'_>,
        schema: impl FnOnce() -> Value,
        instance: &Value,
    ) -> Result<(), AppError> {
        let part = match key {
            SchemaKey::App { part, .. } => part,
            SchemaKey::Platform(_) => Part::Input,
        };
        let cacheable = !matches!(key, SchemaKey::App { revision: "", .. });
        let cached = if cacheable {
            self.0.lock().ok().and_then(|cache| cache.get(key))
        } else {
            None
        };
        let validator = match cached {
            Some(validator) => validator,
            None => {
                let validator = Arc::new(compile(&schema(), part)?);
                if cacheable && let Ok(mut cache) = self.0.lock() {
                    cache.insert(key, Arc::clone(&validator));
                }
                validator
            }
        };
        check(&validator, instance, part.what())
    }
}

fn compile(schema: &Value, part: Part) -> Result<jsonschema::Validator, AppError> {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|_| {
            AppError::new(
                ErrorCode::ActionInvalid,
                format!("the {} schema cannot be used", part.what()),
            )
        })
}

fn check(validator: &jsonschema::Validator, instance: &Value, what: &str) -> Result<(), AppError> {
    // The first problem's place, for a caller that fixes one field at a time
    // (`/values/date` names the field `date`).
    let first = validator
        .iter_errors(instance)
        .next()
        .map(|error| error.instance_path().to_string());
    let problems: Vec<String> = validator
        .iter_errors(instance)
        .take(3)
        .map(|error| {
            let at = error.instance_path().to_string();
            let mut text = error.to_string();
            if text.len() > 200 {
                let mut cut = 200;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                text.push('…');
            }
            if at.is_empty() {
                text
            } else {
                format!("{at}: {text}")
            }
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    let mut details = serde_json::Map::new();
    if let Some(path) = first.filter(|path| !path.is_empty()) {
        let field = path
            .rsplit('/')
            .next()
            .filter(|last| !last.is_empty() && !last.bytes().all(|b| b.is_ascii_digit()));
        if let Some(field) = field {
            details.insert("field".to_owned(), Value::from(field));
        }
        details.insert("path".to_owned(), Value::from(path));
    }
    let error = AppError::new(
        ErrorCode::InputInvalid,
        format!("the {what} is not valid: {}", problems.join("; ")),
    );
    Err(if details.is_empty() {
        error
    } else {
        error.with_details(Value::Object(details))
    })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use serde_json::json;

    use super::*;

    fn app_key<'a>(revision: &'a str, tool: &'a str, part: Part) -> SchemaKey<'a> {
        SchemaKey::App {
            app: "notes",
            revision,
            tool,
            part,
        }
    }

    #[test]
    fn schema_failures_name_the_place() {
        let validators = Validators::default();
        let schema = json!({"type": "object", "properties": {"weekStart": {"type": "string", "format": "date"}}, "required": ["weekStart"], "additionalProperties": false});
        let key = app_key("r1", "app__notes__week", Part::Input);
        let validate = |instance: &Value| validators.validate(key, || schema.clone(), instance);
        assert!(validate(&json!({"weekStart": "2026-09-07"})).is_ok());
        let error = validate(&json!({"weekStart": "soon"})).unwrap_err();
        assert_eq!(error.code, ErrorCode::InputInvalid);
        assert!(error.message.contains("/weekStart"), "{}", error.message);
        assert_eq!(error.details.as_ref().unwrap()["field"], "weekStart");
        let error = validate(&json!({"weekStart": "2026-09-07", "x": 1})).unwrap_err();
        assert!(error.message.contains('x'), "{}", error.message);
        let broken = json!({"type": "no-such-type"});
        let error = validators
            .validate(
                app_key("r1", "app__notes__week", Part::Result),
                || broken,
                &json!({}),
            )
            .unwrap_err();
        assert_eq!(error.code, ErrorCode::ActionInvalid);
        assert!(error.message.contains("result schema"), "{}", error.message);
    }

    /// A schema is built and compiled once per app revision and tool: the
    /// next call finds it; another revision, tool or part is its own entry.
    #[test]
    fn a_schema_is_compiled_once_per_revision_and_tool() {
        let validators = Validators::default();
        let built = Cell::new(0);
        let closed = || {
            built.set(built.get() + 1);
            json!({"type": "object", "additionalProperties": false})
        };
        let open = || {
            built.set(built.get() + 1);
            json!({"type": "object"})
        };
        let extra = json!({"x": 1});
        let list = "app__notes__items__list";
        assert!(
            validators
                .validate(app_key("r1", list, Part::Input), closed, &extra)
                .is_err()
        );
        assert!(
            validators
                .validate(app_key("r1", list, Part::Input), open, &extra)
                .is_err(),
            "the cached validator of r1 judges, not the schema offered again"
        );
        assert_eq!(built.get(), 1);
        assert!(
            validators
                .validate(app_key("r2", list, Part::Input), open, &extra)
                .is_ok()
        );
        assert!(
            validators
                .validate(app_key("r1", list, Part::Result), open, &extra)
                .is_ok()
        );
        assert!(
            validators
                .validate(
                    app_key("r1", "app__notes__items__get", Part::Input),
                    open,
                    &extra
                )
                .is_ok()
        );
        assert_eq!(built.get(), 4);
        // Without a revision nothing is cached.
        for _ in 0..2 {
            assert!(
                validators
                    .validate(app_key("", list, Part::Input), open, &extra)
                    .is_ok()
            );
        }
        assert_eq!(built.get(), 6);
        for _ in 0..2 {
            assert!(
                validators
                    .validate(SchemaKey::Platform("getDocs"), closed, &extra)
                    .is_err()
            );
        }
        assert_eq!(built.get(), 7);
        assert_eq!(validators.0.lock().unwrap().held, 5);
    }

    #[test]
    fn the_cache_is_bounded() {
        let validators = Validators::default();
        let names: Vec<String> = (0..=Validators::CAPACITY)
            .map(|n| format!("app__notes__t{n}__list"))
            .collect();
        for name in &names {
            validators
                .validate(
                    app_key("r1", name, Part::Input),
                    || json!({"type": "object"}),
                    &json!({}),
                )
                .unwrap();
        }
        assert_eq!(validators.0.lock().unwrap().held, 1);
    }
}
