// @ts-check
/* labledger site: interactive line charts on the vendored uPlot (drag to zoom, double-click to
   reset, hover for exact values), plus small SVG charts (reliability diagrams). */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h;
  var SVGNS = "http://www.w3.org/2000/svg";
  /** Values beyond ± this are left out of a chart's y range (and said under the chart). */
  var OFF_CHART = 1e300;

  /** Exponential moving average that skips missing values (never replaces the raw series). */
  LL.ema = function (values, alpha) {
    var out = new Array(values.length);
    /** @type {number | null} */
    var last = null;
    for (var i = 0; i < values.length; i++) {
      var v = values[i];
      if (v === null || v === undefined || !isFinite(v)) {
        out[i] = null;
        continue;
      }
      last = last === null ? v : alpha * last + (1 - alpha) * v;
      out[i] = last;
    }
    return out;
  };

  /**
   * The buckets of a level of a scalar's summaries (site/curves.py) as rows:
   * {b, w, n, mean, min, max, last, minfirst, rt, ex}; a step is [b * w, (b + 1) * w).
   */
  LL.bucketRows = function (/** @type {any} */ cols, /** @type {number} */ w) {
    var out = [];
    for (var i = 0; i < cols.b.length; i++) {
      var mean = cols.mean[i];
      out.push({
        b: cols.b[i],
        w: w,
        n: cols.n[i],
        mean: mean,
        min: cols.min ? cols.min[i] : mean,
        max: cols.max ? cols.max[i] : mean,
        last: cols.last ? cols.last[i] : mean,
        minfirst: cols.minfirst ? cols.minfirst[i] : 1,
        rt: cols.rt ? cols.rt[i] : null,
        ex: cols.ex ? cols.ex[i] : null,
      });
    }
    return out;
  };

  /**
   * The rows of scalar k of a run (its summaries `doc`, LL.data.curve) for the steps
   * [s0, s1) (widened to whole top-level buckets): the finest level with at most `limit` buckets there, its chunks loaded on demand,
   * and the top level's rows on either side. Resolves to {rows, level} (level 0: the top alone).
   */
  LL.curveRange = function (
    /** @type {string} */ runId,
    /** @type {number} */ k,
    /** @type {any} */ doc,
    /** @type {number} */ s0,
    /** @type {number} */ s1,
    /** @type {number} */ limit
  ) {
    var top = LL.bucketRows(doc.top, doc.widths[0]);
    var w0 = doc.widths[0];
    s0 = Math.floor(s0 / w0) * w0; // whole top buckets, so the finer rows replace them exactly
    s1 = (Math.floor((s1 - 1) / w0) + 1) * w0;
    var level = 0;
    for (var l = 1; l < doc.widths.length; l++) if ((s1 - s0) / doc.widths[l] <= limit) level = l;
    if (level === 0) return Promise.resolve({ rows: top, level: 0 });
    var w = doc.widths[level];
    var need = [];
    doc.chunks[level].forEach(function (/** @type {number[]} */ rg, /** @type {number} */ c) {
      if ((rg[1] + 1) * w > s0 && rg[0] * w < s1) need.push(c);
    });
    return Promise.all(
      need.map(function (c) {
        return LL.data.curveChunk(runId, k, level, c);
      })
    ).then(function (parts) {
      var fine = [];
      parts.forEach(function (part) {
        LL.bucketRows(part, w).forEach(function (r) {
          if (r.b * w >= s0 && r.b * w < s1) fine.push(r);
        });
      });
      var rows = top
        .filter(function (r) {
          return (r.b + 1) * w0 <= s0;
        })
        .concat(
          fine,
          top.filter(function (r) {
            return r.b * w0 >= s1;
          })
        );
      return { rows: rows, level: level };
    });
  };

  /** Tick labels with as many decimals as the tick spacing needs (uPlot's default rounds 1e-4 to 0). */
  function tickText(u, splits) {
    var finite = splits.filter(function (v) {
      return v !== null && isFinite(v);
    });
    if (!finite.length) return splits;
    var step = finite.length > 1 ? Math.abs(finite[1] - finite[0]) : Math.abs(finite[0]) || 1;
    var big = Math.max.apply(null, finite.map(Math.abs));
    if (big !== 0 && (big < 1e-3 || big >= 1e7)) {
      return splits.map(function (v) {
        return v === null
          ? ""
          : v === 0
            ? "0"
            : v.toExponential(Math.max(0, Math.min(6, Math.ceil(Math.log10(big / step)))));
      });
    }
    var decimals = 0; // the fewest decimals that write the tick spacing exactly (0.25 -> 2)
    while (decimals < 10 && step > 0) {
      var scaled = step * Math.pow(10, decimals);
      if (Math.abs(scaled - Math.round(scaled)) < 1e-6 * Math.max(1, scaled)) break;
      decimals++;
    }
    return splits.map(function (v) {
      if (v === null) return "";
      var t = v.toFixed(decimals);
      return decimals === 0 && Math.abs(v) >= 1000 ? Number(t).toLocaleString("en-US") : t;
    });
  }

  function width(el) {
    return Math.max(260, Math.floor(el.getBoundingClientRect().width || el.clientWidth || 600));
  }

  /**
   * A line chart. opts: {title, x: [...], xLabel, series: [{label, values, color}], smoothing (0 = off),
   * marks: [{x, label}], hlines: [{y, label}], onPick(index, x), pickHint, height, onZoom(min, max, zoomed)}.
   * Returns the container element; element.chart is the uPlot instance.
   */
  LL.lineChart = function (opts) {
    var box = /** @type {ChartFigure} */ (h("figure", { class: "chart" }));
    var caption = h("figcaption", null, h("span", { class: "chart-title" }, opts.title || ""));
    var resetBtn = h(
      "button",
      { type: "button", class: "small", title: "Show the whole x range (or double-click the chart)" },
      "Reset zoom"
    );
    caption.appendChild(resetBtn);
    box.appendChild(caption);
    var plotEl = h("div", { class: "plot" });
    box.appendChild(plotEl);
    var pickEl = opts.onPick ? h("p", { class: "pick-hint muted" }, opts.pickHint || "") : null;
    if (pickEl) box.appendChild(pickEl);
    if (typeof window.uPlot !== "function") {
      plotEl.appendChild(LL.callout("error", "The chart library (static/vendor/uplot) did not load."));
      return box;
    }
    var data = [opts.x];
    var series = [
      {
        label: opts.xLabel || "x",
        value: function (u, v) {
          return LL.fmt.exact(v);
        },
      },
    ];
    var alpha = opts.smoothing || 0;
    opts.series.forEach(function (s, i) {
      var color = s.color || LL.palette[i % LL.palette.length];
      data.push(s.values);
      series.push({
        label: s.label,
        stroke: color,
        width: alpha ? 1 : 1.5,
        spanGaps: false,
        alpha: alpha ? 0.45 : 1,
        points: { show: opts.x.length <= 400, size: 5, fill: color },
        value: function (u, v) {
          return LL.fmt.exact(v);
        },
      });
      if (alpha) {
        data.push(LL.ema(s.values, alpha));
        series.push({
          label: s.label + " (EMA " + alpha + ")",
          stroke: color,
          width: 2.25,
          points: { show: false },
          value: function (u, v) {
            return v === null || v === undefined ? "–" : LL.fmt.num(v, 6);
          },
        });
      }
    });
    var marks = opts.marks || [],
      hlines = opts.hlines || [];
    function drawMarks(u) {
      var ctx = u.ctx;
      ctx.save();
      ctx.lineWidth = 1.5 * devicePixelRatio;
      marks.forEach(function (m) {
        var px = u.valToPos(m.x, "x", true);
        if (!isFinite(px) || px < u.bbox.left || px > u.bbox.left + u.bbox.width) return;
        ctx.strokeStyle = m.color || "#D55E00";
        ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
        ctx.beginPath();
        ctx.moveTo(px, u.bbox.top);
        ctx.lineTo(px, u.bbox.top + u.bbox.height);
        ctx.stroke();
        ctx.setLineDash([]);
        ctx.fillStyle = m.color || "#D55E00";
        ctx.font = 11 * devicePixelRatio + "px system-ui, sans-serif";
        var tw = ctx.measureText(m.label || "").width;
        var tx =
          px + 4 * devicePixelRatio + tw > u.bbox.left + u.bbox.width
            ? px - 4 * devicePixelRatio - tw
            : px + 4 * devicePixelRatio;
        // The label sits in the padding above the plot area, clear of the lines.
        ctx.textBaseline = "bottom";
        ctx.fillText(m.label || "", tx, u.bbox.top - 3 * devicePixelRatio);
        ctx.textBaseline = "alphabetic";
      });
      hlines.forEach(function (g) {
        var py = u.valToPos(g.y, "y", true);
        if (!isFinite(py) || py < u.bbox.top || py > u.bbox.top + u.bbox.height) return;
        ctx.strokeStyle = g.color || "#555";
        ctx.setLineDash([2 * devicePixelRatio, 3 * devicePixelRatio]);
        ctx.beginPath();
        ctx.moveTo(u.bbox.left, py);
        ctx.lineTo(u.bbox.left + u.bbox.width, py);
        ctx.stroke();
        ctx.setLineDash([]);
        ctx.fillStyle = g.color || "#555";
        ctx.font = 11 * devicePixelRatio + "px system-ui, sans-serif";
        ctx.fillText(g.label || "", u.bbox.left + 4 * devicePixelRatio, py - 3 * devicePixelRatio);
      });
      ctx.restore();
    }
    /** How many values of the series lie beyond ±OFF_CHART (their own range would overflow). */
    function offChart() {
      var n = 0;
      for (var k = 1; k < data.length; k++)
        (data[k] || []).forEach(function (/** @type {any} */ v) {
          if (typeof v === "number" && isFinite(v) && Math.abs(v) > OFF_CHART) n++;
        });
      return n;
    }
    // The y range from the values within ±OFF_CHART and the hlines: a value like MLflow's
    // ±1.797e308 (its stand-in for ±inf) makes max - min overflow, and uPlot's own range a blank chart.
    function yRange(/** @type {any} */ _u, /** @type {number} */ min, /** @type {number} */ max) {
      if (!(Math.abs(min) <= OFF_CHART && Math.abs(max) <= OFF_CHART)) {
        min = Infinity;
        max = -Infinity;
        for (var k = 1; k < data.length; k++)
          (data[k] || []).forEach(function (/** @type {any} */ v) {
            if (typeof v === "number" && Math.abs(v) <= OFF_CHART) {
              min = Math.min(min, v);
              max = Math.max(max, v);
            }
          });
        if (min > max) min = max = 0;
      }
      hlines.forEach(function (g) {
        if (isFinite(g.y) && Math.abs(g.y) <= OFF_CHART) {
          min = Math.min(min, g.y);
          max = Math.max(max, g.y);
        }
      });
      var pad = (max - min) * 0.05 || Math.abs(max) * 0.05 || 0.05;
      return [min - pad, max + pad];
    }
    var offNote = h("p", { class: "muted small off-chart" });
    function noteOffChart() {
      var n = offChart();
      offNote.hidden = n === 0;
      offNote.textContent = n
        ? n +
          " value(s) beyond ±1e300 are off the chart (MLflow stores ±inf as ±1.8e308); hover over their step to read them."
        : "";
      return n > 0;
    }
    box.appendChild(offNote);
    var ownRange = noteOffChart() || hlines.length > 0;
    var u = null,
      downAt = null,
      zoomTimer = 0;
    var cfg = {
      width: 600,
      height: opts.height || 240,
      series: series,
      // Room above the plot area for the marks' labels (null: uPlot's own padding).
      padding: marks.length ? [20, null, null, null] : [null, null, null, null],
      scales: { x: { time: false }, y: ownRange ? { range: yRange } : {} },
      axes: [
        { label: opts.xLabel || null, labelSize: opts.xLabel ? 22 : 0, values: tickText },
        { size: 64, values: tickText },
      ],
      cursor: { drag: { x: true, y: false, setScale: true }, points: { size: 7 } },
      legend: { live: true },
      hooks: {
        draw: [drawMarks],
        // opts.onZoom(min, max, zoomed): the x range shown changed (debounced; zoomed: less than
        // the data's whole range), e.g. to load finer buckets of a scalar's summaries
        setScale: [
          function (/** @type {any} */ uu, /** @type {string} */ key) {
            if (key !== "x" || !opts.onZoom) return;
            clearTimeout(zoomTimer);
            zoomTimer = setTimeout(function () {
              var sx = uu.scales.x,
                xs = opts.x;
              if (sx.min === null || sx.max === null || !xs.length) return;
              opts.onZoom(sx.min, sx.max, sx.min > xs[0] || sx.max < xs[xs.length - 1]);
            }, 120);
          },
        ],
        setCursor: [
          function (uu) {
            if (!pickEl) return;
            var i = uu.cursor.idx;
            pickEl.textContent =
              i === null || i === undefined ? opts.pickHint || "" : opts.pickLabel ? opts.pickLabel(i, opts.x[i]) : "";
          },
        ],
      },
    };
    // uPlot needs a laid-out container; create once the figure is in the document.
    function create() {
      if (u || !box.isConnected) return;
      cfg.width = width(plotEl);
      u = new window.uPlot(cfg, data, plotEl);
      box.chart = u;
      box.drawnAt = performance.now(); // read by bench/site.py
      resetBtn.addEventListener("click", function () {
        u.setScale("x", { min: opts.x[0], max: opts.x[opts.x.length - 1] });
      });
      if (opts.onPick) {
        u.over.style.cursor = "pointer";
        u.over.addEventListener("mousedown", function (e) {
          downAt = [e.clientX, e.clientY];
        });
        u.over.addEventListener("click", function (e) {
          if (downAt && (Math.abs(e.clientX - downAt[0]) > 3 || Math.abs(e.clientY - downAt[1]) > 3)) return;
          var i = u.cursor.idx;
          if (i !== null && i !== undefined) opts.onPick(i, opts.x[i]);
        });
      }
      if (window.ResizeObserver) {
        var last = cfg.width,
          timer = null;
        new ResizeObserver(function () {
          clearTimeout(timer);
          timer = setTimeout(function () {
            var w = width(plotEl);
            if (Math.abs(w - last) > 4) {
              last = w;
              u.setSize({ width: w, height: cfg.height });
            }
          }, 80);
        }).observe(plotEl);
      }
    }
    box.mount = create;
    /**
     * New data for the same series (a live page's appended steps): the chart is updated in place,
     * so a zoomed-in x range stays where the user put it; an unzoomed chart grows with the data.
     */
    box.setData = function (/** @type {number[]} */ x, /** @type {any[][]} */ values) {
      var first = opts.x[0],
        last = opts.x[opts.x.length - 1];
      opts.x = x;
      data = [x];
      values.forEach(function (v) {
        data.push(v);
        if (alpha) data.push(LL.ema(v, alpha));
      });
      if (noteOffChart() && !ownRange) {
        ownRange = true;
        cfg.scales.y = { range: yRange };
        if (u) u.scales.y.range = yRange;
      }
      if (!u) return;
      var sx = u.scales.x,
        zoomed = sx.min !== null && sx.max !== null && (sx.min > first || sx.max < last);
      u.setData(data, !zoomed);
    };
    requestAnimationFrame(create);
    return box;
  };

  function svg(tag, attrs) {
    var n = document.createElementNS(SVGNS, tag);
    Object.keys(attrs || {}).forEach(function (k) {
      n.setAttribute(k, String(attrs[k]));
    });
    return n;
  }
  function svgText(x, y, text, attrs) {
    var t = svg("text", Object.assign({ x: x, y: y }, attrs || {}));
    t.textContent = text;
    return t;
  }

  /**
   * Reliability diagram (SVG): bins [{low, high, count, confidence, accuracy}] per series;
   * series: [{label, bins, color, dashed}]. The diagonal is perfect calibration.
   */
  LL.reliabilityChart = function (seriesList, opts) {
    opts = opts || {};
    var W = 320,
      H = 300,
      L = 44,
      T = 12,
      R = 12,
      B = 40,
      pw = W - L - R,
      ph = H - T - B;
    var root = svg("svg", {
      viewBox: "0 0 " + W + " " + H,
      class: "reliability",
      role: "img",
      "aria-label": opts.label || "Reliability diagram: accuracy against confidence",
    });
    function X(v) {
      return L + v * pw;
    }
    function Y(v) {
      return T + (1 - v) * ph;
    }
    root.appendChild(svg("rect", { x: L, y: T, width: pw, height: ph, fill: "none", stroke: "#bbb" }));
    [0, 0.25, 0.5, 0.75, 1].forEach(function (v) {
      root.appendChild(svg("line", { x1: X(v), x2: X(v), y1: T + ph, y2: T + ph + 4, stroke: "#777" }));
      root.appendChild(
        svgText(X(v), T + ph + 15, String(v), { "text-anchor": "middle", "font-size": 10, fill: "#444" })
      );
      root.appendChild(svg("line", { x1: L - 4, x2: L, y1: Y(v), y2: Y(v), stroke: "#777" }));
      root.appendChild(svgText(L - 6, Y(v) + 3, String(v), { "text-anchor": "end", "font-size": 10, fill: "#444" }));
    });
    root.appendChild(
      svgText(L + pw / 2, H - 6, opts.xLabel || "confidence (top-label probability)", {
        "text-anchor": "middle",
        "font-size": 11,
        fill: "#222",
      })
    );
    var yl = svgText(12, T + ph / 2, opts.yLabel || "accuracy", {
      "text-anchor": "middle",
      "font-size": 11,
      fill: "#222",
    });
    yl.setAttribute("transform", "rotate(-90 12 " + (T + ph / 2) + ")");
    root.appendChild(yl);
    root.appendChild(
      svg("line", { x1: X(0), y1: Y(0), x2: X(1), y2: Y(1), stroke: "#999", "stroke-dasharray": "4 3" })
    );
    seriesList.forEach(function (s, si) {
      var color = s.color || LL.palette[si % LL.palette.length];
      var pts = s.bins.filter(function (b) {
        return b.count > 0 && LL.isNum(b.confidence) && LL.isNum(b.accuracy);
      });
      var maxCount = Math.max.apply(
        null,
        pts
          .map(function (b) {
            return b.count;
          })
          .concat([1])
      );
      if (pts.length > 1) {
        root.appendChild(
          svg("polyline", {
            points: pts
              .map(function (b) {
                return X(b.confidence) + "," + Y(b.accuracy);
              })
              .join(" "),
            fill: "none",
            stroke: color,
            "stroke-width": 2,
            "stroke-dasharray": s.dashed ? "5 3" : "none",
          })
        );
      }
      pts.forEach(function (b) {
        var c = svg("circle", {
          cx: X(b.confidence),
          cy: Y(b.accuracy),
          r: 2.5 + 4 * Math.sqrt(b.count / maxCount),
          fill: color,
          "fill-opacity": 0.75,
          stroke: "#fff",
        });
        var t = document.createElementNS(SVGNS, "title");
        t.textContent =
          s.label +
          ": confidence " +
          b.confidence.toFixed(4) +
          ", accuracy " +
          b.accuracy.toFixed(4) +
          ", " +
          b.count +
          " items";
        c.appendChild(t);
        root.appendChild(c);
      });
    });
    var legend = h(
      "div",
      { class: "legend-inline" },
      seriesList.map(function (s, si) {
        return h(
          "span",
          { class: "lg" },
          h("span", {
            class: "swatch" + (s.dashed ? " dashed" : ""),
            style: { background: s.color || LL.palette[si % LL.palette.length] },
          }),
          s.label
        );
      })
    );
    return h("figure", { class: "svgchart" }, root, legend);
  };
})();
