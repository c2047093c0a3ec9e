// @ts-check
/* Diff of two runs (#a=id&b=id): what `labledger diff A B --no-compare --json` reports, computed
   the same way from each run's data/diff/<run>.js (config, environment, data, scalar summaries,
   stored evaluations; only what differs). */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h;
  var SECTIONS = ["config", "environment", "data", "scalars", "evaluations"];
  var TITLES = {
    config: "Config",
    environment: "Environment",
    data: "Data",
    scalars: "Scalar summaries",
    evaluations: "Stored evaluations",
  };

  function isNumber(v) {
    return typeof v === "number";
  }
  function same(a, b) {
    if (a === undefined || b === undefined) return a === b;
    if (isNumber(a) && isNumber(b)) return a === b;
    if (typeof a !== typeof b || Array.isArray(a) !== Array.isArray(b) || (a === null) !== (b === null)) return false;
    if (a === null || typeof a !== "object") return a === b;
    var ka = Object.keys(a).sort(),
      kb = Object.keys(b).sort();
    if (ka.length !== kb.length) return false;
    for (var i = 0; i < ka.length; i++) if (ka[i] !== kb[i] || !same(a[ka[i]], b[kb[i]])) return false;
    return true;
  }
  function byCodePoint(x, y) {
    var a = Array.from(x),
      b = Array.from(y);
    for (var i = 0; i < Math.min(a.length, b.length); i++) {
      var d = /** @type {number} */ (a[i].codePointAt(0)) - /** @type {number} */ (b[i].codePointAt(0));
      if (d) return d;
    }
    return a.length - b.length;
  }

  /** The changes between two sections, as rundiff._changes gives them: [{key, a, b, delta?, only?}]. */
  function changes(a, b) {
    var keys = Object.keys(a || {});
    Object.keys(b || {}).forEach(function (k) {
      if (keys.indexOf(k) < 0) keys.push(k);
    });
    keys.sort(byCodePoint);
    var out = [];
    keys.forEach(function (k) {
      var inA = Object.prototype.hasOwnProperty.call(a || {}, k),
        inB = Object.prototype.hasOwnProperty.call(b || {}, k);
      var va = inA ? a[k] : undefined,
        vb = inB ? b[k] : undefined;
      if (same(va, vb)) return;
      /** @type {Record<string, any>} */
      var row = { key: k, a: inA ? va : null, b: inB ? vb : null };
      if (isNumber(va) && isNumber(vb)) row.delta = vb - va;
      if (!inA || !inB) row.only = inB ? "b" : "a";
      out.push(row);
    });
    return out;
  }
  /** The diff document (without paired comparisons) of two runs' sides. */
  function diffDoc(sa, sb) {
    /** @type {Record<string, any>} */
    var doc = { a: { id: sa.id, name: sa.name }, b: { id: sb.id, name: sb.name } };
    SECTIONS.forEach(function (s) {
      doc[s] = changes(sa[s], sb[s]);
    });
    return doc;
  }
  LL.diffDoc = diffDoc;

  function cell(v, missing) {
    if (missing) return h("span", { class: "muted" }, "(missing)");
    if (v !== null && typeof v === "object") return h("code", { class: "json" }, JSON.stringify(v));
    return typeof v === "number" ? LL.numCell(v) : LL.valueText(v);
  }

  /** The result sets a run's side lists (data: results.<name>.rows). */
  function resultSets(side) {
    return Object.keys((side && side.data) || {})
      .map(function (k) {
        var m = /^results\.(.+)\.rows$/.exec(k);
        return m ? m[1] : null;
      })
      .filter(function (n) {
        return n !== null;
      });
  }

  /** Paired comparisons of the result sets both runs stored (labledger diff's, precomputed). */
  function comparisonsSection(comparisons, ra, rb, resamples) {
    var title = "Paired comparisons";
    if (comparisons === null)
      return LL.section(
        title,
        "sec-comparisons",
        h(
          "p",
          { class: "muted", id: "comparisons-missing" },
          "Both runs stored result sets, but the site compares only runs of the same group (or name) " +
            "near each other in time. Run ",
          h("code", null, "labledger diff " + ra.id + " " + rb.id),
          " for the paired comparison."
        )
      );
    if (!comparisons.length)
      return LL.section(
        title + " (0)",
        "sec-comparisons",
        h("p", { class: "muted" }, "No result set both runs stored.")
      );
    var rows = [];
    comparisons.forEach(function (c) {
      if (!c.paired) {
        rows.push(h("tr", null, h("th", { scope: "row" }, c.results), h("td", { colspan: 9, class: "muted" }, c.note)));
        return;
      }
      (c.metrics || []).forEach(function (m) {
        rows.push(
          h(
            "tr",
            null,
            h("th", { scope: "row" }, c.results),
            h("td", null, m.task),
            h("td", { class: "mono" }, m.metric),
            h("td", { class: "n" }, LL.isNum(m.n) ? LL.fmt.num(m.n) : "–"),
            h("td", { class: "n" }, LL.numCell(m.a)),
            h("td", { class: "n" }, LL.numCell(m.b)),
            h("td", { class: "n" }, LL.numCell(m.diff)),
            h(
              "td",
              { class: "n" },
              LL.isNum(m.ci_low) && LL.isNum(m.ci_high)
                ? "[" + LL.fmt.num(m.ci_low) + ", " + LL.fmt.num(m.ci_high) + "]"
                : "–"
            ),
            h("td", { class: "n" }, LL.fmt.p(m.p)),
            h("td", { class: "muted" }, m.method || "–")
          )
        );
      });
    });
    return LL.section(
      title + " (" + comparisons.length + ")",
      "sec-comparisons",
      h(
        "p",
        { class: "muted" },
        "Each result set both runs stored, B against A on the n items they share, computed when the site " +
          "was built" +
          (resamples ? " (bootstraps draw " + LL.fmt.num(resamples) + " resamples)" : "") +
          "; the interval column says how each interval was formed."
      ),
      h(
        "div",
        { class: "scroll" },
        h(
          "table",
          { class: "data diff", id: "diff-comparisons" },
          h(
            "thead",
            null,
            h(
              "tr",
              null,
              ["result set", "task", "metric", "n", "A", "B", "B − A", "95% CI", "p", "interval"].map(function (t, i) {
                return h("th", { scope: "col", class: i >= 3 && i < 9 ? "n" : null }, t);
              })
            )
          ),
          h("tbody", null, rows)
        )
      )
    );
  }

  LL.start(function () {
    return LL.data.catalog().then(function (cat) {
      var main = LL.main(),
        p = LL.params();
      LL.crumbs([{ label: "Runs", href: "index.html" }, { label: "Diff" }]);
      LL.title("Diff");
      var ra = LL.findRun(cat, p.a),
        rb = LL.findRun(cat, p.b);
      return Promise.all([LL.data.diffSide(ra.id), LL.data.diffSide(rb.id)]).then(function (sides) {
        var shared = resultSets(sides[0]).filter(function (n) {
          return resultSets(sides[1]).indexOf(n) >= 0;
        });
        if (!shared.length) return render(sides, []);
        return LL.data
          .diffPaired(ra.id)
          .catch(function () {
            return null;
          })
          .then(function (paired) {
            var found = paired && paired.partners && paired.partners[rb.id];
            return render(sides, found || null, paired ? paired.resamples : null);
          });
      });
      /**
       * @param {any[]} sides
       * @param {any[] | null} comparisons  null: the builder did not compare this pair
       * @param {number | null} [resamples]
       */
      function render(sides, comparisons, resamples) {
        var doc = diffDoc(sides[0], sides[1]);
        doc.comparisons = comparisons;
        window.LABLEDGER["diff/doc"] = doc;
        main.appendChild(h("h1", null, "Diff: " + ra.name + " → " + rb.name));
        main.appendChild(
          h(
            "p",
            { class: "sub" },
            "A = ",
            h("a", { href: LL.link("run.html", { run: ra.id }) }, ra.name),
            " (",
            h("code", null, ra.id),
            "), B = ",
            h("a", { href: LL.link("run.html", { run: rb.id }) }, rb.name),
            " (",
            h("code", null, rb.id),
            "). Only what differs; the same as ",
            h("code", null, "labledger diff " + ra.id + " " + rb.id),
            ". ",
            h("a", { href: LL.link("diff.html", { a: rb.id, b: ra.id }), id: "diff-swap" }, "Swap A and B"),
            " · ",
            h("a", { href: LL.link("curves.html", { runs: ra.id + "," + rb.id }) }, "Curves of both")
          )
        );
        var total = 0;
        SECTIONS.forEach(function (s) {
          var rows = doc[s];
          total += rows.length;
          var body = rows.length
            ? h(
                "div",
                { class: "scroll" },
                h(
                  "table",
                  { class: "data diff", id: "diff-" + s },
                  h(
                    "thead",
                    null,
                    h(
                      "tr",
                      null,
                      h("th", { scope: "col" }, "key"),
                      h("th", { scope: "col" }, "A"),
                      h("th", { scope: "col" }, "B"),
                      h("th", { scope: "col", class: "n" }, "B − A")
                    )
                  ),
                  h(
                    "tbody",
                    null,
                    rows.map(function (r) {
                      return h(
                        "tr",
                        { class: r.only ? "only-" + r.only : null },
                        h("th", { scope: "row", class: "mono" }, r.key),
                        h("td", null, cell(r.a, r.only === "b")),
                        h("td", null, cell(r.b, r.only === "a")),
                        h("td", { class: "n" }, LL.isNum(r.delta) ? LL.numCell(r.delta) : "–")
                      );
                    })
                  )
                )
              )
            : h("p", { class: "muted" }, "No differences.");
          main.appendChild(LL.section(TITLES[s] + " (" + rows.length + ")", "sec-" + s, body));
        });
        main.appendChild(comparisonsSection(doc.comparisons, ra, rb, resamples));
        if (!total) main.appendChild(LL.callout("info", "The two runs do not differ in anything the diff compares."));
      }
    });
  });
})();
