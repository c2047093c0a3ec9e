// @ts-check
/* Hyperparameters: the selected runs (#runs=id,id or #where=query) as a table of config columns and
   metrics (sortable, only the columns that differ), and a metric-vs-parameter scatter chart. */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h;
  var SVGNS = "http://www.w3.org/2000/svg";

  function svg(tag, attrs) {
    var n = document.createElementNS(SVGNS, tag);
    Object.keys(attrs || {}).forEach(function (k) {
      n.setAttribute(k, String(attrs[k]));
    });
    return n;
  }
  function svgText(x, y, text, attrs) {
    var t = svg("text", Object.assign({ x: x, y: y, "font-size": 11, fill: "#333" }, attrs || {}));
    t.textContent = text;
    return t;
  }
  function isMetric(k) {
    return /^eval\./.test(k) || /^summary\./.test(k) || /^scalars\..*\.(last|min|max)$/.test(k);
  }

  /** Scatter of metric (y) against a parameter (x): numbers on a linear axis, other values as categories. */
  function scatter(rows, xKey, yKey, value) {
    var W = 640,
      H = 340,
      L = 64,
      R = 16,
      T = 12,
      B = 44;
    var pts = rows
      .map(function (r) {
        return { r: r, x: value(r, xKey), y: value(r, yKey) };
      })
      .filter(function (p) {
        return LL.isNum(p.y) && p.x !== null && p.x !== undefined;
      });
    var root = svg("svg", {
      viewBox: "0 0 " + W + " " + H,
      class: "scatter",
      id: "hp-scatter",
      role: "img",
      "aria-label": yKey + " against " + xKey,
    });
    if (!pts.length) {
      root.appendChild(
        svgText(W / 2, H / 2, "No run has both " + xKey + " and " + yKey + ".", { "text-anchor": "middle" })
      );
      return root;
    }
    var numeric = pts.every(function (p) {
      return LL.isNum(p.x);
    });
    var cats = numeric
      ? []
      : LL.labelOrder(
          pts.map(function (p) {
            return LL.valueText(p.x);
          })
        );
    var xs = pts.map(function (p) {
      return numeric ? p.x : cats.indexOf(LL.valueText(p.x));
    });
    var ys = pts.map(function (p) {
      return p.y;
    });
    var logX =
      numeric &&
      xs.every(function (v) {
        return v > 0;
      }) &&
      Math.max.apply(null, xs) / Math.min.apply(null, xs) >= 100;
    function tx(v) {
      return logX ? Math.log10(v) : v;
    }
    var x0 = Math.min.apply(null, xs.map(tx)),
      x1 = Math.max.apply(null, xs.map(tx)),
      y0 = Math.min.apply(null, ys),
      y1 = Math.max.apply(null, ys);
    if (!numeric) {
      x0 = -0.5;
      x1 = cats.length - 0.5;
    }
    if (x0 === x1) {
      x0 -= 1;
      x1 += 1;
    } else if (numeric) {
      var xpad = (x1 - x0) * 0.05;
      x0 -= xpad;
      x1 += xpad;
    }
    if (y0 === y1) {
      y0 -= Math.abs(y0) * 0.1 || 1;
      y1 += Math.abs(y1) * 0.1 || 1;
    }
    var pad = (y1 - y0) * 0.06;
    y0 -= pad;
    y1 += pad;
    function X(v) {
      return L + ((tx(v) - x0) / (x1 - x0)) * (W - L - R);
    }
    function XC(i) {
      return L + ((i - x0) / (x1 - x0)) * (W - L - R);
    }
    function Y(v) {
      return T + (1 - (v - y0) / (y1 - y0)) * (H - T - B);
    }
    root.appendChild(svg("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "none", stroke: "#bbb" }));
    for (var i = 0; i <= 4; i++) {
      var yv = y0 + ((y1 - y0) * i) / 4;
      root.appendChild(svgText(L - 6, Y(yv) + 4, LL.fmt.num(yv, 3), { "text-anchor": "end" }));
    }
    if (numeric) {
      for (i = 0; i <= 4; i++) {
        var xv = x0 + ((x1 - x0) * i) / 4;
        var shownX = logX ? Math.pow(10, xv) : xv;
        root.appendChild(
          svgText(L + ((xv - x0) / (x1 - x0)) * (W - L - R), H - B + 16, LL.fmt.num(shownX, 3), {
            "text-anchor": "middle",
          })
        );
      }
    } else {
      cats.forEach(function (c, ci) {
        root.appendChild(
          svgText(XC(ci), H - B + 16, c.length > 14 ? c.slice(0, 13) + "…" : c, { "text-anchor": "middle" })
        );
      });
    }
    root.appendChild(
      svgText(L + (W - L - R) / 2, H - 6, xKey + (logX ? " (log scale)" : ""), { "text-anchor": "middle" })
    );
    var yl = svgText(14, T + (H - T - B) / 2, yKey, { "text-anchor": "middle" });
    yl.setAttribute("transform", "rotate(-90 14 " + (T + (H - T - B) / 2) + ")");
    root.appendChild(yl);
    pts.forEach(function (p, j) {
      var cx = numeric ? X(p.x) : XC(xs[j]);
      var c = svg("circle", { cx: cx, cy: Y(p.y), r: 4, fill: LL.palette[0], "fill-opacity": 0.7, class: "pt" });
      var t = document.createElementNS(SVGNS, "title");
      t.textContent = p.r.name + ": " + xKey + " = " + LL.valueText(p.x) + ", " + yKey + " = " + LL.fmt.exact(p.y);
      c.appendChild(t);
      root.appendChild(c);
    });
    return root;
  }

  LL.start(function () {
    return LL.data.catalog().then(function (cat) {
      var main = LL.main(),
        p = LL.params();
      LL.crumbs([{ label: "Runs", href: "index.html" }, { label: "Hyperparameters" }]);
      LL.title("Hyperparameters");
      main.appendChild(h("h1", null, "Hyperparameters"));
      var runs = p.runs
        ? p.runs
            .split(",")
            .filter(Boolean)
            .map(function (id) {
              return LL.findRun(cat, id);
            })
        : LL.where.select(cat, p.where || "");
      var index = new Map();
      cat.runs.forEach(function (r, i) {
        index.set(r, i);
      });
      var names = (cat.fields && cat.fields.names) || [];
      function value(r, key) {
        var v = LL.where.field(cat, index.get(r), key);
        return v === undefined ? null : v;
      }
      var present = names.filter(function (k) {
        return runs.some(function (r) {
          return value(r, k) !== null;
        });
      });
      var configKeys = present.filter(function (k) {
        return k.indexOf("config.") === 0;
      });
      var metricKeys = present.filter(isMetric);
      function differs(k) {
        var first = null,
          seen = false;
        return runs.some(function (r) {
          var v = JSON.stringify(value(r, k));
          if (!seen) {
            seen = true;
            first = v;
            return false;
          }
          return v !== first;
        });
      }
      main.appendChild(
        h(
          "p",
          { class: "sub" },
          runs.length + " run" + (runs.length === 1 ? "" : "s"),
          p.where ? [" where ", h("code", null, p.where)] : "",
          ": " + configKeys.length + " config keys, " + metricKeys.length + " metrics. ",
          h("a", { href: LL.link("curves.html", p.runs ? { runs: p.runs } : { where: p.where }) }, "Curves"),
          " · ",
          h("a", { href: LL.link("index.html", p.where ? { where: p.where } : {}) }, "Change the selection")
        )
      );
      var onlyDiff = h("input", { type: "checkbox", id: "hp-differ", checked: p.all !== "1" });
      var lastOnly = h("input", { type: "checkbox", id: "hp-last", checked: p.minmax !== "1" });
      main.appendChild(
        h(
          "div",
          { class: "controls" },
          h("label", { class: "field", for: "hp-differ" }, onlyDiff, " only columns that differ"),
          h("label", { class: "field", for: "hp-last" }, lastOnly, " scalars: last value only")
        )
      );
      var tableBox = h("div");
      main.appendChild(LL.section("Runs × config × metrics", "hp-table", tableBox));
      function columns() {
        var cfg = configKeys.filter(function (k) {
          return !onlyDiff.checked || runs.length < 2 || differs(k);
        });
        var met = metricKeys.filter(function (k) {
          return !lastOnly.checked || !/^scalars\..*\.(min|max)$/.test(k);
        });
        if (onlyDiff.checked && runs.length >= 2) met = met.filter(differs);
        /** @type {any[]} */
        var cols = [
          {
            key: "name",
            label: "Run",
            className: "runcol",
            render: function (r) {
              return h("a", { href: LL.link("run.html", { run: r.id }), class: "runlink", title: r.id }, r.name);
            },
          },
        ];
        cfg.concat(met).forEach(function (k) {
          cols.push({
            key: k,
            label: k.indexOf("config.") === 0 ? k.slice(7) : k,
            title: k,
            num: true,
            className: k.indexOf("config.") === 0 ? "cfg" : "metric",
            value: function (r) {
              return value(r, k);
            },
            render: function (r) {
              return LL.numCell(value(r, k));
            },
          });
        });
        return { cols: cols, cfg: cfg, met: met };
      }
      var c0 = columns();
      var sort = p.sort ? { key: p.sort.replace(/^-/, ""), dir: p.sort[0] === "-" ? -1 : 1 } : null;
      var table = LL.vtable({
        columns: c0.cols,
        rows: runs,
        sort: sort,
        className: "hparams",
        rowHeight: 34,
        empty: "No runs selected.",
        onSort: function (s) {
          sort = s;
          save();
        },
      });
      tableBox.appendChild(table);

      var chartBox = h("div", { id: "hp-chart" });
      var xSel = h("select", { id: "hp-x" });
      var ySel = h("select", { id: "hp-y" });
      main.appendChild(
        LL.section(
          "Metric against parameter",
          "hp-scatter-sec",
          h(
            "div",
            { class: "controls" },
            h("label", { class: "field", for: "hp-x" }, "x ", xSel),
            h("label", { class: "field", for: "hp-y" }, "y ", ySel)
          ),
          chartBox
        )
      );
      function fill(select, keys, want) {
        LL.clear(select);
        keys.forEach(function (k) {
          select.appendChild(h("option", { value: k, selected: k === want }, k));
        });
      }
      function chart() {
        LL.clear(chartBox);
        if (!xSel.value || !ySel.value) {
          chartBox.appendChild(LL.callout("info", "The selected runs have no config key or no metric to plot."));
          return;
        }
        chartBox.appendChild(scatter(runs, xSel.value, ySel.value, value));
      }
      function options() {
        var c = columns();
        fill(xSel, c.cfg.length ? c.cfg : configKeys, p.px || xSel.value);
        var ys = c.met.length ? c.met : metricKeys;
        fill(
          ySel,
          ys,
          p.py ||
            ySel.value ||
            ys.filter(function (k) {
              return /^eval\./.test(k);
            })[0] ||
            ys.filter(function (k) {
              return /loss.*\.last$/.test(k);
            })[0]
        );
        return c;
      }
      function save() {
        LL.setHash({
          runs: p.runs,
          where: p.runs ? null : p.where,
          all: onlyDiff.checked ? null : 1,
          minmax: lastOnly.checked ? null : 1,
          sort: sort ? (sort.dir < 0 ? "-" : "") + sort.key : null,
          px: xSel.value || null,
          py: ySel.value || null,
        });
      }
      options();
      chart();
      [onlyDiff, lastOnly].forEach(function (box) {
        box.addEventListener("change", function () {
          var c = options();
          table.redraw(null, c.cols);
          chart();
          save();
        });
      });
      [xSel, ySel].forEach(function (s) {
        s.addEventListener("change", function () {
          chart();
          save();
        });
      });
    });
  });
})();
