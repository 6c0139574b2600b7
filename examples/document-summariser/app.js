"use strict";
// Document Summariser: uploads documents with Sasha.files.upload and asks for
// a summary with Sasha.chat.execute, referencing each chosen document as
// @<converted name>. The streamed answer replaces the text each time and is
// never parsed as HTML.

const $ = (id) => document.getElementById(id);
const state = { documents: [], running: false };

function say(text) {
  $("problem").hidden = true;
  $("notice").textContent = text;
  $("notice").hidden = !text;
}

function complain(error) {
  let text = "Something went wrong.";
  if (error && typeof error.message === "string") {
    const message = error.message.charAt(0).toUpperCase() + error.message.slice(1);
    text = error.code ? `${message} (${error.code}${error.diagnosticId ? `, reference ${error.diagnosticId}` : ""})` : message;
  }
  const refused = error && error.details && Array.isArray(error.details.files) ? error.details.files : [];
  for (const file of refused) {
    if (file && typeof file.name === "string" && typeof file.reason === "string") {
      text += `\n${file.name}: ${file.reason}`;
    }
  }
  $("notice").hidden = true;
  $("problem").textContent = text;
  $("problem").hidden = false;
}

function setRunning(running) {
  state.running = running;
  for (const id of ["upload", "ask", "files"]) {
    $(id).disabled = running;
  }
}

function renderDocuments() {
  const list = $("document-list");
  list.textContent = "";
  state.documents.forEach((document_, index) => {
    const id = `document-${index}`;
    const input = Object.assign(document.createElement("input"), { type: "checkbox", id, checked: document_.chosen });
    input.addEventListener("change", () => {
      document_.chosen = input.checked;
    });
    const label = document.createElement("label");
    label.htmlFor = id;
    const original = document.createElement("span");
    original.textContent = document_.original;
    const converted = document.createElement("span");
    converted.className = "converted";
    converted.textContent = `@${document_.converted}`;
    label.append(input, original, converted);
    const item = document.createElement("li");
    item.append(label);
    list.append(item);
  });
  $("documents").hidden = state.documents.length === 0;
}

function progress({ phase, loaded, total }) {
  if (phase === "reading") {
    say(`Reading documents… ${Math.round((loaded / Math.max(total, 1)) * 100)} %`);
  } else if (phase === "uploading") {
    say("Sending documents…");
  } else if (phase === "converting") {
    say("Converting documents to Markdown…");
  }
}

async function upload(event) {
  event.preventDefault();
  const files = $("files").files;
  if (!files || files.length === 0) {
    complain({ message: "Choose at least one document first." });
    $("files").focus();
    return;
  }
  setRunning(true);
  say(`Uploading ${files.length} ${files.length === 1 ? "document" : "documents"}…`);
  try {
    const descriptors = await Sasha.files.upload(files, { onProgress: progress });
    for (const descriptor of descriptors) {
      state.documents.push({ ...descriptor, chosen: true });
    }
    renderDocuments();
    $("files").value = "";
    say(`Uploaded ${descriptors.map((d) => d.original).join(", ")}.`);
  } catch (error) {
    complain(error);
  } finally {
    setRunning(false);
  }
}

async function ask(event) {
  event.preventDefault();
  const instruction = $("instruction").value.trim();
  const chosen = state.documents.filter((d) => d.chosen);
  if (!instruction) {
    complain({ message: "Write an instruction first." });
    $("instruction").focus();
    return;
  }
  const references = chosen.map((d) => `@${d.converted}`).join(" ");
  const prompt = references ? `${instruction}\n\nDocuments: ${references}` : instruction;
  setRunning(true);
  $("answer").setAttribute("aria-busy", "true");
  $("answer").textContent = "";
  say(chosen.length ? `Asking about ${chosen.length} ${chosen.length === 1 ? "document" : "documents"}…` : "Asking…");
  try {
    const text = await Sasha.chat.execute(prompt, { newSession: $("new-session").checked });
    $("answer").textContent = text;
    say("The answer is complete.");
    // Follow-up questions continue this conversation unless asked otherwise.
    $("new-session").checked = false;
  } catch (error) {
    complain(error);
  } finally {
    $("answer").setAttribute("aria-busy", "false");
    setRunning(false);
  }
}

Sasha.chat.onStream((fullText) => {
  // The full text so far: replace, never append, never parse.
  $("answer").textContent = fullText;
});

$("upload-form").addEventListener("submit", upload);
$("ask-form").addEventListener("submit", ask);
Sasha.ready().catch(complain);
