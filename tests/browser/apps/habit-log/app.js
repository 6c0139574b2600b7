"use strict";
// Lists the current user's habits (newest first) and adds new ones, through
// Sasha.data on the owner-scoped table `habits`.
const form = document.getElementById("add");
const input = document.getElementById("title");
const button = form.querySelector("button");
const list = document.getElementById("habits");
const empty = document.getElementById("empty");
const problem = document.getElementById("problem");

function complain(error) {
  const text = error && typeof error.message === "string" ? error.message : "Something went wrong.";
  problem.textContent = error && error.diagnosticId ? `${text} (reference ${error.diagnosticId})` : text;
  problem.hidden = false;
}

async function load() {
  const { rows } = await Sasha.data.list("habits", { orderBy: [{ field: "id", direction: "desc" }], limit: 50 });
  list.replaceChildren(
    ...rows.map((row) => {
      const item = document.createElement("li");
      item.textContent = row.title;
      return item;
    }),
  );
  empty.hidden = rows.length > 0;
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const title = input.value.trim();
  if (!title) {
    input.focus();
    return;
  }
  problem.hidden = true;
  button.disabled = true;
  try {
    await Sasha.data.create("habits", { title });
    form.reset();
    await load();
  } catch (error) {
    complain(error);
  } finally {
    button.disabled = false;
    input.focus();
  }
});

load().catch(complain);
