"use strict";
const main = document.querySelector("main");

document.getElementById("flip").addEventListener("click", () => {
  main.classList.toggle("flipped");
});
