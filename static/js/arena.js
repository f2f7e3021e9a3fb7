// The arena page: start a battle, stream both answers over a WebSocket, vote, reveal.
// Answers are model output: they are escaped before a small Markdown subset is applied, so no HTML
// from a model ever reaches the page as markup.
(function () {
  "use strict";
  const root = document.getElementById("arena");
  if (!root) return;
  const form = document.getElementById("prompt-form");
  const promptBox = document.getElementById("prompt");
  const sendButton = document.getElementById("send");
  const newRoundButton = document.getElementById("new-round");
  const statusLine = document.getElementById("status");
  const revealLine = document.getElementById("reveal");
  const voteButtons = Array.from(document.querySelectorAll("button.vote"));
  const maxTurns = parseInt(root.dataset.maxTurns, 10) || 4;
  const csrf = () => form.querySelector("input[name=csrfmiddlewaretoken]").value;

  let battle = null;      // public id of the current battle
  let socket = null;
  let turns = [];         // [{prompt, a: {text, status}, b: {text, status}}]
  let voted = false;
  let consented = root.dataset.consented === "true";

  function escapeHtml(text) {
    return text.replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
  }

  function inline(text) {  // text is already escaped
    return text
      .replace(/`([^`]+)`/g, "<code>$1</code>")
      .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
      .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>");
  }

  function renderMarkdown(source) {
    const lines = escapeHtml(source).split("\n");
    const out = [];
    let inCode = false, list = null;
    const closeList = () => { if (list) { out.push(`</${list}>`); list = null; } };
    for (const line of lines) {
      if (/^\s*(```|~~~)/.test(line)) {
        closeList();
        out.push(inCode ? "</code></pre>" : "<pre><code>");
        inCode = !inCode;
        continue;
      }
      if (inCode) { out.push(line + "\n"); continue; }
      let m;
      if ((m = line.match(/^\s{0,3}(#{1,6})\s+(.*)$/))) {
        closeList();
        const level = Math.min(m[1].length + 2, 6);
        out.push(`<h${level}>${inline(m[2])}</h${level}>`);
      } else if ((m = line.match(/^\s*[-*+]\s+(.*)$/))) {
        if (list !== "ul") { closeList(); out.push("<ul>"); list = "ul"; }
        out.push(`<li>${inline(m[1])}</li>`);
      } else if ((m = line.match(/^\s*(\d{1,9})[.)]\s+(.*)$/))) {
        // A list the model broke with blank lines goes on counting from the number it wrote.
        if (list !== "ol") { closeList(); out.push(`<ol start="${parseInt(m[1], 10)}">`); list = "ol"; }
        out.push(`<li>${inline(m[2])}</li>`);
      } else if (line.trim() === "") {
        closeList();
      } else {
        closeList();
        out.push(`<p>${inline(line)}</p>`);
      }
    }
    closeList();
    if (inCode) out.push("</code></pre>");
    return out.join("");
  }

  function complete(side) { return side.status === "done" || side.status === "error"; }
  function allDone() { return turns.length > 0 && turns.every((t) => t.a.status === "done" && t.b.status === "done"); }
  function anyFailed() { return turns.some((t) => t.a.status === "error" || t.b.status === "error"); }
  function busy() { return turns.some((t) => !complete(t.a) || !complete(t.b)); }
  // A side is "queued" until a worker takes it (the server counts the answers ahead of it), "starting"
  // from then until its first text (the model loading, the prompt being read), then "answering".
  function phase(side) {
    if (side.status === "pending") return "queued";
    if (side.status === "streaming" && !side.text) return "starting";
    return side.status === "streaming" ? "answering" : side.status;
  }
  function waiting() { return turns.some((t) => phase(t.a) === "queued" || phase(t.b) === "queued"); }
  function aheadText(count) { return count === 1 ? "1 answer ahead of it" : `${count} answers ahead of it`; }
  function sideNote(side) {
    const now = phase(side);
    if (now === "queued") {
      const ahead = side.queue ? side.queue.ahead : null;
      if (ahead === null || ahead === undefined) return "Queued: waiting for a free worker…";
      return ahead > 0 ? `Queued: ${aheadText(ahead)}.` : "Queued: next in line for a worker.";
    }
    return now === "starting" ? "Starting: the model is reading your prompt…" : "";
  }

  function statusText() {
    const last = turns[turns.length - 1];
    if (!last) return "";
    const phases = [phase(last.a), phase(last.b)];
    if (phases.includes("queued")) {
      const ahead = Math.max(...[last.a, last.b].filter((s) => phase(s) === "queued").map((s) => (s.queue ? s.queue.ahead : 0) || 0));
      return ahead > 0 ? `Queued behind other battles: ${aheadText(ahead)}. The answers start when a worker is free.`
                       : "Queued: next in line for a worker.";
    }
    if (phases.includes("starting")) return phases.includes("answering") ? "One model is answering, the other is starting…" : "Starting both models…";
    const answering = ["a", "b"].filter((k) => phase(last[k]) === "answering").map((k) => k.toUpperCase());
    if (answering.length === 2) return "Both models are answering…";
    if (answering.length === 1) return `Model ${answering[0]} is answering…`;
    return "Waiting for the answers…";
  }

  function render() {
    for (const side of ["a", "b"]) {
      const container = document.querySelector(`#pane-${side} .turns`);
      container.replaceChildren();
      turns.forEach((turn, index) => {
        const block = document.createElement("div");
        block.className = "turn";
        block.dataset.turn = index;
        const user = document.createElement("div");
        user.className = "user";
        user.textContent = "You: " + turn.prompt;
        const answer = document.createElement("div");
        const state = turn[side];
        const now = phase(state);
        answer.className = "answer " + (now === "error" ? "failed" : now === "done" ? "done" : now === "answering" ? "streaming" : "waiting");
        answer.dataset.phase = now;
        answer.innerHTML = renderMarkdown(state.text || "");
        const note = sideNote(state);
        if (note) {
          const line = document.createElement("p");
          line.className = "queue-note muted";
          line.textContent = note;
          answer.appendChild(line);
        }
        if (state.status === "done" && state.cut) {
          const mark = document.createElement("p");
          mark.className = "cut-mark muted";
          mark.textContent = "(cut at the token limit)";
          mark.title = "The model reached the most tokens an answer may have here; the answer ends mid-way.";
          answer.appendChild(mark);
        }
        if (state.status === "error") {
          const failed = document.createElement("p");
          failed.textContent = state.message || "This model could not answer. This battle will not be rated.";
          answer.appendChild(failed);
        }
        block.append(user, answer);
        container.appendChild(block);
      });
    }
    const canVote = !voted && allDone();
    voteButtons.forEach((b) => { b.disabled = !canVote; });
    sendButton.disabled = !consented || voted || busy() || anyFailed() || turns.length >= maxTurns;
    if (!consented) statusLine.textContent = "Read the terms above and agree to start.";
    else if (voted) statusLine.textContent = "Vote recorded. Start a new round to battle again.";
    else if (anyFailed()) statusLine.textContent = "A model failed; this battle will not be rated. Start a new round.";
    else if (busy()) statusLine.textContent = statusText();
    else if (allDone()) statusLine.textContent = turns.length >= maxTurns ? "Turn limit reached: please vote." : "Vote, or continue the conversation.";
    else statusLine.textContent = "";
    schedulePoll();
  }

  // While a side waits for a worker, ask the server every few seconds where it stands (its place in
  // the queue moves without an event); streamed events take over once a worker starts it.
  let pollTimer = null;
  function schedulePoll() {
    if (pollTimer || !waiting()) return;
    pollTimer = setTimeout(() => {
      pollTimer = null;
      if (waiting() && socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({type: "sync"}));
      schedulePoll();
    }, 2000);
  }

  // A snapshot (on connect, or answering a sync) may be older than the events already streamed: a side
  // keeps whichever of the two is further on (waiting < answering < finished; then the longer text).
  const RANK = {pending: 0, streaming: 1, done: 2, error: 2};
  function newer(local, remote) {
    if (!local) return {...remote};
    const ahead = (RANK[remote.status] ?? 0) - (RANK[local.status] ?? 0);
    if (ahead > 0 || (ahead === 0 && (remote.text || "").length > (local.text || "").length)) return {...local, ...remote};
    return ahead === 0 && remote.queue ? {...local, queue: remote.queue} : local;
  }

  function applySnapshot(state) {
    turns = state.turns.map((t, index) => {
      const known = turns[index];
      return {prompt: t.prompt, a: newer(known && known.a, t.a), b: newer(known && known.b, t.b)};
    });
    if (state.reveal) showReveal(state.reveal, state.winner);
    render();
  }

  function applyEvent(event) {
    const turn = turns[event.turn];
    if (!turn) { socket.send(JSON.stringify({type: "sync"})); return; }
    const side = turn[event.side];
    if (event.type === "start") { side.text = ""; side.status = "streaming"; }
    else if (event.type === "delta") {
      if (event.offset === side.text.length) side.text += event.text;
      else if (event.offset < side.text.length) {
        const overlap = side.text.length - event.offset;
        if (overlap < event.text.length) side.text += event.text.slice(overlap);
      }  // a gap is repaired by the final "done" text
      side.status = "streaming";
    } else if (event.type === "done") { side.text = event.text; side.status = "done"; side.cut = !!event.cut; }
    else if (event.type === "error") { side.status = "error"; side.message = event.message; }
    render();
  }

  function connect(id) {
    if (socket) socket.close();
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}/ws/arena/battles/${id}/`);
    socket.onmessage = (message) => {
      const event = JSON.parse(message.data);
      if (event.type === "snapshot") applySnapshot(event);
      else if (["start", "delta", "done", "error"].includes(event.type)) applyEvent(event);
    };
    socket.onclose = () => {
      if (battle === id && busy()) setTimeout(() => { if (battle === id) connect(id); }, 1000);
    };
  }

  async function post(url, data) {
    const body = new URLSearchParams(data);
    const response = await fetch(url, {method: "POST", body, headers: {"X-CSRFToken": csrf()}, credentials: "same-origin"});
    let payload = {};
    try { payload = await response.json(); } catch (e) { payload = {error: `The server answered ${response.status}.`}; }
    if (!response.ok) throw new Error(payload.error || `The server answered ${response.status}.`);
    return payload;
  }

  function showReveal(reveal, winner) {
    voted = true;
    const labels = {"model_a": "You voted A", "model_b": "You voted B", "tie": "You voted tie", "tie (bothbad)": "You voted both bad"};
    revealLine.hidden = false;
    revealLine.textContent = `${labels[winner] || "Voted"}. Model A was ${reveal.model_a}; Model B was ${reveal.model_b}.` +
      (reveal.counted ? "" : " (This vote is kept but not rated: an answer revealed a model's identity.)");
    document.querySelector("#pane-a h2").textContent = `Model A: ${reveal.model_a}`;
    document.querySelector("#pane-b h2").textContent = `Model B: ${reveal.model_b}`;
  }

  const termsPanel = document.getElementById("terms");
  document.getElementById("agree").addEventListener("click", async () => {
    try {
      await post("/arena/consent/", {version: termsPanel.dataset.version});
      consented = true;
      termsPanel.hidden = true;
      statusLine.textContent = "";
      render();
      promptBox.focus();
    } catch (error) {
      statusLine.textContent = error.message;
    }
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!consented) { statusLine.textContent = "Read the terms above and agree first."; termsPanel.hidden = false; return; }
    const prompt = promptBox.value.trim();
    if (!prompt) { statusLine.textContent = "Type a prompt first."; return; }
    sendButton.disabled = true;
    try {
      if (!battle) {
        const created = await post("/arena/battles/", {prompt});
        battle = created.battle;
        reportButton.hidden = false;
        turns = [{prompt, a: {text: "", status: "pending"}, b: {text: "", status: "pending"}}];
        connect(battle);
      } else {
        await post(`/arena/battles/${battle}/turns/`, {prompt});
        turns.push({prompt, a: {text: "", status: "pending"}, b: {text: "", status: "pending"}});
        if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({type: "sync"}));
      }
      promptBox.value = "";
      render();
    } catch (error) {
      statusLine.textContent = error.message;
      sendButton.disabled = false;
    }
  });

  promptBox.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });

  voteButtons.forEach((button) => button.addEventListener("click", async () => {
    voteButtons.forEach((b) => { b.disabled = true; });
    try {
      const result = await post(`/arena/battles/${battle}/vote/`, {winner: button.dataset.winner});
      showReveal(result, result.winner);
      render();
    } catch (error) {
      statusLine.textContent = error.message;
      render();
    }
  }));

  const reportButton = document.getElementById("report");
  const reportDialog = document.getElementById("report-dialog");
  const reportForm = document.getElementById("report-form");
  const reportReason = document.getElementById("report-reason");
  const reportError = document.getElementById("report-error");
  reportButton.addEventListener("click", () => {
    if (!battle) return;
    reportReason.value = "";
    reportError.textContent = "";
    reportDialog.showModal();
    reportReason.focus();
  });
  document.getElementById("report-cancel").addEventListener("click", () => reportDialog.close());
  reportForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const reason = reportReason.value.trim();
    if (!reason) { reportError.textContent = "Say why you report this battle."; return; }
    try {
      await post(`/arena/battles/${battle}/report/`, {reason});
      reportDialog.close();
      statusLine.textContent = "Reported: this battle is held back until staff review it.";
      reportButton.disabled = true;
    } catch (error) {
      reportError.textContent = error.message;  // the dialog stays open: the reason is not lost
    }
  });

  newRoundButton.addEventListener("click", () => {
    if (socket) socket.close();
    battle = null; socket = null; turns = []; voted = false;
    reportButton.hidden = true; reportButton.disabled = false;
    revealLine.hidden = true;
    document.querySelector("#pane-a h2").textContent = "Model A";
    document.querySelector("#pane-b h2").textContent = "Model B";
    render();
    promptBox.focus();
  });

  window.podiumArena = {renderMarkdown};  // used by the sanitisation test
  render();
})();
