//! The caller's catalogue as the gateway reads it: studio-core's
//! `GetCatalogue` answer converted once, where it is received, into typed
//! apps (their capabilities, declared tables with columns, compiled actions and
//! data contract). Every other module reads these fields, never the wire.
//!
//! Nothing here is cached: each listing and call asks studio-core again, so a
//! grant revoked a moment ago is already gone.
//!
//! This module must never decide who sees or may run a tool: it moves fields.

use std::collections::BTreeMap;

use sasha_contract::actions::CompiledAction;
use sasha_contract::caller::AppAccess;
use sasha_contract::data::{Table, TableDeclaration};
use sasha_proto::convert::FromWire;
use sasha_proto::pb;
use sasha_proto::{AppError, ErrorCode};
use sasha_service::Role;
use sasha_service::grpc::{self, CoreClient};
use serde_json::{Value, json};

/// The apps a caller may use, by id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalogue {
    /// Changes whenever any package changes.
    pub fingerprint: String,
    pub apps: BTreeMap<String, App>,
}

/// What an app declared about its data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DataCapability {
    /// No data (`data: false`).
    #[default]
    None,
    /// `data: read`: no mutating table tools.
    Read,
    /// `data: read-write`.
    ReadWrite,
}

/// One app of the catalogue.
#[derive(Debug, Clone, PartialEq)]
pub struct App {
    pub id: String,
    /// The caller's grant on the app, read fresh by studio-core.
    pub access: AppAccess,
    pub name: String,
    pub description: String,
    pub revision: String,
    pub resource_uri: String,
    /// Declares `chat: true` (the open app's chat tool).
    pub chat: bool,
    /// Declares `files: true` (the open app's upload tool).
    pub files: bool,
    pub data: DataCapability,
    /// The data contract's hash; `None` for an app without data.
    pub contract_hash: Option<String>,
    /// The declared tables, by name.
    pub tables: BTreeMap<String, DeclaredTable>,
    pub actions: Vec<CompiledAction>,
    /// The data contract, when studio-core sent it (one app asked for by id,
    /// and the caller did not already hold its hash).
    pub contract: Option<pb::DataContract>,
    /// The caller's credential writes this app as a script (operator
    /// consent at mint time, read fresh by `AuthorizeCall`): no model
    /// confirmation, audited as `automation`.
    pub automation: bool,
    /// A preview's app (the draft): what the previewer may read of the live
    /// data, as studio-core worked it out; every data call of the preview
    /// carries it to data-worker unchanged.
    pub preview_scope: Option<pb::PreviewScope>,
}

/// One declared table: its declaration and its structure (name and columns).
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredTable {
    pub declaration: TableDeclaration,
    pub table: Table,
}

impl App {
    /// Whether the caller holds `manage` on this app.
    pub fn manages(&self) -> bool {
        self.access == AppAccess::Manage
    }

    /// The action with id `action_id`.
    pub fn action(&self, action_id: &str) -> Option<&CompiledAction> {
        self.actions.iter().find(|action| action.id == action_id)
    }

    /// The `sasha://apps/<id>/tables` document: per table its declaration
    /// and columns, as the data contract serialises them.
    pub fn tables_json(&self) -> Value {
        Value::Object(
            self.tables
                .iter()
                .map(|(name, table)| {
                    (
                        name.clone(),
                        json!({"declaration": table.declaration, "columns": table.table.columns}),
                    )
                })
                .collect(),
        )
    }
}

/// A catalogue studio-core sent that this gateway cannot read: its bug, so
/// the caller sees an internal error and the reason is logged.
fn unreadable(error: &AppError) -> AppError {
    tracing::error!(reason = %error.message, "studio-core sent a catalogue that cannot be read");
    AppError::from_code(ErrorCode::Internal)
}

impl TryFrom<&pb::Catalogue> for Catalogue {
    type Error = AppError;
    fn try_from(catalogue: &pb::Catalogue) -> Result<Catalogue, AppError> {
        Ok(Catalogue {
            fingerprint: catalogue.fingerprint.clone(),
            apps: catalogue
                .apps
                .iter()
                .map(|app| Ok((app.id.clone(), App::try_from(app)?)))
                .collect::<Result<_, AppError>>()?,
        })
    }
}

impl TryFrom<&pb::CatalogueApp> for App {
    type Error = AppError;
    fn try_from(app: &pb::CatalogueApp) -> Result<App, AppError> {
        let capabilities = app.capabilities.unwrap_or_default();
        let data = match pb::DataCapability::try_from(capabilities.data) {
            Ok(pb::DataCapability::ReadWrite) => DataCapability::ReadWrite,
            Ok(pb::DataCapability::Read) => DataCapability::Read,
            _ => DataCapability::None,
        };
        let tables = app
            .tables
            .iter()
            .map(|(name, table)| {
                let declaration = table
                    .declaration
                    .as_ref()
                    .ok_or_else(|| {
                        AppError::new(ErrorCode::InputInvalid, "a table declaration is missing")
                    })
                    .and_then(TableDeclaration::try_from)?;
                Ok((
                    name.clone(),
                    DeclaredTable {
                        declaration,
                        table: Table::from(&pb::TableStructure {
                            name: name.clone(),
                            columns: table.columns.clone(),
                            unique: table.unique.clone(),
                            foreign_keys: table.foreign_keys.clone(),
                            checks: table.checks.clone(),
                            ..Default::default()
                        }),
                    },
                ))
            })
            .collect::<Result<_, AppError>>()?;
        Ok(App {
            id: app.id.clone(),
            access: AppAccess::from_wire(app.access)?,
            name: app.name.clone(),
            description: app.description.clone(),
            revision: app.revision.clone(),
            resource_uri: app.resource_uri.clone(),
            chat: capabilities.chat,
            files: capabilities.files,
            data,
            contract_hash: Some(app.contract_hash.clone()).filter(|hash| !hash.is_empty()),
            tables,
            actions: app
                .actions
                .iter()
                .map(CompiledAction::try_from)
                .collect::<Result<_, AppError>>()?,
            contract: app.contract.clone(),
            automation: app.automation,
            preview_scope: app.preview_scope.clone(),
        })
    }
}

/// `GetCatalogue` for `principal`: every app they may use, or with `app_id`
/// that app only with its data contract unless `known_contract_hash` is its
/// current one; with `preview`, that app as its draft. Converted here, once.
pub async fn fetch(
    core: &CoreClient,
    deadline: std::time::Duration,
    principal: &pb::Principal,
    app_id: Option<&str>,
    known_contract_hash: String,
    preview: Option<&str>,
) -> Result<Catalogue, AppError> {
    let request = pb::CatalogueRequest {
        principal: Some(principal.clone()),
        app_id: app_id.unwrap_or_default().to_owned(),
        known_contract_hash,
        preview: preview.unwrap_or_default().to_owned(),
    };
    let reply = grpc::within_read(Role::StudioCore, deadline, crate::TRY_AGAIN, || {
        let (mut core, request) = (core.clone(), request.clone());
        async move { core.get_catalogue(request).await }
    })
    .await?;
    Catalogue::try_from(&reply).map_err(|error| unreadable(&error))
}

#[cfg(test)]
mod tests {
    use sasha_proto::convert::ToWire;

    use super::*;

    fn column(name: &str, declared_type: &str, not_null: bool, primary_key: bool) -> pb::Column {
        pb::Column {
            name: name.into(),
            declared_type: declared_type.into(),
            not_null,
            default_value: None,
            primary_key,
            generated: false,
        }
    }

    fn wire_app() -> pb::CatalogueApp {
        pb::CatalogueApp {
            id: "notes".into(),
            access: AppAccess::Use.to_wire(),
            name: "Notes".into(),
            description: "Keep notes".into(),
            revision: "abc".into(),
            resource_uri: "ui://sasha/apps/notes/revisions/abc".into(),
            capabilities: Some(pb::Capabilities {
                chat: true,
                files: false,
                data: pb::DataCapability::Read as i32,
            }),
            contract_hash: "h1".into(),
            tables: [(
                "note_items".to_owned(),
                pb::CatalogueTable {
                    declaration: Some(pb::TableDeclaration {
                        access: pb::Access::Shared as i32,
                        owner_field: None,
                        ..Default::default()
                    }),
                    columns: vec![
                        column("id", "INTEGER", false, true),
                        column("title", "TEXT", true, false),
                    ],
                    ..Default::default()
                },
            )]
            .into(),
            actions: Vec::new(),
            contract: None,
            automation: false,
            preview_scope: None,
        }
    }

    #[test]
    fn the_wire_app_is_read_into_typed_fields() {
        let catalogue = Catalogue::try_from(&pb::Catalogue {
            fingerprint: "f".into(),
            apps: vec![wire_app()],
        })
        .unwrap();
        assert_eq!(catalogue.fingerprint, "f");
        let app = &catalogue.apps["notes"];
        assert_eq!(app.data, DataCapability::Read);
        assert!(app.chat && !app.files);
        assert_eq!(app.contract_hash.as_deref(), Some("h1"));
        let table = &app.tables["note_items"];
        assert_eq!(table.table.name, "note_items");
        assert_eq!(table.table.columns.len(), 2);
        // The tables document is the data contract's own serialisation.
        assert_eq!(
            app.tables_json(),
            json!({"note_items": {
                "declaration": {"access": "shared", "ownerField": null},
                "columns": [
                    {"name": "id", "declaredType": "INTEGER", "notNull": false, "defaultValue": null, "primaryKey": true},
                    {"name": "title", "declaredType": "TEXT", "notNull": true, "defaultValue": null, "primaryKey": false}
                ]
            }})
        );
        let mut without_data = wire_app();
        without_data.contract_hash.clear();
        without_data.capabilities = None;
        let app = App::try_from(&without_data).unwrap();
        assert_eq!(app.contract_hash, None);
        assert_eq!(app.data, DataCapability::None);
    }

    #[test]
    fn a_table_without_its_declaration_is_refused() {
        let mut app = wire_app();
        app.tables.get_mut("note_items").unwrap().declaration.take();
        assert!(App::try_from(&app).is_err());
    }
}
