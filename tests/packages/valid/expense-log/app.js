"use strict";
const form = document.getElementById("add");

async function refresh() {
  const totals = await Sasha.actions.call("category-totals", { from: "2026-01-01", to: "2026-12-31" });
  const body = document.querySelector("#totals tbody");
  body.replaceChildren();
  for (const group of totals.groups) {
    const row = document.getElementById("row").content.cloneNode(true);
    row.querySelector(".name").textContent = String(group.category_id);
    row.querySelector(".total").textContent = group.total.toFixed(2);
    body.append(row);
  }
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const values = Object.fromEntries(new FormData(form));
  values.amount = Number(values.amount);
  values.category_id = Number(values.category_id);
  await Sasha.actions.call("add-expense", values);
  form.reset();
  await refresh();
});

refresh().catch((error) => console.warn(error.code, error.message));
