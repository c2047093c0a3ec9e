// @ts-check
/* Lineage (#15): which run started from which checkpoint and which soups combined which, drawn as
   SVG in layers (parents above), run nodes linking to their run pages, soup edges labelled with
   their weights, the path to a selected model highlighted; seed 001's trajectory table under it.
   Text only via textContent. */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h;
  var NS = "http://www.w3.org/2000/svg";
  var W = 220,
    H = 80,
    GX = 30,
    GY = 56,
    PAD = 8;

  /** @param {string} tag @param {Record<string, string | number>} attrs @returns {SVGElement} */
  function svg(tag, attrs) {
    var el = /** @type {SVGElement} */ (document.createElementNS(NS, tag));
    Object.keys(attrs).forEach(function (k) {
      el.setAttribute(k, String(attrs[k]));
    });
    return el;
  }
  /**
   * A line as a head that may be cut and a tail always shown (a headline's value).
   * @typedef {{head: string, tail: string}} NodeLine
   */
  /** @param {string} head @param {string} [tail] @returns {NodeLine} */
  function line(head, tail) {
    return { head: head, tail: tail || "" };
  }

  /**
   * What a node shows: its title (a run's or soup's name, a checkpoint's file, a starting point's
   * name: on two lines when one is too narrow) and the lines under it, each cut to the node's
   * width when drawn (the node's hover title has everything whole): a run's or soup's headline
   * (the metric's name cut, never its value) and its kind with the end of its id (same-named runs
   * differ there); a checkpoint's short sha256 and step.
   * @param {LineageNode} n @returns {{title: string, lines: NodeLine[]}}
   */
  function nodeText(n) {
    if (n.type === "run" || n.type === "soup") {
      var head = n.headline || "no headline",
        cut = n.headline ? head.lastIndexOf(" ") : -1;
      return {
        title: n.name || n.label,
        lines: [
          cut > 0 ? line(head.slice(0, cut), head.slice(cut)) : line(head),
          line(n.type + (n.run_id ? " · " + n.run_id.slice(-6) : "")),
        ],
      };
    }
    if (n.type === "checkpoint") {
      var state = n.state === "changed" ? " · CHANGED" : n.state === "missing" ? " · missing" : "";
      return {
        title: n.file || n.label,
        lines: [
          line("sha256 " + (n.sha256 || "").slice(0, 12)),
          line("checkpoint" + (LL.isNum(n.step) ? " · step " + n.step : "") + state),
        ],
      };
    }
    return { title: n.name || n.label, lines: [line("external" + (n.sha256 ? " · " + n.sha256.slice(0, 12) : ""))] };
  }

  /**
   * The longest `n` (up to `hi`) for which `fits(n)`, `fits` growing false once false.
   * @param {number} hi @param {(n: number) => boolean} fits
   */
  function longest(hi, fits) {
    var lo = 0;
    while (lo < hi) {
      var mid = Math.ceil((lo + hi) / 2);
      if (fits(mid)) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /**
   * Lay out each node's text to its width, measured as drawn (the graph must be in the page): the
   * title on one line, else on two (the first broken after a "-", "_", ".", "/" or space near its
   * end when there is one), the second, when the rest is still too wide, "…" and the title's end,
   * so both ends of a long name or file show; each other line the longest start of its head that
   * fits with "…" and its tail. Lines stack from the top; `data-full` keeps each whole.
   * @param {SVGElement} box
   */
  function fitLabels(box) {
    var room = W - 2 * PAD;
    /** @param {SVGTextElement} t @param {string} text */
    function width(t, text) {
      t.textContent = text;
      return t.getComputedTextLength();
    }
    box.querySelectorAll("g.node").forEach(function (g) {
      var els = /** @type {SVGTextElement[]} */ (/** @type {unknown} */ (Array.from(g.querySelectorAll("text"))));
      var first = els[0],
        second = els[1],
        full = first.getAttribute("data-full") || "";
      if (width(first, full) <= room) {
        second.textContent = "";
      } else {
        var n = longest(full.length, function (k) {
          return width(first, full.slice(0, k)) <= room;
        });
        var sep = Math.max.apply(
          null,
          ["-", "_", ".", "/", " "].map(function (c) {
            return full.lastIndexOf(c, n - 1) + 1;
          })
        );
        if (sep > n * 0.6) n = sep;
        first.textContent = full.slice(0, n);
        var rest = full.slice(n);
        if (width(second, rest) > room) {
          var m = longest(rest.length, function (k) {
            return width(second, "…" + rest.slice(rest.length - k)) <= room;
          });
          second.textContent = "…" + rest.slice(rest.length - m);
        }
      }
      var y = 18;
      els.forEach(function (t, i) {
        if (i === 1 && !t.textContent) return t.setAttribute("visibility", "hidden");
        t.removeAttribute("visibility");
        t.setAttribute("y", String(y));
        y += 17;
        if (i < 2) return;
        var head = t.getAttribute("data-head") || "",
          tail = t.getAttribute("data-tail") || "";
        if (width(t, head + tail) <= room) return;
        var k = longest(head.length, function (c) {
          return width(t, head.slice(0, c) + "…" + tail) <= room;
        });
        t.textContent = head.slice(0, k).trimEnd() + "…" + tail;
      });
    });
  }

  /** @param {LineagePayload} data @returns {{ box: SVGElement, select: (id: string) => void, fit: () => void }} */
  function drawGraph(data) {
    /** @type {Record<number, LineageNode[]>} */
    var layers = {};
    data.nodes.forEach(function (n) {
      (layers[n.layer] = layers[n.layer] || []).push(n);
    });
    var depth = Object.keys(layers).length;
    var widest = Math.max.apply(
      null,
      Object.keys(layers).map(function (k) {
        return layers[Number(k)].length;
      })
    );
    var width = widest * (W + GX) + GX,
      height = depth * (H + GY) + GY;
    /** @type {Record<string, {x: number, y: number}>} */
    var pos = {};
    Object.keys(layers).forEach(function (k) {
      var row = layers[Number(k)];
      var offset = (width - row.length * (W + GX) + GX) / 2;
      row.forEach(function (n, i) {
        pos[n.id] = { x: offset + i * (W + GX), y: GY / 2 + Number(k) * (H + GY) };
      });
    });
    var box = svg("svg", {
      class: "lineage-graph",
      viewBox: "0 0 " + width + " " + height,
      width: width,
      height: height,
      role: "img",
      "aria-label": "lineage graph: " + data.nodes.length + " nodes",
    });
    /** @type {Record<string, SVGElement>} */
    var edgeEls = {};
    data.edges.forEach(function (e, i) {
      var a = pos[e.source],
        b = pos[e.target];
      if (!a || !b) return;
      var g = svg("g", { class: "edge edge-" + e.kind, "data-source": e.source, "data-target": e.target });
      var x1 = a.x + W / 2,
        y1 = a.y + H,
        x2 = b.x + W / 2,
        y2 = b.y;
      g.appendChild(
        svg("path", {
          d:
            "M" +
            x1 +
            "," +
            y1 +
            " C" +
            x1 +
            "," +
            (y1 + GY / 2) +
            " " +
            x2 +
            "," +
            (y2 - GY / 2) +
            " " +
            x2 +
            "," +
            y2,
          fill: "none",
        })
      );
      if (LL.isNum(e.weight)) {
        var t = svg("text", { x: (x1 + x2) / 2 + 4, y: (y1 + y2) / 2, class: "weight" });
        t.textContent = String(Math.round(e.weight * 1e4) / 1e4);
        g.appendChild(t);
      }
      box.appendChild(g);
      edgeEls[String(i)] = g;
    });
    /** @type {Record<string, SVGElement>} */
    var nodeEls = {};
    data.nodes.forEach(function (n) {
      var p = pos[n.id];
      var g = svg("g", {
        class: "node node-" + n.type + (n.state === "changed" ? " changed" : ""),
        "data-id": n.id,
        transform: "translate(" + p.x + "," + p.y + ")",
      });
      var text = nodeText(n);
      var title = svg("title", {});
      title.textContent =
        n.label +
        (n.run_id && n.type !== "checkpoint" ? "\n" + n.type + " " + n.run_id : "") +
        (n.sha256 ? "\nsha256 " + n.sha256 : "") +
        (n.state === "changed" ? "\nCHANGED since logged" : "");
      g.appendChild(title);
      g.appendChild(svg("rect", { width: W, height: H, rx: n.type === "soup" ? 14 : 4 }));
      [text.title, ""].forEach(function (t, i) {
        var el = svg("text", { x: PAD, y: 18 + 17 * i, class: "line name", "data-full": t });
        el.textContent = t;
        g.appendChild(el);
      });
      text.lines.forEach(function (l, i) {
        var el = svg("text", {
          x: PAD,
          y: 35 + 17 * i,
          class: "line sub",
          "data-full": l.head + l.tail,
          "data-head": l.head,
          "data-tail": l.tail,
        });
        el.textContent = l.head + l.tail;
        g.appendChild(el);
      });
      if ((n.type === "run" || n.type === "soup") && n.run_id) {
        var link = svg("a", { href: LL.safeHref(LL.link("run.html", { run: n.run_id })), class: "node-link" });
        link.appendChild(g);
        box.appendChild(link);
      } else {
        box.appendChild(g);
      }
      nodeEls[n.id] = g;
    });
    /** @param {string} id */
    function select(id) {
      /** @type {Record<string, string[]>} */
      var up = {};
      data.edges.forEach(function (e) {
        (up[e.target] = up[e.target] || []).push(e.source);
      });
      /** @type {Record<string, boolean>} */
      var on = {};
      var stack = id ? [id] : [];
      while (stack.length) {
        var cur = /** @type {string} */ (stack.pop());
        if (on[cur]) continue;
        on[cur] = true;
        (up[cur] || []).forEach(function (p) {
          stack.push(p);
        });
      }
      Object.keys(nodeEls).forEach(function (k) {
        nodeEls[k].classList.toggle("on-path", !!on[k]);
        nodeEls[k].classList.toggle("selected", k === id);
      });
      data.edges.forEach(function (e, i) {
        var el = edgeEls[String(i)];
        if (el) el.classList.toggle("on-path", !!on[e.source] && !!on[e.target]);
      });
    }
    return {
      box: box,
      select: select,
      fit: function () {
        fitLabels(box);
      },
    };
  }

  /** @param {LineagePayload} data */
  function trajectoryTable(data) {
    var rows = data.trajectory;
    if (!rows.length) return h("p", { class: "muted" }, "No runs.");
    var keys = Object.keys(rows[0]).filter(function (k) {
      return k !== "run_id" && k !== "type";
    });
    return h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { class: "trajectory" },
        h(
          "thead",
          null,
          h(
            "tr",
            null,
            keys.map(function (k) {
              return h("th", { scope: "col" }, k);
            })
          )
        ),
        h(
          "tbody",
          null,
          rows.map(function (r) {
            return h(
              "tr",
              null,
              keys.map(function (k) {
                var v = r[k];
                if (k === "stage")
                  return h("th", { scope: "row" }, h("a", { href: LL.link("run.html", { run: r.run_id }) }, String(v)));
                return h("td", null, v === null || v === undefined ? "—" : String(v));
              })
            );
          })
        )
      )
    );
  }

  LL.start(function () {
    return LL.data.lineage().then(function (data) {
      var main = LL.main();
      LL.crumbs([{ label: "Runs", href: "index.html" }, { label: "Lineage" }]);
      LL.title("Lineage");
      main.appendChild(h("h1", null, "Lineage"));
      main.appendChild(
        h(
          "p",
          { class: "sub" },
          "Which run started from which checkpoint, and which soups combined which (weights on the edges). " +
            "Click a run to open it; choose a model to highlight the path to it."
        )
      );
      if (!data.nodes.length) {
        main.appendChild(h("p", { class: "muted" }, "No runs in this site."));
        return;
      }
      var changed = data.nodes.filter(function (n) {
        return n.state === "changed";
      });
      if (changed.length)
        main.appendChild(
          LL.callout(
            "error",
            changed.length +
              " checkpoint file(s) changed after they were logged (sha256 mismatch): " +
              changed
                .map(function (n) {
                  return n.label;
                })
                .join(", ")
          )
        );
      var graph = drawGraph(data);
      var models = data.nodes.filter(function (n) {
        return n.type === "run" || n.type === "soup";
      });
      var picker = h(
        "select",
        { id: "lineage-select", "aria-label": "highlight the path to" },
        h("option", { value: "" }, "(none)"),
        models.map(function (n) {
          return h("option", { value: n.id }, n.name || n.label);
        })
      );
      var wanted = LL.params().node || "";
      picker.value = wanted;
      graph.select(wanted);
      picker.addEventListener("change", function () {
        graph.select(picker.value);
        LL.setHash(picker.value ? { node: picker.value } : {});
      });
      main.appendChild(h("p", null, h("label", null, "Path to ", picker)));
      main.appendChild(
        h("div", { class: "lineage-scroll" }, /** @type {Child} */ (/** @type {unknown} */ (graph.box)))
      );
      graph.fit(); // measured in the page
      main.appendChild(LL.section("Trajectory", "trajectory", trajectoryTable(data)));
    });
  });
})();
