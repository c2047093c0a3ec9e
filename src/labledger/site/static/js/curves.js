// @ts-check
/* Curves: one logged scalar overlaid across the selected runs (#runs=id,id or #where=query).
   x: step, examples seen, wall time or time since start; log y; smoothing over the raw line;
   group by a config key, the run group or the tags (mean line, min-max or 95% CI band, n in the
   legend). Curves come as multi-resolution buckets (site/curves.py): the top level first, finer
   levels of the visible range when the chart is zoomed (drag to zoom, double-click to reset). */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h;
  var TOP = 2000;
  var MAX_RUNS = 200;
  // Student t quantiles (0.975) by degrees of freedom, for the 95% CI of a group mean.
  var T975 = [
    NaN,
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.16,
    2.145,
    2.131,
    2.12,
    2.11,
    2.101,
    2.093,
    2.086,
    2.08,
    2.074,
    2.069,
    2.064,
    2.06,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
  ];
  var XMODES = { step: "step", examples: "examples seen", wall: "wall time", relative: "time since start (s)" };

  function tcrit(df) {
    return df < T975.length ? T975[df] : 1.96;
  }

  var bucketRows = LL.bucketRows;

  /** Merge buckets into buckets `W` steps wide (W a multiple of each bucket's width). */
  function rebin(rows, W) {
    var out = [],
      cur = null;
    rows.forEach(function (r) {
      var B = Math.floor((r.b * r.w) / W);
      if (!cur || cur.b !== B) {
        cur = { b: B, w: W, n: 0, sum: 0, mean: null, min: null, max: null, last: null, minAt: 0, maxAt: 0 };
        out.push(cur);
      }
      if (r.n > 0 && LL.isNum(r.mean)) {
        cur.sum += r.mean * r.n;
        cur.n += r.n;
        cur.mean = cur.sum / cur.n;
        if (cur.min === null || r.min < cur.min) {
          cur.min = r.min;
          cur.minAt = r.b * r.w + (r.minfirst ? 0 : 0.5);
        }
        if (cur.max === null || r.max > cur.max) {
          cur.max = r.max;
          cur.maxAt = r.b * r.w + (r.minfirst ? 0.5 : 0);
        }
      }
      cur.last = r.last;
      cur.rt = r.rt;
      cur.ex = r.ex;
    });
    out.forEach(function (c) {
      c.minfirst = c.minAt <= c.maxAt ? 1 : 0;
    });
    return out;
  }

  LL.start(function () {
    return LL.data.catalog().then(function (cat) {
      var main = LL.main(),
        p = LL.params();
      LL.crumbs([{ label: "Runs", href: "index.html" }, { label: "Curves" }]);
      LL.title("Curves");
      main.appendChild(h("h1", null, "Curves"));
      var runs;
      if (p.runs) {
        var wanted = p.runs.split(",").filter(Boolean);
        runs = wanted.map(function (id) {
          return LL.findRun(cat, id);
        });
      } else {
        runs = LL.where.select(cat, p.where || "");
      }
      runs = runs.filter(function (r) {
        return !r.unreadable;
      });
      var cut = runs.length > MAX_RUNS;
      if (cut) runs = runs.slice(0, MAX_RUNS);
      main.appendChild(
        h(
          "p",
          { class: "sub" },
          runs.length + " run" + (runs.length === 1 ? "" : "s") + (p.where ? " where " : p.runs ? " selected" : ""),
          p.where ? h("code", null, p.where) : null,
          cut ? " (the first " + MAX_RUNS + " by start time)" : "",
          ". ",
          h("a", { href: LL.link("index.html", p.where ? { where: p.where } : {}) }, "Change the selection"),
          " · ",
          h("a", { href: LL.link("hparams.html", p.runs ? { runs: p.runs } : { where: p.where }) }, "Hyperparameters")
        )
      );
      var names = [];
      runs.forEach(function (r) {
        (r.scalars || []).forEach(function (s) {
          if (names.indexOf(s) < 0) names.push(s);
        });
      });
      if (!names.length) {
        main.appendChild(LL.callout("info", "These runs logged no scalars."));
        return;
      }
      var known = (cat.fields && cat.fields.names) || [];
      var groupKeys = ["group", "tags"].concat(
        known.filter(function (k) {
          return k.indexOf("config.") === 0;
        })
      );
      var state = {
        scalar:
          names.indexOf(p.scalar) >= 0
            ? p.scalar
            : names.filter(function (n) {
                return /loss/i.test(n);
              })[0] || names[0],
        x: XMODES[p.x] ? p.x : "step",
        log: p.log === "1",
        smooth: Math.max(0, Math.min(0.99, Number(p.smooth) || 0)),
        group: groupKeys.indexOf(p.group) >= 0 ? p.group : "",
        band: p.band === "ci" ? "ci" : "minmax",
      };
      function sel(id, label, options, value) {
        var s = h(
          "select",
          { id: id },
          options.map(function (o) {
            return h("option", { value: o[0], selected: o[0] === value }, o[1]);
          })
        );
        return h("label", { class: "field", for: id }, label + " ", s);
      }
      var cScalar = sel(
        "c-scalar",
        "Scalar",
        names.map(function (n) {
          return [n, n];
        }),
        state.scalar
      );
      var cX = sel(
        "c-x",
        "x",
        Object.keys(XMODES).map(function (k) {
          return [k, XMODES[k]];
        }),
        state.x
      );
      var cGroup = sel(
        "c-group",
        "Group by",
        [["", "(each run)"]].concat(
          groupKeys.map(function (k) {
            return [k, k];
          })
        ),
        state.group
      );
      var cBand = sel(
        "c-band",
        "Band",
        [
          ["minmax", "min–max across runs"],
          ["ci", "95% CI of the mean"],
        ],
        state.band
      );
      var cLog = h("input", { type: "checkbox", id: "c-log", checked: state.log });
      var cSmooth = h("input", {
        type: "range",
        id: "c-smooth",
        min: "0",
        max: "0.99",
        step: "0.01",
        value: String(state.smooth),
        "aria-label": "Smoothing (EMA weight)",
      });
      var smoothText = h("span", { class: "mono" }, String(state.smooth));
      main.appendChild(
        h(
          "div",
          { class: "controls" },
          cScalar,
          cX,
          h("label", { class: "field", for: "c-log" }, cLog, " log y"),
          h("label", { class: "field", for: "c-smooth" }, "Smoothing ", cSmooth, " ", smoothText),
          cGroup,
          cBand
        )
      );
      var status = h("p", { id: "c-status", class: "muted small", "aria-live": "polite" });
      var plotEl = h("div", { class: "plot curves-plot", id: "curves-plot" });
      var legend = h("div", { class: "legend-inline", id: "c-legend" });
      var hover = h("div", { id: "c-hover", class: "hover-values" }, h("p", { class: "muted" }, "Hover the chart."));
      var figure = /** @type {any} */ (h("figure", { class: "chart curves" }, plotEl, legend));
      main.appendChild(LL.section("Overlay", "overlay", status, figure, hover));

      // runs' data: {run, label, color, doc, rows (visible buckets), k}
      var series = [];
      var counts = {};
      runs.forEach(function (r) {
        counts[r.name] = (counts[r.name] || 0) + 1;
      });
      function runLabel(r) {
        return counts[r.name] > 1 ? r.name + " · " + r.id.slice(-6) : r.name;
      }
      function save() {
        LL.setHash({
          runs: p.runs,
          where: p.runs ? null : p.where,
          scalar: state.scalar,
          x: state.x === "step" ? null : state.x,
          log: state.log ? 1 : null,
          smooth: state.smooth || null,
          group: state.group || null,
          band: state.group && state.band === "ci" ? "ci" : null,
        });
      }
      function loadScalar() {
        var todo = runs.filter(function (r) {
          return (r.scalars || []).indexOf(state.scalar) >= 0;
        });
        status.textContent = "Loading " + todo.length + " curve" + (todo.length === 1 ? "" : "s") + "…";
        return Promise.all(
          todo.map(function (r, i) {
            var k = r.scalars.indexOf(state.scalar);
            return LL.data.curve(r.id, k).then(function (doc) {
              return {
                run: r,
                k: k,
                label: runLabel(r),
                color: LL.palette[i % LL.palette.length],
                doc: doc,
                rows: bucketRows(doc.top, doc.widths[0]),
                level: 0,
              };
            });
          })
        ).then(function (list) {
          series = list;
          var missing = runs.length - list.length;
          status.textContent =
            list.length +
            " curve" +
            (list.length === 1 ? "" : "s") +
            " of " +
            state.scalar +
            (missing ? " (" + missing + " of the runs did not log it)" : "") +
            ". Drag across the chart to zoom (finer buckets load), double-click to reset.";
        });
      }

      function xOf(s, r) {
        if (state.x === "step") return r.b * r.w;
        if (state.x === "relative") return r.rt;
        if (state.x === "wall") return LL.isNum(r.rt) ? s.run.started + r.rt : null;
        return r.ex;
      }
      function groupOf(run) {
        if (state.group === "group") return run.group || "(no group)";
        if (state.group === "tags")
          return (run.tags || []).length ? (run.tags || []).slice().sort().join(", ") : "(no tags)";
        var i = cat.runs.indexOf(run);
        var v = LL.where.field(cat, i, state.group);
        return state.group + " = " + (v === null || v === undefined ? "(missing)" : LL.valueText(v));
      }

      /** Lines to draw: [{label, color, X, mean, lo, hi, raw: [x, y] pairs, n, kind}]. */
      function lines() {
        var out = [];
        if (!state.group) {
          series.forEach(function (s) {
            var X = [],
              mean = [],
              rawX = [],
              rawY = [],
              info = [];
            var rows = s.rows;
            for (var i = 0; i < rows.length; i++) {
              var r = rows[i],
                x = xOf(s, r);
              if (!LL.isNum(x)) continue;
              X.push(x);
              mean.push(r.n > 0 ? r.mean : null);
              info.push(r);
            }
            for (i = 0; i < X.length; i++) {
              var rr = info[i];
              var next = i + 1 < X.length ? X[i + 1] : X[i] + (i > 0 ? X[i] - X[i - 1] : 1);
              if (rr.n > 1 && rr.min !== rr.max) {
                rawX.push(X[i], (X[i] + next) / 2);
                rawY.push(rr.minfirst ? rr.min : rr.max, rr.minfirst ? rr.max : rr.min);
              } else {
                rawX.push(X[i]);
                rawY.push(rr.n > 0 ? rr.mean : null);
              }
            }
            out.push({ label: s.label, color: s.color, X: X, mean: mean, rawX: rawX, rawY: rawY, info: info, n: 1 });
          });
          return out;
        }
        var groups = {},
          order = [];
        series.forEach(function (s) {
          var g = groupOf(s.run);
          if (!groups[g]) {
            groups[g] = [];
            order.push(g);
          }
          groups[g].push(s);
        });
        order.forEach(function (g, gi) {
          var members = groups[g];
          var W = 1;
          members.forEach(function (s) {
            s.rows.forEach(function (r) {
              if (r.w > W) W = r.w;
            });
          });
          var byB = {},
            keys = [];
          members.forEach(function (s) {
            rebin(s.rows, W).forEach(function (r) {
              if (!(r.n > 0)) return;
              var x = xOf(s, r);
              if (!LL.isNum(x)) return;
              var e = byB[r.b];
              if (!e) {
                e = byB[r.b] = { b: r.b, w: W, vals: [], xs: [] };
                keys.push(r.b);
              }
              e.vals.push(r.mean);
              e.xs.push(x);
            });
          });
          keys.sort(function (a, b) {
            return a - b;
          });
          var X = [],
            mean = [],
            lo = [],
            hi = [],
            info = [];
          keys.forEach(function (b) {
            var e = byB[b],
              n = e.vals.length;
            var m = 0,
              xm = 0;
            e.vals.forEach(function (v, i) {
              m += v;
              xm += e.xs[i];
            });
            m /= n;
            xm /= n;
            var l, u;
            if (state.band === "ci") {
              var ss = 0;
              e.vals.forEach(function (v) {
                ss += (v - m) * (v - m);
              });
              var half = n > 1 ? (tcrit(n - 1) * Math.sqrt(ss / (n - 1))) / Math.sqrt(n) : 0;
              l = m - half;
              u = m + half;
            } else {
              l = Math.min.apply(null, e.vals);
              u = Math.max.apply(null, e.vals);
            }
            X.push(xm);
            mean.push(m);
            lo.push(l);
            hi.push(u);
            info.push({ b: b, w: W, n: n, mean: m, min: l, max: u });
          });
          out.push({
            label: g + " (n=" + members.length + ")",
            color: LL.palette[gi % LL.palette.length],
            X: X,
            mean: mean,
            lo: lo,
            hi: hi,
            rawX: X,
            rawY: mean,
            info: info,
            n: members.length,
            group: true,
          });
        });
        return out;
      }

      /** One x array for all lines (uPlot's aligned data); each line's values at those x. */
      function align(ls) {
        var all = [];
        ls.forEach(function (l) {
          l.rawX.forEach(function (x) {
            all.push(x);
          });
          l.X.forEach(function (x) {
            all.push(x);
          });
        });
        var xs = Float64Array.from(all).sort();
        var uniq = [];
        for (var i = 0; i < xs.length; i++) if (i === 0 || xs[i] !== xs[i - 1]) uniq.push(xs[i]);
        var at = new Map();
        uniq.forEach(function (x, j) {
          at.set(x, j);
        });
        function place(xArr, yArr) {
          var col = new Array(uniq.length).fill(null);
          for (var i = 0; i < xArr.length; i++) {
            var y = yArr[i];
            if (state.log && !(y > 0)) y = null;
            col[at.get(xArr[i])] = y;
          }
          return col;
        }
        return { x: uniq, place: place };
      }

      var u = null,
        current = [],
        applying = false,
        zoomTimer = null;
      function draw() {
        var ls = lines();
        current = ls;
        var al = align(ls);
        var data = [al.x];
        var cfgSeries = [{ label: XMODES[state.x] }];
        var bands = [];
        ls.forEach(function (l) {
          if (l.group) {
            data.push(al.place(l.X, l.hi));
            cfgSeries.push({
              label: l.label + " high",
              stroke: l.color,
              width: 0,
              points: { show: false },
              spanGaps: true,
            });
            data.push(al.place(l.X, l.lo));
            cfgSeries.push({
              label: l.label + " low",
              stroke: l.color,
              width: 0,
              points: { show: false },
              spanGaps: true,
            });
            bands.push({ series: [data.length - 2, data.length - 1], fill: l.color + "33" });
            data.push(al.place(l.X, l.mean));
            cfgSeries.push({ label: l.label, stroke: l.color, width: 2, points: { show: false }, spanGaps: true });
            return;
          }
          data.push(al.place(l.rawX, l.rawY));
          cfgSeries.push({
            label: l.label,
            stroke: state.smooth ? l.color + "66" : l.color,
            width: state.smooth ? 1 : 1.5,
            points: { show: false },
            spanGaps: true,
          });
          if (state.smooth) {
            data.push(al.place(l.X, LL.ema(l.mean, state.smooth)));
            cfgSeries.push({
              label: l.label + " (EMA)",
              stroke: l.color,
              width: 2.25,
              points: { show: false },
              spanGaps: true,
            });
          }
        });
        LL.clear(legend);
        ls.forEach(function (l) {
          legend.appendChild(
            h("span", { class: "lg" }, h("span", { class: "swatch", style: { background: l.color } }), l.label)
          );
        });
        figure.lines = ls.map(function (l) {
          return { label: l.label, points: l.mean.length, group: !!l.group, n: l.n };
        });
        var xScale = u ? u.scales.x : null;
        var keep = xScale && u && u.__zoomed ? [xScale.min, xScale.max] : null;
        if (u) u.destroy();
        var cfg = {
          width: Math.max(240, Math.floor(plotEl.getBoundingClientRect().width || 800)),
          height: 380,
          series: cfgSeries,
          bands: bands,
          legend: { show: false },
          scales: { x: { time: state.x === "wall" }, y: state.log ? { distr: 3 } : {} },
          axes: [{ label: XMODES[state.x], labelSize: 22 }, { size: 70 }],
          cursor: { drag: { x: true, y: false, setScale: true } },
          hooks: {
            setCursor: [showHover],
            setScale: [
              function (uu, key) {
                if (key !== "x" || applying) return;
                clearTimeout(zoomTimer);
                zoomTimer = setTimeout(function () {
                  detail(uu.scales.x.min, uu.scales.x.max);
                }, 120);
              },
            ],
          },
        };
        u = new window.uPlot(cfg, data, plotEl);
        figure.chart = u;
        if (keep) {
          applying = true;
          u.setScale("x", { min: keep[0], max: keep[1] });
          u.__zoomed = true;
          applying = false;
        }
        figure.drawnAt = performance.now();
      }

      /** Load finer buckets for the visible x range (per run: the level with at most TOP buckets there). */
      function detail(x0, x1) {
        var full = u && u.data[0].length ? [u.data[0][0], u.data[0][u.data[0].length - 1]] : [x0, x1];
        var zoomed = x0 > full[0] || x1 < full[1];
        if (
          !zoomed &&
          series.every(function (s) {
            return s.level === 0;
          })
        )
          return Promise.resolve(null);
        var jobs = series.map(function (s) {
          var top = bucketRows(s.doc.top, s.doc.widths[0]);
          var inside = top.filter(function (r) {
            var x = xOf(s, r);
            return LL.isNum(x) && x >= x0 && x <= x1;
          });
          if (!zoomed || !inside.length) {
            s.rows = top;
            s.level = 0;
            return Promise.resolve();
          }
          var w0 = s.doc.widths[0];
          return LL.curveRange(
            s.run.id,
            s.k,
            s.doc,
            inside[0].b * w0,
            (inside[inside.length - 1].b + 1) * w0,
            TOP
          ).then(function (got) {
            s.rows = got.rows;
            s.level = got.level;
          });
        });
        return Promise.all(jobs).then(function () {
          var levels = series.map(function (s) {
            return s.level;
          });
          figure.levels = levels;
          draw();
          if (zoomed) {
            applying = true;
            u.setScale("x", { min: x0, max: x1 });
            u.__zoomed = true;
            applying = false;
          }
          status.textContent =
            (zoomed ? "Zoomed: " : "") +
            series.length +
            " curves; bucket level " +
            (Math.max.apply(null, levels.concat([0])) || 0) +
            (zoomed ? " in the visible range. Double-click to reset." : ". Drag across the chart to zoom.");
          return null;
        });
      }

      function showHover(uu) {
        var left = uu.cursor.left;
        if (left === undefined || left === null || left < 0) return;
        var x = uu.posToVal(left, "x");
        LL.clear(hover);
        hover.appendChild(
          h("p", { class: "muted" }, XMODES[state.x] + " ≈ " + (state.x === "wall" ? LL.fmt.time(x) : LL.fmt.num(x, 6)))
        );
        var rows = current.map(function (l) {
          var lo = 0,
            hi = l.X.length - 1,
            j = -1;
          while (lo <= hi) {
            var mid = (lo + hi) >> 1;
            if (l.X[mid] <= x) {
              j = mid;
              lo = mid + 1;
            } else hi = mid - 1;
          }
          var r = j >= 0 ? l.info[j] : null;
          var text = "–";
          if (r && LL.isNum(r.mean)) {
            text = LL.fmt.num(r.mean, 6);
            if (r.n > 1 && r.min !== r.max)
              text += l.group
                ? " [" + LL.fmt.num(r.min, 4) + ", " + LL.fmt.num(r.max, 4) + "]"
                : " (min " + LL.fmt.num(r.min, 4) + ", max " + LL.fmt.num(r.max, 4) + ", " + r.n + " values)";
          }
          var where = r
            ? "steps " + LL.fmt.num(r.b * r.w) + (r.w > 1 ? "–" + LL.fmt.num((r.b + 1) * r.w - 1) : "")
            : "";
          return h(
            "tr",
            null,
            h("th", { scope: "row" }, h("span", { class: "swatch", style: { background: l.color } }), " ", l.label),
            h("td", { class: "n mono" }, text),
            h("td", { class: "muted small" }, where)
          );
        });
        hover.appendChild(h("table", { class: "data compact" }, h("tbody", null, rows)));
      }

      function redraw() {
        save();
        draw();
      }
      cScalar.querySelector("select").addEventListener("change", function (ev) {
        state.scalar = /** @type {HTMLSelectElement} */ (ev.target).value;
        save();
        loadScalar().then(draw);
      });
      cX.querySelector("select").addEventListener("change", function (ev) {
        state.x = /** @type {HTMLSelectElement} */ (ev.target).value;
        if (u) u.__zoomed = false;
        series.forEach(function (s) {
          s.rows = bucketRows(s.doc.top, s.doc.widths[0]);
        });
        redraw();
      });
      cGroup.querySelector("select").addEventListener("change", function (ev) {
        state.group = /** @type {HTMLSelectElement} */ (ev.target).value;
        redraw();
      });
      cBand.querySelector("select").addEventListener("change", function (ev) {
        state.band = /** @type {HTMLSelectElement} */ (ev.target).value;
        redraw();
      });
      cLog.addEventListener("change", function () {
        state.log = cLog.checked;
        redraw();
      });
      cSmooth.addEventListener("input", function () {
        state.smooth = Number(cSmooth.value);
        smoothText.textContent = cSmooth.value;
        redraw();
      });
      return loadScalar().then(function () {
        return new Promise(function (resolve) {
          requestAnimationFrame(function () {
            draw();
            resolve(null);
          });
        });
      });
    });
  });
})();
