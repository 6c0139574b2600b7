// Time Sheet Entry's own view, driven by role and label as a person would:
// what more than one browser scenario does inside the app (`app` is the
// app's inner frame, see studio-page.mjs's `innerFrame`).

/** A manager adds `name` as the first project, from the empty state. */
export async function addProjectInApp(app, name) {
  await app.getByRole("heading", { name: "No projects yet" }).waitFor({ timeout: 20_000 });
  await app.getByLabel("Project name", { exact: true }).fill(name);
  await app.getByRole("button", { name: "Add your first project" }).click();
  await app.getByRole("status").filter({ hasText: `Added the project ${name}.` }).waitFor();
}

/** The ISO date of the Monday the view shows, once it has rendered. */
export async function weekStartInApp(app) {
  return app.locator("#week-start[datetime]").getAttribute("datetime");
}

/** Logs `hours` on `project` for the log form's own day (today's, in the shown week). */
export async function logHoursInApp(app, project, hours) {
  const form = app.getByRole("region", { name: "Log hours" });
  await form.waitFor({ timeout: 20_000 });
  await app.getByLabel("Project", { exact: true }).selectOption({ label: project });
  await app.getByLabel("Hours", { exact: true }).fill(hours);
  await app.getByRole("button", { name: "Log hours" }).click();
  await app.getByRole("status").filter({ hasText: `Logged ${Number(hours).toFixed(2)} hours for ${project}` }).waitFor();
}
