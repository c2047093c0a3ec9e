// @ts-check
/* Catalog: every run of the site, with filters and sorting. The catalog comes in parts
   (labledger/site/catalog.py): the head holds the newest runs and the page draws them first, then
   loads the chunks of older runs, newest first; filters and sorting work over the runs loaded, and
   the page says so until every chunk is in. */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h;
  /* The head's runs are drawn at once when they are this many; fewer, and the newest chunk is
     loaded first (a screenful before the first paint). */
  var FIRST_RUNS = 100;
  /* Chunks loading at once, and how often (ms) the table is redrawn while they come in. */
  var PARALLEL = 4;
  var REDRAW_MS = 300;

  /* The last value of each scalar: in the entry, or in the query fields (scalars.<name>.last). */
  var lastOf = function (r, k) {
    return (r.last || {})[k];
  };
  /** The headline columns: from the head's headline names, else the last values of losses, accuracies, F1. */
  function headlineKeys(head, fieldNames) {
    var keys = (head.headline || []).slice();
    if (!keys.length) {
      var names = (head.last || []).slice();
      fieldNames.forEach(function (f) {
        var m = /^scalars\.(.*)\.last$/.exec(f);
        if (m && names.indexOf(m[1]) < 0) names.push(m[1]);
      });
      names.forEach(function (k) {
        if (keys.indexOf("last." + k) < 0 && /loss|acc|f1/i.test(k)) keys.push("last." + k);
      });
    }
    return keys.slice(0, 6);
  }
  function headlineValue(r, k) {
    if (k.indexOf("last.") === 0) return lastOf(r, k.slice(5));
    return (r.headline || {})[k];
  }

  LL.start(function () {
    return LL.data.catalogHead().then(function (head) {
      var names = LL.catalogNames(head),
        nChunks = (head.chunks || []).length;
      /* parts[0]: the head's runs (the newest); parts[1 + j]: chunk nChunks - 1 - j */
      /** @type {any[]} */
      var parts = new Array(nChunks + 1).fill(null);
      parts[0] = LL.catalogPart(head, names);
      var next = nChunks - 1; // the next chunk to load
      var first = Promise.resolve();
      if (parts[0].runs.length < FIRST_RUNS && nChunks) {
        first = LL.data.catalogChunk(next).then(function (c) {
          parts[1] = LL.catalogPart(c, names);
        });
        next -= 1;
      }
      return first.then(function () {
        draw(head, names, parts, next);
      });
    });
  });

  /**
   * The page, from the parts loaded (see LL.start above), then every chunk from `next` down to 0.
   * @param {any} head @param {string[]} names @param {any[]} parts @param {number} next
   */
  function draw(head, names, parts, next) {
    var total = head.n === undefined ? parts[0].runs.length : head.n;
    var cat = LL.joinCatalog(head, parts.filter(Boolean)),
      main = LL.main(),
      runs = cat.runs || [];
    var complete = runs.length >= total;
    var p = LL.params();
    LL.crumbs([{ label: "Runs" }]);
    LL.title("Runs");
    main.appendChild(h("h1", null, "Runs"));
    main.appendChild(
      h(
        "p",
        { class: "sub" },
        LL.fmt.num(total) + " run" + (total === 1 ? "" : "s") + " from ledger ",
        h("code", null, cat.ledger || ""),
        ". Click a run for its curves, microbatches and evaluations."
      )
    );
    var state = {
      q: p.q || "",
      group: p.group || "",
      status: p.status || "",
      tag: p.tag || "",
      where: p.where || "",
    };
    var known = names;
    var queryRows = LL.where.rowsOf(cat);
    /** @type {Record<string, any>} */
    var byId = {};
    queryRows.forEach(function (q) {
      byId[q.id] = q;
    });
    /** @type {Record<string, boolean>} */
    var selected = {};
    /* the runs the URL selects that are not loaded yet (selected as they come in) */
    /** @type {Record<string, boolean>} */
    var wanted = {};
    (p.sel || "").split(",").forEach(function (id) {
      if (id && byId[id]) selected[id] = true;
      else if (id && !complete) wanted[id] = true;
    });
    /** @type {((row: any) => boolean) | null} */
    var whereTest = null;
    var whereBox = h("input", {
      type: "text",
      id: "where",
      class: "mono",
      spellcheck: "false",
      placeholder: "config.lr < 1e-3 and status = 'finished'",
      value: state.where,
      "aria-label": "Query (the language of labledger runs --where)",
      "aria-describedby": "where-help",
    });
    var whereErr = h("pre", { id: "where-error", class: "query-error", role: "alert", hidden: true });
    var whereHelp = h(
      "p",
      { id: "where-help", class: "muted small" },
      "The same expressions as ",
      h("code", null, "labledger runs --where"),
      ": config.<key>, scalars.<name>.last|min|max, summary.<key>, eval.<set>.<metric>, name, group, status, " +
        "tags has 'x', started, duration; = != < <= > >= ~ in (...) between … and …, is null, and/or/not."
    );
    function compileWhere() {
      whereTest = null;
      whereErr.hidden = true;
      whereBox.removeAttribute("aria-invalid");
      if (!state.where.trim()) return;
      try {
        whereTest = LL.where.compile(state.where, known, LL.where.catalogKinds(cat)).test;
      } catch (e) {
        if (!e || !e.query) throw e;
        whereErr.textContent = e.message;
        whereErr.hidden = false;
        whereBox.setAttribute("aria-invalid", "true");
        whereTest = function () {
          return false;
        };
      }
    }
    compileWhere();
    lastOf = function (r, k) {
      var v = r.last ? r.last[k] : undefined;
      if (v !== undefined) return v;
      var q = byId[r.id];
      return q ? q.fields("scalars." + k + ".last") : undefined;
    };
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
    var statuses = head.statuses || [];
    var g = select("f-group", "Group", cat.groups || [], state.group);
    var st = select("f-status", "Status", statuses, state.status);
    var tg = select("f-tag", "Tag", cat.tags || [], state.tag);
    var count = h("span", { class: "muted", "aria-live": "polite" });
    var progress = h("p", { id: "catalog-loading", class: "muted small", role: "status", hidden: complete });
    main.appendChild(
      h(
        "div",
        { class: "query" },
        h("label", { for: "where", class: "field wide" }, "Query ", whereBox),
        whereErr,
        whereHelp
      )
    );
    main.appendChild(
      h("div", { class: "controls" }, h("label", { class: "field" }, "Filter ", search), g, st, tg, count)
    );
    main.appendChild(progress);
    var selCount = h("span", { id: "sel-count", class: "muted" });
    var curvesLink = h("a", { id: "open-curves", class: "button", href: "curves.html" }, "Curves");
    var hparamsLink = h("a", { id: "open-hparams", class: "button", href: "hparams.html" }, "Hyperparameters");
    var diffLink = h("a", { id: "open-diff", class: "button", href: "diff.html" }, "Diff");
    var clearSel = h("button", { type: "button", id: "sel-clear", class: "small" }, "Clear selection");
    main.appendChild(h("div", { class: "controls selection" }, selCount, curvesLink, hparamsLink, diffLink, clearSel));

    var keys = headlineKeys(head, known);
    /** @type {TableColumn<CatalogRun>[]} */
    var cols = [
      {
        key: "sel",
        label: "Select",
        sortable: false,
        className: "sel",
        head: function () {
          var all = h("input", {
            type: "checkbox",
            id: "sel-all",
            "aria-label": "Select every run shown",
            onchange: function () {
              shownRows().forEach(function (r) {
                if (all.checked) selected[r.id] = true;
                else delete selected[r.id];
              });
              refresh();
            },
          });
          return all;
        },
        render: function (r) {
          return h("input", {
            type: "checkbox",
            class: "pick",
            checked: !!selected[r.id],
            "aria-label": "Select " + r.name,
            dataset: { id: r.id },
            onchange: function (/** @type {Event} */ ev) {
              if (/** @type {HTMLInputElement} */ (ev.target).checked) selected[r.id] = true;
              else delete selected[r.id];
              updateSelection();
              save();
            },
          });
        },
      },
      {
        key: "name",
        label: "Run",
        className: "runcol",
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
    ];
    // Columns that would show only "–" for every run are left out, headline names break after "_",
    // and the pages' links wrap in their cell (the demo's table fits 1280 px).
    var anyBatches = !!head.batches;
    var anyPages = !!head.pages;
    if (anyBatches)
      cols.push({
        key: "batches",
        label: "Microbatches",
        num: true,
        render: function (r) {
          return r.batches && !r.unreadable
            ? h("a", { href: LL.link("batches.html", { run: r.id }) }, LL.fmt.num(r.batches))
            : "–";
        },
      });
    keys.forEach(function (k) {
      cols.push({
        key: "h:" + k,
        label: k,
        num: true,
        wrap: true,
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
    if (anyPages)
      cols.push({
        key: "pages",
        label: "Pages",
        className: "pages",
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
      if (whereTest && !whereTest(byId[r.id])) return false;
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
    function shownRows() {
      return runs.filter(matches);
    }
    function selectedIds() {
      return runs
        .filter(function (r) {
          return selected[r.id];
        })
        .map(function (r) {
          return r.id;
        });
    }
    function updateSelection() {
      var ids = selectedIds();
      selCount.textContent = ids.length
        ? ids.length + " selected:"
        : "None selected; the pages below open the runs the query selects:";
      var scope = ids.length ? { runs: ids.join(",") } : { where: state.where };
      curvesLink.setAttribute("href", LL.link("curves.html", scope));
      hparamsLink.setAttribute("href", LL.link("hparams.html", scope));
      if (ids.length === 2) {
        diffLink.setAttribute("href", LL.link("diff.html", { a: ids[0], b: ids[1] }));
        diffLink.removeAttribute("aria-disabled");
        diffLink.title = "What differs between the two selected runs";
      } else {
        diffLink.setAttribute("href", "#");
        diffLink.setAttribute("aria-disabled", "true");
        diffLink.title = "Select exactly two runs to compare them";
      }
    }
    clearSel.addEventListener("click", function () {
      selected = {};
      refresh();
    });
    var table = LL.vtable({
      columns: cols,
      rows: runs.filter(matches),
      sort: sort,
      className: "runs",
      rowHeight: 46,
      empty: total ? "No run matches the filters." : "The ledger has no runs yet.",
      onSort: function (s) {
        sort = s;
        save();
      },
    });
    function save() {
      LL.setHash({
        where: state.where,
        sel: selectedIds().join(","),
        q: state.q,
        group: state.group,
        status: state.status,
        tag: state.tag,
        sort: (sort.dir < 0 ? "-" : "") + sort.key,
      });
    }
    function counted(/** @type {number} */ shown) {
      count.textContent =
        LL.fmt.num(shown) +
        " of " +
        LL.fmt.num(runs.length) +
        " shown" +
        (complete ? "" : ", of " + LL.fmt.num(total) + " runs (loading)");
      progress.hidden = complete;
      progress.textContent = complete
        ? ""
        : "Loading older runs: " +
          LL.fmt.num(runs.length) +
          " of " +
          LL.fmt.num(total) +
          " loaded, newest first. Filters, sorting and selection cover the loaded runs until every run is in.";
    }
    function refresh() {
      var rows = runs.filter(matches);
      counted(rows.length);
      table.redraw(rows);
      updateSelection();
      save();
    }
    /* The chunks not loaded yet, newest first, PARALLEL at a time; the table is redrawn as they
         come in (at most every REDRAW_MS) and once they are all in. */
    var timer = null;
    function loaded() {
      cat = LL.joinCatalog(head, parts.filter(Boolean));
      runs = cat.runs;
      queryRows = LL.where.rowsOf(cat);
      byId = {};
      queryRows.forEach(function (q) {
        byId[q.id] = q;
      });
      complete = runs.length >= total || parts.every(Boolean);
      Object.keys(wanted).forEach(function (id) {
        if (byId[id]) {
          selected[id] = true;
          delete wanted[id];
        }
      });
      compileWhere();
      refresh();
      if (complete) {
        LL.catalogLoadedAt = performance.now();
        document.body.setAttribute("data-catalog-loaded", "1");
      }
    }
    function arrived() {
      if (parts.every(Boolean)) {
        clearTimeout(timer);
        timer = null;
        loaded();
      } else if (timer === null)
        timer = setTimeout(function () {
          timer = null;
          loaded();
        }, REDRAW_MS);
    }
    function loadNext() {
      if (next < 0) return;
      var k = next--;
      LL.data
        .catalogChunk(k)
        .then(function (c) {
          parts[parts.length - 1 - k] = LL.catalogPart(c, names);
          arrived();
          loadNext();
        })
        .catch(LL.fail);
    }
    var whereTimer = null;
    whereBox.addEventListener("input", function () {
      clearTimeout(whereTimer);
      whereTimer = setTimeout(function () {
        state.where = whereBox.value;
        compileWhere();
        refresh();
      }, 150);
    });
    whereBox.addEventListener("keydown", function (/** @type {KeyboardEvent} */ ev) {
      if (ev.key !== "Enter") return;
      clearTimeout(whereTimer);
      state.where = whereBox.value;
      compileWhere();
      refresh();
    });
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
    counted(runs.filter(matches).length);
    updateSelection();
    if (complete) {
      LL.catalogLoadedAt = performance.now();
      document.body.setAttribute("data-catalog-loaded", "1");
    }
    for (var i = 0; i < PARALLEL; i++) loadNext();

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
  }
})();
