"use strict";
// Time Sheet Entry: one week (Monday to Sunday) of entries, edited in place,
// with per-day and per-project totals computed here from Sasha.data.list.
// Managers of the app also keep its projects (add, rename, retire).
//
// Dates are stored as ISO calendar days (YYYY-MM-DD, the DATE kind) and shown
// and typed in the one locale the host context gives (`Sasha.hostContext
// .locale`), never in the browser's own date widget.

const CONFLICT_MESSAGE = "This entry changed elsewhere; reloaded the latest values — apply your change again.";
const PROJECT_CONFLICT = "This project changed elsewhere; reloaded the latest values — apply your change again.";
const HOURS_RULE = "Hours must be between 0.25 and 24.";
const MIN_HOURS = 0.25;
const MAX_HOURS = 24;
const MAX_NOTE = 200;
const MAX_NAME = 80;
const PAGE_LIMIT = 200;
const MAX_PAGES = 25;
/** Refusals that mean the viewer may not write `projects` (not a manager). */
const NOT_MANAGER = new Set(["APP_CAPABILITY_DENIED", "APP_ACCESS_DENIED", "APP_ACTION_UNAVAILABLE", "APP_OPERATION_UNAVAILABLE"]);

const state = {
  locale: "en-GB",
  timeZone: undefined,
  format: null,
  weekStart: "",
  projects: [],
  entries: [],
  // Whether the viewer may write `projects`: true, false, or null (not known yet).
  manages: null,
};
const $ = (id) => document.getElementById(id);

// --- Calendar days (ISO YYYY-MM-DD, computed in UTC so no clock shifts) ----

function pad(number, width = 2) {
  return String(number).padStart(width, "0");
}

function toUtc(iso) {
  const [year, month, day] = iso.split("-").map(Number);
  return new Date(Date.UTC(year, month - 1, day));
}

function fromUtc(date) {
  return `${pad(date.getUTCFullYear(), 4)}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())}`;
}

function addDays(iso, days) {
  const date = toUtc(iso);
  date.setUTCDate(date.getUTCDate() + days);
  return fromUtc(date);
}

function mondayOf(iso) {
  return addDays(iso, -((toUtc(iso).getUTCDay() + 6) % 7));
}

function weekDays() {
  return Array.from({ length: 7 }, (_, index) => addDays(state.weekStart, index));
}

function daysInMonth(year, month) {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/** Today in the host's time zone (the browser's when the host gave none). */
function todayIso() {
  const options = { year: "numeric", month: "2-digit", day: "2-digit", calendar: "gregory", numberingSystem: "latn" };
  if (state.timeZone) {
    options.timeZone = state.timeZone;
  }
  const parts = Object.fromEntries(new Intl.DateTimeFormat("en-GB", options).formatToParts(new Date()).map((part) => [part.type, part.value]));
  return `${parts.year}-${parts.month}-${parts.day}`;
}

// --- The host's locale: how dates are shown and typed -----------------------

const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

function supportedLocale(requested) {
  try {
    const [locale] = Intl.DateTimeFormat.supportedLocalesOf(typeof requested === "string" && requested ? [requested] : []);
    if (locale) {
      return locale;
    }
  } catch {
    // an ill-formed tag: keep the default
  }
  return "en-GB";
}

function supportedTimeZone(requested) {
  if (typeof requested !== "string" || !requested) {
    return undefined;
  }
  try {
    new Intl.DateTimeFormat("en-GB", { timeZone: requested });
    return requested;
  } catch {
    return undefined;
  }
}

/**
 * The locale's numeric date pattern: the order of day, month and year and the
 * text between them, from Intl (Gregorian calendar, Latin digits), as
 * `{order, literals, pattern, regex}`; "dd/mm/yyyy" for en-GB.
 */
function numericDateFormat(locale) {
  const formatter = new Intl.DateTimeFormat(locale, {
    day: "2-digit",
    month: "2-digit",
    year: "numeric",
    timeZone: "UTC",
    calendar: "gregory",
    numberingSystem: "latn",
  });
  const parts = formatter.formatToParts(new Date(Date.UTC(2026, 10, 23)));
  const order = [];
  const literals = [""];
  for (const part of parts) {
    if (part.type === "day" || part.type === "month" || part.type === "year") {
      order.push(part.type);
      literals.push("");
    } else if (part.type === "literal") {
      literals[literals.length - 1] += part.value.replace(BIDI, "");
    } else {
      return null;
    }
  }
  if (order.length !== 3 || new Set(order).size !== 3) {
    return null;
  }
  const letters = { day: "dd", month: "mm", year: "yyyy" };
  const pattern = literals[0] + order.map((type, index) => letters[type] + literals[index + 1]).join("");
  const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const literalRegex = (text, edge) => {
    const trimmed = text.trim();
    if (trimmed === "") {
      return edge || text === "" ? "\\s*" : "\\s+";
    }
    return `\\s*${trimmed.split(/\s+/).map(escape).join("\\s*")}\\s*`;
  };
  const digits = { day: "(\\d{1,2})", month: "(\\d{1,2})", year: "(\\d{4})" };
  const source = literalRegex(literals[0], true)
    + order.map((type, index) => digits[type] + literalRegex(literals[index + 1], index === order.length - 1)).join("");
  return { order, literals, pattern, regex: new RegExp(`^${source}$`) };
}

function setLocale(context) {
  state.locale = supportedLocale(context.locale);
  state.timeZone = supportedTimeZone(context.timeZone);
  state.format = numericDateFormat(state.locale) || numericDateFormat("en-GB");
}

/** An ISO day as the locale types it ("07/09/2026" in en-GB). */
function typedDate(iso) {
  const [year, month, day] = iso.split("-");
  const values = { day, month, year };
  const { order, literals } = state.format;
  return literals[0] + order.map((type, index) => values[type] + literals[index + 1]).join("");
}

/** The text typed into a date field as an ISO day, or null: strictly the locale's pattern, a day that exists. */
function parseTypedDate(text) {
  const match = state.format.regex.exec(String(text).replace(BIDI, "").trim());
  if (!match) {
    return null;
  }
  const values = {};
  state.format.order.forEach((type, index) => {
    values[type] = Number(match[index + 1]);
  });
  const { year, month, day } = values;
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) {
    return null;
  }
  return `${pad(year, 4)}-${pad(month)}-${pad(day)}`;
}

function dateRule() {
  return `Enter a real date as ${state.format.pattern}, for example ${typedDate(todayIso())}.`;
}

function formatted(iso, options) {
  return new Intl.DateTimeFormat(state.locale, { ...options, timeZone: "UTC", calendar: "gregory" }).format(toUtc(iso));
}

function longDate(iso) {
  return formatted(iso, { weekday: "short", day: "numeric", month: "short", year: "numeric" });
}

function dayLabel(iso) {
  return formatted(iso, { weekday: "short", day: "numeric" });
}

function hoursText(value) {
  return (Math.round(value * 100) / 100).toFixed(2);
}

// --- Messages ----------------------------------------------------------------

function say(text) {
  $("problem").hidden = true;
  $("notice").textContent = text;
  $("notice").hidden = !text;
}

function complain(text) {
  $("notice").hidden = true;
  $("problem").textContent = text;
  $("problem").hidden = !text;
}

function describe(error) {
  if (error && typeof error.message === "string") {
    return error.diagnosticId ? `${error.message} (reference ${error.diagnosticId})` : error.message;
  }
  return "Something went wrong.";
}

function sentence(text) {
  const trimmed = String(text || "").trim();
  if (!trimmed) {
    return "";
  }
  const capital = trimmed[0].toUpperCase() + trimmed.slice(1);
  return /[.!?]$/.test(capital) ? capital : `${capital}.`;
}

// --- Field errors: next to the field, described by it ------------------------

/** The error element that belongs to a field: the `.field-error` beside it. */
function errorOf(field) {
  return field.parentElement.querySelector(".field-error");
}

function describedBy(field) {
  return (field.getAttribute("aria-describedby") || "").split(/\s+/).filter(Boolean);
}

function setFieldError(field, text) {
  const error = errorOf(field);
  if (!error.id) {
    error.id = `${field.id || field.dataset.key}-error`;
  }
  error.textContent = text;
  error.hidden = false;
  field.setAttribute("aria-invalid", "true");
  const ids = describedBy(field).filter((id) => id !== error.id);
  field.setAttribute("aria-describedby", [...ids, error.id].join(" "));
}

function clearFieldError(field) {
  const error = errorOf(field);
  error.textContent = "";
  error.hidden = true;
  field.removeAttribute("aria-invalid");
  const ids = describedBy(field).filter((id) => id !== error.id);
  if (ids.length) {
    field.setAttribute("aria-describedby", ids.join(" "));
  } else {
    field.removeAttribute("aria-describedby");
  }
}

/** Shows each `[field, message]` problem; focuses the first. Answers whether there were any. */
function showProblems(problems) {
  for (const [field, text] of problems) {
    setFieldError(field, text);
  }
  if (problems.length) {
    problems[0][0].focus();
  }
  return problems.length > 0;
}

/** The field a data API error names (`details.field`, or the first of `details.fields`). */
function fieldNamed(error) {
  const details = error && error.details;
  if (!details || typeof details !== "object") {
    return null;
  }
  if (typeof details.field === "string") {
    return details.field;
  }
  if (Array.isArray(details.fields) && typeof details.fields[0] === "string") {
    return details.fields[0];
  }
  return null;
}

/** A version conflict (the row moved on), not a broken rule on a field. */
function isVersionConflict(error) {
  return Boolean(error && error.code === "APP_CONFLICT" && !fieldNamed(error) && !(error.details && error.details.rule));
}

function hoursProblem(text) {
  const hours = Number(text);
  if (String(text).trim() === "" || !Number.isFinite(hours) || hours < MIN_HOURS || hours > MAX_HOURS) {
    return HOURS_RULE;
  }
  return null;
}

// --- Loading -----------------------------------------------------------------

async function listAll(table, query) {
  const rows = [];
  let cursor;
  for (let page = 0; page < MAX_PAGES; page += 1) {
    const result = await Sasha.data.list(table, cursor ? { ...query, cursor } : query);
    rows.push(...result.rows);
    cursor = result.nextCursor;
    if (typeof cursor !== "string" || cursor === "") {
      break;
    }
  }
  return rows;
}

async function loadProjects() {
  state.projects = await listAll("projects", { orderBy: [{ field: "name" }, { field: "id" }], limit: PAGE_LIMIT });
}

async function loadEntries() {
  state.entries = await listAll("entries", {
    where: [
      { field: "date", operator: "gte", value: state.weekStart },
      { field: "date", operator: "lte", value: addDays(state.weekStart, 6) },
    ],
    orderBy: [{ field: "date" }, { field: "id" }],
    limit: PAGE_LIMIT,
  });
}

/**
 * Whether the viewer may write `projects` (it is `write: manage`, so: whether
 * they manage the app): the host lists only the tools this person may call.
 * `null` when it cannot say now (the controls stay hidden until a reload).
 */
async function probeManages() {
  try {
    return await Sasha.data.allows("projects", "update");
  } catch {
    return null;
  }
}

function projectById(id) {
  return state.projects.find((project) => project.id === id) || null;
}

function projectName(id) {
  const project = projectById(id);
  return project ? project.name : `Project ${id}`;
}

function isOpen(project) {
  return project.retired_at === null || project.retired_at === undefined || project.retired_at === "";
}

function openProjects() {
  return state.projects.filter(isOpen);
}

// --- Rendering ---------------------------------------------------------------

function renderWeek() {
  const start = $("week-start");
  start.dateTime = state.weekStart;
  start.textContent = `${longDate(state.weekStart)} – ${longDate(addDays(state.weekStart, 6))}`;
}

function renderEmptyState() {
  const open = openProjects();
  const none = open.length === 0;
  const manager = state.manages === true;
  $("no-projects").hidden = !none;
  $("log").hidden = none;
  if (!none) {
    return;
  }
  const never = state.projects.length === 0;
  $("no-projects-title").textContent = never ? "No projects yet" : "No open projects";
  let text;
  if (manager) {
    text = never
      ? "Hours are logged against projects. You manage this app: add the first project here."
      : "Every project is retired. Add a project or bring one back under Projects below.";
  } else {
    text = never
      ? "Hours are logged against projects, and only a manager of this app can add them. Ask a manager to add the projects you work on."
      : "Every project has been retired. Ask a manager of this app to add a project or bring one back.";
  }
  $("no-projects-text").textContent = text;
  $("first-project-form").hidden = !(manager && never);
}

function renderLogForm() {
  const select = $("log-project");
  const chosen = select.value;
  const open = openProjects();
  select.replaceChildren(...open.map((project) => new Option(project.name, String(project.id))));
  if (chosen && open.some((project) => String(project.id) === chosen)) {
    select.value = chosen;
  }
  const date = $("log-date");
  date.placeholder = state.format.pattern;
  $("log-date-hint").textContent = `Write it as ${state.format.pattern}`;
  if (date.value.trim() === "") {
    resetLogDate();
  }
}

function resetLogDate() {
  const days = weekDays();
  const today = todayIso();
  $("log-date").value = typedDate(days.includes(today) ? today : days[0]);
  clearFieldError($("log-date"));
}

function totalRow(label, value) {
  const row = $("total-row").content.firstElementChild.cloneNode(true);
  row.querySelector(".label").textContent = label;
  row.querySelector(".value").textContent = hoursText(value);
  return row;
}

function entryLabel(entry) {
  return `${projectName(entry.project)} on ${longDate(entry.date)}`;
}

function projectOptions(selected) {
  const options = openProjects().map((project) => new Option(project.name, String(project.id)));
  if (!openProjects().some((project) => project.id === selected)) {
    // A retired (or unreadable) project stays the entry's until changed.
    const project = projectById(selected);
    options.push(new Option(project ? `${project.name} (retired)` : `Project ${selected}`, String(selected)));
  }
  return options;
}

function renderEntries() {
  const body = document.querySelector("#entries tbody");
  body.replaceChildren();
  for (const entry of state.entries) {
    body.append(entryRow(entry));
  }
  const any = state.entries.length > 0;
  $("no-entries").hidden = any;
  $("entries-help").hidden = !any;
  $("entries").hidden = !any;

  const days = weekDays();
  const perDay = new Map(days.map((day) => [day, 0]));
  const perProject = new Map();
  let total = 0;
  for (const entry of state.entries) {
    if (perDay.has(entry.date)) {
      perDay.set(entry.date, perDay.get(entry.date) + entry.hours);
    }
    perProject.set(entry.project, (perProject.get(entry.project) || 0) + entry.hours);
    total += entry.hours;
  }
  document.querySelector("#day-totals tbody").replaceChildren(...days.map((day) => totalRow(dayLabel(day), perDay.get(day))));
  $("week-total").textContent = hoursText(total);
  const projects = [...perProject.entries()].sort((a, b) => projectName(a[0]).localeCompare(projectName(b[0]), state.locale));
  const projectBody = document.querySelector("#project-totals tbody");
  projectBody.replaceChildren(...projects.map(([id, hours]) => totalRow(projectName(id), hours)));
  if (projects.length === 0) {
    projectBody.append(totalRow("No hours yet", 0));
  }
}

function entryRow(entry) {
  const row = $("entry-row").content.firstElementChild.cloneNode(true);
  const label = entryLabel(entry);
  const key = `entry-${entry.id}`;
  row.dataset.id = String(entry.id);
  const fields = {
    date: row.querySelector(".entry-date"),
    project: row.querySelector(".entry-project"),
    hours: row.querySelector(".entry-hours"),
    note: row.querySelector(".entry-note"),
  };
  for (const [name, field] of Object.entries(fields)) {
    field.id = `${key}-${name}`;
    errorOf(field).id = `${key}-${name}-error`;
  }
  fields.date.value = typedDate(entry.date);
  fields.date.placeholder = state.format.pattern;
  fields.date.setAttribute("aria-label", `Date for ${label} (${state.format.pattern})`);
  fields.project.replaceChildren(...projectOptions(entry.project));
  fields.project.value = String(entry.project);
  fields.project.setAttribute("aria-label", `Project for ${label}`);
  fields.hours.value = String(entry.hours);
  fields.hours.setAttribute("aria-label", `Hours for ${label}`);
  fields.note.value = entry.note || "";
  fields.note.setAttribute("aria-label", `Note for ${label}`);
  const save = row.querySelector(".save");
  save.setAttribute("aria-label", `Save changes to ${label}`);
  save.addEventListener("click", () => saveEntry(entry, fields, save));
  for (const field of [fields.date, fields.hours, fields.note]) {
    field.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        saveEntry(entry, fields, save);
      }
    });
  }
  for (const field of Object.values(fields)) {
    field.addEventListener("input", () => clearFieldError(field));
  }
  const remove = row.querySelector(".delete");
  remove.setAttribute("aria-label", `Delete ${label}`);
  remove.addEventListener("click", () => deleteEntry(entry, remove));
  return row;
}

function projectItem(project) {
  const item = $("project-item").content.firstElementChild.cloneNode(true);
  const open = isOpen(project);
  item.dataset.id = String(project.id);
  item.querySelector(".project-name").textContent = open ? project.name : `${project.name} (retired ${longDate(project.retired_at)})`;
  const rename = item.querySelector(".rename");
  rename.setAttribute("aria-label", `Rename ${project.name}`);
  rename.setAttribute("aria-expanded", "false");
  const retire = item.querySelector(".retire");
  retire.textContent = open ? "Retire" : "Bring back";
  retire.setAttribute("aria-label", `${open ? "Retire" : "Bring back"} ${project.name}`);
  retire.addEventListener("click", () => setRetired(project, open, retire));

  const form = item.querySelector(".rename-form");
  const input = form.querySelector("input");
  input.id = `project-${project.id}-name`;
  form.id = `project-${project.id}-rename`;
  rename.setAttribute("aria-controls", form.id);
  errorOf(input).id = `project-${project.id}-name-error`;
  const label = form.querySelector("label");
  label.htmlFor = input.id;
  label.textContent = `New name for ${project.name}`;
  const close = () => {
    form.hidden = true;
    rename.setAttribute("aria-expanded", "false");
    clearFieldError(input);
    rename.focus();
  };
  rename.addEventListener("click", () => {
    const opening = form.hidden;
    if (!opening) {
      close();
      return;
    }
    form.hidden = false;
    rename.setAttribute("aria-expanded", "true");
    input.value = project.name;
    input.focus();
    input.select();
  });
  form.querySelector(".cancel").addEventListener("click", close);
  form.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      close();
    }
  });
  input.addEventListener("input", () => clearFieldError(input));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    renameProject(project, input, form.querySelector("button[type=submit]"));
  });
  return item;
}

/**
 * The rename form open in the projects panel, as the person left it: a
 * redraw (another tab's write, a re-read after a conflict) must not close
 * it under their typing.
 */
function openRename() {
  const form = document.querySelector("#projects .rename-form:not([hidden])");
  if (!form) {
    return null;
  }
  const input = form.querySelector("input");
  const error = errorOf(input);
  return {
    id: form.closest("li[data-id]").dataset.id,
    value: input.value,
    focused: document.activeElement === input,
    start: input.selectionStart,
    end: input.selectionEnd,
    error: error.hidden ? "" : error.textContent,
  };
}

/** Opens `kept` (from `openRename`) again in the redrawn panel, if its project is still there. */
function reopenRename(kept) {
  const item = kept && document.querySelector(`#projects li[data-id="${kept.id}"]`);
  if (!item) {
    return;
  }
  const form = item.querySelector(".rename-form");
  const input = form.querySelector("input");
  form.hidden = false;
  item.querySelector(".rename").setAttribute("aria-expanded", "true");
  input.value = kept.value;
  if (kept.error) {
    setFieldError(input, kept.error);
  }
  if (kept.focused) {
    input.focus();
    input.setSelectionRange(kept.start, kept.end);
  }
}

function renderProjectsPanel() {
  const show = state.manages === true && state.projects.length > 0;
  $("projects").hidden = !show;
  if (!show) {
    return;
  }
  const kept = openRename();
  const open = openProjects();
  const retired = state.projects.filter((project) => !isOpen(project));
  $("open-projects").replaceChildren(...open.map(projectItem));
  $("no-open-projects").hidden = open.length > 0;
  $("retired-projects").replaceChildren(...retired.map(projectItem));
  $("retired-projects-block").hidden = retired.length === 0;
  reopenRename(kept);
}

function render() {
  renderWeek();
  renderEmptyState();
  renderLogForm();
  renderEntries();
  renderProjectsPanel();
}

async function refresh() {
  const probing = state.manages === null ? probeManages() : Promise.resolve(state.manages);
  const [manages] = await Promise.all([probing, loadProjects(), loadEntries()]);
  state.manages = manages;
  render();
}

/** A write of `projects` refused because the viewer no longer manages the app. */
function lostManage(error) {
  if (error && NOT_MANAGER.has(error.code)) {
    state.manages = false;
    render();
    complain("Only a manager of this app can change its projects, and you no longer are one.");
    return true;
  }
  return false;
}

// --- Entries -----------------------------------------------------------------

/** Reads an entry row's fields: `{changes, problems}` against the stored entry. */
function entryChanges(entry, fields) {
  const changes = {};
  const problems = [];
  const date = parseTypedDate(fields.date.value);
  if (!date) {
    problems.push([fields.date, dateRule()]);
  } else if (date !== entry.date) {
    changes.date = date;
  }
  const project = Number(fields.project.value);
  if (!fields.project.value || (!projectById(project) && project !== entry.project)) {
    problems.push([fields.project, "Choose a project."]);
  } else if (project !== entry.project) {
    changes.project = project;
  }
  const hours = Number(fields.hours.value);
  if (fields.hours.value === "" || hours !== entry.hours) {
    const problem = hoursProblem(fields.hours.value);
    if (problem) {
      problems.push([fields.hours, problem]);
    } else {
      changes.hours = hours;
    }
  }
  const note = fields.note.value.trim();
  if (note.length > MAX_NOTE) {
    problems.push([fields.note, `Keep the note to ${MAX_NOTE} characters.`]);
  } else if (note !== (entry.note || "")) {
    changes.note = note || null;
  }
  return { changes, problems };
}

async function saveEntry(entry, fields, button) {
  if (button.disabled) {
    return;
  }
  Object.values(fields).forEach(clearFieldError);
  const { changes, problems } = entryChanges(entry, fields);
  if (showProblems(problems)) {
    complain("");
    return;
  }
  const before = entryLabel(entry);
  if (Object.keys(changes).length === 0) {
    say(`Nothing to save: ${before} is unchanged.`);
    return;
  }
  button.disabled = true;
  try {
    await Sasha.data.update("entries", entry.id, changes, { expectedVersion: entry._sasha_version });
    const after = { ...entry, ...changes };
    await refresh();
    let text = `Saved ${hoursText(after.hours)} hours for ${entryLabel(after)}.`;
    if (!weekDays().includes(after.date)) {
      text += ` It is now in the week of ${longDate(mondayOf(after.date))}.`;
    }
    say(text);
    focusEntry(entry.id, ".save") || $("entries-title").focus();
  } catch (error) {
    if (isVersionConflict(error)) {
      await refresh().catch(() => {});
      complain(CONFLICT_MESSAGE);
    } else if (!placeServerError(error, fields)) {
      complain(describe(error));
    }
  } finally {
    button.disabled = false;
  }
}

/** Puts a data API error next to the field its details name; answers whether it could. */
function placeServerError(error, fields) {
  const field = fields[fieldNamed(error)];
  if (!field) {
    return false;
  }
  setFieldError(field, sentence(error.message));
  field.focus();
  complain("");
  return true;
}

function focusEntry(id, selector) {
  const row = document.querySelector(`#entries tbody tr[data-id="${id}"]`);
  const target = row && row.querySelector(selector);
  if (target) {
    target.focus();
    return true;
  }
  return false;
}

// The view runs in a sandbox without modals, so window.confirm() is always
// false there: ask with an in-page modal <dialog> instead.
function askConfirmation(text) {
  const dialog = $("confirm-delete");
  $("confirm-text").textContent = text;
  return new Promise((resolve) => {
    const done = (answer) => {
      $("confirm-yes").removeEventListener("click", yes);
      $("confirm-keep").removeEventListener("click", keep);
      dialog.removeEventListener("cancel", keep);
      if (dialog.open) {
        dialog.close();
      }
      resolve(answer);
    };
    const yes = () => done(true);
    const keep = () => done(false);
    $("confirm-yes").addEventListener("click", yes);
    $("confirm-keep").addEventListener("click", keep);
    dialog.addEventListener("cancel", keep);
    dialog.showModal();
    $("confirm-keep").focus();
  });
}

async function deleteEntry(entry, button) {
  const name = projectName(entry.project);
  const confirmed = await askConfirmation(`Delete ${hoursText(entry.hours)} hours for ${name} on ${longDate(entry.date)}?`);
  if (!confirmed) {
    button.focus();
    return;
  }
  button.disabled = true;
  try {
    await Sasha.data.delete("entries", entry.id, { expectedVersion: entry._sasha_version });
    await refresh();
    say(`Deleted the entry for ${name} on ${longDate(entry.date)}.`);
    $("entries-title").focus();
  } catch (error) {
    if (isVersionConflict(error)) {
      await refresh().catch(() => {});
      complain(CONFLICT_MESSAGE);
    } else {
      complain(describe(error));
    }
    button.disabled = false;
  }
}

const logFields = {
  date: $("log-date"),
  project: $("log-project"),
  hours: $("log-hours"),
  note: $("log-note"),
};
for (const field of Object.values(logFields)) {
  field.addEventListener("input", () => clearFieldError(field));
  field.addEventListener("change", () => clearFieldError(field));
}

$("log-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const submit = form.querySelector("button[type=submit]");
  if (submit.disabled) {
    return;
  }
  if (!state.format) {
    return; // not started yet
  }
  Object.values(logFields).forEach(clearFieldError);
  const problems = [];
  const date = parseTypedDate(logFields.date.value);
  if (!date) {
    problems.push([logFields.date, dateRule()]);
  }
  const project = Number(logFields.project.value);
  if (!logFields.project.value || !openProjects().some((candidate) => candidate.id === project)) {
    problems.push([logFields.project, "Choose a project."]);
  }
  const hoursProblemText = hoursProblem(logFields.hours.value);
  if (hoursProblemText) {
    problems.push([logFields.hours, hoursProblemText]);
  }
  const note = logFields.note.value.trim();
  if (note.length > MAX_NOTE) {
    problems.push([logFields.note, `Keep the note to ${MAX_NOTE} characters.`]);
  }
  if (showProblems(problems)) {
    complain("");
    return;
  }
  const input = { date, project, hours: Number(logFields.hours.value) };
  if (note) {
    input.note = note;
  }
  submit.disabled = true;
  try {
    await Sasha.actions.call("log-hours", input);
    if (mondayOf(input.date) !== state.weekStart) {
      state.weekStart = mondayOf(input.date);
    }
    await refresh();
    logFields.hours.value = "";
    logFields.note.value = "";
    say(`Logged ${hoursText(input.hours)} hours for ${projectName(input.project)} on ${longDate(input.date)}.`);
    logFields.hours.focus();
  } catch (error) {
    if (!placeServerError(error, logFields)) {
      complain(describe(error));
    }
  } finally {
    submit.disabled = false;
  }
});

// --- Projects (managers) -----------------------------------------------------

/** What is wrong with `text` as the name of a project (`self`: the one being renamed). */
function nameProblem(text, self = null) {
  const name = text.trim();
  if (!name) {
    return "Enter a project name.";
  }
  if (name.length > MAX_NAME) {
    return `Keep the name to ${MAX_NAME} characters.`;
  }
  const folded = name.toLocaleLowerCase(state.locale);
  const same = state.projects.find((project) => project !== self && project.name.trim().toLocaleLowerCase(state.locale) === folded);
  if (same) {
    return isOpen(same)
      ? `There is already a project called ${same.name}.`
      : `There is already a retired project called ${same.name}: bring it back instead.`;
  }
  return null;
}

/**
 * A refused project write: on its name field when the error names one. With
 * `reload` (the add forms, which a reload leaves in place) the list is read
 * again, since someone else may have added the name meanwhile.
 */
function projectWriteFailed(error, input, reload) {
  if (lostManage(error)) {
    return;
  }
  const field = fieldNamed(error);
  if (field === "name") {
    const text = error.details && error.details.rule === "unique"
      ? `There is already a project called ${input.value.trim()}.`
      : sentence(error.message);
    setFieldError(input, text);
    input.focus();
    complain("");
    if (reload) {
      refresh().catch(() => {});
    }
    return;
  }
  complain(describe(error));
}

async function addProject(input, button, after) {
  if (button.disabled) {
    return;
  }
  clearFieldError(input);
  const problem = nameProblem(input.value);
  if (problem) {
    showProblems([[input, problem]]);
    complain("");
    return;
  }
  const name = input.value.trim();
  button.disabled = true;
  try {
    await Sasha.data.create("projects", { name });
    input.value = "";
    await refresh();
    say(`Added the project ${name}.`);
    after();
  } catch (error) {
    projectWriteFailed(error, input, true);
  } finally {
    button.disabled = false;
  }
}

async function renameProject(project, input, button) {
  if (button.disabled) {
    return;
  }
  clearFieldError(input);
  const name = input.value.trim();
  if (name === project.name) {
    say(`${project.name} keeps its name.`);
    return;
  }
  const problem = nameProblem(input.value, project);
  if (problem) {
    showProblems([[input, problem]]);
    complain("");
    return;
  }
  button.disabled = true;
  try {
    await Sasha.data.update("projects", project.id, { name }, { expectedVersion: project._sasha_version });
    await refresh();
    say(`Renamed ${project.name} to ${name}.`);
    focusProject(project.id, ".rename");
  } catch (error) {
    if (isVersionConflict(error)) {
      await refresh().catch(() => {});
      complain(PROJECT_CONFLICT);
      focusProject(project.id, ".rename");
    } else {
      projectWriteFailed(error, input, false);
    }
  } finally {
    button.disabled = false;
  }
}

async function setRetired(project, retire, button) {
  if (button.disabled) {
    return;
  }
  button.disabled = true;
  try {
    await Sasha.data.update("projects", project.id, { retired_at: retire ? todayIso() : null }, { expectedVersion: project._sasha_version });
    await refresh();
    say(retire
      ? `Retired ${project.name}: it is no longer offered for new hours, and the hours logged against it keep it.`
      : `Brought back ${project.name}: it is offered for new hours again.`);
    focusProject(project.id, ".retire") || $("projects-title").focus();
  } catch (error) {
    if (lostManage(error)) {
      return;
    }
    if (isVersionConflict(error)) {
      await refresh().catch(() => {});
      complain(PROJECT_CONFLICT);
    } else {
      complain(describe(error));
    }
  } finally {
    button.disabled = false;
  }
}

function focusProject(id, selector) {
  const target = document.querySelector(`#projects li[data-id="${id}"] ${selector}`);
  if (target && !$("projects").hidden) {
    target.focus();
    return true;
  }
  return false;
}

$("first-project-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = $("first-project-name");
  addProject(input, event.currentTarget.querySelector("button[type=submit]"), () => {
    // The log form replaces this one: go on to logging hours.
    (!$("log").hidden ? $("log-date") : $("add-project-name")).focus();
  });
});
$("add-project-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = $("add-project-name");
  addProject(input, event.currentTarget.querySelector("button[type=submit]"), () => input.focus());
});
for (const id of ["first-project-name", "add-project-name"]) {
  $(id).addEventListener("input", () => clearFieldError($(id)));
}

// --- Weeks and start-up ------------------------------------------------------

async function moveWeek(days) {
  if (!state.format) {
    return; // not started yet
  }
  state.weekStart = addDays(state.weekStart, days);
  say("");
  complain("");
  resetLogDate();
  try {
    await refresh();
  } catch (error) {
    complain(describe(error));
  }
}

$("previous-week").addEventListener("click", () => moveWeek(-7));
$("next-week").addEventListener("click", () => moveWeek(7));
$("entries-title").tabIndex = -1;
$("projects-title").tabIndex = -1;

async function start() {
  await Sasha.ready();
  setLocale(Sasha.hostContext);
  state.weekStart = mondayOf(todayIso());
  resetLogDate();
  await refresh();
}

start().catch((error) => complain(describe(error)));
