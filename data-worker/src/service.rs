//! `DataService`: the governed data operations over gRPC.
//!
//! A request names the app, the hash of its data contract, the actor the caller
//! already authorised, a declared table, and the operation's arguments in the
//! JSON grammar. The grammar builds owner-scoped, parameterised statements; the
//! engine runs them (a mutation with its idempotency receipt and audit row in one
//! transaction). SQLite work runs on the blocking pool.
//!
//! A request with a `preview` id runs against its actor's own scratch copy
//! of the app's data for that draft preview (see [`crate::engine::preview`]),
//! never the live file, holding only the live rows its `preview_scope` says
//! the actor may read; `RemovePreview` removes such copies, and
//! `RemoveAppData` removes them with the live file. `ApplyContract` publishes a
//! contract: its pending migrations are applied to the live file in one
//! transaction, unless an applied migration drifted (then nothing is), or with
//! `dry_run` only reported from a read-only look at the file.
//!
//! Every app-scoped call is checked against this worker's ownership first
//! ([`crate::ownership`]): with one data-worker it must name epoch 0; with
//! leases the lease must be live and the app served here at the epoch the
//! call names, or the call is refused (`AppError::not_owner`) before
//! anything runs. The call counts as running until its work ends, and its
//! answer is checked once more before it leaves.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sasha_contract::caller::{AppAccess, CallSource, Initiator, MAX_INITIATOR_ID};
use sasha_contract::data::{Access, DataContract, PreviewScope, contract_hash};
use sasha_proto::convert::FromWire;
use sasha_proto::pb::data_service_server::DataService;
use sasha_proto::pb::{
    self, DescribeSchemaRequest, ExecuteReply, ExecuteRequest, HealthReply, HealthRequest,
    MigrationDriftReply, MigrationDriftRequest, SchemaDescription, TablesWithRowsReply,
    TablesWithRowsRequest,
};
use sasha_proto::{AppError, ErrorCode};
use sasha_service::data_plane::Layout;
use sasha_service::{Role, grpc};
use serde_json::{Map, Value};
use tonic::{Request, Response, Status};

use crate::engine::preview::Preview;
use crate::engine::snapshot::{self, Snapshot};
use crate::engine::{
    Approval, AuditMeta, AuditOperation, AuditRecord, Drift, DriftKind, Engine, MutationOutcome,
    Publisher, ReceiptKey, Target, sql_error,
};
use crate::grammar::{self, Statement, TableSpec, csv::at_row};
use crate::ownership::{Effect, Ownership};
use crate::undo::LedgerOperation;
use constraints::Write;
use sasha_contract::grammar::MAX_CSV_ROWS;

/// The `DataService` implementation.
#[derive(Clone)]
pub(crate) struct Worker {
    engine: Engine,
    /// Contracts by hash, as callers supplied and the worker verified them.
    contracts: Arc<Mutex<HashMap<String, Arc<DataContract>>>>,
    /// Replication of the app databases, when on (for `Health`).
    replicator: Option<sasha_replica::Replicator>,
    /// Which apps this worker serves, at which epoch: checked before every
    /// app-scoped call and at the durability gate.
    ownership: Arc<Ownership>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker over `app_data_root` serving what `ownership` says, its
    /// live commits gated on `replicator` when replication is on and, with
    /// leases, on the owner's fence.
    pub(crate) fn new(
        app_data_root: &Path,
        replicator: Option<sasha_replica::Replicator>,
        ownership: Arc<Ownership>,
    ) -> Worker {
        use crate::engine::durable::Durability;
        let durability: Option<Arc<dyn Durability>> = match ownership.layout() {
            Layout::Leases => Some(Arc::new(crate::replication::Fenced {
                ownership: Arc::clone(&ownership),
                replicator: replicator.clone(),
            })),
            Layout::Single => replicator.clone().map(|replicator| {
                Arc::new(crate::replication::ReplicatedApps { replicator }) as Arc<dyn Durability>
            }),
        };
        Worker {
            engine: Engine::durable(app_data_root, crate::engine::STATEMENT_DEADLINE, durability),
            contracts: Arc::new(Mutex::new(HashMap::new())),
            replicator,
            ownership,
        }
    }

    /// The engine the worker runs calls on (the lease loop closes an app's
    /// connections through it).
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Runs `work` for an app-scoped call of `app_id` naming `epoch` on the
    /// blocking pool, if this worker serves the app at that epoch now (see
    /// the module header). The call counts as running until `work` returns,
    /// even when the caller went away meanwhile.
    async fn owned_call<T: Send + 'static>(
        &self,
        app_id: &str,
        epoch: u64,
        effect: Effect,
        work: impl FnOnce(&Worker) -> Result<T, AppError> + Send + 'static,
    ) -> Result<T, Status> {
        let call = self
            .ownership
            .begin_call(app_id, epoch, Instant::now())
            .map_err(|error| error.to_status())?;
        let worker = self.clone();
        blocking(move || {
            let result = work(&worker);
            call.finish(result, effect, Instant::now())
        })
        .await
    }

    /// The verified contract for `hash`: from the cache, or decoded from the
    /// `supplied` wire message and checked against the hash.
    fn contract(
        &self,
        hash: &str,
        supplied: Option<&pb::DataContract>,
    ) -> Result<Arc<DataContract>, AppError> {
        if let Some(contract) = self
            .contracts
            .lock()
            .ok()
            .and_then(|cache| cache.get(hash).cloned())
        {
            return Ok(contract);
        }
        let Some(supplied) = supplied else {
            return Err(AppError::new(
                ErrorCode::NotReady,
                "the data service does not know this data contract yet; send it with the request",
            )
            .with_details(serde_json::json!({"contractRequired": true})));
        };
        let contract = DataContract::try_from(supplied).map_err(|_| {
            AppError::new(ErrorCode::InputInvalid, "the data contract is not valid")
        })?;
        if contract.hash != hash || contract_hash(&contract.tables, &contract.migrations) != hash {
            return Err(AppError::new(
                ErrorCode::InputInvalid,
                "the data contract does not match its hash",
            ));
        }
        let contract = Arc::new(contract);
        if let Ok(mut cache) = self.contracts.lock() {
            cache.insert(hash.to_owned(), contract.clone());
        }
        Ok(contract)
    }
}

/// An engine drift finding as it travels on the wire.
fn drift_to_wire(drift: &Drift) -> pb::Drift {
    pb::Drift {
        number: drift.number,
        file: drift.file.clone(),
        kind: match drift.kind {
            DriftKind::ChecksumChanged => pb::DriftKind::ChecksumChanged,
            DriftKind::NotInContract => pb::DriftKind::NotInContract,
        } as i32,
        applied_checksum: drift.applied_checksum.clone(),
        contract_checksum: drift.contract_checksum.clone(),
    }
}

/// Runs a statement inside the mutation's transaction (a write ending in
/// `RETURNING`, or the owner-scoped read of the current row) and gives back its
/// first row.
pub(crate) fn returning(
    transaction: &rusqlite::Connection,
    statement: &Statement,
) -> Result<Option<Map<String, Value>>, AppError> {
    let mut prepared = crate::engine::prepare_governed(transaction, &statement.sql)?;
    let mut rows = prepared
        .query(rusqlite::params_from_iter(statement.params.iter()))
        .map_err(sql_error)?;
    match rows.next().map_err(sql_error)? {
        Some(row) => Ok(Some(
            grammar::row_to_json(&statement.columns, row).map_err(sql_error)?,
        )),
        None => Ok(None),
    }
}

/// [`returning`] for a write by `actor`: a constraint it breaks is explained
/// in the caller's terms ([`constraints::explain`]), and a reference it sets
/// to a row of an owner table that is not the actor's is refused as one to a
/// missing row ([`constraints::unowned_reference`]).
fn writing(
    transaction: &rusqlite::Connection,
    statement: &Statement,
    contract: &DataContract,
    table: &str,
    write: &Write<'_>,
    actor: &str,
) -> Result<Option<Map<String, Value>>, AppError> {
    let stepped = {
        let mut prepared = crate::engine::prepare_governed(transaction, &statement.sql)?;
        let mut rows = prepared
            .query(rusqlite::params_from_iter(statement.params.iter()))
            .map_err(sql_error)?;
        match rows.next() {
            Ok(Some(row)) => Ok(Some(
                grammar::row_to_json(&statement.columns, row).map_err(sql_error)?,
            )),
            Ok(None) => Ok(None),
            Err(error) => Err(error),
        }
    };
    // The failed statement is done with before its cause is asked about.
    let row = stepped
        .map_err(|error| constraints::explain(transaction, contract, table, write, actor, error))?;
    if let (Some(row), Write::Values(values)) = (&row, write)
        && let Some(refused) =
            constraints::unowned_reference(transaction, contract, table, values, row, actor)
    {
        return Err(refused);
    }
    Ok(row)
}

fn record_id(row: &Map<String, Value>) -> String {
    match row.get(grammar::ID_COLUMN) {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn not_found() -> AppError {
    AppError::from_code(ErrorCode::RecordNotFound)
}

/// What the request's actor may read of the live data when it is a
/// preview's (`None` for the live data); a preview that does not say is
/// refused, never given more.
fn preview_scope(request: &ExecuteRequest) -> Result<Option<PreviewScope>, AppError> {
    if request.preview.is_empty() {
        return Ok(None);
    }
    match &request.preview_scope {
        Some(scope) => Ok(Some(PreviewScope::from(scope))),
        None => Err(AppError::new(
            ErrorCode::InputInvalid,
            "a preview's request must say what its previewer may read of the live data",
        )),
    }
}

/// One governed operation, run to completion on a blocking thread.
fn execute(worker: &Worker, request: ExecuteRequest) -> Result<Value, AppError> {
    let actor = request
        .actor
        .as_ref()
        .map(|actor| actor.user_id.clone())
        .unwrap_or_default();
    if actor.is_empty() {
        return Err(AppError::new(
            ErrorCode::InputInvalid,
            "the request names no actor",
        ));
    }
    // The grant the caller read; one it left unspecified is refused, never
    // taken for either.
    let access = AppAccess::from_wire(request.actor.as_ref().map_or(0, |actor| actor.access))?;
    let manages = access == AppAccess::Manage;
    let contract = worker.contract(&request.contract_hash, request.contract.as_ref())?;
    if let Some(operation) = LedgerOperation::parse(&request.operation) {
        if !request.preview.is_empty() {
            return Err(AppError::new(
                ErrorCode::InputInvalid,
                "activity and undo work on the app's live data, not on a preview",
            ));
        }
        let meta = match operation {
            LedgerOperation::Undo => {
                let (initiator, initiator_id) = provenance(request.provenance.as_ref())?;
                Some(AuditMeta {
                    source: CallSource::from_wire(request.source)?,
                    initiator,
                    initiator_id,
                    app_revision: request.app_revision.clone(),
                    action_id: None,
                })
            }
            LedgerOperation::Activity | LedgerOperation::UndoPreview => None,
        };
        return crate::undo::execute(
            operation,
            crate::undo::Call {
                engine: &worker.engine,
                app_id: &request.app_id,
                contract: &contract,
                actor: &actor,
                access,
                meta,
                request_json: &request.request_json,
                restore_copy: &|as_of| restore_copy(worker, &request.app_id, as_of),
            },
        );
    }
    let Some((declaration, table)) = contract.declared_table(&request.table) else {
        return Err(AppError::new(ErrorCode::NotFound, "no such table"));
    };
    let spec = TableSpec::new(table, declaration);
    let scope = preview_scope(&request)?;
    let app = match &scope {
        None => Target::Live(&request.app_id),
        Some(scope) => Target::Preview {
            app_id: &request.app_id,
            preview: Preview {
                id: &request.preview,
                previewer: &actor,
                scope,
            },
        },
    };
    // The request's text is parsed once: the receipt of a mutation hashes
    // the request as sent, then the grammar takes it apart.
    let input = grammar::read_request(&request.request_json)?;
    let input_hash = if sasha_contract::grammar::is_mutating(&request.operation) {
        grammar::request_hash(&request.operation, &request.table, &input)
    } else {
        String::new()
    };
    let parsed = grammar::parse_value(&request.operation, &spec, input)?;
    if sasha_contract::grammar::is_mutating(&request.operation) && !declaration.may_write(manages) {
        return Err(AppError::new(
            ErrorCode::AccessDenied,
            format!(
                "only the app's managers may change the {} table",
                request.table
            ),
        )
        .with_details(serde_json::json!({"table": request.table, "write": "manage"})));
    }
    // A manager's reads of a `managersReadAll` table see every owner's rows;
    // their writes (below, with `spec`) stay bound to their own.
    let read_spec = if declaration.reads_every_owner(manages) {
        spec.every_owner()
    } else {
        spec.clone()
    };
    let engine = &worker.engine;
    let meta = || -> Result<AuditMeta, AppError> {
        let (initiator, initiator_id) = provenance(request.provenance.as_ref())?;
        Ok(AuditMeta {
            source: CallSource::from_wire(request.source)?,
            initiator,
            initiator_id,
            app_revision: request.app_revision.clone(),
            action_id: (!request.action_id.is_empty()).then(|| request.action_id.clone()),
        })
    };
    let receipt = |key: &str| ReceiptKey {
        actor: actor.clone(),
        operation: format!("{}.{}", request.table, request.operation),
        key: key.to_owned(),
        input_hash: input_hash.clone(),
    };
    // The rows of one governed read statement, keyed by its columns.
    let read = |statement: &Statement| {
        engine.query_named(
            app,
            &contract,
            &statement.sql,
            &statement.params,
            Some(&statement.columns),
        )
    };
    // One page of the governed list, as `list` answers it and `export` reads,
    // its cursors under the app's own key (kept in its data, so a cursor
    // outlives a move of the app to another worker).
    let list_page = |query: &grammar::ListQuery, key: &crate::engine::CursorKey| {
        let (statement, plan) = grammar::list_statement(&read_spec, query, &actor, key.as_bytes())?;
        Ok::<_, AppError>(plan.finish_page(read(&statement)?, key.as_bytes()))
    };
    match parsed {
        grammar::Request::List(query) => {
            let key = engine.cursor_key(app, &contract)?;
            let (rows, next) = list_page(&query, &key)?;
            Ok(serde_json::json!({"rows": rows, "nextCursor": next}))
        }
        grammar::Request::Export(mut query) => {
            // Page after page of the governed list, so an export reads exactly
            // the rows (and owner scope) a list would.
            let key = engine.cursor_key(app, &contract)?;
            let mut rows = Vec::new();
            let next = loop {
                let (page, next) = list_page(&query, &key)?;
                rows.extend(page);
                match next {
                    Some(cursor) if rows.len() < MAX_CSV_ROWS => query.cursor = Some(cursor),
                    next => break next,
                }
            };
            let csv = grammar::csv::write_export(&read_spec, &rows)?;
            Ok(serde_json::json!({"csv": csv, "rows": rows.len(), "nextCursor": next}))
        }
        grammar::Request::Import {
            file,
            idempotency_key,
        } => {
            let rows = file
                .rows
                .into_iter()
                .map(|row| {
                    let statement = grammar::create_statement(&spec, &row.values, &actor)
                        .map_err(|error| at_row(row.row, error))?;
                    Ok((row.row, statement, row.values))
                })
                .collect::<Result<Vec<_>, AppError>>()?;
            let result = serde_json::json!({"imported": rows.len(), "skipped": file.skipped});
            let table = request.table.clone();
            let declared = Arc::clone(&contract);
            let writer = actor.clone();
            // Every row of the file is an import in the ledger, whoever sent
            // it, named by the import's key so it is undone as one.
            let meta = AuditMeta {
                source: CallSource::Import,
                initiator: Initiator::Import,
                initiator_id: Some(idempotency_key.clone()),
                ..meta()?
            };
            let count = rows.len();
            engine.mutate_rows(
                app,
                &contract,
                receipt(&idempotency_key),
                meta,
                count,
                move |transaction| {
                    let mut audit = Vec::with_capacity(rows.len());
                    for (row, statement, values) in &rows {
                        let write = Write::Values(values);
                        let created =
                            writing(transaction, statement, &declared, &table, &write, &writer)
                                .map_err(|error| at_row(*row, error))?
                                .ok_or_else(|| AppError::from_code(ErrorCode::Internal))?;
                        audit.push(AuditRecord {
                            table: table.clone(),
                            record_id: record_id(&created),
                            operation: AuditOperation::Create,
                            before: None,
                            after: Some(Value::Object(created)),
                        });
                    }
                    Ok(MutationOutcome {
                        result: result.clone(),
                        audit,
                    })
                },
            )
        }
        grammar::Request::Get { id } => {
            let statement = grammar::get_statement(&read_spec, &id, &actor)?;
            read(&statement)?
                .into_iter()
                .next()
                .map(Value::Object)
                .ok_or_else(not_found)
        }
        grammar::Request::Aggregate(query) => {
            let statement = grammar::aggregate_statement(&read_spec, &query, &actor)?;
            let rows = read(&statement)?;
            grammar::check_group_count(rows.len())?;
            Ok(serde_json::json!({"groups": rows}))
        }
        grammar::Request::History { id, limit, after } => {
            // Like a get: a row a caller cannot read has no history for them,
            // and one that never existed is the same answer.
            let owner_scoped =
                spec.access == Access::Owner && !declaration.reads_every_owner(manages);
            let record = match &id {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            let owned_by = spec
                .owner_field
                .as_deref()
                .filter(|_| owner_scoped)
                .map(|field| (field, actor.as_str()));
            let history = engine.history(
                app,
                &contract,
                &request.table,
                &record,
                owned_by,
                after,
                limit + 1,
            )?;
            if history.entries.is_empty() {
                return Err(not_found());
            }
            let mut entries = history.entries;
            let next = (entries.len() > limit as usize).then(|| {
                entries.truncate(limit as usize);
                entries.last().map(|entry| entry.entry.to_string())
            });
            Ok(serde_json::json!({"entries": entries, "nextCursor": next.flatten()}))
        }
        grammar::Request::Create {
            values,
            idempotency_key,
        } => {
            let statement = grammar::create_statement(&spec, &values, &actor)?;
            let table = request.table.clone();
            let declared = Arc::clone(&contract);
            let writer = actor.clone();
            engine.mutate(
                app,
                &contract,
                receipt(&idempotency_key),
                meta()?,
                move |transaction| {
                    let write = Write::Values(&values);
                    let row = writing(transaction, &statement, &declared, &table, &write, &writer)?
                        .ok_or_else(|| AppError::from_code(ErrorCode::Internal))?;
                    Ok(MutationOutcome {
                        result: Value::Object(row.clone()),
                        audit: vec![AuditRecord {
                            table: table.clone(),
                            record_id: record_id(&row),
                            operation: AuditOperation::Create,
                            before: None,
                            after: Some(Value::Object(row)),
                        }],
                    })
                },
            )
        }
        grammar::Request::Update {
            id,
            changes,
            expected_version,
            idempotency_key,
        } => {
            let before = grammar::get_statement(&spec, &id, &actor)?;
            let statement =
                grammar::update_statement(&spec, &id, &changes, expected_version, &actor)?;
            let table = request.table.clone();
            let declared = Arc::clone(&contract);
            let writer = actor.clone();
            engine.mutate(
                app,
                &contract,
                receipt(&idempotency_key),
                meta()?,
                move |transaction| {
                    let previous = returning(transaction, &before)?.ok_or_else(not_found)?;
                    let write = Write::Values(&changes);
                    let row = writing(transaction, &statement, &declared, &table, &write, &writer)?
                        .ok_or_else(|| conflict(&previous))?;
                    Ok(MutationOutcome {
                        result: Value::Object(row.clone()),
                        audit: vec![AuditRecord {
                            table: table.clone(),
                            record_id: record_id(&row),
                            operation: AuditOperation::Update,
                            before: Some(Value::Object(previous)),
                            after: Some(Value::Object(row)),
                        }],
                    })
                },
            )
        }
        grammar::Request::Delete {
            id,
            expected_version,
            idempotency_key,
        } => {
            let before = grammar::get_statement(&spec, &id, &actor)?;
            let statement = grammar::delete_statement(&spec, &id, expected_version, &actor)?;
            let table = request.table.clone();
            let declared = Arc::clone(&contract);
            let writer = actor.clone();
            engine.mutate(app, &contract, receipt(&idempotency_key), meta()?, move |transaction| {
                let previous = returning(transaction, &before)?.ok_or_else(not_found)?;
                let write = Write::Delete(&id);
                let row = writing(transaction, &statement, &declared, &table, &write, &writer)?
                    .ok_or_else(|| conflict(&previous))?;
                Ok(MutationOutcome {
                    result: serde_json::json!({"id": row.get(grammar::ID_COLUMN), "deleted": true}),
                    audit: vec![AuditRecord {
                        table: table.clone(),
                        record_id: record_id(&row),
                        operation: AuditOperation::Delete,
                        before: Some(Value::Object(previous)),
                        after: None,
                    }],
                })
            })
        }
    }
}

/// A change's initiator and its id from the wire: a known initiator, with an
/// id exactly when its kind carries one (bounded, printable).
fn provenance(
    wire: Option<&sasha_proto::pb::Provenance>,
) -> Result<(Initiator, Option<String>), AppError> {
    let wire = wire
        .ok_or_else(|| AppError::new(ErrorCode::InputInvalid, "the request names no initiator"))?;
    let initiator = Initiator::from_wire(wire.initiator)?;
    if initiator == Initiator::Migration {
        return Err(AppError::new(
            ErrorCode::InputInvalid,
            "the initiator migration is recorded by the platform for a publication's \
             migration; a data call never names it",
        ));
    }
    let id = wire.id.as_str();
    let fits = id.len() <= MAX_INITIATOR_ID && id.chars().all(|c| c.is_ascii_graphic());
    match (initiator.takes_id(), id.is_empty()) {
        (true, false) if fits => Ok((initiator, Some(id.to_owned()))),
        (false, true) => Ok((initiator, None)),
        _ => Err(AppError::new(
            ErrorCode::InputInvalid,
            format!("the initiator {initiator} has a malformed or missing id"),
        )),
    }
}

/// A copy of `app_id`'s file as it was at `as_of` (RFC 3339), restored from
/// object storage for a restore `from: "replica"`. Runs on this blocking
/// thread; the app's slot is not held meanwhile, so the app stays live.
fn restore_copy(worker: &Worker, app_id: &str, as_of: &str) -> Result<Snapshot, AppError> {
    let Some(replicator) = &worker.replicator else {
        return Err(AppError::new(
            ErrorCode::OperationUnavailable,
            "this data-worker does not replicate to object storage (SASHA_REPLICA_URL is unset), \
             so there is no copy to restore from; restore from the ledger instead",
        ));
    };
    let at = time::OffsetDateTime::parse(as_of, &time::format_description::well_known::Rfc3339)
        .map_err(|_| {
            AppError::new(
                ErrorCode::InputInvalid,
                "asOf is not an RFC 3339 time; write it like 2026-12-07T09:30:00Z",
            )
        })?;
    let (live, copy) = worker.engine.snapshot_paths(app_id)?;
    let database = sasha_replica::Database::App(app_id.to_owned());
    let restored = tokio::runtime::Handle::current()
        .block_on(replicator.restore_copy_at(&database, &live, &copy, at));
    match restored {
        Ok(Some(_)) => Snapshot::open(copy),
        Ok(None) => {
            snapshot::remove(&copy);
            Err(AppError::new(
                ErrorCode::InputInvalid,
                format!(
                    "object storage holds no copy of this app's data at {as_of}: its replica \
                     begins later; pick a later instant, or restore from the ledger"
                ),
            ))
        }
        Err(error) => {
            snapshot::remove(&copy);
            Err(error.to_restore_error())
        }
    }
}

/// The row exists for this actor but its version moved on.
fn conflict(current: &Map<String, Value>) -> AppError {
    AppError::new(
        ErrorCode::Conflict,
        "the record changed since it was read; reload it and try again",
    )
    .with_details(serde_json::json!({"currentVersion": current.get(grammar::VERSION_COLUMN)}))
}

/// The role of the peer that sent `request`: its mTLS certificate's (in
/// unit tests, a `Role` the test put in the request's extensions, which no
/// remote caller can reach).
fn caller_role<T>(request: &Request<T>) -> Option<Role> {
    #[cfg(test)]
    if let Some(role) = request.extensions().get::<Role>() {
        return Some(*role);
    }
    sasha_service::identity::peer_role(request)
}

/// Publishing a draft's migrations, removing previews and deleting an app's
/// data are studio-core's decisions: the gateway (which may also call this
/// service) is refused them.
fn only_studio_core<T>(request: &Request<T>) -> Result<(), Status> {
    if caller_role(request) == Some(Role::StudioCore) {
        return Ok(());
    }
    Err(AppError::new(
        ErrorCode::AccessDenied,
        "only studio-core may change an app's data lifecycle",
    )
    .to_status())
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, AppError> + Send + 'static,
) -> Result<T, Status> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(|error| error.to_status()),
        Err(_) => Err(AppError::from_code(ErrorCode::Internal).to_status()),
    }
}

#[tonic::async_trait]
impl DataService for Worker {
    #[tracing::instrument(skip_all, name = "data.health")]
    async fn health(
        &self,
        _request: Request<HealthRequest>,
    ) -> Result<Response<HealthReply>, Status> {
        let mut reply = grpc::health_reply(Role::DataWorker, Vec::new());
        reply.replication = self
            .replicator
            .as_ref()
            .map(|replicator| replicator.health());
        Ok(Response::new(reply))
    }

    #[tracing::instrument(skip_all, name = "data.execute", fields(app_id, operation, table))]
    async fn execute(
        &self,
        request: Request<ExecuteRequest>,
    ) -> Result<Response<ExecuteReply>, Status> {
        let request = request.into_inner();
        let span = tracing::Span::current();
        span.record("app_id", request.app_id.as_str());
        span.record("operation", request.operation.as_str());
        span.record("table", request.table.as_str());
        let effect = if sasha_contract::grammar::is_mutating(&request.operation) {
            Effect::Writes
        } else {
            Effect::Reads
        };
        let (app_id, epoch) = (request.app_id.clone(), request.epoch);
        let result = self
            .owned_call(&app_id, epoch, effect, move |worker| {
                execute(worker, request)
            })
            .await?;
        Ok(Response::new(ExecuteReply {
            result_json: result.to_string(),
        }))
    }

    async fn describe_schema(
        &self,
        request: Request<DescribeSchemaRequest>,
    ) -> Result<Response<SchemaDescription>, Status> {
        let request = request.into_inner();
        let (app_id, epoch) = (request.app_id.clone(), request.epoch);
        let schema = self
            .owned_call(&app_id, epoch, Effect::Reads, move |worker| {
                let contract =
                    worker.contract(&request.contract_hash, request.contract.as_ref())?;
                worker.engine.describe(request.app_id.as_str(), &contract)
            })
            .await?;
        Ok(Response::new(SchemaDescription {
            schema: Some(pb::Schema::from(&schema)),
        }))
    }

    async fn migration_drift(
        &self,
        request: Request<MigrationDriftRequest>,
    ) -> Result<Response<MigrationDriftReply>, Status> {
        let request = request.into_inner();
        let (app_id, epoch) = (request.app_id.clone(), request.epoch);
        let drift = self
            .owned_call(&app_id, epoch, Effect::Reads, move |worker| {
                let contract =
                    worker.contract(&request.contract_hash, request.contract.as_ref())?;
                worker.engine.migration_drift(&request.app_id, &contract)
            })
            .await?;
        Ok(Response::new(MigrationDriftReply {
            drift: drift.iter().map(drift_to_wire).collect(),
        }))
    }

    async fn tables_with_rows(
        &self,
        request: Request<TablesWithRowsRequest>,
    ) -> Result<Response<TablesWithRowsReply>, Status> {
        let request = request.into_inner();
        let (app_id, epoch) = (request.app_id.clone(), request.epoch);
        let tables = self
            .owned_call(&app_id, epoch, Effect::Reads, move |worker| {
                worker
                    .engine
                    .tables_with_rows(&request.app_id, &request.tables)
            })
            .await?;
        Ok(Response::new(TablesWithRowsReply { tables }))
    }

    #[tracing::instrument(skip_all, name = "data.apply_contract", fields(app_id, dry_run))]
    async fn apply_contract(
        &self,
        request: Request<pb::ApplyContractRequest>,
    ) -> Result<Response<pb::ApplyContractReply>, Status> {
        only_studio_core(&request)?;
        let request = request.into_inner();
        let span = tracing::Span::current();
        span.record("app_id", request.app_id.as_str());
        span.record("dry_run", request.dry_run);
        let (app_id, epoch) = (request.app_id.clone(), request.epoch);
        let effect = if request.dry_run {
            Effect::Reads
        } else {
            Effect::Writes
        };
        let application = self.owned_call(&app_id, epoch, effect, move |worker| {
            let Some(supplied) = request.contract.as_ref() else {
                return Err(AppError::new(
                    ErrorCode::InputInvalid,
                    "the request carries no data contract",
                ));
            };
            let contract = worker.contract(&supplied.hash, Some(supplied))?;
            // Only studio-core reaches this (above), and it names an admin
            // only for a publication whose review showed the widening.
            let approval = if request.approved_by_admin.is_empty() {
                Approval::None
            } else {
                Approval::Admin(&request.approved_by_admin)
            };
            let publisher = Publisher {
                by: &request.published_by,
                revision: &request.revision,
            };
            worker.engine.apply_contract(
                &request.app_id,
                &contract,
                request.dry_run,
                approval,
                publisher,
            )
        });
        let application = application.await?;
        Ok(Response::new(pb::ApplyContractReply {
            applied: application.applied,
            drift: application.drift.iter().map(drift_to_wire).collect(),
        }))
    }

    #[tracing::instrument(skip_all, name = "data.remove_preview", fields(app_id))]
    async fn remove_preview(
        &self,
        request: Request<pb::RemovePreviewRequest>,
    ) -> Result<Response<pb::RemovePreviewReply>, Status> {
        only_studio_core(&request)?;
        let request = request.into_inner();
        tracing::Span::current().record("app_id", request.app_id.as_str());
        let (app_id, epoch) = (request.app_id.clone(), request.epoch);
        let removed_files = self
            .owned_call(&app_id, epoch, Effect::Local, move |worker| {
                worker
                    .engine
                    .remove_previews(&request.app_id, &request.preview)
            })
            .await?;
        Ok(Response::new(pb::RemovePreviewReply { removed_files }))
    }

    #[tracing::instrument(skip_all, name = "data.remove_app_data", fields(app_id))]
    async fn remove_app_data(
        &self,
        request: Request<pb::RemoveAppDataRequest>,
    ) -> Result<Response<pb::RemoveAppDataReply>, Status> {
        only_studio_core(&request)?;
        let request = request.into_inner();
        tracing::Span::current().record("app_id", request.app_id.as_str());
        let (app_id, epoch) = (request.app_id.clone(), request.epoch);
        // Its success is not withheld once done: the file is gone, and the
        // replica's removal passed the owner's fence at the gate.
        let removed = self
            .owned_call(&app_id, epoch, Effect::Local, move |worker| {
                worker.engine.back_up_and_remove(&request.app_id)
            })
            .await?;
        Ok(Response::new(match removed {
            Some(removed) => pb::RemoveAppDataReply {
                removed: true,
                backup_file: removed.backup,
                bytes: removed.bytes,
                sha256: removed.sha256,
            },
            None => pb::RemoveAppDataReply::default(),
        }))
    }
}

mod constraints;

#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod undo_tests;
