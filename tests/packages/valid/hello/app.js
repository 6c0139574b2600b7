"use strict";
const form = document.getElementById("greet");
const message = document.getElementById("message");
const clicks = document.getElementById("clicks");
let count = 0;

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const name = new FormData(form).get("name").trim() || "there";
  message.textContent = `Hello, ${name}!`;
});

document.getElementById("count").addEventListener("click", () => {
  count += 1;
  clicks.textContent = String(count);
});
