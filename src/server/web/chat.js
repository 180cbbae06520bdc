// striker's chat page: streams /v1/chat/completions (SSE) with the settings on the right, shows
// reasoning folded, tool calls as they arrive, and lets a tool result be sent back. No libraries.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { model: null, messages: [], controller: null, pendingCall: null };

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api_key").value.trim();
  if (key) h.Authorization = "Bearer " + key;
  return h;
}

async function loadModel() {
  try {
    const r = await fetch("/v1/models", { headers: headers() });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error ? body.error.message : r.statusText);
    state.model = body.data[0].id;
    $("model").textContent = state.model;
  } catch (e) {
    $("model").textContent = "no model: " + e.message;
  }
}

function element(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function addBubble(role, text) {
  const box = element("div", "msg " + role);
  box.appendChild(element("div", "role", role));
  const content = element("div", "content", text || "");
  box.appendChild(content);
  $("messages").appendChild(box);
  box.scrollIntoView({ block: "end" });
  return box;
}

// An assistant bubble that fills as deltas arrive.
class AssistantView {
  constructor() {
    this.box = addBubble("assistant");
    this.content = this.box.querySelector(".content");
    this.details = element("details", "reasoning");
    this.details.appendChild(element("summary", null, "Reasoning"));
    this.reasoningText = element("div", "reasoning-text");
    this.details.appendChild(this.reasoningText);
    this.details.hidden = true;
    this.box.insertBefore(this.details, this.content);
    this.calls = element("div", "tool-calls");
    this.box.appendChild(this.calls);
    this.meta = element("div", "meta");
    this.box.appendChild(this.meta);
  }
  reasoning(text) {
    this.details.hidden = false;
    this.reasoningText.textContent = text;
  }
  text(text) { this.content.textContent = text; }
  toolCalls(calls) {
    this.calls.replaceChildren(...calls.map((c) => {
      const row = element("div", "tool-call");
      row.appendChild(element("span", "tool-name", c.function.name));
      row.appendChild(element("span", "tool-args", "(" + c.function.arguments + ")"));
      return row;
    }));
  }
  error(message) { this.box.appendChild(element("div", "error", message)); }
  status(text) { this.meta.textContent = text; }
}

function readSettings() {
  const body = { model: state.model, stream: true, stream_options: { include_usage: true } };
  const num = (id) => { const v = $(id).value.trim(); return v === "" ? undefined : Number(v); };
  for (const id of ["temperature", "top_p", "max_tokens"]) {
    const v = num(id);
    if (v !== undefined) body[id] = v;
  }
  const tools = $("tools").value.trim();
  if (tools) {
    try {
      body.tools = JSON.parse(tools);
    } catch (e) {
      throw new Error("Tools is not valid JSON: " + e.message);
    }
  }
  return body;
}

// Server-sent events: yields the parsed JSON of each `data:` line until [DONE].
async function* sseEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") return;
        yield JSON.parse(data);
      }
    }
  }
}

async function send(text) {
  if (!state.model) await loadModel();
  let body;
  try {
    body = readSettings();
  } catch (e) {
    addBubble("assistant").appendChild(element("div", "error", e.message));
    return;
  }
  if (state.pendingCall && $("as-tool-result").checked) {
    state.messages.push({ role: "tool", tool_call_id: state.pendingCall.id, content: text });
    addBubble("tool", text);
  } else {
    state.messages.push({ role: "user", content: text });
    addBubble("user", text);
  }
  setPendingCall(null);
  const system = $("system").value.trim();
  body.messages = (system ? [{ role: "system", content: system }] : []).concat(state.messages);

  const view = new AssistantView();
  const out = { reasoning: "", content: "", calls: [] };
  state.controller = new AbortController();
  setBusy(true);
  let finish = null, usage = null;
  try {
    const r = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), body: JSON.stringify(body), signal: state.controller.signal });
    if (!r.ok) {
      const err = await r.json().catch(() => ({}));
      throw new Error(err.error ? err.error.message : r.status + " " + r.statusText);
    }
    for await (const chunk of sseEvents(r)) {
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices || []) {
        const d = choice.delta || {};
        const reasoning = d.reasoning || d.reasoning_content;
        if (reasoning) { out.reasoning += reasoning; view.reasoning(out.reasoning); }
        if (d.content) { out.content += d.content; view.text(out.content); }
        for (const tc of d.tool_calls || []) {
          if (!out.calls[tc.index]) out.calls[tc.index] = { id: tc.id, type: "function", function: { name: "", arguments: "" } };
          const call = out.calls[tc.index];
          if (tc.function && tc.function.name) call.function.name += tc.function.name;
          if (tc.function && tc.function.arguments) call.function.arguments += tc.function.arguments;
          view.toolCalls(out.calls.filter(Boolean));
        }
        if (choice.finish_reason) finish = choice.finish_reason;
      }
    }
    view.status([finish && "finish: " + finish,
      usage && usage.prompt_tokens + " prompt + " + usage.completion_tokens + " completion tokens"].filter(Boolean).join(" · "));
  } catch (e) {
    if (e.name === "AbortError") view.status("stopped");
    else view.error(e.message);
  } finally {
    state.controller = null;
    setBusy(false);
  }
  const calls = out.calls.filter(Boolean);
  const message = { role: "assistant", content: out.content || null };
  if (out.reasoning) message.reasoning_content = out.reasoning;
  if (calls.length) message.tool_calls = calls;
  if (out.content || calls.length) state.messages.push(message);
  if (calls.length) setPendingCall(calls[0]);
}

function setPendingCall(call) {
  state.pendingCall = call;
  $("tool-reply").hidden = !call;
  $("tool-reply-name").textContent = call ? call.function.name : "";
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
}

$("composer").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("prompt").value.trim();
  if (!text || state.controller) return;
  $("prompt").value = "";
  send(text);
});
$("prompt").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("composer").requestSubmit(); }
});
$("stop").addEventListener("click", () => { if (state.controller) state.controller.abort(); });
$("new-chat").addEventListener("click", () => {
  if (state.controller) state.controller.abort();
  state.messages = [];
  setPendingCall(null);
  $("messages").replaceChildren();
});
loadModel();
