// @ts-check
/* Batch browser: page through microbatches (chunk files loaded on demand), jump to a microbatch or
   an optimizer step, a batch's samples with input/gold/prediction/probabilities/cross-entropy,
   sort by cross-entropy, keyboard navigation, sample detail. */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h;
  var BATCH_FIELDS = [
    "microbatch",
    "optimizer_step",
    "examples_seen",
    "batch_size",
    "loss",
    "time",
    "forward_ms",
    "gpu_allocated_mib",
    "gpu_peak_allocated_mib",
  ];
  var SAMPLE_SHOWN = ["input", "model_input", "gold", "prediction", "probabilities", "cross_entropy"];

  LL.start(function () {
    var p = LL.params(),
      runId = p.run,
      run,
      toc;
    return LL.data
      .catalog()
      .then(function (cat) {
        run = LL.findRun(cat, runId);
        return LL.data.toc(runId);
      })
      .then(function (t) {
        toc = t;
        var main = LL.main();
        LL.title("Microbatches · " + run.name);
        LL.crumbs([
          { label: "Runs", href: "index.html" },
          { label: run.name, href: LL.link("run.html", { run: run.id }) },
          { label: "Microbatches" },
        ]);
        main.appendChild(h("h1", null, "Microbatches of ", run.name));
        main.appendChild(
          h(
            "p",
            { class: "sub" },
            LL.fmt.num(toc.count) +
              " microbatches, " +
              LL.fmt.num(toc.samples) +
              " samples" +
              (toc.max_step !== null ? ", optimizer steps up to " + LL.fmt.num(toc.max_step) : "") +
              ". Times are shown in this computer's time zone."
          )
        );
        var chunks = toc.chunks;
        var state = {
          chunk: null,
          pos: 0,
          sample: p.sample !== undefined ? Number(p.sample) : null,
          sort: p.sort || "",
        };

        var mbInput = h("input", {
          type: "number",
          id: "goto-mb",
          min: 1,
          "aria-label": "Microbatch number",
          placeholder: "microbatch",
        });
        var stepInput = h("input", {
          type: "number",
          id: "goto-step",
          min: 0,
          "aria-label": "Optimizer step",
          placeholder: "step",
        });
        var prevBtn = h("button", { type: "button", id: "prev", title: "Previous microbatch (k or ←)" }, "‹ Prev");
        var nextBtn = h("button", { type: "button", id: "next", title: "Next microbatch (j or →)" }, "Next ›");
        var sortSel = h(
          "select",
          { id: "sort" },
          h("option", { value: "" }, "as logged"),
          h("option", { value: "ce-desc" }, "cross-entropy, highest first"),
          h("option", { value: "ce-asc" }, "cross-entropy, lowest first")
        );
        sortSel.value = state.sort;
        var position = h("span", { id: "position", "aria-live": "polite" });
        main.appendChild(
          h(
            "div",
            { class: "batchbar", role: "toolbar", "aria-label": "Microbatch navigation" },
            prevBtn,
            nextBtn,
            h(
              "form",
              {
                onsubmit: function (ev) {
                  ev.preventDefault();
                  if (mbInput.value !== "") gotoMicrobatch(Number(mbInput.value));
                },
              },
              h("label", { for: "goto-mb" }, "Microbatch"),
              mbInput,
              h("button", { type: "submit" }, "Go")
            ),
            h(
              "form",
              {
                onsubmit: function (ev) {
                  ev.preventDefault();
                  if (stepInput.value !== "") gotoStep(Number(stepInput.value));
                },
              },
              h("label", { for: "goto-step" }, "Step"),
              stepInput,
              h("button", { type: "submit" }, "Go")
            ),
            h("label", null, "Sort samples ", sortSel),
            position
          )
        );
        main.appendChild(
          h(
            "p",
            { class: "muted keys" },
            "Keys: ",
            h("kbd", null, "j"),
            "/",
            h("kbd", null, "→"),
            " next microbatch, ",
            h("kbd", null, "k"),
            "/",
            h("kbd", null, "←"),
            " previous, ",
            h("kbd", null, "↓"),
            "/",
            h("kbd", null, "↑"),
            " next/previous sample, ",
            h("kbd", null, "s"),
            " sort by cross-entropy, ",
            h("kbd", null, "Esc"),
            " close the sample."
          )
        );
        var batchBox = h("div", { id: "batch" });
        main.appendChild(batchBox);

        function chunkOfMicrobatch(mb) {
          var lo = 0,
            hi = chunks.length - 1;
          while (lo < hi) {
            var mid = (lo + hi) >> 1;
            if (chunks[mid][1] < mb) lo = mid + 1;
            else hi = mid;
          }
          return lo;
        }
        function load(ci) {
          return LL.data.chunk(runId, ci);
        }
        function current() {
          return state.chunk ? state.chunk.batches[state.pos] : null;
        }
        function globalIndex() {
          var n = 0;
          for (var i = 0; i < state.ci; i++) n += chunks[i][4];
          return n + state.pos;
        }
        function show(ci, pos, keepSample) {
          return load(ci)
            .then(function (chunk) {
              state.chunk = chunk;
              state.ci = ci;
              state.pos = Math.max(0, Math.min(pos, chunk.batches.length - 1));
              if (!keepSample) state.sample = null;
              render();
            })
            .catch(function (e) {
              LL.clear(batchBox).appendChild(LL.callout("error", e.message));
            });
        }
        function gotoMicrobatch(mb, keepSample) {
          if (!chunks.length) return Promise.resolve();
          var ci = chunkOfMicrobatch(mb);
          return load(ci).then(function (chunk) {
            var pos = chunk.batches.findIndex(function (b, i) {
              return (b.microbatch !== undefined ? b.microbatch : chunks[ci][0] + i) >= mb;
            });
            return show(ci, pos < 0 ? chunk.batches.length - 1 : pos, !!keepSample);
          });
        }
        function gotoStep(step) {
          var ci = chunks.findIndex(function (c) {
            return c[2] !== null && c[3] !== null && c[2] <= step && step <= c[3];
          });
          if (ci < 0)
            ci = chunks.findIndex(function (c) {
              return c[2] !== null && c[2] >= step;
            });
          if (ci < 0) {
            position.textContent = "No microbatch has optimizer step " + step + ".";
            return Promise.resolve();
          }
          return load(ci).then(function (chunk) {
            var pos = chunk.batches.findIndex(function (b) {
              return typeof b.optimizer_step === "number" && b.optimizer_step >= step;
            });
            return show(ci, pos < 0 ? 0 : pos);
          });
        }
        function move(delta) {
          if (!state.chunk) return;
          var pos = state.pos + delta;
          if (pos >= 0 && pos < state.chunk.batches.length) return show(state.ci, pos);
          if (pos < 0 && state.ci > 0)
            return load(state.ci - 1).then(function (c) {
              return show(state.ci - 1, c.batches.length - 1);
            });
          if (pos >= state.chunk.batches.length && state.ci < chunks.length - 1) return show(state.ci + 1, 0);
        }
        function sortedSamples(b) {
          var list = (b.samples || []).map(function (s, i) {
            return { s: s, i: i };
          });
          if (state.sort) {
            var dir = state.sort === "ce-asc" ? 1 : -1;
            list.sort(function (a, c) {
              var x = a.s && typeof a.s.cross_entropy === "number" ? a.s.cross_entropy : null;
              var y = c.s && typeof c.s.cross_entropy === "number" ? c.s.cross_entropy : null;
              if (x === null && y === null) return a.i - c.i;
              if (x === null) return 1;
              if (y === null) return -1;
              return dir * (x - y) || a.i - c.i;
            });
          }
          return list;
        }

        function render() {
          var b = current();
          LL.clear(batchBox);
          if (!b) {
            batchBox.appendChild(h("p", { class: "muted" }, "No microbatches."));
            return;
          }
          var images = new Set(state.chunk.images || []);
          var mb = b.microbatch !== undefined ? b.microbatch : chunks[state.ci][0] + state.pos;
          var gi = globalIndex();
          position.textContent =
            "Microbatch " +
            LL.fmt.num(mb) +
            " (" +
            LL.fmt.num(gi + 1) +
            " of " +
            LL.fmt.num(toc.count) +
            ")" +
            (typeof b.optimizer_step === "number" ? " · step " + LL.fmt.num(b.optimizer_step) : "");
          prevBtn.disabled = gi === 0;
          nextBtn.disabled = gi >= toc.count - 1;
          mbInput.value = mb;
          if (typeof b.optimizer_step === "number") stepInput.value = b.optimizer_step;
          LL.setHash({ run: runId, mb: mb, sample: state.sample, sort: state.sort });

          var fields = {};
          BATCH_FIELDS.forEach(function (k) {
            if (k in b) fields[k] = b[k];
          });
          Object.keys(b).forEach(function (k) {
            if (k !== "samples" && !(k in fields)) fields[k] = b[k];
          });
          batchBox.appendChild(
            LL.section(
              "Microbatch " + mb,
              "batch-fields",
              h(
                "div",
                { class: "facts" },
                Object.keys(fields).map(function (k) {
                  var v = fields[k];
                  return h(
                    "div",
                    { class: "fact" },
                    h("span", { class: "fk" }, k),
                    h(
                      "span",
                      { class: "fv" },
                      v !== null && typeof v === "object"
                        ? LL.jsonTree(v, 0)
                        : k === "time" && typeof v === "number"
                          ? h("span", { class: "num", title: LL.fmt.exact(v) }, LL.fmt.time(v))
                          : LL.numCell(v)
                    )
                  );
                })
              )
            )
          );

          var samples = sortedSamples(b);
          var labels = [];
          samples.forEach(function (x) {
            if (x.s && x.s.probabilities && typeof x.s.probabilities === "object")
              labels = labels.concat(Object.keys(x.s.probabilities));
          });
          var order = LL.labelOrder(labels);
          var table = h("table", { class: "data samples stack", id: "samples" });
          table.appendChild(
            h(
              "caption",
              null,
              samples.length +
                " samples" +
                (state.sort ? ", sorted by cross-entropy" : ", in logged order") +
                ". Click a row (or press Enter on it) for every field."
            )
          );
          table.appendChild(
            h(
              "thead",
              null,
              h(
                "tr",
                null,
                h("th", { scope: "col", class: "n" }, "#"),
                h("th", { scope: "col" }, "Input"),
                h("th", { scope: "col" }, "Gold"),
                h("th", { scope: "col" }, "Prediction"),
                h("th", { scope: "col" }, "Probabilities"),
                h(
                  "th",
                  {
                    scope: "col",
                    class: "n",
                    "aria-sort": state.sort ? (state.sort === "ce-asc" ? "ascending" : "descending") : null,
                  },
                  h(
                    "button",
                    {
                      type: "button",
                      class: "sort",
                      id: "sort-ce",
                      onclick: function () {
                        toggleSort();
                      },
                    },
                    "Cross-entropy",
                    h(
                      "span",
                      { "aria-hidden": "true" },
                      state.sort === "ce-asc" ? " ▲" : state.sort === "ce-desc" ? " ▼" : ""
                    )
                  )
                )
              )
            )
          );
          var tbody = h("tbody");
          samples.forEach(function (x) {
            var s = x.s || {};
            var input = "input" in s ? s.input : "model_input" in s ? s.model_input : s.image;
            var right = s.prediction !== undefined && s.gold !== undefined && String(s.prediction) === String(s.gold);
            var tr = h(
              "tr",
              {
                class: "clickable" + (state.sample === x.i ? " selected" : ""),
                tabindex: 0,
                dataset: { index: x.i },
                "aria-selected": state.sample === x.i ? "true" : "false",
                onclick: function () {
                  selectSample(x.i);
                },
                onkeydown: function (ev) {
                  if (ev.key === "Enter") {
                    ev.preventDefault();
                    selectSample(x.i);
                  }
                },
              },
              h("td", { class: "n", "data-label": "#" }, String(x.i)),
              h("td", { class: "input", "data-label": "input" }, LL.inputView(input, images, runId)),
              h("td", { class: "gold", "data-label": "gold" }, LL.valueText(s.gold)),
              h(
                "td",
                { class: "pred", "data-label": "prediction" },
                LL.valueText(s.prediction),
                s.prediction !== undefined && s.gold !== undefined
                  ? h(
                      "span",
                      { class: right ? "mark-ok" : "mark-bad", "aria-label": right ? "correct" : "wrong" },
                      right ? " ✓" : " ✗"
                    )
                  : null
              ),
              h("td", { "data-label": "probabilities" }, LL.probBars(s.probabilities, s.gold, s.prediction, order)),
              h("td", { class: "n", "data-label": "cross-entropy" }, LL.numCell(s.cross_entropy))
            );
            tbody.appendChild(tr);
            if (state.sample === x.i) {
              tbody.appendChild(
                h("tr", { class: "detail-row" }, h("td", { colspan: 6 }, sampleDetail(s, x.i, mb, images, order)))
              );
            }
          });
          table.appendChild(tbody);
          batchBox.appendChild(LL.section("Samples", "samples-section", h("div", { class: "scroll" }, table)));
        }
        function sampleDetail(s, i, mb, images, order) {
          /** @type {Record<string, unknown>} */
          var rest = {};
          Object.keys(s).forEach(function (k) {
            if (SAMPLE_SHOWN.indexOf(k) < 0) rest[k] = s[k];
          });
          var input = "input" in s ? s.input : s.model_input;
          var sec = LL.section(
            "Sample " + i + " of microbatch " + mb,
            "sample-detail",
            h(
              "div",
              { class: "grid2" },
              h("div", null, h("h3", null, "Input"), LL.inputView(input, images, runId)),
              h(
                "div",
                null,
                h("h3", null, "Prediction"),
                LL.kv({ gold: s.gold, prediction: s.prediction, cross_entropy: s.cross_entropy }, { compact: true }),
                LL.probBars(s.probabilities, s.gold, s.prediction, order)
              )
            ),
            h("h3", null, "Other fields"),
            Object.keys(rest).length ? LL.kv(rest, { compact: true }) : h("p", { class: "muted" }, "none"),
            h("details", null, h("summary", null, "The sample as logged (JSON)"), LL.jsonTree(s, 3)),
            h(
              "button",
              {
                type: "button",
                id: "close-sample",
                onclick: function () {
                  selectSample(null);
                },
              },
              "Close (Esc)"
            )
          );
          sec.classList.add("detail");
          return sec;
        }
        function selectSample(i) {
          state.sample = i;
          render();
          var target =
            i === null
              ? null
              : /** @type {HTMLElement | null} */ (document.querySelector('#samples tr[data-index="' + i + '"]'));
          if (target) target.focus();
          var det = document.getElementById("sample-detail");
          if (det && i !== null && det.scrollIntoView) det.scrollIntoView({ block: "nearest" });
        }
        function toggleSort() {
          state.sort = state.sort === "ce-desc" ? "ce-asc" : state.sort === "ce-asc" ? "" : "ce-desc";
          sortSel.value = state.sort;
          render();
        }
        function moveSample(delta) {
          var b = current();
          if (!b || !b.samples || !b.samples.length) return;
          var order = sortedSamples(b).map(function (x) {
            return x.i;
          });
          var at = state.sample === null ? -1 : order.indexOf(state.sample);
          var next = Math.max(0, Math.min(order.length - 1, at + delta));
          selectSample(order[next]);
        }
        sortSel.addEventListener("change", function () {
          state.sort = sortSel.value;
          render();
        });
        prevBtn.addEventListener("click", function () {
          move(-1);
        });
        nextBtn.addEventListener("click", function () {
          move(1);
        });
        document.addEventListener("keydown", function (ev) {
          if (LL.typing(ev) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
          if (ev.key === "j" || ev.key === "ArrowRight") {
            ev.preventDefault();
            move(1);
          } else if (ev.key === "k" || ev.key === "ArrowLeft") {
            ev.preventDefault();
            move(-1);
          } else if (ev.key === "ArrowDown") {
            ev.preventDefault();
            moveSample(1);
          } else if (ev.key === "ArrowUp") {
            ev.preventDefault();
            moveSample(-1);
          } else if (ev.key === "s") {
            ev.preventDefault();
            toggleSort();
          } else if (ev.key === "Escape" && state.sample !== null) {
            ev.preventDefault();
            selectSample(null);
          }
        });
        window.addEventListener("hashchange", function () {
          var q = LL.params();
          if (q.run !== runId) {
            location.reload();
            return;
          }
          var b = current();
          var mbNow = b ? (b.microbatch !== undefined ? b.microbatch : null) : null;
          if (q.mb !== undefined && Number(q.mb) !== mbNow) {
            state.sample = q.sample !== undefined ? Number(q.sample) : null;
            gotoMicrobatch(Number(q.mb), true);
          } else if (q.step !== undefined) gotoStep(Number(q.step));
        });
        if (!chunks.length) {
          batchBox.appendChild(h("p", { class: "muted" }, "This run logged no microbatches."));
          return;
        }
        if (p.mb !== undefined && p.mb !== "") return gotoMicrobatch(Number(p.mb), true);
        if (p.step !== undefined && p.step !== "") return gotoStep(Number(p.step));
        return show(0, 0);
      });
  });
})();
