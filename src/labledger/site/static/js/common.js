// @ts-check
/* labledger site: shared helpers. Every string from a run goes into the page through
   textContent or createTextNode (never innerHTML), so it shows as text. */
(function () {
  "use strict";
  var LL = (window.LL = /** @type {LLNamespace} */ (/** @type {unknown} */ ({})));
  window.LABLEDGER = window.LABLEDGER || {};

  var SAFE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
  var SAFE_PART = /^[A-Za-z0-9._-]{1,160}$/;
  var SAFE_REF = /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;

  /* ---------------------------------------------------------------- DOM building */
  /** @param {Node} node @param {Child} child */
  function append(node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) {
      child.forEach(function (c) {
        append(node, c);
      });
      return;
    }
    if (typeof child === "string" || typeof child === "number" || typeof child === "boolean") {
      node.appendChild(document.createTextNode(String(child)));
      return;
    }
    node.appendChild(child);
  }

  /** h("a", {href: ..., class: ..., onclick: fn}, "text", child, [more]) */
  LL.h = /** @type {LLNamespace["h"]} */ (
    function (/** @type {string} */ tag, /** @type {Record<string, any> | null | undefined} */ attrs) {
      var node = document.createElement(tag);
      if (attrs) {
        Object.keys(attrs).forEach(function (k) {
          var v = attrs[k];
          if (v === null || v === undefined || v === false) return;
          if (k === "class") node.className = v;
          else if (k === "text") node.textContent = String(v);
          else if (k.slice(0, 2) === "on" && typeof v === "function") node.addEventListener(k.slice(2), v);
          else if (k === "style" && typeof v === "object")
            Object.keys(v).forEach(function (s) {
              /** @type {any} */ (node.style)[s] = v[s];
            });
          else if (k === "dataset")
            Object.keys(v).forEach(function (d) {
              node.dataset[d] = String(v[d]);
            });
          else if (k === "href") node.setAttribute("href", LL.safeHref(String(v)));
          else if (k === "src") node.setAttribute("src", LL.safeSrc(String(v)));
          else if (k === "value") /** @type {HTMLInputElement} */ (node).value = v;
          else if (k === "checked" || k === "selected" || k === "disabled") /** @type {any} */ (node)[k] = !!v;
          else if (v === true) node.setAttribute(k, "");
          else node.setAttribute(k, String(v));
        });
      }
      for (var i = 2; i < arguments.length; i++) append(node, arguments[i]);
      return node;
    }
  );

  var h = LL.h;

  /* Links only ever point at this site's pages, anchors or files. */
  LL.safeHref = function (href) {
    if (/^(index|run|batches|eval|test|compare|lineage|curves|hparams|diff)\.html(#.*)?$/.test(href) || /^#/.test(href))
      return href;
    if (/^images\//.test(href) && href.indexOf("..") < 0) return href;
    return "#";
  };
  LL.safeSrc = function (src) {
    return /^images\//.test(src) && src.indexOf("..") < 0 ? src : "";
  };

  /**
   * A label that may break after each "_", ".", "/" or "-" (a <wbr> there): a long metric name
   * heads a narrow column of numbers on two lines instead of widening the table.
   * @param {string} text
   * @returns {(string | HTMLElement)[]}
   */
  LL.breakable = function (text) {
    var s = String(text);
    /** @type {(string | HTMLElement)[]} */
    var out = [];
    var start = 0;
    for (var i = 0; i < s.length - 1; i++) {
      if ("_./-".indexOf(s.charAt(i)) >= 0) {
        out.push(s.slice(start, i + 1), h("wbr", null));
        start = i + 1;
      }
    }
    out.push(s.slice(start));
    return out;
  };

  LL.clear = function (node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  };
  LL.main = function () {
    return document.getElementById("main");
  };

  /* ---------------------------------------------------------------- data files */
  /** @type {Record<string, Promise<any>>} */
  var pending = {};
  /* Tries of a data file that `labledger serve` answers 503 (it is building the site and says when
     to ask again, Retry-After): at most LOAD_TRIES, each after at most LOAD_WAIT_MAX seconds. */
  var LOAD_TRIES = 200;
  var LOAD_WAIT_MAX = 10;
  /**
   * Milliseconds to wait before asking for src again when a server answers it 503, else null (a
   * page from file://, another failure).
   * @param {string} src
   * @returns {Promise<number | null>}
   */
  function retryAfter(src) {
    if (!/^https?:$/.test(location.protocol) || typeof fetch === "undefined") return Promise.resolve(null);
    // eslint-disable-next-line no-restricted-syntax -- only under http(s): the status of a file labledger serve refused
    return fetch(src, { method: "HEAD", cache: "no-store", credentials: "same-origin" }).then(
      function (r) {
        if (r.status !== 503) return null;
        var after = Number(r.headers.get("Retry-After"));
        return Math.min(Math.max(after > 0 ? after : 3, 1), LOAD_WAIT_MAX) * 1000;
      },
      /** @returns {number | null} */
      function () {
        return null;
      }
    );
  }
  /** Load a data file with a <script> tag (works from file://); resolves to its payload. */
  LL.load = function (key, src) {
    if (Object.prototype.hasOwnProperty.call(window.LABLEDGER, key)) return Promise.resolve(window.LABLEDGER[key]);
    if (pending[key]) return pending[key];
    pending[key] = new Promise(function (resolve, reject) {
      var tries = 0;
      function attempt() {
        var s = document.createElement("script");
        s.src = src;
        s.async = true;
        s.onload = function () {
          if (Object.prototype.hasOwnProperty.call(window.LABLEDGER, key)) resolve(window.LABLEDGER[key]);
          else reject(new Error(src + " did not define " + key));
        };
        s.onerror = function () {
          s.remove();
          retryAfter(src).then(function (wait) {
            if (wait !== null && ++tries < LOAD_TRIES) {
              setTimeout(attempt, wait);
              return;
            }
            delete pending[key];
            reject(new Error("Could not load " + src + ". Is the site folder complete?"));
          });
        };
        document.head.appendChild(s);
      }
      attempt();
    });
    return pending[key];
  };
  /** @type {Record<string, Promise<any>>} */
  var unpacked = {};
  /**
   * The payload a packed data file holds ({"encoding": "gzip+base64", "data": ...}: site/output.py
   * packed_json), decompressed with the browser's DecompressionStream; any other payload as it is.
   * @param {string} key @param {any} payload
   */
  LL.unpack = function (key, payload) {
    if (!payload || payload.encoding !== "gzip+base64" || typeof payload.data !== "string")
      return Promise.resolve(payload);
    if (unpacked[key]) return unpacked[key];
    if (typeof DecompressionStream === "undefined")
      return Promise.reject(new Error("This browser cannot decompress the batch data (no DecompressionStream)."));
    var text = atob(payload.data);
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    unpacked[key] = new Response(stream).text().then(JSON.parse);
    return unpacked[key];
  };
  /** @param {unknown} id @param {string} [what] */
  function checkId(id, what) {
    if (typeof id !== "string" || !SAFE_ID.test(id))
      throw new Error("Not a valid " + (what || "run id") + ": " + JSON.stringify(id));
    return id;
  }
  /* ---------------------------------------------------------------- the packed catalog */
  /** The bytes of a base64 text. @param {string} text */
  function base64Bytes(text) {
    var native = /** @type {any} */ (Uint8Array).fromBase64;
    if (native) return native(text);
    var bin = atob(text),
      n = bin.length,
      out = new Uint8Array(n);
    for (var i = 0; i < n; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  /** @type {any} */
  var ABSENT = undefined;
  /** The n values of a packed column (labledger/site/packing.py); undefined where a row has no such key. */
  LL.unpackColumn = function (col, n) {
    var out = new Array(n),
      i;
    if ("c" in col) {
      for (i = 0; i < n; i++) out[i] = col.c;
    } else if (col.v) {
      out = col.v;
    } else if (col.f !== undefined) {
      var f = new Float64Array(base64Bytes(col.f).buffer);
      for (i = 0; i < n; i++) out[i] = f[i] !== f[i] ? null : f[i];
    } else {
      var bytes = base64Bytes(col.i).buffer;
      var idx = col.w === 1 ? new Uint8Array(bytes) : col.w === 2 ? new Uint16Array(bytes) : new Uint32Array(bytes);
      var table = col.d,
        m = table.length;
      for (i = 0; i < n; i++) out[i] = idx[i] < m ? table[idx[i]] : ABSENT;
    }
    return out;
  };
  /**
   * The catalog as the pages read it: runs as objects, query fields as one array per field
   * (fields.columns[j][i] is field j of run i). Reads the packed form and the older list form.
   */
  LL.unpackCatalog = function (cat) {
    if (!cat || cat.unpacked) return cat;
    /** @type {any} */
    var out = {},
      k;
    for (k in cat) if (Object.prototype.hasOwnProperty.call(cat, k)) out[k] = cat[k];
    var fields = cat.fields || { names: [], rows: [] };
    if (cat.packed) {
      var t = cat.runs,
        n = t.n,
        keys = t.keys,
        cols = t.cols.map(function (/** @type {PackedColumn} */ c) {
          return LL.unpackColumn(c, n);
        });
      var runs = new Array(n);
      for (var i = 0; i < n; i++) {
        /** @type {any} */
        var r = {};
        for (var j = 0; j < keys.length; j++) {
          var v = cols[j][i];
          if (v !== ABSENT) r[keys[j]] = v;
        }
        runs[i] = r;
      }
      out.runs = runs;
      out.fields = {
        names: fields.names,
        columns: fields.cols.map(function (/** @type {PackedColumn} */ c) {
          return LL.unpackColumn(c, fields.n);
        }),
      };
    } else {
      var rows = fields.rows || [];
      out.runs = cat.runs || [];
      out.fields = {
        names: fields.names || [],
        columns: (fields.names || []).map(function (/** @type {string} */ _, /** @type {number} */ j) {
          return rows.map(function (/** @type {any[]} */ row) {
            var v = row[j];
            return v === undefined ? null : v;
          });
        }),
      };
    }
    out.unpacked = true;
    return out;
  };
  /** Every query field name of a catalog (its head's `names`; a catalog of one file: its own). */
  LL.catalogNames = function (head) {
    return head.names || (head.fields && head.fields.names) || [];
  };
  /**
   * One part of the catalog (the head's newest runs, or a chunk: labledger/site/catalog.py) as the
   * pages read it, its query fields laid out by `names` (fields.columns[j][i]: field names[j] of the
   * part's run i; null where the part has no such field).
   */
  LL.catalogPart = function (payload, names) {
    var part = LL.unpackCatalog(payload),
      n = part.runs.length;
    /** @type {Record<string, any[]>} */
    var own = {};
    part.fields.names.forEach(function (/** @type {string} */ name, /** @type {number} */ j) {
      own[name] = part.fields.columns[j];
    });
    return {
      runs: part.runs,
      fields: {
        names: names,
        columns: names.map(function (name) {
          return own[name] || new Array(n).fill(null);
        }),
      },
    };
  };
  /** The catalog of the head's fields and the runs of `parts` (LL.catalogPart's, newest first). */
  LL.joinCatalog = function (head, parts) {
    /** @type {any} */
    var out = {},
      k;
    for (k in head)
      if (Object.prototype.hasOwnProperty.call(head, k) && k !== "runs" && k !== "fields" && k !== "packed")
        out[k] = head[k];
    var names = LL.catalogNames(head);
    out.runs = [].concat.apply(
      [],
      parts.map(function (p) {
        return p.runs;
      })
    );
    out.fields = {
      names: names,
      columns: names.map(function (/** @type {string} */ _, /** @type {number} */ j) {
        return [].concat.apply(
          [],
          parts.map(function (p) {
            return p.fields.columns[j];
          })
        );
      }),
    };
    out.unpacked = true;
    return out;
  };
  /** @type {Promise<any> | null} */
  var catalogPromise = null;
  LL.data = {
    /** The whole catalog: its head and every chunk. */
    catalog: function () {
      if (!catalogPromise)
        catalogPromise = LL.data.catalogHead().then(function (head) {
          var loads = [];
          for (var k = (head.chunks || []).length - 1; k >= 0; k--) loads.push(LL.data.catalogChunk(k));
          return Promise.all(loads).then(function (chunks) {
            var names = LL.catalogNames(head);
            var parts = [LL.catalogPart(head, names)].concat(
              chunks.map(function (c) {
                return LL.catalogPart(c, names);
              })
            );
            return LL.joinCatalog(head, parts);
          });
        });
      return catalogPromise;
    },
    catalogHead: function () {
      return LL.load("catalog", "data/catalog.js");
    },
    catalogChunk: function (k) {
      if (!(k >= 0 && k === Math.floor(k))) throw new Error("bad catalog chunk");
      return LL.load("catalog/" + k, "data/catalog/" + k + ".js");
    },
    compare: function () {
      return LL.load("compare", "data/compare.js");
    },
    lineage: function () {
      return LL.load("lineage", "data/lineage.js");
    },
    run: function (id) {
      checkId(id);
      return LL.load("runs/" + id, "data/runs/" + id + ".js");
    },
    toc: function (id) {
      checkId(id);
      return LL.load("batches/" + id + "/toc", "data/batches/" + id + "/toc.js");
    },
    loss: function (id) {
      checkId(id);
      return LL.load("batches/" + id + "/loss", "data/batches/" + id + "/loss.js");
    },
    chunk: function (id, i) {
      checkId(id);
      if (!(i >= 0 && i === Math.floor(i))) throw new Error("bad chunk index");
      var key = "batches/" + id + "/" + i;
      return LL.load(key, "data/" + key + ".js").then(function (payload) {
        return LL.unpack(key, payload);
      });
    },
    evaluation: function (id, name) {
      checkId(id);
      checkId(name, "evaluation name");
      return LL.load("evals/" + id + "/" + name, "data/evals/" + id + "/" + name + ".js");
    },
    logits: function (id, name) {
      checkId(id);
      checkId(name, "evaluation name");
      return LL.load("evals/" + id + "/" + name + "/logits", "data/evals/" + id + "/" + name + ".logits.js");
    },
    /**
     * The summaries of scalar k of a run (site/curves.py): entry k of the run's curve file
     * data/curves/<run>.js, or, when that entry says they have their own file (a long run),
     * data/curves/<run>/<k>.js.
     */
    curve: function (id, k) {
      checkId(id);
      if (!(k >= 0 && k === Math.floor(k))) throw new Error("bad scalar index");
      return LL.load("curves/" + id, "data/curves/" + id + ".js").then(function (/** @type {CurveFile} */ file) {
        var entry = (file.scalars || [])[k];
        if (!entry) throw new Error("data/curves/" + id + ".js has no scalar " + k);
        if (!entry.own) return entry;
        return LL.load("curves/" + id + "/" + k, "data/curves/" + id + "/" + k + ".js");
      });
    },
    curveChunk: function (id, k, level, c) {
      checkId(id);
      [k, level, c].forEach(function (i) {
        if (!(i >= 0 && i === Math.floor(i))) throw new Error("bad chunk index");
      });
      var key = "curves/" + id + "/" + k + "/" + level + "-" + c;
      return LL.load(key, "data/" + key + ".js");
    },
    diffSide: function (id) {
      checkId(id);
      return LL.load("diff/" + id, "data/diff/" + id + ".js");
    },
    diffPaired: function (id) {
      checkId(id);
      return LL.load("diff/" + id + "/paired", "data/diff/" + id + ".paired.js");
    },
    test: function (id, name) {
      checkId(id);
      checkId(name, "test name");
      return LL.load("tests/" + id + "/" + name, "data/tests/" + id + "/" + name + ".js");
    },
    testPart: function (id, name, part) {
      checkId(id);
      checkId(name, "test name");
      if (!SAFE_PART.test(part)) throw new Error("bad part name");
      return LL.load("tests/" + id + "/" + name + "/" + part, "data/tests/" + id + "/" + name + "/" + part + ".js");
    },
  };
  /** The run entry of the catalog, or an error naming the id (only catalogued runs are loaded). */
  LL.findRun = function (catalog, id) {
    var run = (catalog.runs || []).filter(function (r) {
      return r.id === id;
    })[0];
    if (!run)
      throw new Error("This site has no run " + JSON.stringify(id || "") + ". Open the run list to choose one.");
    if (run.unreadable)
      throw new Error("Run " + JSON.stringify(id) + " could not be read when this site was built: " + run.unreadable);
    return run;
  };
  LL.imageSrc = function (runId, ref) {
    if (!SAFE_ID.test(runId) || !SAFE_REF.test(ref)) return "";
    return "images/" + runId + "/" + ref.split("/").map(encodeURIComponent).join("/");
  };

  /* ---------------------------------------------------------------- location hash */
  LL.params = function () {
    /** @type {Record<string, string>} */
    var out = {};
    new URLSearchParams(location.hash.replace(/^#/, "")).forEach(function (v, k) {
      out[k] = v;
    });
    return out;
  };
  LL.query = function (params) {
    var q = new URLSearchParams();
    Object.keys(params).forEach(function (k) {
      if (params[k] !== null && params[k] !== undefined && params[k] !== "") q.set(k, String(params[k]));
    });
    return q.toString();
  };
  LL.link = function (page, params) {
    var q = LL.query(params || {});
    return page + (q ? "#" + q : "");
  };
  LL.setHash = function (params) {
    var q = LL.query(params);
    history.replaceState(null, "", location.pathname + location.search + (q ? "#" + q : ""));
  };

  /* ---------------------------------------------------------------- formatting */
  /**
   * @param {unknown} v
   * @returns {v is number}
   */
  function isNum(v) {
    return typeof v === "number" && isFinite(v);
  }
  LL.isNum = isNum;
  LL.fmt = {
    /** Short, readable number (the exact value is in title/hover). */
    num: function (v, digits) {
      if (v === null || v === undefined) return "–";
      if (typeof v !== "number") return String(v);
      if (!isFinite(v)) return String(v);
      if (Number.isInteger(v))
        // toLocaleString builds a formatter per call (35 ms of the 10,000-run catalog's first paint)
        return Math.abs(v) < 1e21 ? String(v).replace(/\B(?=(\d{3})+(?!\d))/g, ",") : v.toLocaleString("en-US");
      var a = Math.abs(v);
      if (a !== 0 && (a < 1e-6 || a >= 1e9)) return v.toExponential((digits || 4) - 1);
      return String(Number(v.toPrecision(digits || 4)));
    },
    /**
     * A p-value, the one rule shared with the CLI: null -> "–"; below 0.001 -> "< 0.001"; else two
     * significant digits without exponent (0.0509 -> "0.051", 0.0012 -> "0.0012", 1 -> "1.0").
     * @param {number | null | undefined} p
     */
    p: function (p) {
      if (!isNum(p)) return "–";
      if (p < 0.001) return "< 0.001";
      return p.toPrecision(2);
    },
    /**
     * The label of a stored interval level: 0.9 -> "90% CI", 0.975 -> "97.5% CI".
     * @param {number | null | undefined} level
     */
    ciLabel: function (level) {
      return isNum(level) ? String(Number((100 * level).toPrecision(4))) + "% CI" : "CI";
    },
    /**
     * Decimals that show `v` with `digits` significant digits (0 to 10).
     * @param {number} v
     * @param {number} [digits]
     */
    decimals: function (v, digits) {
      var a = Math.abs(v);
      if (!isFinite(a) || a === 0) return (digits || 4) - 1;
      return Math.max(0, Math.min(10, (digits || 4) - 1 - Math.floor(Math.log10(a))));
    },
    /**
     * A value and its interval with the same number of decimals (so that they read together):
     * {value: "0.001671", ci: "[-0.000279, 0.003900]"}. `signed` puts "+" before positive numbers.
     * @param {number | null | undefined} value
     * @param {number | null | undefined} lo
     * @param {number | null | undefined} hi
     * `decimals` fixes the number of decimals (a column or row of a table shares them).
     * @param {{digits?: number, decimals?: number, signed?: boolean}} [opts]
     * @returns {{value: string, ci: string}}
     */
    interval: function (value, lo, hi, opts) {
      var o = opts || {};
      var ref =
        isNum(value) && value !== 0 ? value : Math.max(isNum(lo) ? Math.abs(lo) : 0, isNum(hi) ? Math.abs(hi) : 0);
      var d = isNum(o.decimals) ? o.decimals : LL.fmt.decimals(ref, o.digits || 4);
      /** @param {number | null | undefined} x */
      function f(x) {
        if (!isNum(x)) return "–";
        var t = x.toFixed(d);
        if (Number(t) === 0) t = (0).toFixed(d);
        return o.signed && Number(t) > 0 ? "+" + t : t.replace(/^-/, "−");
      }
      return { value: f(value), ci: isNum(lo) && isNum(hi) ? "[" + f(lo) + ", " + f(hi) + "]" : "–" };
    },
    /**
     * Decimals shared by a column or row: those of its largest magnitude at `digits` significant digits.
     * @param {(number | null | undefined)[]} values
     * @param {number} [digits]
     */
    sharedDecimals: function (values, digits) {
      var big = 0;
      values.forEach(function (v) {
        if (isNum(v)) big = Math.max(big, Math.abs(v));
      });
      return LL.fmt.decimals(big, digits);
    },
    /** The exact stored value (JavaScript prints the shortest text that reads back the same). */
    exact: function (v) {
      return v === null || v === undefined ? "–" : String(v);
    },
    pct: function (v) {
      return isNum(v) ? (100 * v).toFixed(1) + "%" : "–";
    },
    time: function (unix) {
      if (!isNum(unix)) return "–";
      var d = new Date(unix * 1000);
      /** @param {number} n */
      function p(n) {
        return (n < 10 ? "0" : "") + n;
      }
      var off = -d.getTimezoneOffset();
      var sign = off >= 0 ? "+" : "-";
      off = Math.abs(off);
      return (
        d.getFullYear() +
        "-" +
        p(d.getMonth() + 1) +
        "-" +
        p(d.getDate()) +
        " " +
        p(d.getHours()) +
        ":" +
        p(d.getMinutes()) +
        ":" +
        p(d.getSeconds()) +
        " UTC" +
        sign +
        p(Math.floor(off / 60)) +
        ":" +
        p(off % 60)
      );
    },
    duration: function (s) {
      if (!isNum(s)) return "–";
      if (s < 60) return s.toFixed(1) + " s";
      var m = Math.floor(s / 60),
        hr = Math.floor(m / 60);
      if (hr > 0) return hr + " h " + (m % 60) + " min";
      return m + " min " + Math.round(s % 60) + " s";
    },
    bytes: function (n) {
      if (!isNum(n)) return "–";
      var u = ["B", "KB", "MB", "GB", "TB"],
        i = 0;
      while (n >= 1024 && i < u.length - 1) {
        n /= 1024;
        i++;
      }
      return (i === 0 ? n : n.toFixed(1)) + " " + u[i];
    },
  };
  /** A number as text with its exact value on hover. */
  LL.numCell = function (v) {
    if (typeof v !== "number") return LL.valueText(v);
    return h("span", { class: "num", title: LL.fmt.exact(v) }, LL.fmt.num(v));
  };
  LL.valueText = function (v) {
    if (v === null || v === undefined) return "–";
    if (typeof v === "string") return v;
    if (typeof v === "number") return LL.fmt.num(v);
    return JSON.stringify(v);
  };

  /**
   * A value with its interval, rounded alike; exact numbers and the level on hover.
   * @param {Interval} m
   * @param {number | null | undefined} [level] the stored level (m.ci when the entry has one)
   * @param {number} [decimals] decimals shared with the rest of the column
   */
  LL.intervalView = function (m, level, decimals) {
    var lv = isNum(m.ci) ? m.ci : level;
    var t = LL.fmt.interval(m.value, m.ci_low, m.ci_high, { decimals: decimals });
    return h(
      "span",
      {
        class: "num",
        title:
          "exact " +
          LL.fmt.exact(m.value) +
          (isNum(m.ci_low) ? "; " + LL.fmt.ciLabel(lv) + " [" + m.ci_low + ", " + m.ci_high + "]" : ""),
      },
      t.value,
      isNum(m.ci_low) ? h("small", { class: "muted" }, " " + t.ci) : null
    );
  };

  /**
   * A confusion matrix (rows: gold, columns: prediction), labels in reading order.
   * @param {ConfusionMatrix} cm
   * @param {string | null} [note]
   */
  LL.matrixView = function (cm, note) {
    var lab = cm.labels.map(String);
    var order = LL.labelOrder(lab).map(function (l) {
      return lab.indexOf(l);
    });
    var mat = order.map(function (i) {
      return order.map(function (j) {
        return cm.matrix[i][j];
      });
    });
    lab = order.map(function (i) {
      return lab[i];
    });
    var table = h(
      "table",
      { class: "data confusion" },
      h("caption", null, note || "rows: " + cm.rows + ", columns: " + cm.columns + "; shading: share of the row"),
      h(
        "thead",
        null,
        h(
          "tr",
          null,
          h("th", { scope: "col" }, cm.rows + " \\ " + cm.columns),
          lab.map(function (l) {
            return h("th", { scope: "col", class: "n" }, l);
          }),
          h("th", { scope: "col", class: "n" }, "total")
        )
      ),
      h(
        "tbody",
        null,
        mat.map(function (row, i) {
          var total = row.reduce(function (a, b) {
            return a + b;
          }, 0);
          return h(
            "tr",
            null,
            h("th", { scope: "row" }, lab[i]),
            row.map(function (v, j) {
              var share = total ? v / total : 0;
              return h(
                "td",
                {
                  class: "n",
                  title: v + " of " + total + " (" + LL.fmt.pct(share) + " of the row)",
                  style: {
                    background: "rgba(0,114,178," + (0.08 + 0.6 * share).toFixed(3) + ")",
                    fontWeight: i === j ? "700" : "400",
                  },
                },
                LL.fmt.num(v)
              );
            }),
            h("td", { class: "n muted" }, LL.fmt.num(total))
          );
        })
      )
    );
    return h("div", { class: "scroll" }, table);
  };

  /**
   * The table of a comparison document: per task and metric a, b, a − b with its CI, the p-value
   * and McNemar's test where there is one.
   * @param {ComparisonView} doc
   */
  LL.comparisonTable = function (doc) {
    /** @type {{task: ComparisonTaskView, m: ComparisonMetric}[]} */
    var rows = [];
    doc.tasks.forEach(function (t) {
      t.metrics.forEach(function (m) {
        rows.push({ task: t, m: m });
      });
    });
    var ciLabel = LL.fmt.ciLabel(doc.ci);
    var body = h(
      "tbody",
      null,
      rows.length
        ? rows.map(function (x) {
            var m = x.m,
              t = x.task,
              mc = m.mcnemar;
            var d = LL.fmt.interval(m.diff, m.ci_low, m.ci_high, { signed: true });
            return h(
              "tr",
              null,
              h("td", null, t.task),
              h(
                "td",
                { title: (m.key || m.metric) + (m.definition ? ": " + m.definition : "") },
                m.label || m.key || m.metric
              ),
              h("td", { class: "n", title: LL.fmt.exact(m.a) }, LL.fmt.interval(m.a, null, null).value),
              h("td", { class: "n", title: LL.fmt.exact(m.b) }, LL.fmt.interval(m.b, null, null).value),
              h("td", { class: "n diff", title: isNum(m.diff) ? "a − b = " + LL.fmt.exact(m.diff) : null }, d.value),
              h("td", { class: "n", title: ciTitle(m, ciLabel) }, m.interval_note || d.ci),
              h("td", { class: "n", title: pTitle(m, doc.adjust) }, pText(m, doc.adjust)),
              h(
                "td",
                {
                  class: "n",
                  title: mc
                    ? (mc.method || "McNemar") +
                      "; b = " +
                      mc.b +
                      ", c = " +
                      mc.c +
                      (isNum(mc.p_value) ? "; p = " + LL.fmt.exact(mc.p_value) : "")
                    : "not applicable",
                },
                mc ? LL.fmt.p(mc.p_value) + " (b=" + mc.b + ", c=" + mc.c + ")" : "–"
              ),
              h("td", { class: "n" }, LL.numCell(isNum(m.n) ? m.n : t.n)),
              h("td", null, t.paired === true ? "paired (same items)" : t.paired === false ? "unpaired" : "–")
            );
          })
        : h("tr", null, h("td", { colspan: 10, class: "muted" }, "This document has no metric entries."))
    );
    var notes = Array.from(
      new Set(
        rows
          .map(function (x) {
            return x.m.warning || "";
          })
          .filter(Boolean)
      )
    );
    var table = h(
      "table",
      { class: "data comparison" },
      h(
        "thead",
        null,
        h(
          "tr",
          null,
          [
            "Task",
            "Metric",
            "a",
            "b",
            "Diff (a − b)",
            ciLabel + " of diff",
            "p (bootstrap)",
            "McNemar p",
            "n",
            "Pairing",
          ].map(function (c, i) {
            return h("th", { scope: "col", class: i >= 2 && i <= 8 ? "n" : null }, c);
          })
        )
      ),
      body
    );
    return h(
      "div",
      { class: "scroll" },
      table,
      notes.map(function (w) {
        return h("p", { class: "stat-warning muted" }, "Warning: " + w);
      })
    );
  };

  /** @param {ComparisonMetric} m @param {string} ciLabel */
  function ciTitle(m, ciLabel) {
    var t = isNum(m.ci_low) ? ciLabel + " [" + m.ci_low + ", " + m.ci_high + "]" : "";
    var an = m.analytic;
    if (an && isNum(an.low) && isNum(an.high))
      t += (t ? "; " : "") + "analytic [" + LL.fmt.exact(an.low) + ", " + LL.fmt.exact(an.high) + "] — " + an.method;
    if (m.interval_note) t += (t ? "; " : "") + "no bootstrap interval: " + m.interval_note;
    return t || null;
  }
  /** @param {ComparisonMetric} m @param {string | null | undefined} adjust */
  function pTitle(m, adjust) {
    if (!isNum(m.p_value)) return null;
    var t = LL.fmt.exact(m.p_value) + (m.method ? " — " + m.method : "");
    if (isNum(m.p_adjusted) && adjust && adjust !== "none")
      t += "; adjusted (" + adjust + "): " + LL.fmt.exact(m.p_adjusted);
    if (isNum(m.mde)) t += "; minimum detectable effect at 80% power: " + LL.fmt.exact(m.mde);
    return t;
  }
  /** The bootstrap p, its adjusted value and "n.s., MDE x pp" when not significant. @param {ComparisonMetric} m @param {string | null | undefined} adjust */
  function pText(m, adjust) {
    var text = LL.fmt.p(m.p_value);
    var adjusted = isNum(m.p_adjusted) && adjust && adjust !== "none";
    if (adjusted) text += " (adj. " + LL.fmt.p(m.p_adjusted) + ")";
    var p = adjusted ? m.p_adjusted : m.p_value;
    if (isNum(p) && p >= 0.05) text += " n.s." + (isNum(m.mde) ? " (MDE " + (100 * m.mde).toFixed(1) + " pp)" : "");
    return text;
  }

  /** Labels in reading order: numerically when every label is a number ("-1", "0", "+1"). */
  LL.labelOrder = function (keys) {
    var uniq = Array.from(new Set(keys.map(String)));
    var nums = uniq.map(function (k) {
      return k.trim() === "" ? NaN : Number(k);
    });
    if (
      uniq.length &&
      nums.every(function (n) {
        return isFinite(n);
      })
    ) {
      return uniq
        .map(function (k, i) {
          return /** @type {[number, string]} */ ([nums[i], k]);
        })
        .sort(function (a, b) {
          return a[0] - b[0] || (a[1] < b[1] ? -1 : 1);
        })
        .map(function (p) {
          return p[1];
        });
    }
    return uniq.sort();
  };

  /* Viridis (colour-blind safe, monotone in lightness), 9 stops. */
  var VIRIDIS = [
    [68, 1, 84],
    [71, 44, 122],
    [59, 81, 139],
    [44, 113, 142],
    [33, 144, 141],
    [39, 173, 129],
    [92, 200, 99],
    [170, 220, 50],
    [253, 231, 37],
  ];
  LL.viridis = function (t) {
    t = Math.max(0, Math.min(1, isNum(t) ? t : 0));
    var x = t * (VIRIDIS.length - 1),
      i = Math.min(VIRIDIS.length - 2, Math.floor(x)),
      f = x - i;
    var a = VIRIDIS[i],
      b = VIRIDIS[i + 1];
    return (
      "rgb(" +
      [0, 1, 2]
        .map(function (j) {
          return Math.round(a[j] + f * (b[j] - a[j]));
        })
        .join(",") +
      ")"
    );
  };
  LL.inkOn = function (t) {
    return t > 0.55 ? "#111" : "#fff";
  };
  /* Okabe-Ito palette: distinguishable with the common colour-vision deficiencies. */
  LL.palette = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442"];

  /* ---------------------------------------------------------------- components */
  LL.section = function (title, id) {
    var sec = h(
      "section",
      { class: "card", id: id || null, "aria-labelledby": id ? id + "-h" : null },
      h("h2", { id: id ? id + "-h" : null }, title)
    );
    for (var i = 2; i < arguments.length; i++) append(sec, arguments[i]);
    return sec;
  };
  LL.callout = function (kind, text) {
    return h("p", { class: "callout " + kind, role: kind === "error" ? "alert" : null }, text);
  };
  LL.badge = function (text, kind) {
    return h("span", { class: "badge " + (kind || "") }, text);
  };
  LL.statusBadge = function (status) {
    return LL.badge(status || "unknown", "status-" + (status || "unknown"));
  };
  LL.chips = function (items) {
    return h(
      "span",
      { class: "chips" },
      (items || []).map(function (t) {
        return h("span", { class: "chip" }, t);
      })
    );
  };

  /** Key/value table of a flat object; nested values as a JSON tree. */
  LL.kv = function (obj, opts) {
    opts = opts || {};
    var rows = Object.keys(obj || {}).map(function (k) {
      var v = obj[k];
      var cell =
        v !== null && typeof v === "object"
          ? LL.jsonTree(v, 1)
          : typeof v === "number"
            ? LL.fmt.exact(v)
            : LL.valueText(v);
      return h("tr", null, h("th", { scope: "row" }, k), h("td", null, cell));
    });
    return h(
      "div",
      { class: "scroll" },
      h("table", { class: "kv" + (opts.compact ? " compact" : "") }, h("tbody", null, rows))
    );
  };

  /** A collapsible tree of any JSON value, as text. */
  LL.jsonTree = function (value, openDepth, depth) {
    depth = depth || 0;
    if (value === null || typeof value !== "object") {
      return h(
        "span",
        { class: "jv jv-" + (value === null ? "null" : typeof value) },
        typeof value === "string" ? JSON.stringify(value) : String(value)
      );
    }
    var isArr = Array.isArray(value);
    var keys = isArr
      ? value.map(function (/** @type {unknown} */ _, /** @type {number} */ i) {
          return i;
        })
      : Object.keys(value);
    var summary = h("summary", null, isArr ? "[" + keys.length + " items]" : "{" + keys.length + " keys}");
    var det = h("details", { class: "jtree", open: depth < (openDepth === undefined ? 1 : openDepth) }, summary);
    var shown = keys.slice(0, 500);
    var list = h(
      "ul",
      null,
      shown.map(function (/** @type {string | number} */ k) {
        return h("li", null, h("span", { class: "jk" }, String(k)), ": ", LL.jsonTree(value[k], openDepth, depth + 1));
      })
    );
    if (keys.length > shown.length)
      list.appendChild(h("li", { class: "muted" }, "… " + (keys.length - shown.length) + " more"));
    det.appendChild(list);
    return det;
  };

  var collator = new Intl.Collator("en", { numeric: true });
  /** @param {any} v */
  function missing(v) {
    return v === null || v === undefined || (typeof v === "number" && isNaN(v));
  }
  /**
   * Two cells' order: numbers by value, text in natural order ("run-2" before "run-10"); a missing
   * value (null, undefined, NaN) after every other.
   * @param {any} a @param {any} b
   */
  LL.cellCompare = function (a, b) {
    if (a === b) return 0;
    if (missing(a)) return missing(b) ? 0 : 1;
    if (missing(b)) return -1;
    if (typeof a === "number" && typeof b === "number") return a - b;
    return collator.compare(String(a), String(b));
  };
  /**
   * A row's value in a column: its `value(row)`, else `row[key]`.
   * @param {TableColumn<any>} c @param {any} r
   */
  LL.cellValue = function (c, r) {
    return c.value ? c.value(r) : r[c.key];
  };
  /**
   * Rows sorted by a column (its `value(row)` or `row[key]`) in direction dir (1 or -1): stable, and
   * missing values last in either direction.
   * @param {any[]} rows @param {TableColumn<any>} c @param {number} dir
   */
  LL.sortRows = function (rows, c, dir) {
    var keyed = rows.map(function (r, i) {
      return /** @type {[any, number, any]} */ ([LL.cellValue(c, r), i, r]);
    });
    keyed.sort(function (a, b) {
      var d = LL.cellCompare(a[0], b[0]);
      if (d !== 0 && (missing(a[0]) || missing(b[0]))) return d;
      return d * dir || a[1] - b[1];
    });
    return keyed.map(function (p) {
      return p[2];
    });
  };
  /**
   * A sortable table's header row into thead: a button per sortable column; a click calls
   * onSort with the new sort (the same column again reverses it; numbers start descending).
   * @param {HTMLElement} thead @param {TableColumn<any>[]} cols @param {{key: string, dir: number} | null} sort
   * @param {(sort: {key: string, dir: number}) => void} onSort @param {boolean} [sortable]
   */
  LL.sortHeader = function (thead, cols, sort, onSort, sortable) {
    LL.clear(thead);
    thead.appendChild(
      h(
        "tr",
        null,
        cols.map(function (c) {
          var dir = sort && sort.key === c.key ? sort.dir : null;
          var still = c.sortable === false || sortable === false;
          var label = c.wrap ? LL.breakable(c.label) : c.label;
          return h(
            "th",
            {
              scope: "col",
              class: (c.num ? "n " : "") + (c.wrap ? "wrap " : "") + (c.className || ""),
              title: c.title || null,
              "aria-sort": dir ? (dir > 0 ? "ascending" : "descending") : null,
            },
            still
              ? c.head
                ? c.head()
                : label
              : h(
                  "button",
                  {
                    class: "sort",
                    type: "button",
                    onclick: function () {
                      onSort({ key: c.key, dir: sort && sort.key === c.key ? -sort.dir : c.num ? -1 : 1 });
                    },
                  },
                  label,
                  h("span", { class: "arrow", "aria-hidden": "true" }, dir ? (dir > 0 ? " ▲" : " ▼") : "")
                )
          );
        })
      )
    );
  };

  /**
   * A sortable table. columns: [{key, label, render(row, i), value(row), num, title, className}].
   * opts: rows, sort: {key, dir}, caption, pageSize, rowClass(row), onRow(row, tr), empty.
   */
  LL.table = function (opts) {
    var cols = opts.columns,
      rows = opts.rows.slice(),
      sort = opts.sort || null,
      page = 0;
    var pageSize = opts.pageSize || 0;
    var wrap = /** @type {TableWrap} */ (/** @type {unknown} */ (h("div", { class: "scroll table-wrap" })));
    var table = h("table", {
      class: "data" + (opts.className ? " " + opts.className : "") + (opts.stack ? " stack" : ""),
    });
    if (opts.caption) table.appendChild(h("caption", null, opts.caption));
    var thead = h("thead"),
      tbody = h("tbody"),
      pager = h("div", { class: "pager" });
    table.appendChild(thead);
    table.appendChild(tbody);
    wrap.appendChild(table);
    wrap.appendChild(pager);
    function header() {
      LL.sortHeader(
        thead,
        cols,
        sort,
        function (next) {
          sort = next;
          page = 0;
          draw();
          if (opts.onSort) opts.onSort(sort);
        },
        opts.sortable
      );
    }
    function draw() {
      header();
      var data = rows.slice();
      if (sort) {
        var c = cols.filter(function (x) {
          return x.key === /** @type {any} */ (sort).key;
        })[0];
        if (c) data = LL.sortRows(data, c, sort.dir);
      }
      LL.clear(tbody);
      var start = pageSize ? page * pageSize : 0,
        end = pageSize ? Math.min(data.length, start + pageSize) : data.length;
      if (!data.length)
        tbody.appendChild(
          h("tr", null, h("td", { colspan: cols.length, class: "muted" }, opts.empty || "Nothing to show."))
        );
      for (var i = start; i < end; i++) {
        /** @type {any} */
        var r = data[i];
        var tr = h(
          "tr",
          { class: opts.rowClass ? opts.rowClass(r) : null },
          cols.map(function (c) {
            var out = c.render ? c.render(r, i) : c.num ? LL.numCell(r[c.key]) : LL.valueText(r[c.key]);
            return h("td", { class: (c.num ? "n " : "") + (c.className || ""), "data-label": c.label || null }, out);
          })
        );
        if (opts.onRow) opts.onRow(r, tr);
        tbody.appendChild(tr);
      }
      LL.clear(pager);
      if (pageSize && data.length > pageSize) {
        var pages = Math.ceil(data.length / pageSize);
        pager.appendChild(
          h(
            "button",
            {
              type: "button",
              disabled: page === 0,
              onclick: function () {
                page--;
                draw();
              },
            },
            "‹ Previous"
          )
        );
        pager.appendChild(
          h(
            "span",
            null,
            " rows " +
              (start + 1).toLocaleString("en-US") +
              "–" +
              end.toLocaleString("en-US") +
              " of " +
              data.length.toLocaleString("en-US") +
              " "
          )
        );
        pager.appendChild(
          h(
            "button",
            {
              type: "button",
              disabled: page >= pages - 1,
              onclick: function () {
                page++;
                draw();
              },
            },
            "Next ›"
          )
        );
      }
    }
    draw();
    wrap.redraw = function (newRows) {
      if (newRows) rows = newRows.slice();
      draw();
    };
    return wrap;
  };

  /** Probabilities by label as bars, in reading order (keys are labels: order is never assumed). */
  LL.probBars = function (probs, gold, pred, order) {
    if (!probs || typeof probs !== "object") return LL.valueText(probs);
    var keys =
      order && order.length
        ? order.filter(function (k) {
            return k in probs;
          })
        : LL.labelOrder(Object.keys(probs));
    Object.keys(probs).forEach(function (k) {
      if (keys.indexOf(k) < 0) keys.push(k);
    });
    return h(
      "div",
      { class: "probs" },
      keys.map(function (k) {
        var p = probs[k];
        var w = isNum(p) ? Math.max(0, Math.min(1, p)) : 0;
        var cls = "prob" + (String(gold) === k ? " gold" : "") + (String(pred) === k ? " pred" : "");
        return h(
          "div",
          { class: cls, title: k + ": " + LL.fmt.exact(p) },
          h("span", { class: "plabel" }, k),
          h("span", { class: "pbar" }, h("span", { class: "pfill", style: { width: (100 * w).toFixed(1) + "%" } })),
          h("span", { class: "pval" }, isNum(p) ? p.toFixed(3) : LL.valueText(p))
        );
      })
    );
  };

  /** Render a sample input: image references as images, text as text, objects field by field. */
  LL.inputView = function (value, images, runId) {
    if (typeof value === "string") {
      if (images && images.has(value)) {
        var src = LL.imageSrc(runId, value);
        if (src)
          return h(
            "figure",
            { class: "thumb" },
            h("img", { src: src, alt: "image " + value }),
            h("figcaption", null, value)
          );
      }
      return h("span", { class: "text" }, value);
    }
    if (value && typeof value === "object" && !Array.isArray(value)) {
      return h(
        "div",
        { class: "input-fields" },
        Object.keys(value).map(function (k) {
          return h(
            "div",
            { class: "ifield" },
            h("span", { class: "ik" }, k),
            " ",
            LL.inputView(value[k], images, runId)
          );
        })
      );
    }
    if (
      Array.isArray(value) &&
      value.length <= 8 &&
      value.every(function (v) {
        return typeof v === "string";
      })
    ) {
      return h(
        "div",
        { class: "input-fields" },
        value.map(function (v) {
          return LL.inputView(v, images, runId);
        })
      );
    }
    if (value === undefined) return h("span", { class: "muted" }, "–");
    return h("code", { class: "json" }, JSON.stringify(value));
  };

  /* ---------------------------------------------------------------- page chrome */
  LL.crumbs = function (items) {
    var nav = document.getElementById("crumbs");
    LL.clear(nav);
    var ol = h("ol");
    items.forEach(function (it, i) {
      var last = i === items.length - 1;
      ol.appendChild(
        h(
          "li",
          null,
          it.href && !last
            ? h("a", { href: it.href }, it.label)
            : h("span", { "aria-current": last ? "page" : null }, it.label)
        )
      );
    });
    nav.appendChild(ol);
  };
  LL.title = function (text) {
    document.title = text + " · labledger";
  };
  LL.fail = function (err) {
    var main = LL.main();
    var loading = document.getElementById("loading");
    if (loading) loading.remove();
    main.appendChild(LL.callout("error", err && err.message ? err.message : String(err)));
    if (window.console && err && err.stack) console.warn(err.stack);
  };
  /** The footer says how the page is opened: from disk, or served (by labledger serve). */
  LL.footer = function () {
    var how = document.getElementById("foot-how");
    if (!how || !/^https?:$/.test(location.protocol)) return;
    how.textContent = "Served by labledger serve at " + location.host + "; the same files also open from disk.";
  };
  /** Run a page's start function once the DOM is ready; errors show on the page. */
  LL.start = function (fn) {
    function go() {
      LL.footer();
      Promise.resolve()
        .then(fn)
        .then(function () {
          var loading = document.getElementById("loading");
          if (loading) loading.remove();
          // When the page became useful and which data files it had read by then (for bench/site.py).
          LL.readyAt = performance.now();
          LL.readyKeys = Object.keys(window.LABLEDGER);
          document.body.setAttribute("data-ready", "1");
        })
        .catch(LL.fail);
    }
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", go);
    else go();
  };
  /** True when a key event comes from a text field (page shortcuts then stay out of the way). */
  LL.typing = function (ev) {
    var t = /** @type {HTMLElement | null} */ (ev.target);
    return !!t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
  };
})();
