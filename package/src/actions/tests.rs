//! The action compiler: descriptors against manifests and data contracts,
//! every refusal with its code and line.

use super::*;
use crate::manifest::{
    Access, ActionDeclaration, Capabilities, DataCapability, TableDeclaration, Theme,
};

type Found = Vec<(String, Option<u32>, String, String)>;

const SCHEMA: &str = "\
CREATE TABLE projects (id INTEGER PRIMARY KEY, name TEXT NOT NULL, code TEXT NOT NULL);
CREATE TABLE entries (
  id INTEGER PRIMARY KEY,
  date TEXT NOT NULL,
  project INTEGER NOT NULL REFERENCES projects(id),
  hours REAL NOT NULL,
  created_by TEXT NOT NULL,
  note TEXT NOT NULL DEFAULT ''
);
CREATE TABLE internal_notes (id INTEGER PRIMARY KEY, body TEXT);
";

const WEEKLY: &str = "\
description: Total hours per project for one week
inputSchema:
  type: object
  properties:
    weekStart: {type: string, format: date, description: Monday of the week}
  required: [weekStart]
  additionalProperties: false
operation:
  aggregate:
    table: entries
    where:
      - {field: date, operator: week-of, valueFrom: input.weekStart}
    groupBy: [project]
    metrics:
      - {as: hours, sum: hours}
      - {as: entryCount, count: id}
resultSchema:
  type: object
  properties:
    groups:
      type: array
      maxItems: 1000
      items:
        type: object
        properties:
          project: {type: integer}
          hours: {type: number}
          entryCount: {type: integer, minimum: 0}
        additionalProperties: false
  required: [groups]
  additionalProperties: false
";

const LOG_HOURS: &str = "\
description: Log hours against a project for one day
inputSchema:
  type: object
  properties:
    date: {type: string, format: date}
    project: {type: integer, minimum: 1}
    hours: {type: number, exclusiveMinimum: 0, maximum: 24}
    note: {type: string, maxLength: 500}
  required: [date, project, hours]
  additionalProperties: false
operation:
  create:
    table: entries
    values:
      date: {valueFrom: input.date}
      project: {valueFrom: input.project}
      hours: {valueFrom: input.hours}
      note: {valueFrom: input.note}
resultSchema:
  type: object
  properties:
    id: {type: integer}
  required: [id]
  additionalProperties: false
";

fn manifest(data: DataCapability, actions: &[(&str, bool)]) -> Manifest {
    let mut tables = BTreeMap::new();
    tables.insert(
        "entries".to_owned(),
        TableDeclaration {
            access: Access::Owner,
            owner_field: Some("created_by".to_owned()),
            write: Default::default(),
            managers_read_all: false,
        },
    );
    tables.insert(
        "projects".to_owned(),
        TableDeclaration {
            access: Access::Shared,
            owner_field: None,
            write: Default::default(),
            managers_read_all: false,
        },
    );
    Manifest {
        id: "time-sheet".to_owned(),
        name: "Time Sheet".to_owned(),
        description: "Log hours".to_owned(),
        version: "1.0.0".to_owned(),
        theme: Theme::SashaTimesheetV1,
        capabilities: Capabilities {
            chat: false,
            files: false,
            data,
        },
        tables,
        actions: actions
            .iter()
            .map(|(id, expose)| ActionDeclaration {
                id: (*id).to_owned(),
                file: descriptor_path(id),
                expose_to_model: *expose,
            })
            .collect(),
    }
}

fn contract(manifest: &Manifest) -> DataContract {
    let files: BTreeMap<String, String> = [
        ("schema.sql", SCHEMA),
        ("migrations/001-initial.sql", SCHEMA),
    ]
    .iter()
    .map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
    .collect();
    let mut diagnostics = Diagnostics::new();
    let data = crate::sql::check_data(manifest, &files, &mut diagnostics);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    data.unwrap()
}

fn compile(
    manifest: &Manifest,
    files: &[(&str, &str)],
    with_data: bool,
) -> (Vec<CompiledAction>, Found) {
    let files: BTreeMap<String, String> = files
        .iter()
        .map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
        .collect();
    let data = with_data.then(|| contract(manifest));
    let mut diagnostics = Diagnostics::new();
    let compiled = compile_actions(manifest, &files, data.as_ref(), &mut diagnostics);
    let found = diagnostics
        .into_sorted()
        .into_iter()
        .map(|d| (d.file, d.line, d.code, d.reason))
        .collect();
    (compiled, found)
}

fn codes(found: &Found) -> Vec<&str> {
    found.iter().map(|(_, _, code, _)| code.as_str()).collect()
}

const INPUT: &str = "{type: object, properties: {weekStart: {type: string, format: date}, projects: {type: array, maxItems: 50, items: {type: integer}}, id: {type: integer}, day: {type: string, maxLength: 10}, hours: {type: number, minimum: 0, maximum: 24}, note: {type: string, maxLength: 500}, flag: {type: boolean}}, required: [weekStart, id, hours], additionalProperties: false}";
const OPERATION: &str = "{aggregate: {table: entries, where: [{field: date, operator: week-of, valueFrom: input.weekStart}], groupBy: [project], metrics: [{as: hours, sum: hours}]}}";
const RESULT: &str = "{type: object, properties: {groups: {type: array, maxItems: 1000, items: {type: object, properties: {project: {type: integer}, hours: {type: number}}, additionalProperties: false}}}, required: [groups], additionalProperties: false}";

fn descriptor(input: &str, operation: &str, result: &str) -> String {
    format!(
        "description: Probe\ninputSchema: {input}\noperation: {operation}\nresultSchema: {result}\n"
    )
}

/// Compiles one app-only action `probe` of a read-write app and returns its
/// diagnostics; asserts that it compiled exactly when there are none.
fn check(text: &str) -> Found {
    check_with(DataCapability::ReadWrite, text)
}

fn check_with(data: DataCapability, text: &str) -> Found {
    let manifest = manifest(data, &[("probe", false)]);
    let (compiled, found) = compile(&manifest, &[("actions/probe.action.yaml", text)], true);
    assert_eq!(compiled.len(), usize::from(found.is_empty()), "{found:#?}");
    found
}

fn check_operation(operation: &str) -> Found {
    check(&descriptor(INPUT, operation, RESULT))
}

/// A property schema `probe` inside an otherwise valid input schema.
fn check_property(schema: &str) -> Found {
    let input = format!(
        "{{type: object, properties: {{weekStart: {{type: string, format: date}}, probe: {schema}}}, required: [weekStart], additionalProperties: false}}"
    );
    check(&descriptor(&input, OPERATION, RESULT))
}

fn assert_codes(found: &Found, expected: &[&str], case: &str) {
    assert_eq!(codes(found), expected, "{case}: {found:#?}");
    for (_, _, _, reason) in found {
        assert!(reason.starts_with(|c: char| !c.is_uppercase()), "{reason}");
        assert!(!reason.ends_with('.'), "{reason}");
    }
}

#[test]
fn the_time_sheet_actions_compile() {
    let manifest = manifest(
        DataCapability::ReadWrite,
        &[("weekly-project-totals", true), ("log-hours", false)],
    );
    let (compiled, found) = compile(
        &manifest,
        &[
            ("actions/weekly-project-totals.action.yaml", WEEKLY),
            ("actions/log-hours.action.yaml", LOG_HOURS),
        ],
        true,
    );
    assert!(found.is_empty(), "{found:#?}");
    assert_eq!(compiled.len(), 2);
    let weekly = &compiled[0];
    assert_eq!(weekly.id, "weekly-project-totals");
    assert_eq!(weekly.visibility, ["model", "app"]);
    assert!(weekly.model_visible());
    assert_eq!(weekly.mcp_name, "app__time_sheet__weekly_project_totals");
    assert_eq!(weekly.description, "Total hours per project for one week");
    assert!(!weekly.mutating);
    assert_eq!(
        weekly.operation,
        Operation::Aggregate(AggregateOperation {
            table: "entries".to_owned(),
            filters: vec![WhereClause {
                field: "date".to_owned(),
                operator: WhereOperator::WeekOf,
                input: "weekStart".to_owned()
            }],
            group_by: vec!["project".to_owned()],
            metrics: vec![
                Metric {
                    alias: "hours".to_owned(),
                    function: MetricFunction::Sum,
                    field: "hours".to_owned()
                },
                Metric {
                    alias: "entryCount".to_owned(),
                    function: MetricFunction::Count,
                    field: "id".to_owned()
                },
            ],
        })
    );
    assert_eq!(
        weekly.input_schema["properties"]["weekStart"]["format"],
        "date"
    );
    assert_eq!(
        weekly.result_schema["properties"]["groups"]["maxItems"],
        1000
    );

    let log = &compiled[1];
    assert_eq!(log.visibility, ["app"]);
    assert!(!log.model_visible());
    assert_eq!(log.mcp_name, "app__time_sheet__log_hours");
    assert!(log.mutating);
    let Operation::Create(create) = &log.operation else {
        panic!("{:?}", log.operation)
    };
    assert_eq!(create.table, "entries");
    assert_eq!(
        create.values.get("hours").map(String::as_str),
        Some("hours")
    );
    assert_eq!(create.values.len(), 4);

    // The wire shape mirrors the descriptor and round-trips.
    let json = serde_json::to_value(weekly).unwrap();
    assert_eq!(
        json["operation"]["aggregate"]["where"][0]["operator"],
        "week-of"
    );
    assert_eq!(
        json["operation"]["aggregate"]["where"][0]["input"],
        "weekStart"
    );
    assert_eq!(
        json["operation"]["aggregate"]["metrics"][1]["as"],
        "entryCount"
    );
    assert_eq!(
        json["operation"]["aggregate"]["metrics"][1]["function"],
        "count"
    );
    assert_eq!(json["mcpName"], "app__time_sheet__weekly_project_totals");
    assert_eq!(json["inputSchema"]["required"][0], "weekStart");
    for action in &compiled {
        let back: CompiledAction =
            serde_json::from_value(serde_json::to_value(action).unwrap()).unwrap();
        assert_eq!(&back, action);
    }
}

#[test]
fn list_and_get_compile() {
    let found = check_operation(
        "{list: {table: entries, where: [{field: project, operator: in, valueFrom: input.projects}, {field: hours, operator: gte, valueFrom: input.hours}, {field: note, operator: neq, valueFrom: input.note}], orderBy: [{field: date, direction: desc}, {field: id}], select: [id, date, hours], limit: 200}}",
    );
    assert!(found.is_empty(), "{found:#?}");
    let found = check_operation("{get: {table: projects, idFrom: input.id}}");
    assert!(found.is_empty(), "{found:#?}");
    let found = check_operation(
        "{aggregate: {table: entries, metrics: [{as: total, sum: hours}, {as: people, countDistinct: created_by}, {as: first, min: date}, {as: last, max: date}, {as: mean, avg: hours}]}}",
    );
    assert!(found.is_empty(), "{found:#?}");

    let manifest = manifest(
        DataCapability::Read,
        &[("recent", false), ("one-project", false)],
    );
    let recent = descriptor(
        INPUT,
        "{list: {table: entries, orderBy: [{field: date, direction: asc}], limit: 10}}",
        RESULT,
    );
    let one = descriptor(INPUT, "{get: {table: projects, idFrom: input.id}}", RESULT);
    let (compiled, found) = compile(
        &manifest,
        &[
            ("actions/recent.action.yaml", &recent),
            ("actions/one-project.action.yaml", &one),
        ],
        true,
    );
    assert!(found.is_empty(), "{found:#?}");
    assert_eq!(
        compiled[0].operation,
        Operation::List(ListOperation {
            table: "entries".to_owned(),
            filters: Vec::new(),
            order_by: vec![OrderBy {
                field: "date".to_owned(),
                direction: Direction::Asc
            }],
            select: Vec::new(),
            limit: Some(10),
        })
    );
    assert_eq!(
        compiled[1].operation,
        Operation::Get(GetOperation {
            table: "projects".to_owned(),
            id_input: "id".to_owned()
        })
    );
    assert_eq!(compiled[1].operation.kind(), "get");
    assert_eq!(compiled[1].operation.table(), "projects");
}

#[test]
fn declarations_are_checked() {
    let valid = descriptor(INPUT, OPERATION, RESULT);
    let mut bad_id = manifest(DataCapability::ReadWrite, &[]);
    for id in [
        "Weekly",
        "weekly_totals",
        "weekly--totals",
        "-weekly",
        &"a".repeat(61),
    ] {
        bad_id.actions.push(ActionDeclaration {
            id: id.to_owned(),
            file: descriptor_path(id),
            expose_to_model: false,
        });
    }
    let (compiled, found) = compile(&bad_id, &[], true);
    assert!(compiled.is_empty());
    assert_eq!(codes(&found), ["ACTION_ID"; 5]);

    let twice = manifest(
        DataCapability::ReadWrite,
        &[("probe", false), ("probe", true)],
    );
    let (compiled, found) = compile(&twice, &[("actions/probe.action.yaml", &valid)], true);
    assert_eq!(compiled.len(), 1);
    assert_codes(&found, &["ACTION_DUPLICATE_ID"], "duplicate");

    let mut moved = manifest(DataCapability::ReadWrite, &[("probe", false)]);
    moved.actions[0].file = "actions/other.action.yaml".to_owned();
    let (_, found) = compile(&moved, &[("actions/other.action.yaml", &valid)], true);
    assert_codes(&found, &["ACTION_FILE_PATH"], "path");

    let missing = manifest(DataCapability::ReadWrite, &[("probe", false)]);
    let (_, found) = compile(&missing, &[], true);
    assert_codes(&found, &["ACTION_FILE_MISSING"], "missing");
    assert_eq!(found[0].0, "actions/probe.action.yaml");

    let ids: Vec<String> = (0..21).map(|n| format!("action-{n}")).collect();
    let many = manifest(
        DataCapability::ReadWrite,
        &ids.iter()
            .map(|id| (id.as_str(), false))
            .collect::<Vec<_>>(),
    );
    let files: Vec<(String, String)> = ids
        .iter()
        .map(|id| (descriptor_path(id), valid.clone()))
        .collect();
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let (_, found) = compile(&many, &files, true);
    assert_codes(&found, &["ACTION_TOO_MANY"], "too many");
}

#[test]
fn descriptor_shape_is_checked() {
    let cases: [(&str, &[&str], Option<u32>); 14] = [
        ("description: [unclosed\n", &["ACTION_YAML"], None),
        ("- a\n- b\n", &["ACTION_SHAPE"], Some(1)),
        (
            &format!("{}sql: SELECT 1\n", descriptor(INPUT, OPERATION, RESULT)),
            &["ACTION_UNKNOWN_KEY"],
            Some(5),
        ),
        (
            &format!("{}handler: app.js\n", descriptor(INPUT, OPERATION, RESULT)),
            &["ACTION_UNKNOWN_KEY"],
            Some(5),
        ),
        (
            "description: Probe\n",
            &[
                "ACTION_MISSING_KEY",
                "ACTION_MISSING_KEY",
                "ACTION_MISSING_KEY",
            ],
            Some(1),
        ),
        (
            &descriptor(INPUT, OPERATION, RESULT).replace("description: Probe", "description: ''"),
            &["ACTION_DESCRIPTION"],
            Some(1),
        ),
        (
            &descriptor(INPUT, OPERATION, RESULT).replace("Probe", &"x".repeat(301)),
            &["ACTION_DESCRIPTION"],
            Some(1),
        ),
        (
            &descriptor(INPUT, OPERATION, RESULT).replace("Probe", "Pro\u{200B}be"),
            &["ACTION_DESCRIPTION"],
            Some(1),
        ),
        (
            &descriptor(INPUT, OPERATION, RESULT)
                .replace("description: Probe", "description: {text: Probe}"),
            &["ACTION_DESCRIPTION"],
            Some(1),
        ),
        (
            &format!(
                "{}description: again\n",
                descriptor(INPUT, OPERATION, RESULT)
            ),
            &["ACTION_YAML"],
            None,
        ),
        (
            &format!("x: &a [1]\ny: *a\n{}", descriptor(INPUT, OPERATION, RESULT)),
            &["ACTION_YAML"],
            None,
        ),
        (
            &descriptor(INPUT, OPERATION, RESULT).replace("Probe", "!!python/object Probe"),
            &["ACTION_YAML"],
            None,
        ),
        (
            &descriptor(INPUT, OPERATION, RESULT).replace("maximum: 24", "maximum: .inf"),
            &["ACTION_YAML"],
            None,
        ),
        (
            &descriptor(INPUT, OPERATION, RESULT)
                .replace("description: Probe\n", "description: Probe\n<<: {x: 1}\n"),
            &["ACTION_YAML"],
            None,
        ),
    ];
    for (text, expected, line) in cases {
        let found = check(text);
        assert_codes(&found, expected, text);
        if line.is_some() {
            assert_eq!(found[0].1, line, "{text}");
        }
    }
    let found = check(&format!(
        "{}# {}\n",
        descriptor(INPUT, OPERATION, RESULT),
        "x".repeat(MAX_DESCRIPTOR_BYTES)
    ));
    assert_codes(&found, &["ACTION_FILE_TOO_LARGE"], "large");
    // A YAML error keeps its line.
    let found = check("description: Probe\ninputSchema: {type: object\noperation: x\n");
    assert_codes(&found, &["ACTION_YAML"], "unclosed");
    assert!(found[0].1.is_some(), "{found:#?}");
}

/// Each YAML limit is refused in words a package author can act on, never
/// as the parser's option names or debug types, and at the line an editor
/// shows (a lone `\r` ends a YAML line but not an editor's).
#[test]
fn yaml_limits_are_refused_plainly_at_the_editors_line() {
    let valid = descriptor(INPUT, OPERATION, RESULT);
    let deep = format!(
        "{}description: {}x{}\n",
        valid.replace("description: Probe\n", ""),
        "[".repeat(41),
        "]".repeat(41)
    );
    let cases = [
        (
            format!("{valid}---\n{valid}"),
            "the descriptor is not valid YAML: only one YAML document is allowed",
        ),
        (
            deep,
            "the descriptor is not valid YAML: the YAML nests too deeply",
        ),
        (
            format!("x: &a [1]\n{valid}"),
            "the descriptor is not valid YAML: anchors and aliases (&name, *name) are not allowed; write each value out",
        ),
        (
            format!("{valid}description: again\n"),
            "the descriptor is not valid YAML: the key description appears twice in one mapping",
        ),
    ];
    for (text, reason) in cases {
        let found = check(&text);
        assert_codes(&found, &["ACTION_YAML"], &text);
        assert_eq!(found[0].3, reason, "{text}");
    }
    let found = check(&format!("# a\r# b\r{}handler: app.js\n", valid));
    assert_codes(&found, &["ACTION_UNKNOWN_KEY"], "lone carriage returns");
    assert_eq!(found[0].1, Some(5), "{found:#?}");
    let found = check("# a\r# b\rdescription: [unclosed\n");
    assert_codes(&found, &["ACTION_YAML"], "lone carriage returns");
    assert_eq!(found[0].1, Some(1), "{found:#?}");
}

#[test]
fn operations_are_exactly_one_supported_kind() {
    let cases = [
        ("{}", "ACTION_OPERATION"),
        (
            &format!(
                "{{aggregate: {}, list: {{table: entries}}}}",
                &OPERATION[12..OPERATION.len() - 1]
            ),
            "ACTION_OPERATION",
        ),
        ("{sql: 'SELECT * FROM entries'}", "ACTION_UNKNOWN_KEY"),
        ("{call: other-action}", "ACTION_UNKNOWN_KEY"),
        (
            "{update: {table: entries, idFrom: input.id, values: {hours: {valueFrom: input.hours}}}}",
            "ACTION_MUTATION_UNSUPPORTED",
        ),
        (
            "{delete: {table: entries, idFrom: input.id}}",
            "ACTION_MUTATION_UNSUPPORTED",
        ),
        ("[aggregate]", "ACTION_SHAPE"),
        ("{list: [entries]}", "ACTION_SHAPE"),
    ];
    for (operation, code) in cases {
        let found = check_operation(operation);
        assert_codes(&found, &[code], operation);
        assert_eq!(found[0].1, Some(3), "{operation}");
    }
    let found = check_operation("{delete: {table: entries, idFrom: input.id}}");
    assert!(
        found[0].3.contains("APP_ACTION_INVALID") && found[0].3.contains("expectedVersion"),
        "{found:#?}"
    );
}

#[test]
fn tables_must_be_declared_and_data_present() {
    for operation in [
        "{list: {table: internal_notes}}",
        "{list: {table: sqlite_master}}",
        "{list: {table: Entries}}",
        "{get: {table: _sasha_audit, idFrom: input.id}}",
    ] {
        assert_codes(
            &check_operation(operation),
            &["ACTION_TABLE_UNDECLARED"],
            operation,
        );
    }
    assert_codes(
        &check_operation("{list: {table: [entries]}}"),
        &["ACTION_SHAPE"],
        "table list",
    );
    let manifest = manifest(DataCapability::ReadWrite, &[("probe", false)]);
    let text = descriptor(INPUT, OPERATION, RESULT);
    let (compiled, found) = compile(&manifest, &[("actions/probe.action.yaml", &text)], false);
    assert!(compiled.is_empty());
    assert_codes(&found, &["ACTION_NO_DATA"], "no data");
    // Problems that do not depend on the table are still reported.
    let text = descriptor(
        INPUT,
        "{list: {table: entries, where: [{field: anything, operator: contains, valueFrom: input.missing}], limit: 500}}",
        RESULT,
    );
    let (_, found) = compile(&manifest, &[("actions/probe.action.yaml", &text)], false);
    assert_codes(
        &found,
        &[
            "ACTION_LIMIT",
            "ACTION_NO_DATA",
            "ACTION_OPERATOR",
            "ACTION_VALUE_FROM",
        ],
        "no data, more",
    );
    let found = check_operation(
        "{list: {table: internal_notes, where: [{field: anything, operator: contains, valueFrom: input.note}]}}",
    );
    assert_codes(
        &found,
        &["ACTION_OPERATOR", "ACTION_TABLE_UNDECLARED"],
        "undeclared, more",
    );
}

#[test]
fn fields_must_be_columns() {
    for operation in [
        "{list: {table: entries, where: [{field: secret, operator: eq, valueFrom: input.note}]}}",
        "{list: {table: entries, orderBy: [{field: rowid}]}}",
        "{list: {table: entries, select: [id, _sasha_version]}}",
        "{list: {table: entries, select: ['date; DROP TABLE entries']}}",
        "{aggregate: {table: entries, groupBy: [name], metrics: [{as: n, count: id}]}}",
        "{aggregate: {table: entries, metrics: [{as: n, sum: cost}]}}",
        "{create: {table: entries, values: {date: {valueFrom: input.weekStart}, project: {valueFrom: input.id}, hours: {valueFrom: input.hours}, cost: {valueFrom: input.hours}}}}",
    ] {
        assert_codes(
            &check_operation(operation),
            &["ACTION_FIELD_UNDECLARED"],
            operation,
        );
    }
}

#[test]
fn where_clauses_are_checked() {
    let clause = |clause: &str| format!("{{list: {{table: entries, where: [{clause}]}}}}");
    let cases = [
        (
            "{field: note, operator: contains, valueFrom: input.note}",
            "ACTION_OPERATOR",
        ),
        (
            "{field: note, operator: starts-with, valueFrom: input.note}",
            "ACTION_OPERATOR",
        ),
        (
            "{field: note, operator: like, valueFrom: input.note}",
            "ACTION_OPERATOR",
        ),
        (
            "{field: note, operator: eq, valueFrom: hello}",
            "ACTION_VALUE_FROM",
        ),
        (
            "{field: note, operator: eq, valueFrom: input.missing}",
            "ACTION_VALUE_FROM",
        ),
        (
            "{field: note, operator: eq, valueFrom: input.note.length}",
            "ACTION_VALUE_FROM",
        ),
        (
            "{field: note, operator: eq, valueFrom: 3}",
            "ACTION_VALUE_FROM",
        ),
        (
            "{field: note, operator: eq, valueFrom: input.note, value: x}",
            "ACTION_UNKNOWN_KEY",
        ),
        ("{field: note, operator: eq}", "ACTION_MISSING_KEY"),
        (
            "{field: project, operator: in, valueFrom: input.id}",
            "ACTION_INPUT_TYPE",
        ),
        (
            "{field: project, operator: eq, valueFrom: input.projects}",
            "ACTION_INPUT_TYPE",
        ),
        (
            "{field: date, operator: week-of, valueFrom: input.day}",
            "ACTION_INPUT_TYPE",
        ),
        ("note", "ACTION_SHAPE"),
    ];
    for (text, code) in cases {
        assert_codes(&check_operation(&clause(text)), &[code], text);
    }
    let found = check_operation(&clause(
        "{field: note, operator: contains, valueFrom: input.note}",
    ));
    assert!(found[0].3.contains("Sasha.data.list"), "{found:#?}");
    // `in` needs an array bounded like the data grammar's 50 values.
    let input = INPUT.replace("maxItems: 50", "maxItems: 51");
    let found = check(&descriptor(
        &input,
        &clause("{field: project, operator: in, valueFrom: input.projects}"),
        RESULT,
    ));
    assert_codes(&found, &["ACTION_INPUT_TYPE"], "in 51");
}

#[test]
fn grammar_bounds_are_enforced() {
    let where_clause = "{field: note, operator: eq, valueFrom: input.note}";
    let many = |n: usize, item: &str| vec![item; n].join(", ");
    let cases = [
            (format!("{{list: {{table: entries, where: [{}]}}}}", many(21, where_clause)), "ACTION_LIMIT"),
            (format!("{{list: {{table: entries, orderBy: [{}]}}}}", many(4, "{field: date}")), "ACTION_LIMIT"),
            (format!("{{list: {{table: entries, select: [{}]}}}}", many(51, "date")), "ACTION_LIMIT"),
            ("{list: {table: entries, select: [date, date]}}".to_owned(), "ACTION_DUPLICATE"),
            ("{list: {table: entries, limit: 0}}".to_owned(), "ACTION_LIMIT"),
            ("{list: {table: entries, limit: 201}}".to_owned(), "ACTION_LIMIT"),
            ("{list: {table: entries, limit: '10'}}".to_owned(), "ACTION_LIMIT"),
            ("{list: {table: entries, orderBy: [{field: date, direction: up}]}}".to_owned(), "ACTION_SHAPE"),
            (format!("{{aggregate: {{table: entries, groupBy: [{}], metrics: [{{as: n, count: id}}]}}}}", many(4, "project")), "ACTION_LIMIT"),
            ("{aggregate: {table: entries, metrics: []}}".to_owned(), "ACTION_LIMIT"),
            ("{aggregate: {table: entries}}".to_owned(), "ACTION_MISSING_KEY"),
            (format!("{{aggregate: {{table: entries, metrics: [{}]}}}}", (0..11).map(|n| format!("{{as: m{n}, sum: hours}}")).collect::<Vec<_>>().join(", ")), "ACTION_LIMIT"),
            ("{aggregate: {table: entries, metrics: [{as: n, sum: hours, avg: hours}]}}".to_owned(), "ACTION_METRIC"),
            ("{aggregate: {table: entries, metrics: [{as: n}]}}".to_owned(), "ACTION_METRIC"),
            ("{aggregate: {table: entries, metrics: [{as: n, median: hours}]}}".to_owned(), "ACTION_UNKNOWN_KEY"),
            ("{aggregate: {table: entries, metrics: [{as: 'total hours', sum: hours}]}}".to_owned(), "ACTION_METRIC"),
            ("{aggregate: {table: entries, metrics: [{as: userId, sum: hours}]}}".to_owned(), "ACTION_PROPERTY_RESERVED"),
            ("{aggregate: {table: entries, metrics: [{as: n, sum: hours}, {as: n, avg: hours}]}}".to_owned(), "ACTION_DUPLICATE"),
            ("{aggregate: {table: entries, groupBy: [project], metrics: [{as: project, count: id}]}}".to_owned(), "ACTION_DUPLICATE"),
        ];
    for (operation, code) in cases {
        assert_codes(&check_operation(&operation), &[code], &operation);
    }
}

#[test]
fn creates_are_checked() {
    let full = "date: {valueFrom: input.weekStart}, project: {valueFrom: input.id}, hours: {valueFrom: input.hours}";
    let create = |values: &str| format!("{{create: {{table: entries, values: {{{values}}}}}}}");
    assert!(check_operation(&create(full)).is_empty());
    assert!(
        check_operation(&create(&format!("{full}, note: {{valueFrom: input.note}}"))).is_empty()
    );
    let cases = [
            (format!("{full}, created_by: {{valueFrom: input.note}}"), "ACTION_VALUE_RESERVED"),
            (format!("{full}, id: {{valueFrom: input.id}}"), "ACTION_VALUE_RESERVED"),
            ("date: {valueFrom: input.weekStart}, project: {valueFrom: input.id}".to_owned(), "ACTION_CREATE_INCOMPLETE"),
            ("date: {valueFrom: input.weekStart}, project: {valueFrom: input.id}, hours: {valueFrom: input.note}".to_owned(), "ACTION_CREATE_INCOMPLETE"),
            (format!("{full}, note: {{valueFrom: input.projects}}"), "ACTION_INPUT_TYPE"),
            (format!("{full}, note: {{valueFrom: input.note, value: x}}"), "ACTION_UNKNOWN_KEY"),
            (format!("{full}, note: input.note"), "ACTION_SHAPE"),
            (String::new(), "ACTION_LIMIT"),
        ];
    for (values, code) in cases {
        let operation = create(&values);
        let found = check_operation(&operation);
        let found: Found = found
            .into_iter()
            .filter(|f| !(values.is_empty() && f.2 == "ACTION_CREATE_INCOMPLETE"))
            .collect();
        assert_codes(&found, &[code], &operation);
    }
    let found = check_with(
        DataCapability::Read,
        &descriptor(INPUT, &create(full), RESULT),
    );
    assert_codes(&found, &["ACTION_READ_ONLY"], "read-only");
}

#[test]
fn gets_need_a_required_id() {
    assert_codes(
        &check_operation("{get: {table: entries, idFrom: input.note}}"),
        &["ACTION_INPUT_TYPE"],
        "optional",
    );
    assert_codes(
        &check_operation("{get: {table: entries, idFrom: input.hours}}"),
        &["ACTION_INPUT_TYPE"],
        "number",
    );
    assert_codes(
        &check_operation("{get: {table: entries, idFrom: 7}}"),
        &["ACTION_VALUE_FROM"],
        "literal",
    );
    assert_codes(
        &check_operation("{get: {table: entries}}"),
        &["ACTION_MISSING_KEY"],
        "missing",
    );
}

#[test]
fn schema_roots_are_closed_objects() {
    let cases = [
        (
            "{type: array, items: {type: string, maxLength: 3}, maxItems: 3}",
            "ACTION_SCHEMA_ROOT",
        ),
        ("{type: string, maxLength: 3}", "ACTION_SCHEMA_ROOT"),
        ("[object]", "ACTION_SCHEMA_ROOT"),
        ("{type: object, properties: {}}", "ACTION_SCHEMA_OPEN"),
        (
            "{type: object, properties: {}, additionalProperties: true}",
            "ACTION_SCHEMA_OPEN",
        ),
        (
            "{type: object, properties: {}, additionalProperties: {type: string}}",
            "ACTION_SCHEMA_OPEN",
        ),
        (
            "{type: object, properties: [a], additionalProperties: false}",
            "ACTION_SCHEMA_VALUE",
        ),
        (
            "{type: object, properties: {a: {type: integer}}, required: [b], additionalProperties: false}",
            "ACTION_SCHEMA_REQUIRED",
        ),
        (
            "{type: object, properties: {a: {type: integer}}, required: [a, a], additionalProperties: false}",
            "ACTION_SCHEMA_REQUIRED",
        ),
        (
            "{type: object, properties: {a: {type: integer}}, required: a, additionalProperties: false}",
            "ACTION_SCHEMA_REQUIRED",
        ),
        (
            "{type: object, properties: {}, additionalProperties: false, $ref: '#/x'}",
            "ACTION_SCHEMA_KEYWORD",
        ),
    ];
    for (schema, code) in cases {
        let found = check(&descriptor(INPUT, OPERATION, schema));
        assert_codes(&found, &[code], schema);
        assert_eq!(found[0].1, Some(4), "{schema}");
    }
    // An empty closed input is fine for an action that takes no input.
    let found = check(&descriptor(
        "{type: object, additionalProperties: false}",
        "{list: {table: projects}}",
        RESULT,
    ));
    assert!(found.is_empty(), "{found:#?}");
    // An invalid input schema does not also make every reference fail.
    let found = check(&descriptor("{type: object}", OPERATION, RESULT));
    assert_codes(&found, &["ACTION_SCHEMA_OPEN"], "open input");
}

#[test]
fn property_schemas_follow_the_subset() {
    let cases = [
        // types
        ("{maxLength: 3}", "ACTION_SCHEMA_TYPE"),
        ("{type: 'null'}", "ACTION_SCHEMA_TYPE"),
        (
            "{type: [string, 'null'], maxLength: 3}",
            "ACTION_SCHEMA_TYPE",
        ),
        ("string", "ACTION_SCHEMA_SHAPE"),
        // strings
        ("{type: string}", "ACTION_SCHEMA_UNBOUNDED"),
        ("{type: string, minLength: 1}", "ACTION_SCHEMA_UNBOUNDED"),
        ("{type: string, maxLength: 65537}", "ACTION_SCHEMA_LIMIT"),
        ("{type: string, maxLength: -1}", "ACTION_SCHEMA_VALUE"),
        ("{type: string, maxLength: '10'}", "ACTION_SCHEMA_VALUE"),
        ("{type: string, maxLength: 1.5}", "ACTION_SCHEMA_VALUE"),
        (
            "{type: string, minLength: 5, maxLength: 4}",
            "ACTION_SCHEMA_BOUNDS",
        ),
        (
            "{type: string, format: email, maxLength: 100}",
            "ACTION_SCHEMA_FORMAT",
        ),
        ("{type: string, format: date-time}", "ACTION_SCHEMA_FORMAT"),
        (
            "{type: string, format: date, maxLength: 10}",
            "ACTION_SCHEMA_KEYWORD",
        ),
        (
            "{type: string, maxLength: 10, pattern: '^(a+)+$'}",
            "ACTION_SCHEMA_KEYWORD",
        ),
        (
            "{type: string, maxLength: 10, minimum: 1}",
            "ACTION_SCHEMA_KEYWORD",
        ),
        (
            "{type: string, maxLength: 10, default: x}",
            "ACTION_SCHEMA_KEYWORD",
        ),
        // enums
        ("{type: string, enum: []}", "ACTION_SCHEMA_ENUM"),
        ("{type: string, enum: [a, a]}", "ACTION_SCHEMA_ENUM"),
        ("{type: string, enum: [a, 1]}", "ACTION_SCHEMA_ENUM"),
        ("{type: string, enum: a}", "ACTION_SCHEMA_ENUM"),
        (
            "{type: string, maxLength: 2, enum: [abc]}",
            "ACTION_SCHEMA_ENUM",
        ),
        ("{type: integer, enum: [1, 2.5]}", "ACTION_SCHEMA_ENUM"),
        (
            "{type: integer, enum: [1, 9007199254740992]}",
            "ACTION_SCHEMA_ENUM",
        ),
        (
            "{type: integer, maximum: 5, enum: [1, 6]}",
            "ACTION_SCHEMA_ENUM",
        ),
        ("{type: number, enum: [1, 1.0]}", "ACTION_SCHEMA_ENUM"),
        ("{type: boolean, enum: [true, 'yes']}", "ACTION_SCHEMA_ENUM"),
        (
            "{type: object, properties: {}, additionalProperties: false, enum: [{}]}",
            "ACTION_SCHEMA_KEYWORD",
        ),
        // numbers
        ("{type: integer, minimum: 1.5}", "ACTION_SCHEMA_VALUE"),
        (
            "{type: integer, maximum: 9007199254740992}",
            "ACTION_SCHEMA_VALUE",
        ),
        (
            "{type: integer, minimum: -9007199254740992}",
            "ACTION_SCHEMA_VALUE",
        ),
        ("{type: number, minimum: '1'}", "ACTION_SCHEMA_VALUE"),
        (
            "{type: number, minimum: 5, maximum: 4}",
            "ACTION_SCHEMA_BOUNDS",
        ),
        (
            "{type: number, exclusiveMinimum: 4, maximum: 4}",
            "ACTION_SCHEMA_BOUNDS",
        ),
        (
            "{type: integer, minimum: 1, exclusiveMaximum: 1}",
            "ACTION_SCHEMA_BOUNDS",
        ),
        ("{type: number, multipleOf: 2}", "ACTION_SCHEMA_KEYWORD"),
        ("{type: integer, maxItems: 2}", "ACTION_SCHEMA_KEYWORD"),
        // arrays
        ("{type: array, maxItems: 5}", "ACTION_SCHEMA_UNBOUNDED"),
        (
            "{type: array, items: {type: integer}}",
            "ACTION_SCHEMA_UNBOUNDED",
        ),
        (
            "{type: array, items: {type: integer}, maxItems: 1001}",
            "ACTION_SCHEMA_LIMIT",
        ),
        (
            "{type: array, items: {type: integer}, minItems: 3, maxItems: 2}",
            "ACTION_SCHEMA_BOUNDS",
        ),
        (
            "{type: array, items: {type: integer}, maxItems: 2, uniqueItems: 'yes'}",
            "ACTION_SCHEMA_VALUE",
        ),
        (
            "{type: array, items: {type: string}, maxItems: 2}",
            "ACTION_SCHEMA_UNBOUNDED",
        ),
        (
            "{type: array, items: [{type: integer}], maxItems: 2}",
            "ACTION_SCHEMA_SHAPE",
        ),
        (
            "{type: array, items: {type: integer}, maxItems: 2, prefixItems: []}",
            "ACTION_SCHEMA_KEYWORD",
        ),
        // nested objects
        (
            "{type: object, properties: {a: {type: integer}}}",
            "ACTION_SCHEMA_OPEN",
        ),
        (
            "{type: object, properties: {a: {type: integer}}, additionalProperties: false, maxLength: 3}",
            "ACTION_SCHEMA_KEYWORD",
        ),
        // annotations
        (
            &format!("{{type: integer, description: '{}'}}", "x".repeat(301)),
            "ACTION_SCHEMA_VALUE",
        ),
        ("{type: integer, title: [x]}", "ACTION_SCHEMA_VALUE"),
    ];
    for (schema, code) in cases {
        let found = check_property(schema);
        assert_codes(&found, &[code], schema);
        assert_eq!(found[0].1, Some(2), "{schema}");
    }
    for schema in [
        "{type: string, format: date}",
        "{type: string, enum: [yes, no, on, off]}",
        "{type: string, minLength: 0, maxLength: 65536, description: Free text, title: Note}",
        "{type: integer, minimum: -9007199254740991, maximum: 9007199254740991}",
        "{type: integer, minimum: 1.0, maximum: 3}",
        "{type: number, exclusiveMinimum: 0, maximum: 24, enum: [0.5, 1, 24]}",
        "{type: boolean, enum: [true]}",
        "{type: array, items: {type: object, properties: {a: {type: integer}}, additionalProperties: false}, minItems: 0, maxItems: 1000, uniqueItems: true}",
    ] {
        let found = check_property(schema);
        assert!(found.is_empty(), "{schema}: {found:#?}");
    }
}

#[test]
fn schema_size_and_depth_are_bounded() {
    // Depth: the root is level 1, so six nested levels pass and seven do not.
    let nest = |levels: usize| {
        let mut schema = "{type: integer}".to_owned();
        for _ in 0..levels {
            schema = format!(
                "{{type: object, properties: {{a: {schema}}}, additionalProperties: false}}"
            );
        }
        schema
    };
    assert!(check(&descriptor(INPUT, OPERATION, &nest(5))).is_empty());
    assert_codes(
        &check(&descriptor(INPUT, OPERATION, &nest(6))),
        &["ACTION_SCHEMA_LIMIT"],
        "depth",
    );
    // Properties: 50 in total across nested objects pass, 51 do not.
    let properties = |count: usize| {
        (0..count)
            .map(|n| format!("p{n}: {{type: integer}}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let split = |count: usize| {
        format!(
            "{{type: object, properties: {{inner: {{type: object, properties: {{{}}}, additionalProperties: false}}}}, additionalProperties: false}}",
            properties(count)
        )
    };
    assert!(check(&descriptor(INPUT, OPERATION, &split(49))).is_empty());
    assert_codes(
        &check(&descriptor(INPUT, OPERATION, &split(50))),
        &["ACTION_SCHEMA_LIMIT"],
        "properties",
    );
    let big_enum = format!(
        "{{type: integer, enum: [{}]}}",
        (0..51)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert_codes(
        &check_property(&big_enum),
        &["ACTION_SCHEMA_ENUM"],
        "enum size",
    );
}

#[test]
fn property_names_are_plain_and_unreserved() {
    for name in [
        "userId",
        "USER_ID",
        "user-id",
        "user_id",
        "ownerId",
        "created_by",
        "createdBy",
        "actorId",
        "__proto__",
        "proto",
        "constructor",
        "prototype",
        "toString",
        "valueOf",
        "hasOwnProperty",
        "eval",
        "Function",
        "script",
        "javascript",
        "_sasha_version",
        "sashaVersion",
    ] {
        let found = check_property(&format!(
            "{{type: object, properties: {{'{name}': {{type: integer}}}}, additionalProperties: false}}"
        ));
        assert_codes(&found, &["ACTION_PROPERTY_RESERVED"], name);
    }
    for (name, code) in [
        ("us\u{0435}rId", "ACTION_PROPERTY_LOOKALIKE"),
        ("\u{0430}mount", "ACTION_PROPERTY_LOOKALIKE"),
        ("ｕserId", "ACTION_PROPERTY_LOOKALIKE"),
        ("user\u{200B}Id", "ACTION_PROPERTY_INVISIBLE"),
        ("amount\u{202E}", "ACTION_PROPERTY_INVISIBLE"),
        ("a\tb", "ACTION_PROPERTY_INVISIBLE"),
        ("user id", "ACTION_PROPERTY_NAME"),
        ("a.b", "ACTION_PROPERTY_NAME"),
        ("", "ACTION_PROPERTY_NAME"),
        (&"a".repeat(65), "ACTION_PROPERTY_NAME"),
    ] {
        let found = check_property(&format!(
            "{{type: object, properties: {{\"{name}\": {{type: integer}}}}, additionalProperties: false}}"
        ));
        assert_codes(&found, &[code], name);
    }
    let fine = "{type: object, properties: {projectCode: {type: integer}, project_code: {type: integer}, factor: {type: number}, transactionCount: {type: integer}, id: {type: integer}, week-start: {type: string, format: date}, '2nd': {type: boolean}}, additionalProperties: false}";
    assert!(check_property(fine).is_empty());
    // The names of the input schema itself are checked too.
    let input = INPUT.replace("note:", "userId:");
    let found = check(&descriptor(&input, OPERATION, RESULT));
    assert_codes(&found, &["ACTION_PROPERTY_RESERVED"], "input");
    assert_eq!(found[0].1, Some(2));
}

#[test]
fn block_style_lines_point_at_the_problem() {
    let text = WEEKLY
        .replace("operator: week-of", "operator: contains")
        .replace("maxItems: 1000", "maxItems: 5000");
    let manifest = manifest(
        DataCapability::ReadWrite,
        &[("weekly-project-totals", true)],
    );
    let (compiled, found) = compile(
        &manifest,
        &[("actions/weekly-project-totals.action.yaml", &text)],
        true,
    );
    assert!(compiled.is_empty());
    let lines: Vec<(&str, Option<u32>)> = found.iter().map(|f| (f.2.as_str(), f.1)).collect();
    assert_eq!(
        lines,
        [
            ("ACTION_OPERATOR", Some(12)),
            ("ACTION_SCHEMA_LIMIT", Some(22))
        ],
        "{found:#?}"
    );
}

#[test]
fn names_and_paths() {
    assert_eq!(
        mcp_name("timesheets", "submit-week"),
        "app__timesheets__submit_week"
    );
    assert_eq!(
        mcp_name("time-sheet", "log-hours"),
        "app__time_sheet__log_hours"
    );
    assert_eq!(
        descriptor_path("log-hours"),
        "actions/log-hours.action.yaml"
    );
}
