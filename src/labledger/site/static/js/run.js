// @ts-check
/* Run page: config, curves of every scalar, microbatch loss, trainer history, validation per epoch
   with the selected epoch, checkpoints, notes, files, and links to evaluations and batches. */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h;
  var SMOOTHING = [0, 0.6, 0.8, 0.9, 0.95, 0.99];

  /** A header fact; `key` names its value (`data-fact`) for a live page to update. */
  function fact(k, v, key) {
    return h(
      "div",
      { class: "fact" },
      h("span", { class: "fk" }, k),
      h("span", key ? { class: "fv", "data-fact": key } : { class: "fv" }, v)
    );
  }

  function header(run) {
    var meta = run.meta || {},
      git = meta.git || {};
    return [
      h("h1", null, run.name, " ", h("span", { id: "run-status" }, LL.statusBadge(run.status))),
      h("p", { class: "sub mono" }, run.id),
      h(
        "div",
        { class: "facts" },
        fact("Group", run.group || "–"),
        fact("Tags", (run.tags || []).length ? LL.chips(run.tags) : "–"),
        fact("Started", LL.fmt.time(run.started)),
        fact("Ended", LL.fmt.time(run.ended), "ended"),
        fact("Duration", LL.fmt.duration(run.duration), "duration"),
        fact("Steps", LL.fmt.num(run.steps), "steps"),
        fact("Host", meta.host || "–"),
        fact("Git", git.commit ? String(git.commit).slice(0, 12) + (git.dirty ? " (dirty)" : "") : "–")
      ),
      startedAs(run.started_as),
      run.error ? LL.callout("error", "Error: " + run.error) : null,
    ];
  }

  /**
   * How the run was started: its command line and the folder it ran in, paths shortened by the
   * build (relative to the folder holding the ledger, else "…/" and the last part), so a mailed
   * site carries no machine path; null when the run did not record its command.
   * @param {{command: string, cwd: string | null} | null | undefined} started
   */
  function startedAs(started) {
    if (!started) return null;
    var cwd = started.cwd;
    return h(
      "p",
      {
        class: "started-as",
        id: "started-as",
        title:
          "Paths relative to the folder holding the ledger (…/ and the last part for others); run.json has them whole.",
      },
      h("span", { class: "fk" }, "Started as"),
      " ",
      h("code", null, started.command),
      !cwd
        ? null
        : cwd === "."
          ? " in the folder holding the ledger"
          : [" in ", h("code", null, cwd), cwd.indexOf("…/") === 0 ? "" : " (under the folder holding the ledger)"]
    );
  }

  /** Buckets shown at once on a chart (the top level's at most; a zoom loads the finest level with no more). */
  var TOP = 2000;

  /** A record's value of a scalar as the site stores it (a non-finite number or null: missing). */
  function valueOf(v) {
    return typeof v === "number" && isFinite(v) ? v : null;
  }

  /** A logged record as a bucket of one step (what a live page appends). */
  function stepRow(step, v) {
    var y = valueOf(v);
    return { b: step, w: 1, n: y === null ? 0 : 1, mean: y, min: y, max: y, last: y, minfirst: 1 };
  }

  /**
   * A chart's points from bucket rows: each bucket through its min and its max in the order they
   * came (a bucket of one value: that value at its step), so a spike is never dropped.
   * @returns {{x: number[], y: Num[], rows: any[]}}
   */
  function lineOf(rows) {
    var x = [],
      y = [],
      at = [];
    rows.forEach(function (r) {
      var s = r.b * r.w;
      if (r.n > 1 && r.min !== r.max) {
        x.push(s, s + r.w / 2);
        y.push(r.minfirst ? r.min : r.max, r.minfirst ? r.max : r.min);
        at.push(r, r);
      } else {
        x.push(s);
        y.push(r.n > 0 ? r.mean : null);
        at.push(r);
      }
    });
    return { x: x, y: y, rows: at };
  }

  /** What a point of a chart stands for: one step's value, or a bucket's steps, mean, min and max. */
  function rowText(k, r) {
    if (r.w === 1 && r.n <= 1) return "optimizer step " + r.b + " (" + k + " = " + LL.fmt.exact(r.mean) + ")";
    return (
      "steps " +
      LL.fmt.num(r.b * r.w) +
      "–" +
      LL.fmt.num((r.b + 1) * r.w - 1) +
      " (" +
      k +
      ": " +
      r.n +
      " values, mean " +
      LL.fmt.num(r.mean, 6) +
      ", min " +
      LL.fmt.exact(r.min) +
      ", max " +
      LL.fmt.exact(r.max) +
      ")"
    );
  }

  /**
   * A scalar charted against the scalar define_metric(step_metric=...) named (run.step_metrics):
   * each bucket's mean paired with the axis scalar's mean in the same step bucket (one step per
   * bucket: the values at the same step), sorted by the axis value; buckets without it left out.
   */
  function pairedLine(doc, axisDoc) {
    var at = new Map();
    if (axisDoc.widths[0] === doc.widths[0])
      LL.bucketRows(axisDoc.top, axisDoc.widths[0]).forEach(function (r) {
        if (r.n > 0) at.set(r.b, r.mean);
      });
    var pts = [];
    LL.bucketRows(doc.top, doc.widths[0]).forEach(function (r, i) {
      if (at.has(r.b)) pts.push([at.get(r.b), r.n > 0 ? r.mean : null, i]);
    });
    pts.sort(function (p, q) {
      return p[0] - q[0] || p[2] - q[2];
    });
    return {
      x: pts.map(function (p) {
        return p[0];
      }),
      y: pts.map(function (p) {
        return p[1];
      }),
    };
  }

  function curvesSection(run, state) {
    var keys = (run.scalars || []).slice();
    var sec = LL.section("Curves", "curves");
    var hasBatches = !!(run.batches && run.batches.count);
    var sel = h(
      "select",
      { id: "smoothing" },
      SMOOTHING.map(function (a) {
        return h("option", { value: String(a), selected: a === state.smoothing }, a ? "EMA " + a : "off");
      })
    );
    sec.appendChild(
      h(
        "div",
        { class: "controls" },
        h("label", { for: "smoothing" }, "Smoothing"),
        sel,
        h(
          "span",
          { class: "muted" },
          "Drag across a chart to zoom (finer buckets load), double-click to reset; hover for exact values." +
            (hasBatches ? " Click a point to open its microbatches." : "") +
            " Smoothing draws an extra line; the raw values stay on the chart."
        )
      )
    );
    var grid = h("div", { class: "charts", id: "curve-charts" });
    sec.appendChild(grid);
    /** @type {Record<string, any>} */
    var docs = {}; // scalar name -> its summaries (LL.data.curve); none for one logged live
    /** @type {Record<string, any[]>} */
    var added = {}; // scalar name -> the rows a live page appended
    /** @type {Record<string, any>} */
    var charts = {}; // scalar name -> its chart, updated in place by `append`
    var loaded = Promise.all(
      keys.map(function (k, i) {
        return LL.data.curve(run.id, i).then(function (doc) {
          docs[k] = doc;
        });
      })
    );
    function chartOf(k, i) {
      var doc = docs[k] || null,
        axis = (run.step_metrics || {})[k],
        axisDoc = axis ? docs[axis] : null;
      if (axisDoc && doc) {
        var paired = pairedLine(doc, axisDoc);
        return LL.lineChart({
          title: k,
          x: paired.x,
          xLabel: axis + " (define_metric step_metric)",
          smoothing: state.smoothing,
          series: [{ label: k, values: paired.y, color: LL.palette[i % LL.palette.length] }],
        });
      }
      var top = doc ? LL.bucketRows(doc.top, doc.widths[0]) : [];
      var view = { rows: top, level: 0, line: lineOf(top.concat(added[k] || [])), asked: "" };
      var picks = hasBatches; // a point's x is an optimizer step
      /** @type {any} */
      var chart = LL.lineChart({
        title: k,
        x: view.line.x,
        xLabel: "optimizer step",
        smoothing: state.smoothing,
        series: [{ label: k, values: view.line.y, color: LL.palette[i % LL.palette.length] }],
        onPick: picks
          ? function (idx) {
              var r = view.line.rows[idx];
              location.href = LL.link("batches.html", { run: run.id, step: r.b * r.w });
            }
          : undefined,
        pickHint: picks ? "Click a point to open the microbatches of that optimizer step." : "",
        pickLabel: function (idx) {
          var r = view.line.rows[idx];
          return r ? (picks ? "Click: microbatches of " : "") + rowText(k, r) : "";
        },
        onZoom: doc
          ? function (x0, x1, zoomed) {
              var ask = zoomed ? x0 + ":" + x1 : "";
              if (ask === view.asked) return;
              view.asked = ask;
              var got = zoomed
                ? LL.curveRange(run.id, i, doc, Math.floor(x0), Math.floor(x1) + 1, TOP)
                : Promise.resolve({ rows: top, level: 0 });
              got.then(function (g) {
                if (view.asked !== ask || (g.level === view.level && g.rows === view.rows)) return;
                view.rows = g.rows;
                view.level = g.level;
                chart.curveLevel = g.level;
                show();
              });
            }
          : undefined,
      });
      chart.curveLevel = 0;
      function show() {
        view.line = lineOf(view.rows.concat(added[k] || []));
        chart.setData(view.line.x, [view.line.y]);
      }
      chart.show = show;
      return chart;
    }
    function draw() {
      LL.clear(grid);
      charts = {};
      if (!keys.length && !hasBatches)
        grid.appendChild(h("p", { class: "muted" }, "This run logged no per-step scalars."));
      keys.forEach(function (k, i) {
        grid.appendChild((charts[k] = chartOf(k, i)));
      });
      if (hasBatches) {
        var holder = h(
          "div",
          { id: "mbloss-holder" },
          h("p", { class: "muted" }, "Loading the loss of every microbatch…")
        );
        grid.appendChild(holder);
        LL.data
          .loss(run.id)
          .then(function (loss) {
            var x =
              loss.microbatch ||
              loss.loss.map(function (_, i) {
                return loss.first + i;
              });
            var chart = LL.lineChart({
              title: "loss per microbatch (" + LL.fmt.num(loss.count) + ")",
              x: x,
              xLabel: "microbatch",
              smoothing: state.smoothing,
              series: [{ label: "microbatch loss", values: loss.loss, color: "#0072B2" }],
              onPick: function (idx, mb) {
                location.href = LL.link("batches.html", { run: run.id, mb: mb });
              },
              pickHint: "Click a point to open that microbatch.",
              pickLabel: function (idx, mb) {
                return "Click: open microbatch " + mb + " (loss " + LL.fmt.exact(loss.loss[idx]) + ")";
              },
            });
            chart.id = "mbloss-chart";
            holder.replaceWith(chart);
          })
          .catch(function (e) {
            holder.replaceWith(LL.callout("error", e.message));
          });
      }
    }
    sel.addEventListener("change", function () {
      state.smoothing = Number(sel.value);
      draw();
    });
    loaded.then(draw).catch(function (e) {
      grid.appendChild(LL.callout("error", e.message));
    });
    /**
     * Scalar records logged since the page's data (a live page in `labledger serve`): appended to
     * each scalar's chart in place (a zoomed-in chart keeps its range); a new scalar redraws all.
     */
    /** @type {any} */ (sec).append = function (/** @type {any[]} */ records) {
      var before = keys.length;
      records.forEach(function (rec) {
        var step = rec.step;
        if (typeof step !== "number") return;
        Object.keys(rec).forEach(function (k) {
          var v = rec[k];
          if (k === "step" || k === "time" || !(typeof v === "number" || v === null)) return;
          if (keys.indexOf(k) < 0) keys.push(k);
          (added[k] = added[k] || []).push(stepRow(step, v));
        });
      });
      loaded.then(function () {
        if (keys.length !== before) return draw();
        keys.forEach(function (k) {
          if (charts[k] && charts[k].show) charts[k].show();
        });
      });
    };
    return sec;
  }

  /**
   * The header's live facts brought up to `info` (a `GET /api/runs/{run}` answer's `run`) and
   * `steps` (the highest step the page has seen): the status badge, the end, the duration (to now
   * while running) and the steps, which only grow (the index's summary may lag the records the page
   * fetched).
   */
  function updateHeader(info, steps) {
    var set = function (/** @type {string} */ key, /** @type {string} */ text) {
      var el = document.querySelector('[data-fact="' + key + '"]');
      if (el && el.textContent !== text) el.textContent = text;
    };
    var summary = info.summary || {};
    if (typeof summary.steps === "number" && (steps === null || summary.steps > steps)) steps = summary.steps;
    if (steps !== null) set("steps", LL.fmt.num(steps));
    set("ended", LL.fmt.time(info.ended));
    set("duration", LL.fmt.duration(info.duration));
    var badge = document.getElementById("run-status");
    if (badge && badge.textContent !== info.status) badge.replaceChildren(LL.statusBadge(info.status));
    return steps;
  }

  /**
   * A running run's page served by `labledger serve` follows the run: every few seconds it asks the
   * API for the scalar records logged since its last fetch (`since`, the cursor of the run's data,
   * then the `next` of each answer), redraws the curves and brings the header (status, end,
   * duration, steps) up to date. The static site shows what the build read (reload after a rebuild
   * for newer steps).
   */
  function follow(run, curves, status) {
    if (run.status !== "running") return;
    if (!/^https?:$/.test(location.protocol)) {
      status.textContent = "This run was running when the site was built: rebuild the site and reload for newer steps.";
      return;
    }
    var cursor = (run.cursor && run.cursor.scalars) || 0,
      added = 0,
      steps = typeof run.steps === "number" ? run.steps : null,
      base = "api/runs/" + encodeURIComponent(run.id);
    LL.live = { cursor: cursor, fetches: 0, records: 0, running: true };
    function json(url) {
      // eslint-disable-next-line no-restricted-syntax -- only under http(s), from labledger serve's API
      return fetch(url, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
        if (!r.ok) throw new Error(url + ": HTTP " + r.status);
        return r.json();
      });
    }
    function tick() {
      json(base + "/scalars?since=" + cursor + "&limit=10000")
        .then(function (page) {
          LL.live.fetches += 1;
          if (page.count) curves.append(page.scalars);
          page.scalars.forEach(function (/** @type {any} */ rec) {
            if (typeof rec.step === "number" && (steps === null || rec.step > steps)) steps = rec.step;
          });
          added += page.count;
          cursor = page.next;
          LL.live.cursor = cursor;
          LL.live.records = added;
          if (page.count === page.limit) return true; // more to read: at once
          return json(base).then(function (info) {
            var running = info.run.status === "running";
            LL.live.running = running;
            steps = updateHeader(info.run, steps);
            status.textContent =
              (running ? "Following the run: " : "The run is " + info.run.status + ": ") +
              LL.fmt.num(added) +
              " scalar record" +
              (added === 1 ? "" : "s") +
              " since the page opened (last update " +
              new Date().toLocaleTimeString() +
              ").";
            if (running) setTimeout(tick, LL.liveIntervalMs);
            return false;
          });
        })
        .then(function (again) {
          if (again) tick();
        })
        .catch(function (e) {
          status.textContent = "Live updates stopped: " + e.message;
        });
    }
    setTimeout(tick, LL.liveIntervalMs);
  }
  /** Milliseconds between a live page's fetches. */
  LL.liveIntervalMs = 2000;

  function systemSection(run) {
    var sys = run.system;
    if (!sys) return null;
    var keys = Object.keys(sys.series);
    var grid = h("div", { class: "charts", id: "system-charts" });
    keys.forEach(function (k, i) {
      grid.appendChild(
        LL.lineChart({
          title: k,
          x: sys.x,
          xLabel: "seconds since the first sample",
          series: [{ label: k, values: sys.series[k], color: LL.palette[i % LL.palette.length] }],
        })
      );
    });
    return LL.section(
      "System metrics",
      "system",
      h(
        "p",
        { class: "muted" },
        LL.fmt.num(sys.samples) +
          " samples (system.jsonl)" +
          (sys.shown < sys.samples ? ", " + LL.fmt.num(sys.shown) + " shown, evenly spaced" : "") +
          "."
      ),
      grid
    );
  }

  function columnsOf(entries, skip) {
    var cols = [];
    entries.forEach(function (e) {
      Object.keys(e).forEach(function (k) {
        if (cols.indexOf(k) < 0 && (!skip || skip.indexOf(k) < 0)) cols.push(k);
      });
    });
    return cols;
  }

  function historySection(run) {
    var hist = run.history || [];
    if (!hist.length) return null;
    var cols = columnsOf(hist).map(function (k) {
      var numeric = hist.some(function (e) {
        return typeof e[k] === "number";
      });
      return {
        key: k,
        label: k,
        num: numeric,
        render: numeric
          ? null
          : function (r) {
              var v = r[k];
              return v !== null && typeof v === "object" ? LL.jsonTree(v, 0) : LL.valueText(v);
            },
      };
    });
    return LL.section(
      "Trainer history",
      "history",
      h(
        "p",
        { class: "muted" },
        hist.length +
          " entries as the trainer logged them (loss over each logging interval, not the last microbatch's)."
      ),
      LL.table({ columns: cols, rows: hist, pageSize: 50 })
    );
  }

  function bestPosition(entries, metric, hib) {
    var best = null,
      pos = null;
    entries.forEach(function (e, j) {
      var v = e[metric];
      if (typeof v !== "number" || !isFinite(v)) return;
      if (best === null || (hib ? v > best : v < best)) {
        best = v;
        pos = j;
      }
    });
    return pos;
  }

  function validationSection(run) {
    var val = run.validation;
    if (!val) return null;
    var entries = val.rows.map(function (i) {
      return run.history[i];
    });
    var ek = val.epoch_key;
    var sec = /** @type {HTMLElement & {update?: () => void}} */ (LL.section("Validation per epoch", "validation"));
    var sel0 = val.selected;
    var state = { metric: sel0 && sel0.metric ? sel0.metric : null, position: sel0 ? sel0.position : null };
    var note = h("p", { class: "muted", id: "selection-rule" });
    var metricSel = h(
      "select",
      { id: "select-metric" },
      sel0 && !sel0.metric ? h("option", { value: "" }, "as recorded by the run") : null,
      val.metrics.map(function (m) {
        return h("option", { value: m, selected: m === state.metric }, m);
      })
    );
    var hibBox = h("input", { type: "checkbox", id: "select-hib" });
    sec.appendChild(
      h(
        "div",
        { class: "controls" },
        h("label", { for: "select-metric" }, "Select the epoch by"),
        metricSel,
        h("label", null, hibBox, "higher is better")
      )
    );
    sec.appendChild(note);
    var tableHolder = h("div"),
      chartHolder = h("div", { class: "charts" });
    sec.appendChild(chartHolder);
    sec.appendChild(tableHolder);
    function hibDefault(m) {
      return !/loss|error|mae|rmse|mse|ece|brier|perplexity|runtime/i.test(m);
    }
    function update() {
      var m = metricSel.value;
      if (!m) {
        state.position = sel0.position;
        note.textContent =
          "Selected: " +
          (ek ? ek + " " + entries[state.position][ek] : "entry " + (state.position + 1)) +
          " — " +
          sel0.rule +
          ".";
        hibBox.disabled = true;
      } else {
        hibBox.disabled = false;
        state.position = bestPosition(entries, m, hibBox.checked);
        var rule = (hibBox.checked ? "highest " : "lowest ") + m + "; ties go to the earliest entry";
        var src =
          sel0 && sel0.metric === m && sel0.higher_is_better === hibBox.checked
            ? " (the builder's default choice)"
            : " (chosen on this page)";
        note.textContent =
          state.position === null
            ? "No entry has a value for " + m + "."
            : "Selected: " +
              (ek ? ek + " " + entries[state.position][ek] : "entry " + (state.position + 1)) +
              " — " +
              rule +
              src +
              ".";
      }
      LL.clear(tableHolder);
      var cols = /** @type {TableColumn<any>[]} */ ([
        {
          key: "__sel",
          label: "",
          sortable: false,
          render: function (r) {
            return entries.indexOf(r) === state.position ? LL.badge("selected", "selected") : "";
          },
        },
      ]).concat(
        columnsOf(entries, ["kind"]).map(function (k) {
          return { key: k, label: k, num: true, className: k === m ? "hl" : "" };
        })
      );
      tableHolder.appendChild(
        LL.table({
          columns: cols,
          rows: entries,
          rowClass: function (r) {
            return entries.indexOf(r) === state.position ? "selected" : "";
          },
        })
      );
      LL.clear(chartHolder);
      if (ek && entries.length > 1) {
        var x = entries.map(function (e) {
          return e[ek];
        });
        var marks = state.position === null ? [] : [{ x: x[state.position], label: "selected" }];
        var shown = m ? [m] : [];
        function varies(k) {
          var v = entries
            .map(function (e) {
              return e[k];
            })
            .filter(function (x) {
              return typeof x === "number";
            });
          return v.some(function (x) {
            return x !== v[0];
          });
        }
        val.metrics.forEach(function (k) {
          if (shown.length < 4 && shown.indexOf(k) < 0 && !/runtime|images|per_second/.test(k) && varies(k))
            shown.push(k);
        });
        shown.forEach(function (k, i) {
          var c = LL.lineChart({
            title: k + " per " + ek,
            x: x,
            xLabel: ek,
            height: 200,
            series: [
              {
                label: k,
                values: entries.map(function (e) {
                  return typeof e[k] === "number" ? e[k] : null;
                }),
                color: LL.palette[i],
              },
            ],
            marks: marks,
          });
          chartHolder.appendChild(c);
          c.mount();
        });
      }
    }
    if (state.metric) hibBox.checked = sel0 && sel0.metric ? !!sel0.higher_is_better : hibDefault(state.metric);
    metricSel.addEventListener("change", function () {
      if (metricSel.value) hibBox.checked = hibDefault(metricSel.value);
      update();
    });
    hibBox.addEventListener("change", update);
    sec.update = update;
    return sec;
  }

  function checkpointsSection(run) {
    var cps = run.checkpoints || [];
    if (!cps.length) return null;
    return LL.section(
      "Checkpoints",
      "checkpoints",
      LL.table({
        rows: cps,
        rowClass: function (r) {
          return r.selected ? "selected" : "";
        },
        columns: [
          {
            key: "step",
            label: "Step",
            num: true,
            render: function (r) {
              return [LL.numCell(r.step), r.selected ? [" ", LL.badge("selected epoch", "selected")] : null];
            },
          },
          {
            key: "sha256",
            label: "sha256",
            render: function (r) {
              return h("code", { class: "sha" }, r.sha256 || "–");
            },
          },
          {
            key: "size",
            label: "Size",
            num: true,
            render: function (r) {
              return LL.fmt.bytes(r.size);
            },
          },
          {
            key: "path",
            label: "Path",
            render: function (r) {
              return h("code", null, r.path || "");
            },
          },
          {
            key: "metrics",
            label: "Metrics",
            sortable: false,
            render: function (r) {
              return r.metrics && Object.keys(r.metrics).length ? LL.jsonTree(r.metrics, 0) : "–";
            },
          },
          {
            key: "time",
            label: "Time",
            num: true,
            render: function (r) {
              return LL.fmt.time(r.time);
            },
          },
        ],
      })
    );
  }

  function notesSection(run) {
    var notes = run.notes || [];
    if (!notes.length) return null;
    return LL.section(
      "Notes and limits",
      "notes",
      h(
        "ul",
        { class: "notes" },
        notes.map(function (n) {
          return h(
            "li",
            null,
            h("span", { class: "muted mono" }, LL.fmt.time(n.time)),
            " ",
            h("span", { class: "text" }, n.text)
          );
        })
      )
    );
  }

  function filesSection(run) {
    var f = run.files || {};
    if (!f.count) return null;
    var sec = LL.section(
      "Files",
      "files",
      h(
        "p",
        { class: "muted" },
        f.count +
          " files, " +
          LL.fmt.bytes(f.bytes) +
          " under the run's files/ folder" +
          (f.count > f.listed.length ? "; the first " + f.listed.length + " are listed" : "") +
          "."
      )
    );
    if (f.folders && f.folders.length > 1) {
      sec.appendChild(
        LL.table({
          rows: f.folders.map(function (r) {
            return { folder: r[0] || "(top level)", files: r[1], bytes: r[2] };
          }),
          columns: [
            { key: "folder", label: "Folder" },
            { key: "files", label: "Files", num: true },
            {
              key: "bytes",
              label: "Size",
              num: true,
              render: function (r) {
                return LL.fmt.bytes(r.bytes);
              },
            },
          ],
        })
      );
    }
    sec.appendChild(
      LL.table({
        rows: f.listed.map(function (r) {
          return { path: r[0], size: r[1] };
        }),
        pageSize: 25,
        columns: [
          {
            key: "path",
            label: "Path",
            render: function (r) {
              return h("code", null, r.path);
            },
          },
          {
            key: "size",
            label: "Size",
            num: true,
            render: function (r) {
              return LL.fmt.bytes(r.size);
            },
          },
        ],
      })
    );
    return sec;
  }

  function pagesSection(run) {
    var items = [];
    if (run.batches && run.batches.count) {
      items.push(
        h(
          "li",
          null,
          h("a", { href: LL.link("batches.html", { run: run.id }), id: "browse-batches" }, "Browse microbatches"),
          " — " + LL.fmt.num(run.batches.count) + " microbatches, " + LL.fmt.num(run.batches.samples) + " samples"
        )
      );
    }
    (run.evaluations || []).forEach(function (e) {
      items.push(
        h(
          "li",
          null,
          h("a", { href: LL.link("eval.html", { run: run.id, name: e.name }) }, "Evaluation: " + e.name),
          e.rows !== null && e.rows !== undefined ? " — " + LL.fmt.num(e.rows) + " rows" : "",
          e.kinds && e.kinds.length ? " (" + e.kinds.join(", ") + ")" : ""
        )
      );
    });
    (run.tests || []).forEach(function (t) {
      items.push(
        h(
          "li",
          null,
          h("a", { href: LL.link("test.html", { run: run.id, name: t.name }) }, "Test breakdown: " + t.name),
          " — " + LL.fmt.num(t.images) + " images"
        )
      );
    });
    if (!items.length) return null;
    return LL.section("Pages of this run", "pages", h("ul", null, items));
  }

  LL.start(function () {
    var id = LL.params().run;
    return LL.data
      .catalog()
      .then(function (cat) {
        LL.findRun(cat, id);
        return LL.data.run(id);
      })
      .then(function (run) {
        var main = LL.main();
        LL.title(run.name);
        LL.crumbs([{ label: "Runs", href: "index.html" }, { label: run.name }]);
        header(run).forEach(function (n) {
          if (n) main.appendChild(n);
        });
        var state = { smoothing: 0 };
        var curves = curvesSection(run, state);
        var liveStatus = h("p", { id: "live-status", class: "muted", "aria-live": "polite" });
        curves.insertBefore(liveStatus, curves.querySelector(".charts"));
        follow(run, curves, liveStatus);
        var sections = [
          pagesSection(run),
          curves,
          LL.mediaSection ? LL.mediaSection(run) : null,
          systemSection(run),
          validationSection(run),
          historySection(run),
          checkpointsSection(run),
          notesSection(run),
          LL.section("Config", "config", LL.jsonTree(run.config || {}, 2)),
          filesSection(run),
          LL.section(
            "Run record",
            "meta",
            h(
              "p",
              { class: "muted" },
              "run.json: where and how the run was made. Paths are shown relative to the folder holding the " +
                "ledger, others as …/ and their last part (the site carries no machine path); run.json has them whole."
            ),
            LL.jsonTree(run.meta || {}, 1)
          ),
        ].filter(Boolean);
        var toc = h(
          "ul",
          { class: "toc", "aria-label": "Sections" },
          sections.map(function (s) {
            return h(
              "li",
              null,
              h(
                "a",
                {
                  href: "#run=" + encodeURIComponent(run.id),
                  onclick: function (ev) {
                    ev.preventDefault();
                    s.scrollIntoView();
                  },
                },
                s.querySelector("h2").textContent
              )
            );
          })
        );
        main.appendChild(toc);
        sections.forEach(function (s) {
          main.appendChild(s);
        });
        sections.forEach(function (s) {
          var u = /** @type {HTMLElement & {update?: () => void}} */ (s);
          if (u.update) u.update();
        });
      });
  });
})();
