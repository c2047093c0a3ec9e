// @ts-check
/* Comparisons: version tables of the benchmark ledger (with significance marks), stored comparison
   documents, and summaries of the values recorded by groups of runs. Text only via textContent. */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h,
    isNum = LL.isNum;

  /** @param {Num | undefined} v */
  function pct(v) {
    return isNum(v) ? (100 * v).toFixed(2) + "%" : "—";
  }
  /** @param {Num | undefined} v */
  function pp(v) {
    return isNum(v) ? (v >= 0 ? "+" : "−") + Math.abs(100 * v).toFixed(2) + "pp" : "—";
  }
  /** @param {Num} lo @param {Num} hi */
  function exactRange(lo, hi) {
    return "[" + LL.fmt.exact(lo) + ", " + LL.fmt.exact(hi) + "]";
  }

  /* ------------------------------------------------------------------ version tables */
  /** The p-value a mark is read from: the adjusted one when the table adjusts (#16). @param {VersionTableRow} row */
  function markP(row) {
    return isNum(row.p_adjusted) ? row.p_adjusted : row.p_value;
  }
  /** @param {VersionTableRow} row @param {string | null | undefined} adjust */
  function markOf(row, adjust) {
    var p = markP(row);
    var which = isNum(row.p_adjusted) && adjust && adjust !== "none" ? "adjusted p (" + adjust + ")" : "p";
    var shown = isNum(p) ? which + " = " + LL.fmt.exact(p) : which + " unknown";
    if (row.significance === "significant") return h("span", { class: "sig-mark sig", title: shown + " < 0.05" }, "*");
    if (row.significance === "not significant")
      return h("span", { class: "sig-mark ns", title: shown + " ≥ 0.05" }, "n.s.");
    return null;
  }
  /** "(MDE x pp)" beside an n.s. mark: inconclusive, not "no change". @param {VersionTableRow} row */
  function mdeOf(row) {
    if (row.significance !== "not significant" || !isNum(row.mde)) return null;
    return h(
      "span",
      { class: "mde muted", title: "minimum detectable effect at 80% power, alpha 0.05" },
      " (MDE " + (100 * row.mde).toFixed(1) + " pp)"
    );
  }
  /** @param {VersionTableRow} row @param {string} ciLabel */
  function deltaTitle(row, ciLabel) {
    if (!isNum(row.delta)) return null;
    var t = "delta " + LL.fmt.exact(row.delta);
    if (row.delta_ci) {
      t += "; paired bootstrap " + ciLabel + " [" + pp(row.delta_ci[0]) + ", " + pp(row.delta_ci[1]) + "]";
      if (isNum(row.p_value)) t += "; p = " + LL.fmt.exact(row.p_value);
      if (isNum(row.p_adjusted)) t += "; adjusted p = " + LL.fmt.exact(row.p_adjusted);
      if (isNum(row.mde)) t += "; MDE " + pp(row.mde);
      if (row.warning) t += "; " + row.warning;
    } else {
      t += "; not tested (no stored predictions on the same items)";
    }
    return t;
  }
  /** @param {VersionTableRow} row @param {string} col */
  function valueTitle(row, col) {
    var v = row.values[col];
    if (!isNum(v)) return "no entry for " + col;
    var t = col + ": " + LL.fmt.exact(v);
    var ci = row.ci[col],
      n = row.n[col];
    if (ci && isNum(ci[0])) t += "; stored CI " + exactRange(ci[0], ci[1]);
    if (isNum(n)) t += "; n = " + n;
    return t;
  }

  /** The ranking entry of column `col` in a row ranked on its predictions (`table --ranks`).
   * @param {VersionTableRow} row @param {string} col @returns {RankEntryView | null} */
  function rankOf(row, col) {
    if (!row.ranking) return null;
    return (
      row.ranking.systems.filter(function (e) {
        return e.name === col;
      })[0] || null
    );
  }
  /** @param {VersionTableRow} row @param {RankEntryView | null} rk */
  function rankTitle(row, rk) {
    if (!rk || !row.ranking) return "";
    var r = row.ranking;
    return (
      "; rank " +
      rk.rank +
      ", joint " +
      LL.fmt.ciLabel(r.ci) +
      " rank interval [" +
      rk.rank_low +
      ", " +
      rk.rank_high +
      "] over the row's " +
      r.systems.length +
      " columns (n = " +
      r.n +
      (r.clusters ? ", " + r.clusters + " clusters" : "") +
      ")" +
      (rk.tied_with_best ? "; not separable from the best" : "")
    );
  }

  /** @param {VersionTable} t @param {number} index */
  function versionTable(t, index) {
    var cols = t.columns,
      delta = t.delta;
    var id = "table-" + index;
    var ciLabel = LL.fmt.ciLabel(t.ci);
    var head = h(
      "tr",
      null,
      h("th", { scope: "col" }, "Benchmark (metric)"),
      cols.map(function (c) {
        return h("th", { scope: "col", class: "n" }, c);
      }),
      delta
        ? h(
            "th",
            { scope: "col", class: "n", title: "last column minus the first model" },
            "Δ " + delta.to + " − " + delta.from
          )
        : null
    );
    var body = h("tbody");
    var cats = Array.from(
      new Set(
        t.rows.map(function (r) {
          return r.category || "";
        })
      )
    );
    var showCats = cats.length > 1 || (cats.length === 1 && cats[0] !== "");
    /** @type {string | null} */
    var last = null;
    t.rows.forEach(function (r) {
      var cat = r.category || "";
      if (showCats && cat !== last) {
        body.appendChild(
          h(
            "tr",
            { class: "cat" },
            h("th", { scope: "rowgroup", colspan: cols.length + 1 + (delta ? 1 : 0) }, cat || "(no category)")
          )
        );
      }
      last = cat;
      body.appendChild(
        h(
          "tr",
          { class: r.significance === "significant" ? "row-sig" : null },
          h(
            "th",
            { scope: "row" },
            h("span", { class: "bench" }, r.benchmark),
            " ",
            h("span", { class: "muted metric-id" }, "(" + r.metric_id + ")")
          ),
          cols.map(function (c) {
            var rk = rankOf(r, c);
            return h(
              "td",
              { class: "n" + (rk && rk.tied_with_best ? " tie-best" : ""), title: valueTitle(r, c) + rankTitle(r, rk) },
              pct(r.values[c]),
              rk
                ? h("span", { class: "rank-mark" }, " #" + rk.rank + " [" + rk.rank_low + "–" + rk.rank_high + "]")
                : null,
              rk && rk.tied_with_best ? h("span", { class: "rank-tie" }, " ≈1") : null
            );
          }),
          delta
            ? h(
                "td",
                { class: "n delta", title: deltaTitle(r, ciLabel) },
                pp(r.delta),
                markOf(r, t.adjust) ? " " : null,
                markOf(r, t.adjust),
                mdeOf(r)
              )
            : null
        )
      );
    });
    var mean = t.mean;
    body.appendChild(
      h(
        "tr",
        { class: "mean" },
        h("th", { scope: "row" }, "Mean (" + (mean.n || 0) + " benchmark" + (mean.n === 1 ? "" : "s") + ")"),
        cols.map(function (c) {
          return h(
            "td",
            { class: "n", title: isNum(mean.values[c]) ? c + ": " + LL.fmt.exact(mean.values[c]) : null },
            pct(mean.values[c])
          );
        }),
        delta
          ? h(
              "td",
              {
                class: "n delta",
                title: isNum(mean.delta) ? "delta of the means " + LL.fmt.exact(mean.delta) + " (not tested)" : null,
              },
              pp(mean.delta)
            )
          : null
      )
    );
    var table = h("table", { class: "data version-table", id: id }, h("thead", null, head), body);
    var parts = [
      h("h3", null, "Suite ", h("code", null, t.suite)),
      h(
        "p",
        { class: "sub" },
        t.rows.length +
          " benchmark" +
          (t.rows.length === 1 ? "" : "s") +
          " × " +
          cols.length +
          " column" +
          (cols.length === 1 ? "" : "s") +
          (delta ? "; delta from " + delta.from + " (the first model) to " + delta.to + " (the last column)" : "") +
          "."
      ),
      h("div", { class: "scroll" }, table),
    ];
    if (t.warnings.length) {
      parts.push(
        h(
          "div",
          { class: "callout warn table-warnings" },
          h("strong", null, "Warnings"),
          h(
            "ul",
            null,
            t.warnings.map(function (w) {
              return h("li", null, w);
            })
          )
        )
      );
    }
    if (t.family) parts.push(h("p", { class: "family" }, "Deltas tested: " + t.family + "; marks use the adjusted p."));
    parts.push(h("p", { class: "definition muted" }, t.definition || ""));
    return h("div", { class: "vtable", id: "suite-" + index }, parts);
  }

  /* ------------------------------------------------------------------ comparison documents */
  /**
   * @param {Record<string, CatalogRun>} runs
   * @param {string} id
   * @param {string | null} [label]
   */
  function runLink(runs, id, label) {
    var r = runs[id];
    if (r && !r.unreadable) return h("a", { href: LL.link("run.html", { run: id }) }, label || r.name);
    return h("span", null, label || id);
  }
  /** @param {Json | undefined} v @param {string | undefined} text */
  function withText(v, text) {
    var shown = LL.valueText(v);
    return text !== undefined && text !== shown ? shown + " (" + text + ")" : shown;
  }
  /**
   * The discordant items of one task: both counts, a cluster filter, and the items (compare --items).
   * @param {ComparisonTaskView} t
   */
  function flipsView(t) {
    var f = t.flips;
    if (!f) return null;
    var byError = f.basis === "error";
    var counts = byError
      ? f.a_better + " with A's error smaller, " + f.b_better + " with B's"
      : f.a_better + " A right & B wrong, " + f.b_better + " A wrong & B right";
    /** @type {string[]} */
    var clusters = [];
    f.items.forEach(function (x) {
      var c = x.cluster === null || x.cluster === undefined ? null : String(x.cluster);
      if (c !== null && clusters.indexOf(c) < 0) clusters.push(c);
    });
    clusters.sort();
    /** @type {TableColumn<FlippedItemView>[]} */
    var columns = [
      {
        key: "better",
        label: "",
        render: function (x) {
          return x.better === "a" ? "A>B" : "B>A";
        },
      },
      { key: "id", label: "Item" },
    ];
    if (clusters.length) columns.push({ key: "cluster", label: "Cluster" });
    columns.push(
      {
        key: "gold",
        label: "Gold",
        render: function (x) {
          return withText(x.gold, x.target);
        },
      },
      {
        key: "pred_a",
        label: "A",
        render: function (x) {
          return withText(x.pred_a, x.output_a);
        },
      },
      {
        key: "pred_b",
        label: "B",
        render: function (x) {
          return withText(x.pred_b, x.output_b);
        },
      }
    );
    if (byError)
      columns.push({ key: "error_a", label: "|err A|", num: true }, { key: "error_b", label: "|err B|", num: true });
    columns.push({
      key: "prompt",
      label: "Prompt",
      className: "prompt",
      render: function (x) {
        return h("span", { title: x.prompt_b ? "B's prompt: " + x.prompt_b : null }, x.prompt || "");
      },
    });
    var holder = h("div", { class: "flip-items" });
    /** @param {string} only */
    function draw(only) {
      LL.clear(holder);
      holder.appendChild(
        LL.table({
          className: "flips",
          rows: f
            ? f.items.filter(function (x) {
                return !only || String(x.cluster) === only;
              })
            : [],
          columns: columns,
          pageSize: 20,
          empty: "No item of this cluster flipped.",
        })
      );
    }
    draw("");
    var filter = null;
    if (clusters.length > 1) {
      var select = h(
        "select",
        {
          "aria-label": "Cluster",
          onchange: function () {
            draw(/** @type {HTMLSelectElement} */ (select).value);
          },
        },
        h("option", { value: "" }, "every cluster"),
        clusters.map(function (c) {
          return h("option", { value: c }, c);
        })
      );
      filter = h("label", null, "Cluster: ", select);
    }
    var note =
      f.shown < f.listed
        ? h("p", { class: "muted" }, "The first " + f.shown + " of " + f.listed + " items; the document has them all.")
        : null;
    return h(
      "div",
      { class: "flips" },
      h(
        "h4",
        null,
        "Items that flipped in task ",
        h("code", null, t.task),
        f.cluster ? " (cluster " + f.cluster + ")" : "",
        ": " + counts
      ),
      filter,
      holder,
      note
    );
  }

  /** @param {ComparisonView} doc @param {Record<string, CatalogRun>} runs */
  function comparisonDoc(doc, runs) {
    var r = runs[doc.run];
    var names = doc.names;
    var head = h("h3", null, String(names.a || "a"), " − ", String(names.b || "b"));
    var where = h(
      "p",
      { class: "sub" },
      "Stored by run ",
      runLink(runs, doc.run, doc.run_name),
      " as ",
      r && !r.unreadable && (r.evaluations || []).indexOf(doc.name) >= 0
        ? h("a", { href: LL.link("eval.html", { run: doc.run, name: doc.name }) }, doc.name)
        : h("code", null, doc.name),
      ". a = ",
      h("code", null, String(doc.a || "")),
      ", b = ",
      h("code", null, String(doc.b || "")),
      isNum(doc.ci)
        ? "; " + LL.fmt.ciLabel(doc.ci) + "s" + (isNum(doc.resamples) ? " from " + doc.resamples + " resamples" : "")
        : "",
      "."
    );
    var family = doc.family ? h("p", { class: "family muted" }, "p-values adjusted: " + doc.family + ".") : null;
    var prompts = doc.tasks
      .filter(function (t) {
        return isNum(t.prompts_differ) && t.prompts_differ > 0;
      })
      .map(function (t) {
        return h(
          "p",
          { class: "warning" },
          "Task ",
          h("code", null, t.task),
          ": " + t.prompts_differ + " paired items have different prompts in A and B (paired on the document id)."
        );
      });
    return h("div", { class: "cdoc" }, head, where, LL.comparisonTable(doc), family, prompts, doc.tasks.map(flipsView));
  }

  /* ------------------------------------------------------------------ groups */
  /** @param {GroupSummary} g @param {Record<string, CatalogRun>} runs @param {string} definition */
  function groupSummary(g, runs, definition) {
    var table = LL.table({
      className: "group-summary",
      sortable: false,
      rows: g.metrics,
      empty: "No run of this group recorded a numeric headline value.",
      columns: [
        {
          key: "key",
          label: "Recorded value",
          render: function (m) {
            return h(
              "span",
              {
                title: m.values
                  .map(function (v) {
                    var r = runs[v[0]];
                    return (r ? r.name : v[0]) + ": " + LL.fmt.exact(v[1]);
                  })
                  .join("\n"),
              },
              m.key
            );
          },
        },
        {
          key: "n",
          label: "Runs",
          num: true,
          render: function (m) {
            return m.n + " of " + g.runs.length;
          },
        },
        { key: "mean", label: "Mean", num: true },
        { key: "std", label: "Std (n − 1)", num: true },
        { key: "min", label: "Min", num: true },
        { key: "max", label: "Max", num: true },
      ],
    });
    return h(
      "div",
      { class: "gsum" },
      h("h3", null, "Group ", h("code", null, g.group)),
      h(
        "p",
        { class: "sub" },
        g.runs.length + " runs: ",
        g.runs.map(function (r, i) {
          return [i ? ", " : "", runLink(runs, r.id, r.name)];
        }),
        "."
      ),
      h("p", { class: "badge recorded" }, "recorded values — not recomputed, not tested"),
      table,
      h("p", { class: "definition muted" }, definition)
    );
  }

  LL.start(function () {
    return Promise.all([LL.data.catalog(), LL.data.compare()]).then(function (got) {
      var cat = got[0],
        data = got[1],
        main = LL.main();
      /** @type {Record<string, CatalogRun>} */
      var runs = {};
      cat.runs.forEach(function (r) {
        runs[r.id] = r;
      });
      LL.crumbs([{ label: "Runs", href: "index.html" }, { label: "Comparisons" }]);
      LL.title("Comparisons");
      main.appendChild(h("h1", null, "Comparisons"));
      main.appendChild(
        h(
          "p",
          { class: "sub" },
          "Version tables from the benchmark ledger, comparison documents stored by the runs of this site, " +
            "and summaries of the values recorded by groups of runs. Hover a value for its exact number and CI."
        )
      );
      var tables = data.tables,
        docs = data.comparisons,
        groups = data.groups;
      main.appendChild(
        h(
          "ul",
          { class: "toc" },
          h("li", null, h("a", { href: "#tables" }, "Version tables (" + tables.length + ")")),
          h("li", null, h("a", { href: "#documents" }, "Stored comparisons (" + docs.length + ")")),
          h("li", null, h("a", { href: "#groups" }, "Group summaries (" + groups.length + ")"))
        )
      );
      main.appendChild(
        LL.section(
          "Version tables",
          "tables",
          tables.length
            ? tables.map(versionTable)
            : h(
                "p",
                { class: "muted" },
                "The benchmark ledger is empty: import a table (labledger table import) or save evaluations with a model."
              )
        )
      );
      main.appendChild(
        LL.section(
          "Stored comparisons",
          "documents",
          docs.length
            ? docs.map(function (d) {
                return comparisonDoc(d, runs);
              })
            : h(
                "p",
                { class: "muted" },
                "No run of this site stored a comparison document (ledger.save_evaluation(run, name, doc, kind='comparison'))."
              )
        )
      );
      main.appendChild(
        LL.section(
          "Group summaries (recorded values)",
          "groups",
          groups.length
            ? groups.map(function (g) {
                return groupSummary(g, runs, data.group_definition || "");
              })
            : h("p", { class: "muted" }, "No group has two or more runs in this site.")
        )
      );
      var target = location.hash.replace(/^#/, "");
      if (/^(tables|documents|groups)$/.test(target)) document.getElementById(target).scrollIntoView();
    });
  });
})();
