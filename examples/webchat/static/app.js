// The valet web chat: plain JavaScript over agent/agenthttp. Every text
// that comes from the model, a tool or the user is inserted with
// textContent, never as HTML.
"use strict";

const user = new URLSearchParams(location.search).get("user") || "demo";
const conversation = "main";
const $ = (id) => document.getElementById(id);

// el makes an element with a class and, optionally, its text.
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// api calls the handler as this page's user (the demo's stand-in for the
// host's authentication).
async function api(method, path, body) {
  const init = { method, headers: { "X-User": user } };
  if (method !== "GET") {
    init.headers["Content-Type"] = "application/json";
    init.body = body === undefined ? "" : JSON.stringify(body);
  }
  const resp = await fetch("/api" + path, init);
  if (resp.status === 204) return {};
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error((data.error && data.error.message) || resp.statusText);
  return data;
}

function scrollDown() { const log = $("log"); log.scrollTop = log.scrollHeight; }

function say(role, text) {
  const m = el("div", "msg " + role, text);
  $("log").append(m);
  scrollDown();
  return m;
}

// ---------------------------------------------------------------- tool cards

// A run's tool calls of one turn go in one row, side by side: a call that
// starts once one of the row has ended belongs to the next turn. Each card
// records when it started and ended in the order of the stream's events.
let row = null;
let seq = 0;

function toolCard(call) {
  if (row && row.querySelector(".tool-card:not(.running)")) row = null;
  if (!row) { row = el("div", "tool-row"); $("log").append(row); }
  const card = el("div", "tool-card running");
  card.dataset.id = call.id;
  card.dataset.started = ++seq;
  card.append(el("div", "name", call.name), el("div", "args", call.args || ""), el("div", "status", "running…"));
  row.append(card);
  scrollDown();
  return card;
}

function finishCard(card, call) {
  card.dataset.ended = ++seq;
  card.classList.remove("running");
  const waiting = call.status === "waiting_for_approval" || call.status === "waiting_for_input";
  card.classList.add(waiting ? "waiting" : call.success ? "done" : "failed");
  let text = waiting ? "waiting for you" : (call.status || "done");
  if (!waiting && !(call.resumed && !call.duration_ms)) text += " in " + call.duration_ms + " ms";
  if (call.resumed) text += " (after your decision)";
  if (call.error) text += ": " + call.error;
  card.querySelector(".status").textContent = text;
}

// ---------------------------------------------------------------- the stream

let running = null; // the AbortController of the stream under way

async function send(text) {
  say("user", text);
  row = null;
  const abort = new AbortController();
  running = abort;
  $("stop").hidden = false;
  try {
    const resp = await fetch(`/api/conversations/${conversation}/messages`, {
      method: "POST", signal: abort.signal,
      headers: { "X-User": user, "Content-Type": "application/json" },
      body: JSON.stringify({ text }),
    });
    if (!resp.ok) {
      const data = await resp.json().catch(() => ({}));
      throw new Error((data.error && data.error.message) || resp.statusText);
    }
    await readEvents(resp.body, handleEvent);
  } catch (err) {
    if (err.name !== "AbortError") say("error", "Error: " + err.message);
  } finally {
    if (running === abort) { running = null; $("stop").hidden = true; }
    refreshApprovals();
    refreshTasks();
  }
}

// readEvents parses Server-Sent Events from a fetch body.
async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const frame = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of frame.split("\n")) {
        if (line.startsWith("data: ")) onEvent(JSON.parse(line.slice(6)));
      }
    }
  }
}

let bubble = null; // the assistant message being written

function handleEvent(ev) {
  switch (ev.type) {
    case "message_start":
      bubble = say("assistant streaming", "");
      break;
    case "message_chunk":
      if (!bubble) bubble = say("assistant streaming", "");
      bubble.textContent += ev.text;
      scrollDown();
      break;
    case "message_retract": // the model call broke off and is retried
      if (bubble) bubble.textContent = "";
      break;
    case "message_end":
      if (!bubble) bubble = say("assistant", "");
      bubble.textContent = ev.text;
      bubble.classList.remove("streaming");
      bubble = null;
      row = null; // the next tool calls are another turn
      break;
    case "tool_call_start":
      toolCard(ev.tool_call);
      break;
    case "tool_result": {
      const card = [...document.querySelectorAll(".tool-card")].find((c) => c.dataset.id === ev.tool_call.id) || toolCard(ev.tool_call);
      finishCard(card, ev.tool_call);
      break;
    }
    case "state_change":
      refreshApprovals();
      break;
    case "execution_end":
      if (bubble) { bubble.classList.remove("streaming"); bubble = null; }
      if (ev.error && ev.result && ev.result.status !== "cancelled") say("error", "Error: " + ev.error.message);
      if (ev.result && ev.result.status === "cancelled") say("error", "Stopped.");
      if (ev.result && ev.result.status === "injected") say("assistant", "(passed to the task under way)");
      break;
  }
}

// ---------------------------------------------------------------- approvals

async function refreshApprovals() {
  const box = $("approvals");
  let list;
  try { list = (await api("GET", "/approvals?conversation=" + conversation)).approvals; } catch (err) { return; }
  box.replaceChildren();
  if (list.length === 0) box.append(el("p", "empty", "Nothing to approve."));
  for (const a of list) box.append(approvalCard(a));
}

function approvalCard(a) {
  const card = el("div", "approval-card");
  card.dataset.id = a.id;
  card.append(el("div", "summary", a.action_summary));
  const dl = el("dl");
  for (const [k, v] of Object.entries(a.details || {})) {
    dl.append(el("dt", "", k), el("dd", "", typeof v === "string" ? v : JSON.stringify(v)));
  }
  card.append(dl);
  const buttons = el("div", "buttons");
  const choices = a.options && a.options.length ? a.options : ["approve", "edit", "cancel"];
  const approve = el("button", "approve", "Approve");
  approve.onclick = () => decide(card, a, { action: "approve" });
  buttons.append(approve);
  if (a.allow_modification && choices.includes("edit")) {
    const edit = el("button", "edit secondary", "Edit");
    edit.onclick = () => editForm(card, a);
    buttons.append(edit);
  }
  const cancel = el("button", "cancel danger", "Cancel");
  cancel.onclick = () => decide(card, a, { action: "cancel" });
  buttons.append(cancel);
  card.append(buttons);
  return card;
}

function editForm(card, a) {
  const form = el("form", "edit-form");
  const inputs = {};
  for (const [k, v] of Object.entries(a.details || {})) {
    const label = el("label", "", k);
    const input = typeof v === "string" && v.includes("\n") ? el("textarea") : el("input");
    input.name = k;
    input.value = typeof v === "string" ? v : JSON.stringify(v);
    if (input.tagName === "TEXTAREA") input.rows = 5;
    inputs[k] = { input, was: input.value };
    form.append(label, input);
  }
  const save = el("button", "save", "Save and send");
  save.type = "submit";
  form.append(save);
  form.onsubmit = (e) => {
    e.preventDefault();
    const fields = {};
    for (const [k, { input, was }] of Object.entries(inputs)) if (input.value !== was) fields[k] = input.value;
    if (Object.keys(fields).length === 0) return decide(card, a, { action: "approve" });
    decide(card, a, { action: "edit", fields });
  };
  card.querySelector(".buttons").replaceWith(form);
}

async function decide(card, a, decision) {
  for (const b of card.querySelectorAll("button")) b.disabled = true;
  decision.fingerprint = a.fingerprint; // a screen out of date answers 409 and runs nothing
  try {
    const { result } = await api("POST", "/approvals/" + encodeURIComponent(a.id), decision);
    card.remove();
    row = null;
    for (const call of result.tool_calls || []) finishCard(toolCard(call), call);
    row = null;
    if (result.response) say("assistant", result.response);
  } catch (err) {
    say("error", "Error: " + err.message);
  }
  refreshApprovals();
}

// ---------------------------------------------------------------- tasks

async function refreshTasks() {
  let list;
  try { list = (await api("GET", "/tasks")).tasks; } catch (err) { return; }
  const ul = $("tasks");
  ul.replaceChildren();
  if (list.length === 0) ul.append(el("li", "empty", "No scheduled tasks."));
  for (const t of list) {
    const li = el("li", "task");
    li.dataset.id = t.id;
    const sched = t.trigger.schedule && t.trigger.schedule.cron ? "cron " + t.trigger.schedule.cron : t.trigger.kind;
    const next = t.next_run ? ", next " + new Date(t.next_run).toLocaleString() : "";
    li.append(el("span", "task-name", t.name), el("span", "task-meta", `${t.status} · ${sched}${next}`));
    const toggle = el("button", "secondary", t.status === "PAUSED" ? "Resume" : "Pause");
    toggle.onclick = () => taskAction(`/tasks/${encodeURIComponent(t.id)}/${t.status === "PAUSED" ? "resume" : "pause"}`, "POST");
    const del = el("button", "danger", "Delete");
    del.onclick = () => taskAction(`/tasks/${encodeURIComponent(t.id)}`, "DELETE");
    li.append(toggle, del);
    ul.append(li);
  }
}

async function taskAction(path, method) {
  try { await api(method, path); } catch (err) { say("error", "Error: " + err.message); }
  refreshTasks();
}

async function addTask(e) {
  e.preventDefault();
  const task = {
    id: "task-" + Date.now().toString(36),
    name: $("task-name").value,
    trigger: { kind: "schedule", schedule: { cron: $("task-cron").value, zone: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC" } },
    action: { instruction: $("task-instruction").value },
    status: "ACTIVE",
    conversation_id: conversation,
  };
  try { await api("POST", "/tasks", task); $("task-name").value = ""; } catch (err) { say("error", "Error: " + err.message); }
  refreshTasks();
}

// ---------------------------------------------------------------- start

async function loadHistory() {
  let msgs;
  try { msgs = (await api("GET", `/conversations/${conversation}/messages`)).messages; } catch (err) { return; }
  for (const m of msgs) {
    if (m.role === "user" && m.name !== "valet_trigger") say("user", m.content);
    if (m.role === "assistant" && m.content) say("assistant", m.content);
    if (m.role === "assistant" && m.tool_calls) {
      row = null;
      for (const c of m.tool_calls) toolCard({ id: c.id, name: c.name, args: c.arguments });
      row = null;
    }
    if (m.role === "tool") {
      const card = [...document.querySelectorAll(".tool-card")].find((c) => c.dataset.id === m.tool_call_id);
      if (card) finishCard(card, { status: m.is_error ? "error" : "completed", success: !m.is_error, duration_ms: 0 });
    }
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("who").textContent = "signed in as " + user;
  $("composer").onsubmit = (e) => {
    e.preventDefault();
    const text = $("input").value.trim();
    if (!text) return;
    $("input").value = "";
    send(text);
  };
  $("stop").onclick = () => api("POST", `/conversations/${conversation}/cancel`).catch(() => {});
  $("task-form").onsubmit = addTask;
  loadHistory();
  refreshApprovals();
  refreshTasks();
});
