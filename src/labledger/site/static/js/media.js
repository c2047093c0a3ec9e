// @ts-check
/* Run page: the media a labledger.wandb run logged (run.media): images by step with a step slider,
   captions and mask overlays; tables (sortable, paged, images in cells); histograms over steps (the
   selected step's bars, a step slider, and a heat strip of every step). */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h;
  var SVGNS = "http://www.w3.org/2000/svg";

  /** @param {string} tag @param {Record<string, string | number>} attrs @param {string} [title] */
  function svg(tag, attrs, title) {
    var node = document.createElementNS(SVGNS, tag);
    Object.keys(attrs).forEach(function (k) {
      node.setAttribute(k, String(attrs[k]));
    });
    if (title) {
      var t = document.createElementNS(SVGNS, "title");
      t.textContent = title;
      node.appendChild(t);
    }
    return node;
  }

  /**
   * A step slider: a range input over the positions of `steps` (starting at the last, as W&B shows
   * the latest), the step it shows, and onChange(position) on every move.
   * @param {string} id @param {Num[]} steps @param {(i: number) => void} onChange
   */
  function stepSlider(id, steps, onChange) {
    var last = steps.length - 1;
    var input = /** @type {HTMLInputElement} */ (
      h("input", {
        type: "range",
        id: id,
        class: "step-slider",
        min: "0",
        max: String(last),
        step: "1",
        value: String(last),
        "aria-label": "Step",
        disabled: steps.length < 2,
      })
    );
    var label = h("output", { for: id, class: "step-label mono" });
    function show() {
      var i = Number(input.value);
      label.textContent =
        "step " + LL.fmt.num(steps[i]) + (steps.length > 1 ? " (" + (i + 1) + " of " + steps.length + ")" : "");
      onChange(i);
    }
    input.addEventListener("input", show);
    var box = /** @type {HTMLElement & {set: (i: number) => void}} */ (
      /** @type {unknown} */ (
        h("div", { class: "controls step-control" }, h("label", { for: id }, "Step"), input, label)
      )
    );
    box.set = function (i) {
      input.value = String(i);
      show();
    };
    return { box: box, start: show };
  }

  /** @param {any} run @param {RunMediaImage} img @param {string} cls */
  function imageFigure(run, img, cls) {
    var src = LL.imageSrc(run.id, img.ref);
    var pixelated = (img.w || 0) <= 64 && (img.h || 0) <= 64;
    var stack = h(
      "div",
      { class: "media-stack" },
      src
        ? h("img", { src: src, alt: img.caption || img.ref, class: pixelated ? "pixelated" : null })
        : h("span", { class: "muted" }, "(no image file)")
    );
    var legend = [];
    (img.masks || []).forEach(function (m) {
      var osrc = LL.imageSrc(run.id, m.overlay);
      if (!osrc) return;
      var overlay = h("img", {
        src: osrc,
        alt: "mask " + m.name,
        class: "media-mask" + (pixelated ? " pixelated" : ""),
        dataset: { mask: m.name },
      });
      stack.appendChild(overlay);
      var box = h("input", {
        type: "checkbox",
        checked: true,
        onchange: function () {
          overlay.hidden = !(/** @type {HTMLInputElement} */ (box).checked);
        },
      });
      legend.push(
        h(
          "div",
          { class: "mask-legend" },
          h("label", null, box, " " + m.name),
          Object.keys(m.colors || {}).map(function (id) {
            return h(
              "span",
              { class: "mask-class" },
              h("span", { class: "swatch", style: { background: m.colors[id] } }),
              (m.labels && m.labels[id]) || "class " + id
            );
          })
        )
      );
    });
    return h(
      "figure",
      { class: cls },
      stack,
      img.caption !== null && img.caption !== undefined && img.caption !== ""
        ? h("figcaption", null, String(img.caption))
        : null,
      legend
    );
  }

  /**
   * A panel's title and how many of its logged steps it shows.
   * @param {{key: string, logged: number, steps: number[]}} m
   */
  function panelHead(m) {
    var shown = m.steps.length < m.logged ? ", " + m.steps.length + " shown (evenly spaced)" : "";
    return h(
      "div",
      null,
      h("h3", null, m.key),
      h("p", { class: "muted" }, m.logged + " step" + (m.logged === 1 ? "" : "s") + " logged" + shown + ".")
    );
  }

  /** @param {any} run @param {RunMediaImages} m @param {number} n */
  function imagePanel(run, m, n) {
    var grid = h("div", { class: "media-grid" });
    var note = h("p", { class: "muted media-note" });
    var slider = stepSlider("media-img-" + n + "-step", m.steps, function (i) {
      LL.clear(grid);
      m.items[i].forEach(function (img) {
        grid.appendChild(imageFigure(run, img, "media-image"));
      });
      if (!m.items[i].length) grid.appendChild(h("p", { class: "muted" }, "No image file of this step is stored."));
      note.textContent = m.more[i] ? m.more[i] + " more images of this step are not shown." : "";
    });
    var panel = h(
      "div",
      { class: "media-panel", dataset: { key: m.key, kind: "images" } },
      panelHead(m),
      slider.box,
      grid,
      note
    );
    slider.start();
    return panel;
  }

  /** @param {any} run @param {any} v */
  function cellView(run, v) {
    if (v && typeof v === "object" && !Array.isArray(v) && typeof v.image === "string")
      return imageFigure(run, { ref: v.image, caption: v.caption, w: 0, h: 0 }, "thumb media-cell");
    if (typeof v === "number") return LL.numCell(v);
    if (v !== null && typeof v === "object") return LL.jsonTree(v, 0);
    return LL.valueText(v);
  }

  /** A cell's value for sorting: an image by its caption (or file). @param {any} v */
  function cellSortValue(v) {
    if (v && typeof v === "object" && !Array.isArray(v) && typeof v.image === "string")
      return v.caption !== null && v.caption !== undefined ? String(v.caption) : v.image;
    if (v !== null && typeof v === "object") return JSON.stringify(v);
    return v;
  }

  /** @param {any} run @param {RunMediaTables} m @param {number} n */
  function tablePanel(run, m, n) {
    var holder = h("div", { class: "media-table" });
    var note = h("p", { class: "muted" });
    var steps = m.tables.map(function (t) {
      return t.step;
    });
    var slider = stepSlider("media-table-" + n + "-step", steps, function (i) {
      var t = m.tables[i];
      var numeric = t.columns.map(function (_, c) {
        return t.data.some(function (r) {
          return typeof r[c] === "number";
        });
      });
      /** @type {TableColumn<any[]>[]} */
      var cols = t.columns.map(function (name, c) {
        return {
          key: String(c),
          label: name,
          num: numeric[c],
          value: function (r) {
            return cellSortValue(r[c]);
          },
          render: function (r) {
            return cellView(run, r[c]);
          },
        };
      });
      LL.clear(holder);
      holder.appendChild(LL.table({ columns: cols, rows: t.data, pageSize: 20, empty: "This table has no rows." }));
      note.textContent =
        LL.fmt.num(t.rows) +
        " row" +
        (t.rows === 1 ? "" : "s") +
        (t.data.length < t.rows ? "; the first " + LL.fmt.num(t.data.length) + " are shown" : "") +
        (t.results ? " (stored as the result set " + t.results + ")" : "") +
        ". Click a column's name to sort by it.";
    });
    var panel = h(
      "div",
      { class: "media-panel", dataset: { key: m.key, kind: "table" } },
      h("h3", null, m.key),
      m.tables.length < m.logged
        ? h("p", { class: "muted" }, "Logged at " + m.logged + " steps; the last " + m.tables.length + " are here.")
        : null,
      m.tables.length > 1 ? slider.box : null,
      note,
      holder
    );
    slider.start();
    return panel;
  }

  /** Bars of one step's histogram. @param {number[]} bins @param {number[]} counts */
  function histBars(bins, counts) {
    var W = 480,
      H = 160,
      pad = 4;
    var lo = bins[0],
      hi = bins[bins.length - 1];
    var top = Math.max.apply(
      null,
      counts
        .map(function (c) {
          return c || 0;
        })
        .concat([1])
    );
    var span = hi - lo || 1;
    var root = svg("svg", { viewBox: "0 0 " + W + " " + (H + 18), class: "hist-bars", role: "img" });
    counts.forEach(function (c, i) {
      var x0 = pad + ((bins[i] - lo) / span) * (W - 2 * pad),
        x1 = pad + ((bins[i + 1] - lo) / span) * (W - 2 * pad);
      var bh = ((c || 0) / top) * H;
      root.appendChild(
        svg(
          "rect",
          { x: x0, y: H - bh, width: Math.max(0.5, x1 - x0 - 0.5), height: bh, fill: "#0072B2" },
          "[" + LL.fmt.num(bins[i]) + ", " + LL.fmt.num(bins[i + 1]) + "): " + LL.fmt.num(c)
        )
      );
    });
    var axis = svg("line", { x1: pad, x2: W - pad, y1: H + 0.5, y2: H + 0.5, stroke: "#5b6470" });
    root.appendChild(axis);
    var left = svg("text", { x: pad, y: H + 14, "font-size": 11, fill: "#5b6470" });
    left.textContent = LL.fmt.num(lo);
    var right = svg("text", { x: W - pad, y: H + 14, "font-size": 11, fill: "#5b6470", "text-anchor": "end" });
    right.textContent = LL.fmt.num(hi);
    root.appendChild(left);
    root.appendChild(right);
    return root;
  }

  /**
   * Every step's histogram on common bins (each step's counts spread over the common bins its bins
   * overlap, in proportion), as columns of a heat strip: x = step, y = value, colour = share of that
   * step's count. A click on a column selects that step.
   * @param {RunMediaHistograms} m @param {(i: number) => void} pick
   */
  function heatStrip(m, pick) {
    var NB = 40,
      W = 480,
      H = 120;
    var lo = Infinity,
      hi = -Infinity;
    m.bins.forEach(function (b) {
      if (b.length && b[0] !== null) lo = Math.min(lo, b[0]);
      if (b.length && b[b.length - 1] !== null) hi = Math.max(hi, b[b.length - 1]);
    });
    if (!isFinite(lo) || !isFinite(hi)) return null;
    var span = hi - lo || 1;
    var cw = W / m.steps.length,
      ch = H / NB;
    var root = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "hist-strip", preserveAspectRatio: "none" });
    var cursor = svg("rect", { x: 0, y: 0, width: cw, height: H, fill: "none", stroke: "#D55E00", "stroke-width": 2 });
    m.steps.forEach(function (step, s) {
      var bins = m.bins[s],
        counts = m.counts[s],
        col = new Array(NB).fill(0),
        total = 0;
      counts.forEach(function (c, i) {
        var a = bins[i],
          b = bins[i + 1];
        if (c === null || a === null || b === null || !(c > 0)) return;
        total += c;
        var ia = Math.max(0, Math.floor(((a - lo) / span) * NB)),
          ib = Math.min(NB - 1, Math.floor(((b - lo) / span) * NB - 1e-9));
        if (b <= a || ib <= ia) {
          col[Math.min(NB - 1, ia)] += c;
          return;
        }
        for (var j = ia; j <= ib; j++) {
          var l = Math.max(a, lo + (j / NB) * span),
            r = Math.min(b, lo + ((j + 1) / NB) * span);
          if (r > l) col[j] += (c * (r - l)) / (b - a);
        }
      });
      var top = Math.max.apply(null, col.concat([1e-12]));
      var g = svg("g", { class: "hist-col" }, "step " + LL.fmt.num(step) + " (" + LL.fmt.num(total) + " values)");
      col.forEach(function (v, j) {
        if (!(v > 0)) return;
        g.appendChild(
          svg("rect", { x: s * cw, y: H - (j + 1) * ch, width: cw + 0.3, height: ch + 0.3, fill: LL.viridis(v / top) })
        );
      });
      g.appendChild(svg("rect", { x: s * cw, y: 0, width: cw, height: H, fill: "transparent" }));
      g.addEventListener("click", function () {
        pick(s);
      });
      root.appendChild(g);
    });
    root.appendChild(cursor);
    return {
      el: h(
        "div",
        { class: "hist-strip-box" },
        h(
          "p",
          { class: "muted" },
          "Every step (left to right), values " +
            LL.fmt.num(lo) +
            " (bottom) to " +
            LL.fmt.num(hi) +
            " (top); brighter = more of that step's values. Click a step to show it."
        ),
        root
      ),
      move: function (/** @type {number} */ s) {
        cursor.setAttribute("x", String(s * cw));
      },
    };
  }

  /** @param {RunMediaHistograms} m @param {number} n */
  function histogramPanel(m, n) {
    var bars = h("div", { class: "hist-holder" });
    /** @type {{el: HTMLElement, move: (s: number) => void} | null} */
    var strip = null;
    var slider = stepSlider("media-hist-" + n + "-step", m.steps, function (i) {
      LL.clear(bars);
      var bins = /** @type {number[]} */ (m.bins[i]),
        counts = /** @type {number[]} */ (m.counts[i]);
      var total = counts.reduce(function (a, c) {
        return a + (c || 0);
      }, 0);
      if (bins.length !== counts.length + 1 || !counts.length) {
        bars.appendChild(h("p", { class: "muted" }, "This step's histogram has no bins."));
      } else {
        bars.appendChild(histBars(bins, counts));
        bars.appendChild(
          h(
            "p",
            { class: "muted hist-summary" },
            counts.length + " bins, " + LL.fmt.num(total) + " values at step " + LL.fmt.num(m.steps[i]) + "."
          )
        );
      }
      if (strip) strip.move(i);
    });
    if (m.steps.length > 1) strip = heatStrip(m, slider.box.set);
    var panel = h(
      "div",
      { class: "media-panel", dataset: { key: m.key, kind: "histogram" } },
      panelHead(m),
      slider.box,
      bars,
      strip ? strip.el : null
    );
    slider.start();
    return panel;
  }

  /**
   * The run page's media section (null when the run logged none): images, tables, histograms.
   * @param {any} run
   */
  LL.mediaSection = function (run) {
    /** @type {RunMedia | null} */
    var media = run.media;
    if (!media) return null;
    var sec = LL.section("Media", "media");
    var parts = [];
    if (media.images.length)
      parts.push(
        h(
          "div",
          { id: "media-images" },
          media.images.map(function (m, i) {
            return imagePanel(run, m, i);
          })
        )
      );
    if (media.tables.length)
      parts.push(
        h(
          "div",
          { id: "media-tables" },
          media.tables.map(function (m, i) {
            return tablePanel(run, m, i);
          })
        )
      );
    if (media.histograms.length)
      parts.push(
        h(
          "div",
          { id: "media-histograms" },
          media.histograms.map(function (m, i) {
            return histogramPanel(m, i);
          })
        )
      );
    if (!parts.length) return null;
    sec.appendChild(
      h(
        "p",
        { class: "muted" },
        "Images, tables and histograms the run logged (media.jsonl), by step. Move a slider (or focus it and use the arrow keys) to change the step."
      )
    );
    parts.forEach(function (p) {
      sec.appendChild(p);
    });
    return sec;
  };
})();
