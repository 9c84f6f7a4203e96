// The page talks to tolk's own API: /languages (LibreTranslate's listing, with targets),
// /translate, /detect and /translate/file. No framework, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
let languages = [];

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

async function failure(response) {
  try {
    const body = await response.json();
    return (body.error && body.error.message) || JSON.stringify(body);
  } catch (e) {
    return `HTTP ${response.status}`;
  }
}

function fillTargets() {
  const source = $("source").value;
  const target = $("target");
  const keep = target.value;
  const entry = languages.find((l) => l.code === source);
  const codes = entry ? entry.targets : [...new Set(languages.flatMap((l) => l.targets))];
  target.innerHTML = "";
  for (const code of codes) {
    if (code === source) continue;
    const named = languages.find((l) => l.code === code);
    target.add(new Option(named ? named.name : code, code));
  }
  if ([...target.options].some((o) => o.value === keep)) target.value = keep;
}

async function loadLanguages() {
  const response = await fetch("/languages");
  languages = await response.json();
  for (const l of languages) $("source").add(new Option(l.name, l.code));
  fillTargets();
}

function timing(started, response) {
  const total = performance.now() - started;
  const server = response.headers.get("Server-Timing") || "";
  const engine = /engine;dur=([\d.]+)/.exec(server);
  $("timing").textContent = `${total.toFixed(0)} ms` + (engine ? ` (engine ${Number(engine[1]).toFixed(0)} ms)` : "");
}

function describe(detected) {
  const named = languages.find((l) => l.code === detected.language);
  const name = named ? named.name : detected.language;
  return `${name} (${Math.round(detected.confidence * 100)}%${detected.reliable ? "" : ", unsure"})`;
}

async function translate() {
  showError("");
  const text = $("input").value;
  if (!text.trim()) return;
  $("status").textContent = "Translating…";
  const started = performance.now();
  const source = $("source").value;
  const body = { text, target_lang: $("target").value };
  if (source !== "auto") body.source_lang = source;
  const response = await fetch("/translate", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  $("status").textContent = "";
  if (!response.ok) return showError(await failure(response));
  const result = await response.json();
  $("output").value = result.translation;
  $("model").textContent = result.model;
  $("detected").textContent = result.detected ? describe(result.detected) : "–";
  timing(started, response);
}

async function detect() {
  showError("");
  const text = $("input").value;
  if (!text.trim()) return;
  const response = await fetch("/detect", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ text }),
  });
  if (!response.ok) return showError(await failure(response));
  const result = await response.json();
  $("detected").textContent = describe(result.detected);
  if ([...$("source").options].some((o) => o.value === result.detected.language)) {
    $("source").value = result.detected.language;
    fillTargets();
  }
}

function swap() {
  const source = $("source");
  const target = $("target");
  const from = source.value === "auto" ? null : source.value;
  const to = target.value;
  source.value = to;
  fillTargets();
  if (from) target.value = from;
  const out = $("output").value;
  if (out) {
    $("output").value = $("input").value;
    $("input").value = out;
  }
}

// The translated file's name as the server gives it (a PDF comes back as a .docx).
function downloadName(response, fallback) {
  const header = response.headers.get("Content-Disposition") || "";
  const found = /filename\*=UTF-8''([^;]+)/i.exec(header);
  return found ? decodeURIComponent(found[1]) : fallback;
}

// The file types the server translates (LibreTranslate's settings list them), as the
// file picker's filter and its hint.
async function loadFormats() {
  const response = await fetch("/frontend/settings");
  if (!response.ok) return;
  const formats = (await response.json()).supportedFilesFormat || [];
  $("file").accept = formats.join(",");
  $("file-hint").textContent = `${formats.join(" ")}: formatting kept.`;
}

async function translateFile() {
  showError("");
  const file = $("file").files[0];
  if (!file) return showError("Choose a file first.");
  const form = new FormData();
  form.append("file", file);
  form.append("target_lang", $("target").value);
  if ($("source").value !== "auto") form.append("source_lang", $("source").value);
  $("status").textContent = "Translating the file…";
  const started = performance.now();
  const response = await fetch("/translate/file", { method: "POST", body: form });
  $("status").textContent = "";
  if (!response.ok) return showError(await failure(response));
  const link = $("file-link");
  const name = downloadName(response, file.name);
  link.href = URL.createObjectURL(await response.blob());
  link.download = name;
  link.textContent = `Download ${name}`;
  link.hidden = false;
  timing(started, response);
}

$("source").addEventListener("change", fillTargets);
$("swap").addEventListener("click", swap);
$("translate").addEventListener("click", translate);
$("detect").addEventListener("click", detect);
$("file-translate").addEventListener("click", translateFile);
loadLanguages().catch((e) => showError(`Could not load the languages: ${e}`));
loadFormats().catch(() => {});  // without the list, any file may be chosen: the server says no
