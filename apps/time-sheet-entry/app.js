"use strict";
// Time Sheet Entry: one week (Monday to Sunday) of the current user's entries,
// with per-day and per-project totals computed here from Sasha.data.list.

const DAY_NAMES = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const CONFLICT_MESSAGE = "This entry changed elsewhere; reloaded the latest values — apply your change again.";

const state = { weekStart: mondayOf(new Date()), projects: [], entries: [] };
const $ = (id) => document.getElementById(id);

// --- Dates (local calendar days as YYYY-MM-DD) ------------------------------

function pad(number) {
  return String(number).padStart(2, "0");
}

function isoDate(date) {
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
}

function parseDate(text) {
  const [year, month, day] = text.split("-").map(Number);
  return new Date(year, month - 1, day);
}

function mondayOf(date) {
  const day = new Date(date.getFullYear(), date.getMonth(), date.getDate());
  day.setDate(day.getDate() - ((day.getDay() + 6) % 7));
  return isoDate(day);
}

function addDays(text, days) {
  const date = parseDate(text);
  date.setDate(date.getDate() + days);
  return isoDate(date);
}

function weekDays() {
  return DAY_NAMES.map((_, index) => addDays(state.weekStart, index));
}

function longDate(text) {
  return parseDate(text).toLocaleDateString("en-GB", { weekday: "short", day: "numeric", month: "short", year: "numeric" });
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

// --- Loading -----------------------------------------------------------------

async function loadProjects() {
  const { rows } = await Sasha.data.list("projects", { orderBy: [{ field: "name" }], limit: 200 });
  state.projects = rows;
}

async function loadEntries() {
  const { rows } = await Sasha.data.list("entries", {
    where: [
      { field: "date", operator: "gte", value: state.weekStart },
      { field: "date", operator: "lte", value: addDays(state.weekStart, 6) },
    ],
    orderBy: [{ field: "date" }, { field: "id" }],
    limit: 200,
  });
  state.entries = rows;
}

function projectName(id) {
  const project = state.projects.find((candidate) => candidate.id === id);
  return project ? project.name : `Project ${id}`;
}

// --- Rendering ---------------------------------------------------------------

function renderWeek() {
  const start = $("week-start");
  start.dateTime = state.weekStart;
  start.textContent = `${longDate(state.weekStart)} – ${longDate(addDays(state.weekStart, 6))}`;
}

function renderProjects() {
  const none = state.projects.length === 0;
  $("no-projects").hidden = !none;
  $("log").hidden = none;
  const select = $("log-project");
  const chosen = select.value;
  select.replaceChildren(...state.projects.map((project) => new Option(project.name, String(project.id))));
  if (chosen && state.projects.some((project) => String(project.id) === chosen)) {
    select.value = chosen;
  }
  const date = $("log-date");
  const days = weekDays();
  date.min = days[0];
  date.max = days[6];
  if (!days.includes(date.value)) {
    const today = isoDate(new Date());
    date.value = days.includes(today) ? today : days[0];
  }
}

function totalRow(label, value) {
  const row = $("total-row").content.firstElementChild.cloneNode(true);
  row.querySelector(".label").textContent = label;
  row.querySelector(".value").textContent = hoursText(value);
  return row;
}

function renderEntries() {
  const body = document.querySelector("#entries tbody");
  body.replaceChildren();
  for (const entry of state.entries) {
    const row = $("entry-row").content.firstElementChild.cloneNode(true);
    const name = projectName(entry.project);
    const when = longDate(entry.date);
    row.dataset.id = String(entry.id);
    row.querySelector(".date").textContent = when;
    row.querySelector(".project").textContent = name;
    row.querySelector(".note").textContent = entry.note || "";
    const input = row.querySelector(".hours");
    input.value = String(entry.hours);
    input.setAttribute("aria-label", `Hours for ${name} on ${when}`);
    const save = row.querySelector(".save");
    save.setAttribute("aria-label", `Save hours for ${name} on ${when}`);
    save.addEventListener("click", () => saveHours(entry, input, save));
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        saveHours(entry, input, save);
      }
    });
    const remove = row.querySelector(".delete");
    remove.setAttribute("aria-label", `Delete ${name} on ${when}`);
    remove.addEventListener("click", () => deleteEntry(entry, remove));
    body.append(row);
  }
  $("no-entries").hidden = state.entries.length > 0;
  $("entries").hidden = state.entries.length === 0;

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
  document.querySelector("#day-totals tbody").replaceChildren(
    ...days.map((day, index) => totalRow(`${DAY_NAMES[index]} ${parseDate(day).getDate()}`, perDay.get(day))),
  );
  $("week-total").textContent = hoursText(total);
  const projects = [...perProject.entries()].sort((a, b) => projectName(a[0]).localeCompare(projectName(b[0])));
  const projectBody = document.querySelector("#project-totals tbody");
  projectBody.replaceChildren(...projects.map(([id, hours]) => totalRow(projectName(id), hours)));
  if (projects.length === 0) {
    projectBody.append(totalRow("No hours yet", 0));
  }
}

async function refresh() {
  await loadProjects();
  await loadEntries();
  renderWeek();
  renderProjects();
  renderEntries();
}

// --- Changes -----------------------------------------------------------------

async function saveHours(entry, input, button) {
  const hours = Number(input.value);
  if (!input.value || !Number.isFinite(hours) || hours <= 0 || hours > 24) {
    complain("Hours must be more than 0 and at most 24.");
    input.focus();
    return;
  }
  button.disabled = true;
  try {
    await Sasha.data.update("entries", entry.id, { hours }, { expectedVersion: entry._sasha_version });
    await refresh();
    say(`Saved ${hoursText(hours)} hours for ${projectName(entry.project)} on ${longDate(entry.date)}.`);
  } catch (error) {
    if (error && error.code === "APP_CONFLICT") {
      await refresh().catch(() => {});
      complain(CONFLICT_MESSAGE);
    } else {
      complain(describe(error));
    }
  } finally {
    button.disabled = false;
  }
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
    if (error && error.code === "APP_CONFLICT") {
      await refresh().catch(() => {});
      complain(CONFLICT_MESSAGE);
    } else {
      complain(describe(error));
    }
    button.disabled = false;
  }
}

$("log-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const submit = form.querySelector("button[type=submit]");
  const input = {
    date: $("log-date").value,
    project: Number($("log-project").value),
    hours: Number($("log-hours").value),
  };
  const note = $("log-note").value.trim();
  if (note) {
    input.note = note;
  }
  submit.disabled = true;
  try {
    await Sasha.actions.call("log-hours", input);
    if (mondayOf(parseDate(input.date)) !== state.weekStart) {
      state.weekStart = mondayOf(parseDate(input.date));
    }
    await refresh();
    $("log-hours").value = "";
    $("log-note").value = "";
    say(`Logged ${hoursText(input.hours)} hours for ${projectName(input.project)} on ${longDate(input.date)}.`);
    $("log-hours").focus();
  } catch (error) {
    complain(describe(error));
  } finally {
    submit.disabled = false;
  }
});

async function moveWeek(days) {
  state.weekStart = addDays(state.weekStart, days);
  say("");
  complain("");
  try {
    await refresh();
  } catch (error) {
    complain(describe(error));
  }
}

$("previous-week").addEventListener("click", () => moveWeek(-7));
$("next-week").addEventListener("click", () => moveWeek(7));
$("entries-title").tabIndex = -1;

refresh().catch((error) => complain(describe(error)));
