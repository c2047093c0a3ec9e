// @ts-check
/* Run page: config, curves of every scalar, microbatch loss, trainer history, validation per epoch
   with the selected epoch, checkpoints, notes, files, and links to evaluations and batches. */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h;
  var SMOOTHING = [0, 0.6, 0.8, 0.9, 0.95, 0.99];

  function fact(k, v) {
    return h("div", { class: "fact" }, h("span", { class: "fk" }, k), h("span", { class: "fv" }, v));
  }

  function header(run) {
    var meta = run.meta || {},
      git = meta.git || {};
    return [
      h("h1", null, run.name, " ", LL.statusBadge(run.status)),
      h("p", { class: "sub mono" }, run.id),
      h(
        "div",
        { class: "facts" },
        fact("Group", run.group || "–"),
        fact("Tags", (run.tags || []).length ? LL.chips(run.tags) : "–"),
        fact("Started", LL.fmt.time(run.started)),
        fact("Ended", LL.fmt.time(run.ended)),
        fact("Duration", LL.fmt.duration(run.duration)),
        fact("Steps", LL.fmt.num(run.steps)),
        fact("Host", meta.host || "–"),
        fact("Git", git.commit ? String(git.commit).slice(0, 12) + (git.dirty ? " (dirty)" : "") : "–")
      ),
      run.error ? LL.callout("error", "Error: " + run.error) : null,
    ];
  }

  /**
   * A scalar's points against its x axis: the step, or the scalar define_metric(step_metric=...)
   * named (run.step_metrics; its value at the same step), sorted by that value, steps without it left out.
   * @returns {{x: number[], y: Num[], axis: string | null}}
   */
  function pointsOf(run, k) {
    var s = run.scalars[k];
    var steps = typeof s.x === "number" ? run.scalar_steps[s.x] : s.x;
    var axis = (run.step_metrics || {})[k];
    var a = axis ? run.scalars[axis] : null;
    if (!a) return { x: steps, y: s.y, axis: null };
    var at = new Map();
    var aSteps = typeof a.x === "number" ? run.scalar_steps[a.x] : a.x;
    aSteps.forEach(function (st, i) {
      if (typeof a.y[i] === "number" && isFinite(a.y[i])) at.set(st, a.y[i]);
    });
    var pts = [];
    steps.forEach(function (st, i) {
      if (at.has(st)) pts.push([at.get(st), s.y[i], i]);
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
      axis: axis,
    };
  }

  function curvesSection(run, state) {
    var keys = Object.keys(run.scalars || {});
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
          "Drag across a chart to zoom, double-click to reset; hover for exact values." +
            (hasBatches ? " Click a point to open its microbatches." : "") +
            " Smoothing draws an extra line; the raw values stay on the chart."
        )
      )
    );
    var grid = h("div", { class: "charts", id: "curve-charts" });
    sec.appendChild(grid);
    /** @type {Record<string, any>} */
    var charts = {}; // scalar name -> its chart, updated in place by `append`
    function draw() {
      LL.clear(grid);
      charts = {};
      if (!keys.length && !hasBatches)
        grid.appendChild(h("p", { class: "muted" }, "This run logged no per-step scalars."));
      keys.forEach(function (k, i) {
        var s = pointsOf(run, k);
        var picks = hasBatches && !s.axis; // a point's x is an optimizer step
        grid.appendChild(
          (charts[k] = LL.lineChart({
            title: k,
            x: s.x,
            xLabel: s.axis ? s.axis + " (define_metric step_metric)" : "optimizer step",
            smoothing: state.smoothing,
            series: [{ label: k, values: s.y, color: LL.palette[i % LL.palette.length] }],
            onPick: picks
              ? function (idx, step) {
                  location.href = LL.link("batches.html", { run: run.id, step: step });
                }
              : null,
            pickHint: picks ? "Click a point to open the microbatches of that optimizer step." : "",
            pickLabel: function (idx, step) {
              return "Click: microbatches of optimizer step " + step + " (" + k + " = " + LL.fmt.exact(s.y[idx]) + ")";
            },
          }))
        );
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
    draw();
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
          var s = run.scalars[k];
          if (!s) {
            s = run.scalars[k] = { x: [], y: [] };
            keys.push(k);
          } else if (typeof s.x === "number") s.x = run.scalar_steps[s.x].slice(); // no longer shared
          s.x.push(step);
          s.y.push(typeof v === "number" && isFinite(v) ? v : null);
        });
      });
      if (keys.length !== before) return draw();
      keys.forEach(function (k) {
        var p = pointsOf(run, k);
        if (charts[k]) charts[k].setData(p.x, [p.y]);
      });
    };
    return sec;
  }

  /**
   * A running run's page served by `labledger serve` follows the run: every few seconds it asks the
   * API for the scalar records logged since its last fetch (`since`, the cursor of the run's data,
   * then the `next` of each answer) and redraws the curves. The static site shows what the build
   * read (reload after a rebuild for newer steps).
   */
  function follow(run, curves, status) {
    if (run.status !== "running") return;
    if (!/^https?:$/.test(location.protocol)) {
      status.textContent = "This run was running when the site was built: rebuild the site and reload for newer steps.";
      return;
    }
    var cursor = (run.cursor && run.cursor.scalars) || 0,
      added = 0,
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
          added += page.count;
          cursor = page.next;
          LL.live.cursor = cursor;
          LL.live.records = added;
          if (page.count === page.limit) return true; // more to read: at once
          return json(base).then(function (info) {
            var running = info.run.status === "running";
            LL.live.running = running;
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
            h("p", { class: "muted" }, "run.json: where and how the run was made."),
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
