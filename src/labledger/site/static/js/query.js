// @ts-check
/* The query language of `labledger runs --where`, in the browser: a port of
   labledger/store/query.py (tokenizer, recursive-descent parser, field checks, the reference
   evaluator and the sort order), evaluated over the catalog's index fields. Errors carry the
   position of the offending character and read like the CLI's. */
(function () {
  "use strict";
  var LL = window.LL;

  var COLUMNS = {
    id: ["id", "text"],
    name: ["name", "text"],
    group: ["grp", "text"],
    status: ["status", "text"],
    host: ["host", "text"],
    "git.commit": ["git_commit", "text"],
    started: ["started", "number"],
    duration: ["duration", "number"],
  };
  var PREFIXES = ["config.", "scalars.", "summary.", "counts.", "eval."];
  var KEYWORDS = ["and", "or", "not", "in", "between", "is", "null", "has", "tag", "true", "false"];
  var TOKEN = new RegExp(
    [
      "(\\s+)",
      "((?:\\d+\\.?\\d*|\\.\\d+)(?:[eE][+-]?\\d+)?)",
      "('(?:[^'\\\\]|\\\\.)*'|\"(?:[^\"\\\\]|\\\\.)*\")",
      '(`[^`"\\\\]+`)',
      '([A-Za-z_][A-Za-z0-9_.@-]*(?:\\[[^\\]"\\\\]*\\])?)',
      "(<=|>=|!=|!~|=|<|>|~)",
      "([(),-])",
    ].join("|"),
    "y"
  );
  var KINDS = [null, "ws", "number", "string", "field", "name", "op", "punct"];

  function col(name) {
    return Object.prototype.hasOwnProperty.call(COLUMNS, name) ? COLUMNS[name] : null;
  }
  function startsWithPrefix(name) {
    return PREFIXES.some(function (p) {
      return name.indexOf(p) === 0;
    });
  }

  /** An error of the language: message, position, and the CLI's three-line text. */
  function QueryError(text, pos, message, what) {
    var e = new Error(
      "invalid " + (what || "expression") + ": " + message + "\n  " + text + "\n  " + " ".repeat(pos) + "^"
    );
    /** @type {any} */ (e).pos = pos;
    /** @type {any} */ (e).short = message;
    /** @type {any} */ (e).query = true;
    return e;
  }
  /** Python's repr() of a text (the CLI's messages quote with it): "'" inside picks double quotes. */
  function repr(s) {
    var t = String(s).replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\r/g, "\\r").replace(/\t/g, "\\t");
    if (t.indexOf("'") >= 0 && t.indexOf('"') < 0) return '"' + t + '"';
    return "'" + t.replace(/'/g, "\\'") + "'";
  }

  function tokenize(text) {
    var out = [],
      i = 0;
    while (i < text.length) {
      TOKEN.lastIndex = i;
      var m = TOKEN.exec(text);
      if (!m) throw QueryError(text, i, "unexpected character " + repr(text[i]));
      var kind = null;
      for (var g = 1; g < m.length; g++)
        if (m[g] !== undefined) {
          kind = KINDS[g];
          break;
        }
      var raw = m[0];
      if (kind === "number") out.push({ kind: "number", text: raw, pos: i, value: Number(raw) });
      else if (kind === "string")
        out.push({ kind: "string", text: raw, pos: i, value: raw.slice(1, -1).replace(/\\(.)/g, "$1") });
      else if (kind === "field") out.push({ kind: "field", text: raw, pos: i, value: raw.slice(1, -1) });
      else if (kind === "name") {
        var low = raw.toLowerCase();
        var kw = KEYWORDS.indexOf(low) >= 0;
        out.push({ kind: kw ? "keyword" : "field", text: raw, pos: i, value: kw ? low : raw });
      } else if (kind === "op" || kind === "punct") out.push({ kind: kind, text: raw, pos: i, value: raw });
      i += raw.length;
    }
    out.push({ kind: "end", text: "", pos: text.length, value: null });
    return out;
  }

  function Parser(text) {
    this.text = text;
    this.tokens = tokenize(text);
    this.i = 0;
  }
  Parser.prototype.peek = function () {
    return this.tokens[this.i];
  };
  Parser.prototype.next = function () {
    return this.tokens[this.i++];
  };
  Parser.prototype.fail = function (message, tok) {
    return QueryError(this.text, (tok || this.peek()).pos, message);
  };
  Parser.prototype.isKw = function () {
    var tok = this.peek();
    return tok.kind === "keyword" && Array.prototype.indexOf.call(arguments, tok.value) >= 0;
  };
  function shown(tok) {
    return tok.kind === "end" ? "the end of the expression" : repr(tok.text);
  }
  Parser.prototype.expectKw = function (word, after) {
    if (!this.isKw(word)) throw this.fail("expected '" + word + "' after " + after + "; got " + shown(this.peek()));
    this.next();
  };
  Parser.prototype.parse = function () {
    if (this.peek().kind === "end")
      throw this.fail("the expression is empty (try: config.lr < 1e-3 and status = 'finished')");
    var node = this.disjunction();
    if (this.peek().kind !== "end")
      throw this.fail("expected 'and', 'or' or the end of the expression; got " + repr(this.peek().text));
    return node;
  };
  Parser.prototype.disjunction = function () {
    var parts = [this.conjunction()];
    while (this.isKw("or")) {
      this.next();
      parts.push(this.conjunction());
    }
    return parts.length === 1 ? parts[0] : { op: "or", parts: parts };
  };
  Parser.prototype.conjunction = function () {
    var parts = [this.unary()];
    while (this.isKw("and")) {
      this.next();
      parts.push(this.unary());
    }
    return parts.length === 1 ? parts[0] : { op: "and", parts: parts };
  };
  Parser.prototype.unary = function () {
    var tok = this.peek();
    if (this.isKw("not")) {
      this.next();
      return { op: "not", parts: [this.unary()] };
    }
    if (tok.kind === "punct" && tok.text === "(") {
      this.next();
      var node = this.disjunction();
      var close = this.peek();
      if (!(close.kind === "punct" && close.text === ")"))
        throw this.fail("expected ')' to close the '(' at character " + (tok.pos + 1) + "; got " + shown(close));
      this.next();
      return node;
    }
    if (this.isKw("has")) {
      this.next();
      this.expectKw("tag", "'has'");
      return { tag: this.stringValue("a tag") };
    }
    if (tok.kind !== "field")
      throw this.fail("expected a field name (like config.lr or name), 'not' or '('; got " + shown(tok));
    this.next();
    return this.test({ name: tok.value, pos: tok.pos });
  };
  Parser.prototype.stringValue = function (what) {
    var tok = this.next();
    if (tok.kind !== "string") throw this.fail("expected " + what + " in quotes; got " + shown(tok), tok);
    return tok.value;
  };
  Parser.prototype.value = function (after) {
    var tok = this.next();
    if (tok.kind === "string" || tok.kind === "number") return tok.value;
    if (tok.kind === "punct" && tok.text === "-" && this.peek().kind === "number") return -this.next().value;
    if (tok.kind === "keyword" && (tok.value === "true" || tok.value === "false")) return tok.value === "true";
    if (tok.kind === "keyword" && tok.value === "null")
      throw this.fail("null is not a value to compare with; write 'is null' or 'is not null'", tok);
    throw this.fail("expected a value (a number, 'text', true or false) after " + after + "; got " + shown(tok), tok);
  };
  Parser.prototype.test = function (field) {
    var tok = this.peek();
    if (tok.kind === "op") {
      this.next();
      if (tok.text === "~" || tok.text === "!~") {
        var pattern = this.stringValue("a regular expression after " + repr(tok.text));
        try {
          new RegExp(pattern);
        } catch (e) {
          throw QueryError(this.text, this.tokens[this.i - 1].pos, "bad regular expression (" + e.message + ")");
        }
        return { field: field, op: "~", values: [pattern], negated: tok.text === "!~" };
      }
      var at = this.peek();
      var value = this.value(repr(tok.text));
      if (typeof value === "boolean" && tok.text !== "=" && tok.text !== "!=")
        throw this.fail("booleans compare with = and != only; got " + repr(tok.text), at);
      if (tok.text === "!=") return { field: field, op: "=", values: [value], negated: true };
      return { field: field, op: tok.text, values: [value], negated: false };
    }
    var negated = false;
    if (this.isKw("not")) {
      this.next();
      negated = true;
      if (!this.isKw("in", "between"))
        throw this.fail("expected 'in' or 'between' after 'not'; got " + shown(this.peek()));
    }
    if (this.isKw("in")) {
      this.next();
      var open = this.next();
      if (!(open.kind === "punct" && open.text === "("))
        throw this.fail("expected '(' after 'in'; got " + shown(open), open);
      var values = [this.value("'('")];
      while (this.peek().kind === "punct" && this.peek().text === ",") {
        this.next();
        values.push(this.value("','"));
      }
      var close = this.next();
      if (!(close.kind === "punct" && close.text === ")"))
        throw this.fail("expected ',' or ')' in the list after 'in'; got " + shown(close), close);
      return { field: field, op: "in", values: values, negated: negated };
    }
    if (this.isKw("between")) {
      this.next();
      var low = this.value("'between'");
      this.expectKw("and", "the first value of 'between'");
      var high = this.value("'and'");
      if (
        typeof low === "boolean" ||
        typeof high === "boolean" ||
        (typeof low === "string") !== (typeof high === "string")
      )
        throw this.fail("'between' needs two numbers or two texts", tok);
      return { field: field, op: "between", values: [low, high], negated: negated };
    }
    if (this.isKw("is")) {
      this.next();
      var neg = false;
      if (this.isKw("not")) {
        this.next();
        neg = true;
      }
      this.expectKw("null", neg ? "'is not'" : "'is'");
      return { field: field, op: "null", values: [], negated: neg };
    }
    if (this.isKw("has")) {
      this.next();
      if (field.name !== "tags")
        throw QueryError(
          this.text,
          field.pos,
          "'has' is for tags (tags has 'x'); " + repr(field.name) + " is not tags"
        );
      return { tag: this.stringValue("a tag") };
    }
    throw this.fail(
      "expected an operator (= != < <= > >= ~ !~ in between is has) after " + repr(field.name) + "; got " + shown(tok)
    );
  };

  function predicates(node, out) {
    if (node.field) out.push(node);
    else if (node.parts)
      node.parts.forEach(function (p) {
        predicates(p, out);
      });
    return out;
  }

  /** Similarity of two names in [0, 1] (1 - edit distance / longer length). */
  function similarity(a, b) {
    var m = a.length,
      n = b.length,
      prev = [],
      cur;
    for (var j = 0; j <= n; j++) prev[j] = j;
    for (var i = 1; i <= m; i++) {
      cur = [i];
      for (j = 1; j <= n; j++)
        cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = cur;
    }
    return 1 - prev[n] / Math.max(1, m, n);
  }
  function unknownFieldMessage(name, known) {
    var names = Object.keys(COLUMNS)
      .concat(["tags"], known)
      .filter(function (v, i, a) {
        return a.indexOf(v) === i;
      })
      .sort();
    var close = names
      .filter(function (k) {
        return k.slice(-(name.length + 1)) === "." + name || k.indexOf("." + name + ".") >= 0;
      })
      .slice(0, 3);
    names
      .map(function (k) {
        return /** @type {[number, string]} */ ([similarity(name, k), k]);
      })
      .filter(function (p) {
        return p[0] >= 0.6 && close.indexOf(p[1]) < 0;
      })
      .sort(function (a, b) {
        return b[0] - a[0];
      })
      .slice(0, 3)
      .forEach(function (p) {
        close.push(p[1]);
      });
    var hint = close.length ? "; did you mean " + close.slice(0, 3).map(repr).join(" or ") + "?" : "";
    if (startsWithPrefix(name)) return "no run has the field " + repr(name) + hint;
    return (
      "unknown field " +
      repr(name) +
      hint +
      " (fields: " +
      Object.keys(COLUMNS).join(", ") +
      ", tags, " +
      PREFIXES.map(function (p) {
        return p + "*";
      }).join(", ") +
      ")"
    );
  }

  function parseIsoDate(v) {
    var m = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?)?(Z|[+-]\d{2}:?\d{2})?$/.exec(
      v
    );
    if (!m) return null;
    var parts = [1, 2, 3, 4, 5, 6].map(function (i) {
      return m[i] ? Number(m[i]) : 0;
    });
    var ms = m[7] ? Number((m[7] + "000").slice(0, 3)) : 0;
    if (m[8]) {
      var off = 0;
      if (m[8] !== "Z") {
        var sign = m[8][0] === "-" ? -1 : 1,
          digits = m[8].slice(1).replace(":", "");
        off = sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2)));
      }
      return (Date.UTC(parts[0], parts[1] - 1, parts[2], parts[3], parts[4], parts[5], ms) - off * 60000) / 1000;
    }
    return new Date(parts[0], parts[1] - 1, parts[2], parts[3], parts[4], parts[5], ms).getTime() / 1000;
  }

  function checkFields(text, node, known, kinds) {
    var knownSet = {};
    known.forEach(function (k) {
      knownSet[k] = true;
    });
    predicates(node, []).forEach(function (t) {
      var f = t.field,
        c = col(f.name);
      if (c) {
        t.values.forEach(function (v) {
          if (c[1] === "text" && typeof v !== "string")
            throw QueryError(text, f.pos, repr(f.name) + " holds text; compare it with a quoted value");
          if (c[1] === "number" && (typeof v === "boolean" || (typeof v === "string" && f.name !== "started")))
            throw QueryError(text, f.pos, repr(f.name) + " is a number of seconds; compare it with a number");
          if (c[1] === "number" && typeof v === "string" && parseIsoDate(v) === null)
            throw QueryError(text, f.pos, "'started' takes a number or an ISO date; got " + repr(v));
        });
        if (t.op === "~" && c[1] !== "text")
          throw QueryError(text, f.pos, repr(f.name) + " is a number; '~' matches text");
        return;
      }
      if (f.name === "tags")
        throw QueryError(text, f.pos, "tags are tested with has: tags has 'baseline' (or: has tag 'baseline')");
      if (!startsWithPrefix(f.name) || !knownSet[f.name])
        throw QueryError(text, f.pos, unknownFieldMessage(f.name, known));
    });
    if (kinds) checkValueKinds(text, node, kinds);
  }

  var KIND_ORDER = ["number", "text", "boolean"];
  var PLURAL = { number: "numbers", text: "text", boolean: "booleans" };
  var HOW = { number: "a number", text: "a quoted value", boolean: "true or false" };

  /**
   * store/query.py's check_value_kinds: comparing a field with a kind of value no run holds there is
   * an error. `kinds(name)` gives {kind: number of runs} of the catalog's values of a field.
   */
  function checkValueKinds(text, node, kinds) {
    predicates(node, []).forEach(function (t) {
      var f = t.field;
      if (col(f.name) || t.op === "null" || t.op === "has" || !startsWithPrefix(f.name)) return;
      var held = kinds(f.name);
      var have = KIND_ORDER.filter(function (k) {
        return held[k] > 0;
      });
      if (!have.length) return;
      var wanted = {};
      if (t.op === "~") wanted.text = true;
      else
        t.values.forEach(function (v) {
          wanted[kindOf(v)] = true;
        });
      var want = Object.keys(wanted).sort();
      if (
        want.some(function (k) {
          return held[k] > 0;
        })
      )
        return;
      var most = have[0];
      have.forEach(function (k) {
        if (held[k] > held[most]) most = k;
      });
      var plural = function (/** @type {string} */ k) {
        return /** @type {any} */ (PLURAL)[k];
      };
      throw QueryError(
        text,
        f.pos,
        repr(f.name) +
          " holds " +
          have.map(plural).join(" and ") +
          ", never " +
          want.map(plural).join(" or ") +
          ": compare it with " +
          /** @type {any} */ (HOW)[most]
      );
    });
  }

  /** {kind: runs} of the values a catalog holds in field `name` (lists, objects and nulls not counted). */
  function catalogKinds(catalog) {
    var f = catalog.fields || { names: [], columns: [] };
    return function (name) {
      var j = f.names.indexOf(name),
        out = { number: 0, text: 0, boolean: 0 };
      if (j < 0) return out;
      f.columns[j].forEach(function (v) {
        if (v === null || v === undefined || typeof v === "object") return;
        out[kindOf(v)] += 1;
      });
      return out;
    };
  }

  function kindOf(v) {
    return typeof v === "boolean" ? "boolean" : typeof v === "string" ? "text" : "number";
  }
  function typed(v, kind) {
    if (kind === "boolean") return typeof v === "boolean" ? (v ? 1 : 0) : null;
    if (kind === "text") return typeof v === "string" ? v : null;
    return typeof v === "number" ? v : null;
  }
  function get(row, f) {
    var c = col(f.name);
    if (c) {
      var v = row[c[0]];
      return v === undefined ? null : v;
    }
    var x = row.fields ? row.fields(f.name) : undefined;
    return x === undefined ? null : x;
  }
  var regexCache = {};
  function testPredicate(t, row) {
    var raw = get(row, t.field);
    if (t.op === "null") return raw === null;
    if (t.op === "~") {
      var s = typed(raw, "text");
      if (s === null) return false;
      var re = regexCache[t.values[0]] || (regexCache[t.values[0]] = new RegExp(t.values[0]));
      return re.test(s);
    }
    var isCol = !!col(t.field.name);
    function conv(value) {
      if (t.field.name === "started" && typeof value === "string") return parseIsoDate(value);
      return typeof value === "boolean" ? (value ? 1 : 0) : value;
    }
    function typedFor(value) {
      return isCol ? raw : typed(raw, kindOf(value));
    }
    if (t.op === "in")
      return t.values.some(function (v) {
        var x = typedFor(v);
        return x !== null && x === conv(v);
      });
    if (t.op === "between") {
      var x = typedFor(t.values[0]);
      return x !== null && conv(t.values[0]) <= x && x <= conv(t.values[1]);
    }
    var v = typedFor(t.values[0]);
    if (v === null) return false;
    var w = conv(t.values[0]);
    switch (t.op) {
      case "=":
        return v === w;
      case "<":
        return v < w;
      case "<=":
        return v <= w;
      case ">":
        return v > w;
      case ">=":
        return v >= w;
    }
    return false;
  }
  function evaluate(node, row) {
    if (node.op === "not") return !evaluate(node.parts[0], row);
    if (node.op === "and")
      return node.parts.every(function (p) {
        return evaluate(p, row);
      });
    if (node.op === "or")
      return node.parts.some(function (p) {
        return evaluate(p, row);
      });
    if (node.tag !== undefined) return (row.tags || []).indexOf(node.tag) >= 0;
    var hit = testPredicate(node, row);
    return node.negated ? !hit : hit;
  }

  /** Sort keys "-eval.test.accuracy,name" -> [{field, desc}] (errors point at the key). */
  function parseSort(text, known) {
    if (!text) return [];
    var out = [],
      pos = 0;
    text.split(",").forEach(function (part) {
      var key = part.trim();
      var desc = key[0] === "-";
      var name = desc ? key.slice(1).trim() : key;
      if (name[0] === "`" && name.slice(-1) === "`") name = name.slice(1, -1);
      var at = text.indexOf(key, pos);
      pos = Math.max(at, 0) + key.length;
      if (!name || !/^[^\s`"\\]+$/.test(name))
        throw QueryError(
          text,
          Math.max(at, 0),
          "bad sort key " + repr(key) + " (a field name, '-' before it for descending)",
          "sort"
        );
      if (!col(name) && (!startsWithPrefix(name) || known.indexOf(name) < 0))
        throw QueryError(text, Math.max(at, 0) + (desc ? 1 : 0), unknownFieldMessage(name, known), "sort");
      out.push({ field: { name: name, pos: at }, desc: desc });
    });
    return out;
  }
  function cmpValues(a, b) {
    if (typeof a === "boolean") a = a ? 1 : 0;
    if (typeof b === "boolean") b = b ? 1 : 0;
    return a < b ? -1 : a > b ? 1 : 0;
  }
  /** The rows in the order the index gives (newest first, then each key; missing values last). */
  function sortRows(rows, keys) {
    var out = rows.slice().sort(function (a, b) {
      return b.started - a.started || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);
    });
    keys
      .slice()
      .reverse()
      .forEach(function (k) {
        var isCol = !!col(k.field.name);
        var groups = [[], [], [], []];
        out.forEach(function (r) {
          var v = get(r, k.field);
          var rank = isCol
            ? v !== null
              ? 0
              : 3
            : typeof v === "boolean"
              ? 2
              : typeof v === "number"
                ? 0
                : typeof v === "string"
                  ? 1
                  : 3;
          groups[rank].push(r);
        });
        for (var g = 0; g < 3; g++)
          groups[g].sort(function (a, b) {
            var d = cmpValues(get(a, k.field), get(b, k.field));
            return k.desc ? -d : d;
          });
        out = groups[0].concat(groups[1], groups[2], groups[3]);
      });
    return out;
  }

  /**
   * The catalog's runs (LL.unpackCatalog's form) as rows the evaluator reads: index columns, tags
   * and the fields.
   * @param {any} catalog
   */
  function rowsOf(catalog) {
    var names = (catalog.fields && catalog.fields.names) || [],
      columns = (catalog.fields && catalog.fields.columns) || [];
    var index = {};
    names.forEach(function (n, i) {
      index[n] = columns[i];
    });
    var now = Date.now() / 1000;
    return (catalog.runs || []).map(function (r, i) {
      var ended = r.ended;
      return {
        run: r,
        id: r.id,
        name: r.name,
        grp: r.group === undefined ? null : r.group,
        status: r.status,
        host: r.host === undefined ? null : r.host,
        git_commit: r.git_commit === undefined ? null : r.git_commit,
        started: r.started,
        duration: typeof ended === "number" ? ended - r.started : r.status === "running" ? now - r.started : null,
        tags: r.tags || [],
        fields: function (name) {
          var c = index[name];
          return c === undefined ? undefined : c[i];
        },
      };
    });
  }

  /**
   * Compile `where` against the catalog's field names: {test(row), node}, or throws a QueryError.
   * @param {string} text
   * @param {string[]} known
   * @param {(name: string) => any} [kinds] the kinds of value each field holds (catalogKinds)
   */
  function compile(text, known, kinds) {
    var node = new Parser(text).parse();
    checkFields(text, node, known, kinds);
    return {
      node: node,
      test: function (row) {
        return evaluate(node, row);
      },
    };
  }

  /**
   * The runs of the catalog that `where` selects, in `sort` order (both optional).
   * @param {any} catalog
   * @param {string | undefined} where
   * @param {string | undefined} [sort]
   */
  function select(catalog, where, sort) {
    var known = (catalog.fields && catalog.fields.names) || [];
    var rows = rowsOf(catalog);
    if (where && where.trim()) {
      var q = compile(where, known, catalogKinds(catalog));
      rows = rows.filter(q.test);
    }
    if (sort) rows = sortRows(rows, parseSort(sort, known));
    return rows.map(function (r) {
      return r.run;
    });
  }

  LL.where = {
    tokenize: tokenize,
    parse: function (text) {
      return new Parser(text).parse();
    },
    compile: compile,
    catalogKinds: catalogKinds,
    evaluate: evaluate,
    rowsOf: rowsOf,
    sortRows: sortRows,
    parseSort: parseSort,
    select: select,
    /** A field's value in a catalog run (index i of catalog.runs). */
    field: function (catalog, i, name) {
      var f = catalog.fields || { names: [], columns: [] };
      var j = f.names.indexOf(name);
      var v = j < 0 ? null : f.columns[j][i];
      return v === undefined ? null : v;
    },
  };
})();
