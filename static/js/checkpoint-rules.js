// The checks on a checkpoint's file list, in the browser, before a byte is sent. The rules and the
// messages come from the server (leaderboard/submissions/checkpoint_rules.json, embedded in the page);
// this is leaderboard/submissions/file_rules.py line for line, and tests/leaderboard/test_upload_rules.py
// runs both over the same lists and compares what they say.
(function (root) {
  "use strict";

  function say(rules, key, values) {
    return rules.messages[key].replace(/\{(\w+)\}/g, function (_, name) { return String(values[name]); });
  }

  // C0 and C1 controls, DEL, and the bidirectional controls (U+061C, U+200E-F, U+202A-E, U+2066-9).
  function isControl(code) {
    return code < 32 || (code >= 127 && code < 160) || code === 0x061C || code === 0x200E || code === 0x200F ||
      (code >= 0x202A && code <= 0x202E) || (code >= 0x2066 && code <= 0x2069);
  }

  function hex(code, width) {
    var digits = code.toString(16);
    while (digits.length < width) { digits = "0" + digits; }
    return digits;
  }

  // Python's name.encode("unicode_escape").decode("ascii"), cut to the same length.
  function shown(rules, name) {
    var out = "";
    for (var ch of name) {
      var code = ch.codePointAt(0);
      if (ch === "\\") { out += "\\\\"; }
      else if (ch === "\t") { out += "\\t"; }
      else if (ch === "\n") { out += "\\n"; }
      else if (ch === "\r") { out += "\\r"; }
      else if (code >= 32 && code < 127) { out += ch; }
      else if (code < 256) { out += "\\x" + hex(code, 2); }
      else if (code < 65536) { out += "\\u" + hex(code, 4); }
      else { out += "\\U" + hex(code, 8); }
    }
    return out.slice(0, rules.shown_name_length);
  }

  function endsWithAny(text, suffixes) {
    return suffixes.some(function (suffix) { return text.endsWith(suffix); });
  }

  function fileNameProblem(rules, name) {
    var codePoints = Array.from(name);
    if (codePoints.some(function (ch) { return isControl(ch.codePointAt(0)); })) {
      return say(rules, "control_characters", { shown: shown(rules, name) });
    }
    if (!name.trim()) { return say(rules, "empty_name", {}); }
    if (name.indexOf("/") >= 0 || name.indexOf("\\") >= 0 || name.indexOf("..") >= 0) {
      return say(rules, "path", { shown: shown(rules, name) });
    }
    if (codePoints.length > rules.max_name_length) {
      return say(rules, "long_name", { shown: shown(rules, name), max_name_length: rules.max_name_length });
    }
    var lower = name.toLowerCase();
    if (endsWithAny(lower, rules.pickle_suffixes)) { return say(rules, "pickle", { name: name }); }
    if (endsWithAny(lower, rules.code_suffixes)) { return say(rules, "code", { name: name }); }
    if (!endsWithAny(lower, [rules.weights_suffix].concat(rules.data_suffixes))) {
      return say(rules, "not_checkpoint", { name: name });
    }
    return null;
  }

  // files: [{name, size}]; returns the messages the server would give for the same list.
  function fileListProblems(rules, files) {
    if (!files.length) { return [say(rules, "no_files", {})]; }
    var errors = [];
    if (files.length > rules.max_files) {
      errors.push(say(rules, "too_many_files", { count: files.length, max_files: rules.max_files }));
    }
    var total = files.reduce(function (sum, f) { return sum + f.size; }, 0);
    if (total > rules.max_bytes) {
      errors.push(say(rules, "too_many_bytes", { total: total, max_bytes: rules.max_bytes }));
    }
    var names = new Set();
    files.forEach(function (f) {
      var problem = fileNameProblem(rules, f.name);
      if (problem) { errors.push(problem); }
      else if (names.has(f.name)) { errors.push(say(rules, "twice", { name: f.name })); }
      else if (f.size === 0) { errors.push(say(rules, "empty_file", { name: f.name })); }
      names.add(f.name);
    });
    if (errors.length) { return errors; }
    if (!names.has(rules.config)) { errors.push(say(rules, "no_config", {})); }
    if (!rules.tokenizer_files.some(function (n) { return names.has(n); })) { errors.push(say(rules, "no_tokenizer", {})); }
    var weights = Array.from(names).filter(function (n) { return n.toLowerCase().endsWith(rules.weights_suffix); });
    if (!weights.length) { errors.push(say(rules, "no_weights", {})); }
    else if (weights.length > 1 && !names.has(rules.index)) {
      errors.push(say(rules, "no_index", { count: weights.length, index: rules.index }));
    }
    return errors;
  }

  root.PodiumCheckpointRules = { fileNameProblem: fileNameProblem, fileListProblems: fileListProblems, shown: shown };
})(window);
