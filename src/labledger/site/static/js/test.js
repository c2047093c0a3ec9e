// @ts-check
/* Test breakdown (seed 004): the cells[target][current] grid as a heat map (viridis), a cell's
   images with their predictions per state, and the episodes replayed from that start. */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h;

  function measures(cells) {
    var keys = [];
    Object.keys(cells).forEach(function (t) {
      Object.keys(cells[t] || {}).forEach(function (c) {
        Object.keys(cells[t][c] || {}).forEach(function (k) {
          if (typeof cells[t][c][k] === "number" && keys.indexOf(k) < 0) keys.push(k);
        });
      });
    });
    /** @type {{id: string, label: string, key: string, per?: string}[]} */
    var out = [];
    var countKey = keys.indexOf("images") >= 0 ? "images" : null;
    keys.forEach(function (k) {
      if (k === countKey) return;
      if (countKey) out.push({ id: k + "/" + countKey, label: k + " per image", key: k, per: countKey });
      out.push({ id: k, label: k + " (count)", key: k });
    });
    if (countKey) out.push({ id: countKey, label: countKey + " (count)", key: countKey });
    return out;
  }
  function cellValue(cell, m) {
    if (!cell || typeof cell[m.key] !== "number") return null;
    if (!m.per) return cell[m.key];
    return cell[m.per] ? cell[m.key] / cell[m.per] : null;
  }
  function at(list, s) {
    if (Array.isArray(list)) {
      var i = Number(s);
      return i >= 0 && i < list.length ? list[i] : undefined;
    }
    if (list && typeof list === "object") return list[s];
    return undefined;
  }

  LL.start(function () {
    var p = LL.params(),
      data;
    return LL.data
      .catalog()
      .then(function (cat) {
        var run = LL.findRun(cat, p.run);
        if ((run.tests || []).indexOf(p.name) < 0)
          throw new Error(
            "Run " + run.name + " has no test breakdown " + JSON.stringify(p.name || "") + " in this site."
          );
        return LL.data.test(p.run, p.name);
      })
      .then(function (d) {
        data = d;
        var main = LL.main(),
          summary = d.summary || {},
          cells = summary.cells || {};
        LL.title(d.name + " · " + d.run_name);
        LL.crumbs([
          { label: "Runs", href: "index.html" },
          { label: d.run_name, href: LL.link("run.html", { run: d.run }) },
          { label: "Test: " + d.name },
        ]);
        main.appendChild(h("h1", null, "Test breakdown: ", d.name));
        main.appendChild(
          h(
            "p",
            { class: "sub" },
            "Run ",
            h("a", { href: LL.link("run.html", { run: d.run }) }, d.run_name),
            " · " +
              LL.fmt.num(d.images) +
              " images" +
              (summary.task ? " · task " + summary.task : "") +
              (summary.source ? " · source " + summary.source : "")
          )
        );
        var analysis = summary.analysis || {};
        var facts = Object.keys(analysis).filter(function (k) {
          return typeof analysis[k] === "number";
        });
        if (facts.length)
          main.appendChild(
            h(
              "div",
              { class: "facts card" },
              facts.map(function (k) {
                return h(
                  "div",
                  { class: "fact" },
                  h("span", { class: "fk" }, k),
                  h("span", { class: "fv", title: LL.fmt.exact(analysis[k]) }, LL.fmt.num(analysis[k], 4))
                );
              })
            )
          );
        if (analysis.note) main.appendChild(LL.callout("info", analysis.note));

        var ms = measures(cells);
        var state = {
          m:
            ms.filter(function (m) {
              return m.id === p.measure;
            })[0] || ms[0],
          cell: p.cell ? p.cell.split(",") : null,
          only: p.all !== "1",
        };
        var sel = h(
          "select",
          { id: "measure" },
          ms.map(function (m) {
            return h("option", { value: m.id, selected: m === state.m }, m.label);
          })
        );
        var grid = h("div", { class: "scroll", id: "grid" });
        var items = h("div", { id: "cell-items" });
        var targets = LL.labelOrder(Object.keys(cells));
        var currents = [];
        targets.forEach(function (t) {
          Object.keys(cells[t] || {}).forEach(function (c) {
            if (currents.indexOf(c) < 0) currents.push(c);
          });
        });
        currents = LL.labelOrder(currents);
        var sec = LL.section(
          "cells[target][current]",
          "cells",
          h(
            "p",
            { class: "muted" },
            "Rows: the target (the digit); columns: the current state. Each cell counts the images of that condition, " +
              "the wrong actions predicted in that state (errors) and the failed episodes that started there (failed_episodes): different measures. " +
              "Click a cell (or Tab to it and press Enter) for its images."
          ),
          h(
            "div",
            { class: "controls" },
            h("label", { for: "measure" }, "Colour by"),
            sel,
            h("span", { class: "scale", id: "scale" })
          ),
          grid
        );
        main.appendChild(sec);
        main.appendChild(items);
        if (summary.latency)
          main.appendChild(LL.section("Latency", "latency", LL.kv(summary.latency, { compact: true })));
        var rest = {};
        Object.keys(summary).forEach(function (k) {
          if (["cells", "analysis", "latency"].indexOf(k) < 0) rest[k] = summary[k];
        });
        main.appendChild(LL.section("Summary fields", "summary-fields", LL.jsonTree(rest, 1)));

        function drawGrid() {
          var m = state.m,
            vals = [];
          targets.forEach(function (t) {
            currents.forEach(function (c) {
              var v = cellValue((cells[t] || {})[c], m);
              if (v !== null) vals.push(v);
            });
          });
          var max = vals.length ? Math.max.apply(null, vals) : 1,
            min = 0;
          var scale = document.getElementById("scale");
          LL.clear(scale).appendChild(document.createTextNode(LL.fmt.num(min)));
          var bar = h("span", { class: "scalebar", "aria-hidden": "true" });
          bar.style.background =
            "linear-gradient(90deg," +
            [0, 0.25, 0.5, 0.75, 1]
              .map(function (t) {
                return LL.viridis(t);
              })
              .join(",") +
            ")";
          scale.appendChild(bar);
          scale.appendChild(document.createTextNode(LL.fmt.num(max, 3) + " (viridis)"));
          var table = h(
            "table",
            { class: "heat" },
            h("caption", { class: "muted" }, "colour: " + m.label),
            h(
              "thead",
              null,
              h(
                "tr",
                null,
                h("th", { scope: "col" }, "target \\ current"),
                currents.map(function (c) {
                  return h("th", { scope: "col" }, c);
                })
              )
            ),
            h(
              "tbody",
              null,
              targets.map(function (t) {
                return h(
                  "tr",
                  null,
                  h("th", { scope: "row" }, t),
                  currents.map(function (c) {
                    var cell = (cells[t] || {})[c];
                    if (!cell) return h("td", null, "");
                    var v = cellValue(cell, m),
                      f = max > min && v !== null ? (v - min) / (max - min) : 0;
                    var label =
                      "target " +
                      t +
                      ", current " +
                      c +
                      ": " +
                      Object.keys(cell)
                        .map(function (k) {
                          return k + " " + cell[k];
                        })
                        .join(", ");
                    var pressed = state.cell && state.cell[0] === t && state.cell[1] === c;
                    var btn = h(
                      "button",
                      {
                        type: "button",
                        class: "cell",
                        "aria-label": label,
                        title: label,
                        "aria-pressed": pressed ? "true" : "false",
                        dataset: { target: t, current: c },
                        onclick: function () {
                          openCell(t, c);
                        },
                      },
                      m.per ? LL.fmt.num(cell[m.key]) : LL.fmt.num(v),
                      h("small", null, m.per ? LL.fmt.pct(v) : cell.images !== undefined ? "of " + cell.images : "")
                    );
                    btn.style.background = LL.viridis(f);
                    btn.style.color = LL.inkOn(f);
                    return h("td", null, btn);
                  })
                );
              })
            )
          );
          LL.clear(grid).appendChild(table);
        }
        function save() {
          LL.setHash({
            run: d.run,
            name: d.name,
            measure: state.m.id,
            cell: state.cell ? state.cell.join(",") : "",
            all: state.only ? "" : "1",
          });
        }
        function openCell(t, c) {
          state.cell = [t, c];
          save();
          drawGrid();
          LL.clear(items).appendChild(h("p", { class: "muted" }, "Loading the images of target " + t + "…"));
          var parts = data.part_of_target[t] ? [data.part_of_target[t]] : [];
          parts = parts.concat(data.untargeted_parts || []);
          return Promise.all(
            parts.map(function (part) {
              return LL.data.testPart(data.run, data.name, part);
            })
          )
            .then(function (loaded) {
              renderItems(t, c, loaded);
            })
            .catch(function (e) {
              LL.clear(items).appendChild(LL.callout("error", e.message));
            });
        }
        function renderItems(t, c, loaded) {
          var images = new Set(),
            list = [];
          loaded.forEach(function (part) {
            (part.images || []).forEach(function (r) {
              images.add(r);
            });
            (part.items || []).forEach(function (it) {
              if (String(it.target) === t) list.push(it);
            });
          });
          var enriched = list.map(function (it) {
            var pred = at(it.predictions, c),
              gold = at(it.gold, c),
              ep = at(it.episodes, c);
            var wrong = gold !== undefined && pred !== undefined && String(gold) !== String(pred);
            var failed = ep && ep.success === false;
            return { it: it, pred: pred, gold: gold, ep: ep, wrong: wrong, failed: failed };
          });
          enriched.sort(function (a, b) {
            return Number(b.wrong) + Number(b.failed) - (Number(a.wrong) + Number(a.failed));
          });
          var shown = state.only
            ? enriched.filter(function (e) {
                return e.wrong || e.failed;
              })
            : enriched;
          var onlyBox = h("input", { type: "checkbox", id: "only-bad", checked: state.only });
          onlyBox.addEventListener("change", function () {
            state.only = onlyBox.checked;
            save();
            renderItems(t, c, loaded);
          });
          var cell = (cells[t] || {})[c] || {};
          var sec = LL.section(
            "Target " + t + ", current " + c,
            "cell-detail",
            h(
              "p",
              { class: "muted" },
              Object.keys(cell)
                .map(function (k) {
                  return k + ": " + cell[k];
                })
                .join(" · ")
            ),
            h(
              "div",
              { class: "controls" },
              h("label", null, onlyBox, "only images with a wrong action or a failed episode here"),
              h("span", { class: "muted" }, shown.length + " of " + enriched.length + " images shown")
            ),
            shown.length
              ? h(
                  "div",
                  { class: "items" },
                  shown.map(function (e) {
                    return itemCard(e, c, images);
                  })
                )
              : h(
                  "p",
                  { class: "muted" },
                  "No image of this cell has an error or a failed episode. Untick the box to see them all."
                )
          );
          LL.clear(items).appendChild(sec);
        }
        function itemCard(e, c, images) {
          var it = e.it,
            ep = e.ep;
          var states = Array.isArray(it.predictions)
            ? it.predictions.map(function (_, i) {
                return String(i);
              })
            : LL.labelOrder(Object.keys(it.predictions || {}));
          var card = h(
            "article",
            { class: "item" + (e.wrong || e.failed ? " wrong" : "") },
            h(
              "h4",
              null,
              typeof it.image === "string" ? LL.inputView(it.image, images, data.run) : null,
              h("span", null, "image ", h("code", null, LL.valueText(it.image_id !== undefined ? it.image_id : it.id))),
              e.wrong ? LL.badge("wrong action", "bad") : LL.badge("right action", "ok"),
              ep ? (ep.success ? LL.badge("episode succeeded", "ok") : LL.badge("episode failed", "bad")) : null
            ),
            h(
              "p",
              null,
              "At current ",
              h("strong", null, c),
              ": gold ",
              h("strong", null, LL.valueText(e.gold)),
              ", predicted ",
              h("strong", null, LL.valueText(e.pred))
            ),
            LL.probBars(at(it.probabilities, c), e.gold, e.pred),
            h(
              "div",
              { class: "muted", style: { fontSize: "12px", marginTop: "6px" } },
              "Prediction in every state (outlined: this one; red: wrong):"
            ),
            h(
              "div",
              { class: "states" },
              states.map(function (s) {
                var pr = at(it.predictions, s),
                  g = at(it.gold, s);
                var bad = g !== undefined && String(g) !== String(pr);
                return h(
                  "span",
                  {
                    class: "state" + (bad ? " bad" : "") + (s === c ? " here" : ""),
                    title: "current " + s + ": predicted " + pr + (g !== undefined ? ", gold " + g : ""),
                  },
                  s + ":" + LL.valueText(pr)
                );
              })
            )
          );
          if (ep) {
            card.appendChild(
              h(
                "p",
                { class: "episode" },
                "Episode from ",
                h("strong", null, c),
                ": " +
                  (ep.termination || "") +
                  (ep.steps !== undefined ? ", " + ep.steps + (ep.steps === 1 ? " move" : " moves") : "") +
                  (ep.shortest !== undefined ? " (shortest " + ep.shortest + ")" : "") +
                  (ep.extra_moves !== null && ep.extra_moves !== undefined ? ", " + ep.extra_moves + " extra" : "")
              )
            );
            var trace = Array.isArray(ep.trace) ? ep.trace : [];
            card.appendChild(
              h(
                "ol",
                { class: "trace", "aria-label": "episode trace" },
                trace.map(function (s, i) {
                  var last = i === trace.length - 1;
                  return h(
                    "li",
                    { class: last ? (ep.success ? "end-ok" : "end-bad") : "" },
                    LL.valueText(s.before) + " —" + LL.valueText(s.action) + "→ " + LL.valueText(s.after)
                  );
                }),
                trace.length ? null : h("li", null, "no moves")
              )
            );
          }
          var extra = {};
          Object.keys(it).forEach(function (k) {
            if (["predictions", "probabilities", "episodes", "gold", "image"].indexOf(k) < 0) extra[k] = it[k];
          });
          card.appendChild(
            h("details", null, h("summary", null, "All fields"), LL.jsonTree(extra, 1), ep ? LL.jsonTree(ep, 1) : null)
          );
          return card;
        }
        sel.addEventListener("change", function () {
          state.m = ms.filter(function (m) {
            return m.id === sel.value;
          })[0];
          save();
          drawGrid();
        });
        drawGrid();
        if (state.cell && cells[state.cell[0]] && cells[state.cell[0]][state.cell[1]])
          return openCell(state.cell[0], state.cell[1]);
      });
  });
})();
