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
      } else if ((m = line.match(/^\s*\d+[.)]\s+(.*)$/))) {
        if (list !== "ol") { closeList(); out.push("<ol>"); list = "ol"; }
        out.push(`<li>${inline(m[1])}</li>`);
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
        answer.className = "answer " + (state.status === "error" ? "failed" : state.status === "done" ? "done" : "streaming");
        answer.innerHTML = renderMarkdown(state.text || "");
        if (state.status === "error") {
          const note = document.createElement("p");
          note.textContent = state.message || "This model could not answer. This battle will not be rated.";
          answer.appendChild(note);
        }
        block.append(user, answer);
        container.appendChild(block);
      });
    }
    const canVote = !voted && allDone();
    voteButtons.forEach((b) => { b.disabled = !canVote; });
    sendButton.disabled = voted || busy() || anyFailed() || turns.length >= maxTurns;
    if (voted) statusLine.textContent = "Vote recorded. Start a new round to battle again.";
    else if (anyFailed()) statusLine.textContent = "A model failed; this battle will not be rated. Start a new round.";
    else if (busy()) statusLine.textContent = "Both models are answering…";
    else if (allDone()) statusLine.textContent = turns.length >= maxTurns ? "Turn limit reached: please vote." : "Vote, or continue the conversation.";
    else statusLine.textContent = "";
  }

  function applySnapshot(state) {
    turns = state.turns.map((t) => ({prompt: t.prompt, a: {...t.a}, b: {...t.b}}));
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
    } else if (event.type === "done") { side.text = event.text; side.status = "done"; }
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
  let consented = root.dataset.consented === "true";
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
  reportButton.addEventListener("click", async () => {
    if (!battle) return;
    const reason = window.prompt("Why do you report this battle? (It will not be published until staff review it.)");
    if (!reason || !reason.trim()) return;
    try {
      await post(`/arena/battles/${battle}/report/`, {reason});
      statusLine.textContent = "Reported: this battle is held back until staff review it.";
      reportButton.disabled = true;
    } catch (error) {
      statusLine.textContent = error.message;
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
