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
  var W = 190,
    H = 46,
    GX = 30,
    GY = 56;

  /** @param {string} tag @param {Record<string, string | number>} attrs @returns {SVGElement} */
  function svg(tag, attrs) {
    var el = /** @type {SVGElement} */ (document.createElementNS(NS, tag));
    Object.keys(attrs).forEach(function (k) {
      el.setAttribute(k, String(attrs[k]));
    });
    return el;
  }
  /** @param {string} text @param {number} n */
  function clip(text, n) {
    return text.length > n ? text.slice(0, n - 1) + "…" : text;
  }

  /** @param {LineagePayload} data @returns {{ box: SVGElement, select: (id: string) => void }} */
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
      var title = svg("title", {});
      title.textContent =
        n.label + (n.sha256 ? "\nsha256 " + n.sha256 : "") + (n.state === "changed" ? "\nCHANGED since logged" : "");
      g.appendChild(title);
      g.appendChild(svg("rect", { width: W, height: H, rx: n.type === "soup" ? 14 : 4 }));
      var line1 = svg("text", { x: 8, y: 18 });
      var line2 = svg("text", { x: 8, y: 36, class: "sub" });
      var kind = n.type === "checkpoint" ? "checkpoint" : n.type === "external" ? "external" : n.type;
      line1.textContent = clip(n.type === "checkpoint" ? n.label : n.name || n.label, 28);
      line2.textContent = clip(kind + (n.type === "run" || n.type === "soup" ? " · " + n.label : ""), 32);
      g.appendChild(line1);
      g.appendChild(line2);
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
    return { box: box, select: select };
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
      { class: "table-scroll" },
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
      main.appendChild(LL.section("Trajectory", "trajectory", trajectoryTable(data)));
    });
  });
})();
