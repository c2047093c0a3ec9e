// @ts-check
/* Catalog: every run of the site, with filters and sorting. */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h;

  function headlineKeys(runs) {
    var keys = [];
    runs.forEach(function (r) {
      Object.keys(r.headline || {}).forEach(function (k) {
        if (keys.indexOf(k) < 0) keys.push(k);
      });
    });
    if (!keys.length) {
      runs.forEach(function (r) {
        Object.keys(r.last || {}).forEach(function (k) {
          if (keys.indexOf("last." + k) < 0 && /loss|acc|f1/i.test(k)) keys.push("last." + k);
        });
      });
    }
    return keys.slice(0, 6);
  }
  function headlineValue(r, k) {
    if (k.indexOf("last.") === 0) return (r.last || {})[k.slice(5)];
    return (r.headline || {})[k];
  }

  LL.start(function () {
    return LL.data.catalog().then(function (cat) {
      var main = LL.main(),
        runs = cat.runs || [];
      var p = LL.params();
      LL.crumbs([{ label: "Runs" }]);
      LL.title("Runs");
      main.appendChild(h("h1", null, "Runs"));
      main.appendChild(
        h(
          "p",
          { class: "sub" },
          runs.length + " run" + (runs.length === 1 ? "" : "s") + " from ledger ",
          h("code", null, cat.ledger || ""),
          ". Click a run for its curves, microbatches and evaluations."
        )
      );
      var state = { q: p.q || "", group: p.group || "", status: p.status || "", tag: p.tag || "" };
      var search = h("input", {
        type: "search",
        id: "filter",
        placeholder: "name, id, group, tag…",
        value: state.q,
        "aria-label": "Filter runs",
      });
      function select(id, label, values, current) {
        var s = h(
          "select",
          { id: id, "aria-label": label },
          h("option", { value: "" }, "all"),
          values.map(function (v) {
            return h("option", { value: v, selected: v === current }, v);
          })
        );
        return h("label", { for: id, class: "field" }, label + " ", s);
      }
      var statuses = Array.from(
        new Set(
          runs.map(function (r) {
            return r.status;
          })
        )
      ).sort();
      var g = select("f-group", "Group", cat.groups || [], state.group);
      var st = select("f-status", "Status", statuses, state.status);
      var tg = select("f-tag", "Tag", cat.tags || [], state.tag);
      var count = h("span", { class: "muted", "aria-live": "polite" });
      main.appendChild(
        h("div", { class: "controls" }, h("label", { class: "field" }, "Filter ", search), g, st, tg, count)
      );

      var keys = headlineKeys(runs);
      /** @type {TableColumn<CatalogRun>[]} */
      var cols = [
        {
          key: "name",
          label: "Run",
          render: function (r) {
            if (r.unreadable) {
              return h(
                "div",
                null,
                h("span", { class: "runname" }, r.name),
                h("div", { class: "muted mono", style: { fontSize: "12px" } }, r.id),
                h("div", { class: "unreadable", role: "note" }, "could not be read: " + r.unreadable)
              );
            }
            return h(
              "div",
              null,
              h("a", { href: LL.link("run.html", { run: r.id }), class: "runlink" }, r.name),
              h("div", { class: "muted mono", style: { fontSize: "12px" } }, r.id)
            );
          },
        },
        { key: "group", label: "Group" },
        {
          key: "tags",
          label: "Tags",
          className: "hide-narrow",
          value: function (r) {
            return (r.tags || []).join(" ");
          },
          render: function (r) {
            return LL.chips(r.tags);
          },
        },
        {
          key: "status",
          label: "Status",
          render: function (r) {
            return LL.statusBadge(r.status);
          },
        },
        {
          key: "started",
          label: "Started",
          num: true,
          className: "hide-narrow",
          render: function (r) {
            return h("span", { class: "mono", title: LL.fmt.time(r.started) }, LL.fmt.time(r.started).slice(0, 16));
          },
        },
        {
          key: "duration",
          label: "Duration",
          num: true,
          className: "hide-narrow",
          render: function (r) {
            return LL.fmt.duration(r.duration);
          },
        },
        { key: "steps", label: "Steps", num: true },
        {
          key: "batches",
          label: "Microbatches",
          num: true,
          render: function (r) {
            return r.batches && !r.unreadable
              ? h("a", { href: LL.link("batches.html", { run: r.id }) }, LL.fmt.num(r.batches))
              : "–";
          },
        },
      ];
      keys.forEach(function (k) {
        cols.push({
          key: "h:" + k,
          label: k,
          num: true,
          title: "headline value recorded by the run",
          value: function (r) {
            var v = headlineValue(r, k);
            return typeof v === "number" ? v : null;
          },
          render: function (r) {
            return LL.numCell(headlineValue(r, k));
          },
        });
      });
      cols.push({
        key: "pages",
        label: "Pages",
        sortable: false,
        title: "evaluation pages (eval) and test breakdowns (grid)",
        render: function (r) {
          var links = [];
          (r.evaluations || []).forEach(function (n) {
            links.push(h("a", { href: LL.link("eval.html", { run: r.id, name: n }) }, "eval: " + n));
          });
          (r.tests || []).forEach(function (n) {
            links.push(h("a", { href: LL.link("test.html", { run: r.id, name: n }) }, "grid: " + n));
          });
          return links.length ? h("span", { class: "chips" }, links) : "–";
        },
      });
      var sort = p.sort
        ? { key: p.sort.replace(/^-/, ""), dir: p.sort[0] === "-" ? -1 : 1 }
        : { key: "started", dir: -1 };
      function matches(r) {
        if (state.group && r.group !== state.group) return false;
        if (state.status && r.status !== state.status) return false;
        if (state.tag && (r.tags || []).indexOf(state.tag) < 0) return false;
        if (state.q) {
          var hay = [r.name, r.id, r.group || "", (r.tags || []).join(" "), r.status].join(" ").toLowerCase();
          return state.q
            .toLowerCase()
            .split(/\s+/)
            .every(function (w) {
              return hay.indexOf(w) >= 0;
            });
        }
        return true;
      }
      var table = LL.table({
        columns: cols,
        rows: runs.filter(matches),
        sort: sort,
        className: "runs",
        empty: runs.length ? "No run matches the filters." : "The ledger has no runs yet.",
        onSort: function (s) {
          sort = s;
          save();
        },
      });
      function save() {
        LL.setHash({
          q: state.q,
          group: state.group,
          status: state.status,
          tag: state.tag,
          sort: (sort.dir < 0 ? "-" : "") + sort.key,
        });
      }
      function refresh() {
        var rows = runs.filter(matches);
        count.textContent = rows.length + " of " + runs.length + " shown";
        table.redraw(rows);
        save();
      }
      search.addEventListener("input", function () {
        state.q = search.value.trim();
        refresh();
      });
      var gs = g.querySelector("select"),
        sts = st.querySelector("select"),
        tgs = tg.querySelector("select");
      gs.addEventListener("change", function () {
        state.group = gs.value;
        refresh();
      });
      sts.addEventListener("change", function () {
        state.status = sts.value;
        refresh();
      });
      tgs.addEventListener("change", function () {
        state.tag = tgs.value;
        refresh();
      });
      main.appendChild(LL.section("All runs", "runs", table));
      count.textContent = runs.filter(matches).length + " of " + runs.length + " shown";

      var comps = cat.comparisons || { tables: [], documents: 0, groups: [] };
      var nTables = (comps.tables || []).length,
        nDocs = comps.documents || 0,
        nGroups = (comps.groups || []).length;
      var items = [];
      if (nTables)
        items.push(
          h(
            "li",
            null,
            h("a", { href: "compare.html#tables" }, "Version tables"),
            ": " + nTables + " suite" + (nTables === 1 ? "" : "s") + " (",
            (comps.tables || []).join(", "),
            ")"
          )
        );
      if (nDocs)
        items.push(
          h(
            "li",
            null,
            h("a", { href: "compare.html#documents" }, "Stored comparisons"),
            ": " + nDocs + " document" + (nDocs === 1 ? "" : "s")
          )
        );
      if (nGroups)
        items.push(
          h(
            "li",
            null,
            h("a", { href: "compare.html#groups" }, "Group summaries"),
            ": " + nGroups + " group" + (nGroups === 1 ? "" : "s") + " with two or more runs (recorded values)"
          )
        );
      main.appendChild(
        LL.section(
          "Comparisons",
          "comparisons",
          items.length
            ? [
                h(
                  "p",
                  null,
                  h("a", { href: "compare.html", id: "compare-link" }, "Open the Comparisons page"),
                  " — version tables with significance marks, stored comparisons and group summaries."
                ),
                h("ul", null, items),
              ]
            : h(
                "p",
                { class: "muted" },
                "Nothing to compare yet: no benchmark entries (labledger table import, or evaluations " +
                  "saved with a model), no stored comparison documents, and no group with two or more runs. ",
                h("a", { href: "compare.html" }, "The Comparisons page"),
                " fills in when they exist."
              )
        )
      );
      main.appendChild(
        LL.section(
          "Lineage",
          "lineage",
          h(
            "p",
            null,
            h("a", { href: "lineage.html", id: "lineage-link" }, "Open the Lineage page"),
            " — which run started from which checkpoint, soups with their weights, and the trajectory table."
          )
        )
      );
    });
  });
})();
