// The submit page: pick or drop a checkpoint folder, check its file list with the server's rules
// (checkpoint-rules.js) before a byte is sent, then create the submission and upload every file through
// the resumable tus endpoint with tus-js-client: several files at once, a progress bar per file and
// overall, and a dropped connection or a closed tab resumed from the offset the server holds
// (tus-js-client keeps each upload's URL in localStorage under a fingerprint that names the submission).
// Without JavaScript, or with a store path, the form posts as a plain multipart form.
(function () {
  "use strict";
  var form = document.getElementById("submit-form");
  if (!form || !window.tus || !window.PodiumCheckpointRules || !window.PodiumCrc32 || !window.tus.isSupported) { return; }
  var Rules = window.PodiumCheckpointRules;
  var rules = JSON.parse(document.getElementById("checkpoint-rules").textContent);
  var draftsUrl = form.dataset.draftsUrl, uploadsUrl = form.dataset.uploadsUrl;
  if (!draftsUrl || !uploadsUrl) { return; }
  var chunkSize = parseInt(form.dataset.chunkBytes, 10) || 16 * 1024 * 1024;
  var PARALLEL = 3;
  var DRAFT_KEY = "podium-draft:";
  var table = document.getElementById("file-list"), body = table.querySelector("tbody");
  var problemsList = document.getElementById("file-problems"), formProblems = document.getElementById("form-problems");
  var stateLine = document.getElementById("upload-state"), ignoredLine = document.getElementById("ignored-files");
  var button = form.querySelector("button[type=submit]");
  var picked = [];   // [{file, name, size, row, sent, startOffset, started, done}]
  var busy = false;

  function csrfToken() { return form.querySelector("input[name=csrfmiddlewaretoken]").value; }

  function human(bytes) {
    var units = ["B", "kB", "MB", "GB", "TB"], i = 0, n = bytes;
    while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
    return (i ? n.toFixed(n < 10 ? 2 : 1) : String(n)) + " " + units[i];
  }

  function duration(seconds) {
    if (!isFinite(seconds) || seconds < 0) { return "–"; }
    seconds = Math.round(seconds);
    if (seconds < 60) { return seconds + " s"; }
    if (seconds < 3600) { return Math.floor(seconds / 60) + " min " + (seconds % 60) + " s"; }
    return Math.floor(seconds / 3600) + " h " + Math.floor((seconds % 3600) / 60) + " min";
  }

  function showList(list, messages) {
    list.textContent = "";
    messages.filter(function (m, i) { return messages.indexOf(m) === i; }).forEach(function (m) {
      var li = document.createElement("li");
      li.className = "error";
      li.textContent = m;
      list.appendChild(li);
    });
    list.hidden = !messages.length;
  }

  // -- picking ------------------------------------------------------------------------------------

  function choose(files, ignored) {
    if (busy) { return; }
    picked = files.map(function (f) { return { file: f, name: f.name, size: f.size }; });
    body.textContent = "";
    picked.forEach(function (item) {
      var row = document.createElement("tr");
      row.dataset.name = item.name;
      ["name", "size num", "bar", "sent num", "rate num", "eta num"].forEach(function (cls) {
        var cell = document.createElement("td");
        cell.className = cls;
        row.appendChild(cell);
      });
      row.querySelector(".name").textContent = item.name;
      row.querySelector(".size").textContent = human(item.size);
      var bar = document.createElement("progress");
      bar.max = Math.max(item.size, 1);
      bar.value = 0;
      row.querySelector(".bar").appendChild(bar);
      var problem = Rules.fileNameProblem(rules, item.name);
      if (problem) { row.classList.add("problem"); row.title = problem; }
      item.row = row;
      body.appendChild(row);
    });
    table.hidden = !picked.length;
    table.querySelector("tfoot .size").textContent = human(total());
    ignoredLine.hidden = !ignored.length;
    ignoredLine.textContent = ignored.length ? "Left out (subfolders and hidden files): " + ignored.join(", ") : "";
    showList(problemsList, picked.length ? check() : []);
  }

  function check() {
    return Rules.fileListProblems(rules, picked.map(function (p) { return { name: p.name, size: p.size }; }));
  }

  function total() { return picked.reduce(function (sum, p) { return sum + p.size; }, 0); }

  function fromFolder(files) {
    var keep = [], ignored = [];
    files.forEach(function (f) {
      var parts = (f.webkitRelativePath || f.name).split("/");
      if (parts.length > 2 || f.name.charAt(0) === ".") { ignored.push(parts.slice(1).join("/") || f.name); }
      else { keep.push(f); }
    });
    choose(keep, ignored);
  }

  document.getElementById("folder-input").addEventListener("change", function (e) {
    fromFolder(Array.from(e.target.files));
  });
  var filesInput = form.querySelector("input[type=file][name=files]");
  filesInput.addEventListener("change", function (e) { choose(Array.from(e.target.files), []); });

  var zone = document.getElementById("dropzone");
  ["dragenter", "dragover"].forEach(function (t) {
    zone.addEventListener(t, function (e) { e.preventDefault(); zone.classList.add("over"); });
  });
  zone.addEventListener("dragleave", function () { zone.classList.remove("over"); });
  zone.addEventListener("drop", function (e) {
    e.preventDefault();
    zone.classList.remove("over");
    var entries = Array.from(e.dataTransfer.items || []).map(function (i) { return i.webkitGetAsEntry && i.webkitGetAsEntry(); });
    var folder = entries.length === 1 && entries[0] && entries[0].isDirectory ? entries[0] : null;
    if (!folder) { choose(Array.from(e.dataTransfer.files), []); return; }
    readFolder(folder).then(function (found) { choose(found.files, found.ignored); });
  });

  function readFolder(dir) {  // the folder's own files; its subfolders are left out, as on the server
    var reader = dir.createReader(), files = [], ignored = [], pending = [];
    return new Promise(function (resolve, reject) {
      (function more() {
        reader.readEntries(function (batch) {
          if (!batch.length) {
            Promise.all(pending).then(function () { resolve({ files: files, ignored: ignored }); }, reject);
            return;
          }
          batch.forEach(function (entry) {
            if (entry.isDirectory || entry.name.charAt(0) === ".") { ignored.push(entry.name + (entry.isDirectory ? "/" : "")); return; }
            pending.push(new Promise(function (ok, fail) { entry.file(function (f) { files.push(f); ok(); }, fail); }));
          });
          more();
        }, reject);
      })();
    });
  }

  // -- the submission -----------------------------------------------------------------------------

  function fieldsOf() {
    var data = {};
    Array.from(form.elements).forEach(function (el) {
      if (!el.name || el.name === "csrfmiddlewaretoken" || el.name === "files" || el.name === "store_path" || el.type === "file") { return; }
      data[el.name] = el.type === "checkbox" ? el.checked : el.value;
    });
    return data;
  }

  function declared() {
    var files = {};
    picked.forEach(function (p) { files[p.name] = p.size; });
    return files;
  }

  function draftKey(fields) {  // the same folder and name, picked again after the tab was closed
    var sig = picked.map(function (p) { return [p.name, p.size, p.file.lastModified].join(":"); }).sort().join("|");
    return DRAFT_KEY + fields.model_name + "|" + sig;
  }

  function labelOf(field) {
    var label = field && form.querySelector("label[for='id_" + field + "']");
    return label ? label.textContent.replace(/:\s*$/, "") : "";
  }

  function messagesOf(payload) {  // {"errors": {field: [..]}}, {"detail": ..}, [..] as sentences
    var out = [];
    (function walk(value, field) {
      if (field === "existing_submission") { return; }  // a link, shown as one (see the submit handler)
      if (typeof value === "string") { out.push(labelOf(field) && field !== "files" ? labelOf(field) + ": " + value : value); }
      else if (Array.isArray(value)) { value.forEach(function (v) { walk(v, field); }); }
      else if (value && typeof value === "object") { Object.keys(value).forEach(function (k) { walk(value[k], k); }); }
    })(payload, "");
    return out.length ? out : ["The server refused the submission."];
  }

  function api(method, url, data) {
    var init = { method: method, credentials: "same-origin",
                 headers: { Accept: "application/json", "X-CSRFToken": csrfToken() } };
    if (data) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(data); }
    return fetch(url, init).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (payload) {
        if (!r.ok) {
          var error = new Error("refused");
          error.messages = messagesOf(payload); error.status = r.status; error.existing = payload.existing_submission;
          throw error;
        }
        return payload;
      });
    });
  }

  function storedDraft(key) {
    try { return JSON.parse(localStorage.getItem(key)); } catch (e) { return null; }
  }

  // An upload a closed tab left unfinished: its fields are filled in again; picking the same
  // folder then resumes it.
  function offerResume() {
    var latest = null, latestKey = null;
    for (var i = 0; i < localStorage.length; i++) {
      var key = localStorage.key(i);
      var stored = key && key.indexOf(DRAFT_KEY) === 0 ? storedDraft(key) : null;
      if (stored && stored.fields && (!latest || stored.at > latest.at)) { latest = stored; latestKey = key; }
    }
    if (!latest || form.querySelector(".errorlist li")) { return; }  // a refused form keeps what was posted
    api("GET", draftUrl(latest.id)).then(function (d) {
      if (d.status !== "UPLOADING") { throw Object.assign(new Error(d.status), { status: 410 }); }
      if (busy || picked.length) { return; }
      Object.keys(latest.fields).forEach(function (name) {
        var el = form.elements[name];
        if (!el || el.type === "file") { return; }
        if (el.type === "checkbox") { el.checked = !!latest.fields[name]; } else { el.value = latest.fields[name]; }
      });
      stateLine.textContent = "The upload of " + latest.fields.model_name +
        " was interrupted: pick the same folder and submit to resume it.";
    }).catch(function (e) {  // refused, expired, submitted or gone; a network failure forgets nothing
      if (e.status === 404 || e.status === 410) { localStorage.removeItem(latestKey); }
    });
  }

  function draftUrl(id) { return draftsUrl.replace(/\/?$/, "/") + encodeURIComponent(id) + "/"; }

  function openDraft(fields) {  // the stored draft if it still takes files, else a new one
    var key = draftKey(fields), known = storedDraft(key);
    known = known && known.id;
    var fresh = function () {
      // The weights' digest first (as the server computes it), so weights already submitted are
      // refused before a byte is sent; the server hashes what arrives all the same.
      var weights = picked.filter(isWeights).map(function (p) { return p.file; });
      return window.PodiumSha256.weightsDigest(weights, function (done, size) {
        stateLine.textContent = "Checking the weights against your earlier submissions… " + Math.floor(100 * done / Math.max(size, 1)) + "%";
      }).then(function (digest) {
        return api("POST", draftsUrl, Object.assign({}, fields, { files: declared(), weight_sha256: digest }));
      }).then(function (d) {
        localStorage.setItem(key, JSON.stringify({ id: d.id, fields: fields, at: Date.now() }));
        return { id: d.id, key: key, resumed: false };
      });
    };
    if (!known) { return fresh(); }
    return api("GET", draftUrl(known)).then(function (d) {
      if (d.status !== "UPLOADING") { localStorage.removeItem(key); return fresh(); }
      var held = {};
      (d.files || []).forEach(function (f) { held[f.name] = f; });
      return { id: known, key: key, resumed: true, held: held };
    }, function () { localStorage.removeItem(key); return fresh(); });
  }

  // -- progress -----------------------------------------------------------------------------------

  var clock = { start: 0 };

  function paint(item) {
    var row = item.row, now = performance.now();
    row.querySelector("progress").value = item.sent;
    row.querySelector(".sent").textContent = item.done ? "done" : human(item.sent);
    row.dataset.sent = String(item.sent);
    var seconds = (now - item.started) / 1000, moved = item.sent - (item.startOffset || 0);
    var rate = seconds > 0.2 && moved > 0 ? moved / seconds : 0;
    row.querySelector(".rate").textContent = rate ? human(rate) + "/s" : "";
    row.querySelector(".eta").textContent = item.done ? "" : rate ? duration((item.size - item.sent) / rate) : "–";
    var all = picked.reduce(function (s, p) { return s + p.sent; }, 0), size = total();
    var foot = table.querySelector("tfoot");
    foot.querySelector("progress").max = Math.max(size, 1);
    foot.querySelector("progress").value = all;
    foot.querySelector(".sent").textContent = human(all);
    var movedAll = picked.reduce(function (s, p) { return s + (p.startOffset === null ? 0 : p.sent - p.startOffset); }, 0);
    var allSeconds = (now - clock.start) / 1000, allRate = allSeconds > 0.2 ? movedAll / allSeconds : 0;
    foot.querySelector(".rate").textContent = allRate > 0 ? human(allRate) + "/s" : "";
    foot.querySelector(".eta").textContent = all >= size ? "" : allRate > 0 ? duration((size - all) / allRate) : "–";
    table.dataset.sent = String(all);
  }

  // Each chunk carries its CRC-32 (tus checksum extension, crc32.js), so the server refuses one that
  // was damaged on the way instead of storing it. The checksum is made when tus-js-client takes the
  // chunk from the file and added to that chunk's PATCH.
  function checksummed(digests) {
    return {
      fileReader: {
        openFile: function (file) {
          return Promise.resolve({
            size: file.size,
            slice: function (start, end) {
              var value = file.slice(start, end);
              digests[String(start)] = value.arrayBuffer()
                .then(function (data) { return window.PodiumCrc32.uploadChecksum(new Uint8Array(data)); });
              return Promise.resolve({ value: value, done: end >= file.size });
            },
            close: function () {},
          });
        },
      },
      onBeforeRequest: function (req) {
        var offset = req.getHeader("Upload-Offset"), digest = req.getMethod() === "PATCH" ? digests[offset] : null;
        if (!digest) { return undefined; }
        delete digests[offset];  // a retried chunk is sliced, and checksummed, again
        return digest.then(function (checksum) { req.setHeader("Upload-Checksum", checksum); });
      },
    };
  }

  function uploadOne(item, draft) {
    return new Promise(function (resolve, reject) {
      var upload = new window.tus.Upload(item.file, Object.assign(checksummed({}), {
        endpoint: uploadsUrl,
        chunkSize: chunkSize,
        retryDelays: [0, 1000, 3000, 5000, 10000],
        metadata: { submission: draft.id, filename: item.name },
        headers: { "X-CSRFToken": csrfToken() },
        storeFingerprintForResuming: true,
        removeFingerprintOnSuccess: true,
        fingerprint: function (file) {
          return Promise.resolve(["podium", draft.id, item.name, file.size, file.lastModified].join("/"));
        },
        onProgress: function (sent) {
          if (item.startOffset === null) { item.startOffset = sent; item.started = performance.now(); }
          item.sent = sent;
          paint(item);
        },
        onSuccess: function () { item.sent = item.size; item.done = true; item.row.classList.add("done"); paint(item); resolve(); },
        onError: function (error) {
          item.row.classList.add("failed");
          var response = error.originalResponse, text = response ? response.getBody() : "";
          var messages;
          try { messages = messagesOf(JSON.parse(text)); } catch (e) { messages = [item.name + ": " + (error.message || error)]; }
          item.row.querySelector(".sent").textContent = "failed";
          reject(Object.assign(new Error("upload failed"), { messages: messages }));
        },
      }));
      upload.findPreviousUploads().then(function (previous) {
        if (previous.length) {
          upload.resumeFromPreviousUpload(previous[0]);
          item.row.dataset.resumed = "1";
        }
        upload.start();
      });
    });
  }

  function isWeights(p) { return p.name.toLowerCase().endsWith(rules.weights_suffix); }

  // Small files first, then the weights in name order: the order the server's running hash reads
  // them, so it hashes each chunk as it arrives (docs/uploads.md).
  function uploadOrder(a, b) {
    if (isWeights(a) !== isWeights(b)) { return isWeights(a) ? 1 : -1; }
    return isWeights(a) ? (a.name < b.name ? -1 : 1) : a.size - b.size;
  }

  function uploadAll(draft) {
    var failures = [];
    clock = { start: performance.now() };
    picked.forEach(function (p) { p.sent = 0; p.startOffset = null; p.started = performance.now(); p.done = false; });
    var queue = picked.filter(function (p) {  // files a closed tab had finished are not sent again
      var held = draft.held && draft.held[p.name];
      if (held && held.received === held.size) { p.sent = p.size; p.done = true; p.row.classList.add("done"); paint(p); return false; }
      return true;
    }).sort(uploadOrder);
    function worker() {
      var item = queue.shift();
      if (!item) { return Promise.resolve(); }
      return uploadOne(item, draft).catch(function (e) { failures = failures.concat(e.messages || []); }).then(worker);
    }
    var workers = [];
    for (var i = 0; i < PARALLEL; i++) { workers.push(worker()); }
    return Promise.all(workers).then(function () {
      if (failures.length) { throw Object.assign(new Error("failed"), { messages: failures }); }
    });
  }

  function settle(draft) {  // the server checks the whole checkpoint once the last byte is in
    return api("GET", draftUrl(draft.id)).then(function (d) {
      if (d.status === "REFUSED" || d.status === "EXPIRED") {
        localStorage.removeItem(draft.key);
        throw Object.assign(new Error("refused"), { messages: d.errors && d.errors.length ? d.errors : ["The submission was " + d.status.toLowerCase() + "."] });
      }
      if (d.status !== "UPLOADING" && d.status !== "FINALIZING") { localStorage.removeItem(draft.key); return d; }  // PENDING and on
      return new Promise(function (r) { setTimeout(r, 500); }).then(function () { return settle(draft); });
    });
  }

  offerResume();

  form.addEventListener("submit", function (e) {
    var storePath = form.querySelector("[name=store_path]");
    if (!picked.length && storePath && storePath.value.trim()) { return; }  // a store folder: the plain form
    e.preventDefault();
    if (busy) { return; }
    showList(formProblems, []);
    var problems = check();
    showList(problemsList, problems);
    if (problems.length) { stateLine.textContent = "Nothing was sent."; return; }
    if (storePath && storePath.value.trim()) { showList(formProblems, ["Upload files or name a store path, not both."]); return; }
    busy = true;
    button.disabled = true;
    var fields = fieldsOf();
    stateLine.textContent = "Checking the submission…";
    openDraft(fields).then(function (draft) {
      stateLine.textContent = draft.resumed ? "Resuming the upload…" : "Uploading…";
      form.dataset.draft = draft.id;
      return uploadAll(draft).then(function () {
        stateLine.textContent = "All files received; checking the checkpoint…";
        return settle(draft);
      });
    }).then(function () {
      stateLine.textContent = "Submitted.";
      window.location.assign(form.dataset.doneUrl);
    }).catch(function (error) {
      showList(formProblems, error.messages || [String(error)]);
      if (error.existing) {  // weights submitted before: where their results are
        var item = document.createElement("li"), link = document.createElement("a");
        link.href = error.existing;
        link.textContent = "See that submission and its results";
        link.className = "existing-submission";
        item.appendChild(link);
        formProblems.appendChild(item);
        formProblems.hidden = false;
      }
      stateLine.textContent = "";
      busy = false;
      button.disabled = false;
    });
  });
})();
