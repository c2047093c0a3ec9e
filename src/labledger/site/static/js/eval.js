// @ts-check
/* Evaluation page: stored documents (evaluations with CIs and definitions, slices, confusion
   matrices; comparisons; threshold sweeps with gates; calibration, raw vs calibrated), counts from
   the stored rows, worst items, and the temperature illustration (computed here, apart from measured
   results). Each document kind is read by its typed fields (see site/types/site.d.ts). */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h,
    isNum = LL.isNum;

  /** @param {Record<string, unknown> | null | undefined} p */
  function paramsText(p) {
    return Object.keys(p || {})
      .map(function (k) {
        var v = p[k];
        return k + "=" + (typeof v === "string" ? v : JSON.stringify(v));
      })
      .join(", ");
  }
  /** @param {{ci?: number | null}[]} entries @param {number | null | undefined} fallback */
  function levelOf(entries, fallback) {
    var withLevel = entries.filter(function (m) {
      return isNum(m.ci);
    });
    return withLevel.length ? withLevel[0].ci : fallback;
  }
  /** @param {string} k @param {string | number | boolean | null | undefined} v */
  function fact(k, v) {
    return h("div", { class: "fact" }, h("span", { class: "fk" }, k), h("span", { class: "fv" }, LL.valueText(v)));
  }

  /** @typedef {{slice: string, n: number, byKey: Record<string, MetricEntry>}} SliceRow */

  /* ------------------------------------------------------------------ evaluation documents */
  /**
   * @param {MetricEntry[]} list
   * @param {number | null | undefined} level
   */
  function metricsTable(list, level) {
    var lv = levelOf(list, level);
    return LL.table({
      rows: list,
      stack: true,
      columns: [
        {
          key: "key",
          label: "Metric",
          render: function (m) {
            return h("strong", null, m.key || m.metric);
          },
        },
        {
          key: "params",
          label: "Parameters",
          value: function (m) {
            return paramsText(m.params);
          },
          render: function (m) {
            return h("code", null, paramsText(m.params));
          },
        },
        {
          key: "value",
          label: "Value",
          num: true,
          render: function (m) {
            return h(
              "span",
              { class: "num", title: LL.fmt.exact(m.value) },
              LL.fmt.interval(m.value, m.ci_low, m.ci_high).value
            );
          },
        },
        {
          key: "ci",
          label: LL.fmt.ciLabel(lv),
          num: true,
          value: function (m) {
            return m.ci_low;
          },
          render: function (m) {
            var title = LL.fmt.ciLabel(isNum(m.ci) ? m.ci : lv) + (m.method ? ": " + m.method : "");
            var an = m.analytic;
            if (an && isNum(an.low) && isNum(an.high))
              title += "; analytic [" + LL.fmt.exact(an.low) + ", " + LL.fmt.exact(an.high) + "] — " + an.method;
            if (m.warning) title += "; " + m.warning;
            return h(
              "span",
              { title: title },
              m.interval_note || LL.fmt.interval(m.value, m.ci_low, m.ci_high).ci,
              m.warning ? h("span", { class: "stat-warning", title: m.warning }, " ⚠") : null
            );
          },
        },
        { key: "n", label: "n", num: true },
        {
          key: "definition",
          label: "Definition",
          render: function (m) {
            return h("span", { class: "muted" }, m.definition || "–");
          },
        },
      ],
    });
  }

  /**
   * @param {Record<string, Record<string, SliceBody>>} slices
   * @param {number | null | undefined} level
   */
  function slicesView(slices, level) {
    /** @type {Node[]} */
    var out = [];
    Object.keys(slices).forEach(function (field) {
      var values = slices[field];
      /** @type {string[]} */
      var names = [];
      Object.keys(values).forEach(function (v) {
        values[v].metrics.forEach(function (m) {
          if (names.indexOf(m.key) < 0) names.push(m.key);
        });
      });
      var rows = LL.labelOrder(Object.keys(values)).map(function (v) {
        /** @type {Record<string, MetricEntry>} */
        var byKey = {};
        values[v].metrics.forEach(function (m) {
          if (!(m.key in byKey)) byKey[m.key] = m;
        });
        return { slice: v, n: values[v].n, byKey: byKey };
      });
      /** @type {MetricEntry[]} */
      var all = [];
      Object.keys(values).forEach(function (v) {
        all = all.concat(values[v].metrics);
      });
      var lv = levelOf(all, level);
      out.push(
        h("h4", null, "By " + field),
        LL.table({
          rows: rows,
          columns: [
            { key: "slice", label: field },
            { key: "n", label: "n", num: true },
          ].concat(
            names.map(function (name) {
              var dec = LL.fmt.sharedDecimals(
                rows.map(function (r) {
                  return r.byKey[name] ? r.byKey[name].value : null;
                })
              );
              return {
                key: name,
                label: name + " (" + LL.fmt.ciLabel(lv) + ")",
                num: true,
                value: function (/** @type {SliceRow} */ r) {
                  return r.byKey[name] ? r.byKey[name].value : null;
                },
                render: function (/** @type {SliceRow} */ r) {
                  var m = r.byKey[name];
                  return m ? LL.intervalView(m, lv, dec) : "–";
                },
              };
            })
          ),
        })
      );
    });
    return out;
  }

  /** @param {PerClass} pc */
  function perClassView(pc) {
    var order = LL.labelOrder(
      pc.labels.map(function (r) {
        return r.label;
      })
    );
    var rows = order.map(function (l) {
      return pc.labels.filter(function (r) {
        return r.label === l;
      })[0];
    });
    /** @param {"precision" | "recall" | "f1"} k */
    function col(k) {
      var dec = LL.fmt.sharedDecimals(
        rows.map(function (r) {
          return r[k].value;
        })
      );
      return {
        key: k,
        label: k,
        num: true,
        value: function (/** @type {PerClassRow} */ r) {
          return r[k].value;
        },
        render: function (/** @type {PerClassRow} */ r) {
          return LL.intervalView(r[k], pc.ci, dec);
        },
      };
    }
    return [
      h("h4", null, "Per class (" + LL.fmt.ciLabel(pc.ci) + ")"),
      h("p", { class: "muted" }, pc.definition + (pc.method ? " CI: " + pc.method + "." : "")),
      LL.table({
        rows: rows,
        columns: [
          {
            key: "label",
            label: "label",
            render: function (r) {
              return h("code", null, r.label);
            },
          },
          { key: "support", label: "support", num: true },
          col("precision"),
          col("recall"),
          col("f1"),
        ],
      }),
    ];
  }

  /**
   * The harness's own value and stderr of each metric beside labledger's recomputed value and
   * interval, as `labledger eval` prints them (the document's `harness`).
   * @param {HarnessCheck} hc
   * @param {number | null | undefined} level
   * @returns {Child[]}
   */
  function harnessView(hc, level) {
    var who = hc.name + (hc.version ? " " + hc.version : "");
    return [
      h("h3", null, "Against what " + who + " reported"),
      h(
        "p",
        { class: "muted" },
        "The harness's value and standard error of each metric beside the value labledger recomputed from the " +
          "stored items and its interval; a note says where the harness's stderr and labledger's interval disagree, and why."
      ),
      LL.table({
        rows: hc.checks,
        stack: true,
        className: "harness-check",
        columns: [
          {
            key: "task",
            label: "Metric",
            render: function (c) {
              return h("strong", null, c.task);
            },
          },
          {
            key: "harness_value",
            label: hc.name,
            num: true,
            render: function (c) {
              return h(
                "span",
                { class: "num", title: LL.fmt.exact(c.harness_value) },
                LL.fmt.interval(c.harness_value, null, null).value
              );
            },
          },
          {
            key: "harness_stderr",
            label: hc.name + " stderr",
            num: true,
            render: function (c) {
              return h(
                "span",
                { class: "num", title: c.stderr_method || "" },
                isNum(c.harness_stderr) ? LL.fmt.num(c.harness_stderr) : "–"
              );
            },
          },
          {
            key: "value",
            label: "labledger",
            num: true,
            render: function (c) {
              return h(
                "span",
                { class: "num", title: LL.fmt.exact(c.value) },
                LL.fmt.interval(c.value, c.ci_low, c.ci_high).value
              );
            },
          },
          {
            key: "ci_low",
            label: "labledger " + LL.fmt.ciLabel(level),
            num: true,
            render: function (c) {
              return LL.fmt.interval(c.value, c.ci_low, c.ci_high).ci;
            },
          },
          {
            key: "equal",
            label: "Value",
            render: function (c) {
              if (!isNum(c.harness_value)) return h("span", { class: "muted" }, "the harness reported none");
              return c.equal ? "same" : h("strong", { class: "stat-warning" }, "DIFFERENT");
            },
          },
          {
            key: "note",
            label: "Note",
            render: function (c) {
              return h("span", { class: "muted" }, c.note || "–");
            },
          },
        ],
      }),
    ];
  }

  /** @param {EvaluationDoc} doc */
  function evaluationView(doc) {
    /** @type {Child[]} */
    var parts = [];
    if (doc.harness && doc.harness.checks && doc.harness.checks.length)
      parts = parts.concat(harnessView(doc.harness, doc.ci));
    Object.keys(doc.tasks).forEach(function (task) {
      var t = doc.tasks[task];
      parts.push(h("h3", null, "Task: " + task + " (n = " + LL.fmt.num(t.n) + ")"));
      parts.push(
        h(
          "div",
          { class: "facts" },
          fact("kind", t.kind),
          fact("headline", t.headline),
          t.positive !== null && t.positive !== undefined ? fact("positive", t.positive) : null,
          isNum(t.clusters) ? fact("clusters", t.clusters) : null,
          fact("interval", LL.fmt.ciLabel(doc.ci) + (isNum(doc.resamples) ? ", " + doc.resamples + " resamples" : ""))
        )
      );
      parts.push(metricsTable(t.metrics, doc.ci));
      if (t.per_class) parts = parts.concat(perClassView(t.per_class));
      if (t.confusion_matrix)
        parts.push(
          h("h4", null, "Confusion matrix"),
          t.confusion_matrix.definition ? h("p", { class: "muted" }, t.confusion_matrix.definition) : null,
          LL.matrixView(t.confusion_matrix)
        );
      if (t.slices) parts = parts.concat(slicesView(t.slices, doc.ci));
    });
    return parts;
  }

  /* ------------------------------------------------------------------ comparison documents */
  /** @param {ComparisonView} c */
  function comparisonView(c) {
    return [
      h("h3", null, String(c.names.a), " − ", String(c.names.b)),
      h(
        "p",
        { class: "sub" },
        "a = ",
        h("code", null, String(c.a)),
        ", b = ",
        h("code", null, String(c.b)),
        "; differences a − b with " +
          LL.fmt.ciLabel(c.ci) +
          "s" +
          (isNum(c.resamples) ? " from " + c.resamples + " paired resamples" : "") +
          ". All stored comparisons are also on ",
        h("a", { href: "compare.html#documents" }, "the Comparisons page"),
        "."
      ),
      LL.comparisonTable(c),
    ];
  }

  /* ------------------------------------------------------------------ sweep documents */
  /** @param {SweepDoc} doc */
  function gateLines(doc) {
    return doc.gates
      .map(function (text) {
        var m = /(>=|<=|>|<)\s*(-?[0-9.]+(?:e[-+]?[0-9]+)?)\s*$/i.exec(text);
        return m ? { y: Number(m[2]), label: "gate " + text } : null;
      })
      .filter(Boolean);
  }

  /** @param {SweepDoc} doc */
  function sweepView(doc) {
    var trials = doc.threshold_trials;
    /** @type {string[]} */
    var keys = [];
    trials.forEach(function (t) {
      Object.keys(t).forEach(function (k) {
        if (k !== "threshold" && k !== "passed_gates" && keys.indexOf(k) < 0) keys.push(k);
      });
    });
    var sel = doc.threshold_selection;
    /** @type {Child[]} */
    var parts = [h("h3", null, "Threshold sweep")];
    if (doc.decision) parts.push(h("p", { class: "muted" }, doc.decision));
    parts.push(
      LL.lineChart({
        title: "metrics by threshold (objective: " + doc.objective + ")",
        x: trials.map(function (t) {
          return t.threshold;
        }),
        xLabel: "threshold",
        series: keys.map(function (k, i) {
          return {
            label: k,
            values: trials.map(function (t) {
              var v = t[k];
              return typeof v === "number" ? v : null;
            }),
            color: LL.palette[i % LL.palette.length],
          };
        }),
        marks: [{ x: sel.threshold, label: "chosen " + LL.fmt.num(sel.threshold) }],
        hlines: gateLines(doc),
        height: 300,
      })
    );
    if (doc.gates.length)
      parts.push(
        h(
          "p",
          null,
          "Gates: ",
          doc.gates.map(function (g) {
            return h("code", { class: "chip" }, g);
          })
        )
      );
    parts.push(
      h(
        "p",
        null,
        "Gates passed at the chosen threshold: ",
        LL.badge(sel.recall_gate_passed ? "yes" : "no", sel.recall_gate_passed ? "ok" : "bad")
      )
    );
    if (doc.tie_break) parts.push(h("p", { class: "muted" }, "Selection rule: " + doc.tie_break));
    parts.push(
      h(
        "div",
        { class: "grid2" },
        h("div", null, h("h4", null, "Chosen threshold"), LL.kv(sel, { compact: true })),
        doc.paired_test
          ? h("div", null, h("h4", null, "Paired test at that threshold"), LL.kv(doc.paired_test, { compact: true }))
          : null
      )
    );
    parts.push(
      h(
        "details",
        null,
        h("summary", null, "Every threshold (" + trials.length + ")"),
        LL.table({
          rows: trials,
          pageSize: 50,
          rowClass: function (t) {
            return t.threshold === sel.threshold ? "selected" : "";
          },
          columns: [{ key: "threshold", label: "threshold", num: true }].concat(
            keys.map(function (k) {
              return { key: k, label: k, num: true };
            })
          ),
        })
      )
    );
    if (doc.definition)
      parts.push(h("details", null, h("summary", null, "Definitions"), LL.kv(doc.definition, { compact: true })));
    return parts;
  }

  /* ------------------------------------------------------------------ calibration documents */
  /**
   * @param {CalibrationMetric[]} list
   * @param {number | null | undefined} level
   */
  function calibrationMetricsTable(list, level) {
    var lv = levelOf(list, level);
    /** @param {CalibrationMetric} m */
    function dec(m) {
      return LL.fmt.sharedDecimals([m.raw, m.calibrated]);
    }
    /** @param {CalibrationMetric} m @param {"raw" | "calibrated"} k */
    function cell(m, k) {
      return h(
        "span",
        { class: "num", title: LL.fmt.exact(m[k]) },
        LL.fmt.interval(m[k], null, null, { decimals: dec(m) }).value
      );
    }
    return LL.table({
      rows: list,
      stack: true,
      columns: [
        {
          key: "metric",
          label: "Metric",
          render: function (m) {
            return h("strong", { title: m.definition || null }, m.metric);
          },
        },
        {
          key: "raw",
          label: "Raw",
          num: true,
          render: function (m) {
            return cell(m, "raw");
          },
        },
        {
          key: "calibrated",
          label: "Calibrated",
          num: true,
          render: function (m) {
            return cell(m, "calibrated");
          },
        },
        {
          key: "value",
          label: "Δ (calibrated − raw)",
          num: true,
          render: function (m) {
            return h(
              "span",
              { class: "num", title: LL.fmt.exact(m.value) },
              LL.fmt.interval(m.value, m.ci_low, m.ci_high, { signed: true, decimals: dec(m) }).value
            );
          },
        },
        {
          key: "ci",
          label: LL.fmt.ciLabel(lv) + " of Δ",
          num: true,
          value: function (m) {
            return m.ci_low;
          },
          render: function (m) {
            return h(
              "span",
              { title: m.method || null },
              LL.fmt.interval(m.value, m.ci_low, m.ci_high, { signed: true, decimals: dec(m) }).ci
            );
          },
        },
        {
          key: "p_value",
          label: "p",
          num: true,
          render: function (m) {
            return h("span", { title: LL.fmt.exact(m.p_value) }, LL.fmt.p(m.p_value));
          },
        },
        { key: "n", label: "n", num: true },
      ],
    });
  }

  /** @param {CalibrationDoc} doc */
  function calibrationView(doc) {
    var raw = doc.raw,
      cal = doc.calibrated;
    /**
     * A number of the raw-vs-calibrated table, with the decimals of its row.
     * @param {{raw: Num, calibrated: Num}} r @param {Num} v @param {boolean} [signed]
     */
    function rowCell(r, v, signed) {
      var d = LL.fmt.sharedDecimals([r.raw, r.calibrated]);
      return h(
        "span",
        { class: "num", title: LL.fmt.exact(v) },
        LL.fmt.interval(v, null, null, { decimals: d, signed: signed }).value
      );
    }
    var keys = Object.keys(raw).concat(
      Object.keys(cal).filter(function (k) {
        return !(k in raw);
      })
    );
    /** @type {Child[]} */
    var parts = [
      h("h3", null, "Raw vs calibrated"),
      LL.table({
        rows: keys.map(function (k) {
          return { metric: k, raw: raw[k], calibrated: cal[k] };
        }),
        columns: [
          { key: "metric", label: "Metric" },
          {
            key: "raw",
            label: "Raw",
            num: true,
            render: function (r) {
              return rowCell(r, r.raw);
            },
          },
          {
            key: "calibrated",
            label: "Calibrated",
            num: true,
            render: function (r) {
              return rowCell(r, r.calibrated);
            },
          },
          {
            key: "delta",
            label: "Δ",
            num: true,
            value: function (r) {
              return isNum(r.raw) && isNum(r.calibrated) ? r.calibrated - r.raw : null;
            },
            render: function (r) {
              return isNum(r.raw) && isNum(r.calibrated) ? rowCell(r, r.calibrated - r.raw, true) : "–";
            },
          },
        ],
      }),
    ];
    Object.keys(doc.tasks).forEach(function (task) {
      var t = doc.tasks[task];
      parts.push(h("h3", null, "Task: " + task + " (n = " + LL.fmt.num(t.n) + ")"));
      parts.push(
        h(
          "div",
          { class: "facts" },
          fact("method", t.steps || t.method),
          fact("fitted on", t.fitted_on),
          fact("held out", t.status),
          fact("honest figure", t.honest)
        )
      );
      parts.push(calibrationMetricsTable(t.metrics, doc.ci));
      if (t.slices) parts = parts.concat(slicesView(t.slices, doc.ci));
      if (t.reliability) {
        /** @type {ReliabilitySeries[]} */
        var series = [];
        if (t.reliability.raw_bins)
          series.push({ label: "raw (as stored)", bins: t.reliability.raw_bins, color: "#777", dashed: true });
        series.push({ label: "calibrated", bins: t.reliability.bins, color: "#0072B2" });
        parts.push(
          h("h4", null, "Reliability, raw vs calibrated"),
          LL.reliabilityChart(series, { label: "Reliability diagram of " + task + ": raw and calibrated" }),
          t.reliability.note ? h("p", { class: "muted" }, t.reliability.note) : null
        );
      }
    });
    if (doc.definitions)
      parts.push(
        h("details", { open: true }, h("summary", null, "Definitions"), LL.kv(doc.definitions, { compact: true }))
      );
    if (doc.recipe) parts.push(h("details", null, h("summary", null, "Recipe"), LL.jsonTree(doc.recipe, 2)));
    return parts;
  }

  /* ------------------------------------------------------------------ one stored document */
  /** @type {Record<string, string>} */
  var TITLES = {
    evaluation: "Evaluation",
    comparison: "Comparison",
    sweep: "Threshold sweep",
    calibration: "Calibration",
  };

  /** @param {DocumentEntry} d @param {number} i */
  function documentSection(d, i) {
    var title = TITLES[d.kind] || d.kind.charAt(0).toUpperCase() + d.kind.slice(1);
    var sec = LL.section(title, "doc-" + i);
    sec.classList.add("doc-" + d.kind);
    sec.querySelector("h2").appendChild(
      h(
        "span",
        {
          class: "measured-tag",
          title: "a result stored in the run or computed from its stored rows, not an illustration",
        },
        d.origin === "saved" ? "recorded result" : "measured"
      )
    );
    sec.appendChild(
      h(
        "p",
        { class: "muted" },
        d.origin === "saved" ? "Stored in the run (" + (d.file || d.kind + ".json") + ")." : d.origin + "."
      )
    );
    if (d.error) {
      sec.appendChild(LL.callout("error", d.error));
      return sec;
    }
    d.thinned.forEach(function (t) {
      sec.appendChild(LL.callout("warn", "Thinned for display: " + t));
    });
    /** @type {Child[]} */
    var parts = [];
    /** @type {unknown} */
    var doc = d.doc;
    try {
      if (d.kind === "evaluation") parts = evaluationView(/** @type {EvaluationDoc} */ (doc));
      else if (d.kind === "comparison" && d.comparison) parts = comparisonView(d.comparison);
      else if (d.kind === "sweep") parts = sweepView(/** @type {SweepDoc} */ (doc));
      else if (d.kind === "calibration") parts = calibrationView(/** @type {CalibrationDoc} */ (doc));
    } catch (e) {
      // One shape per kind: a document without it is said to be so, and shown as stored.
      parts = [];
      sec.appendChild(
        LL.callout("warn", "This " + d.kind + " document does not have the fields this page reads (" + String(e) + ").")
      );
    }
    parts.forEach(function (n) {
      if (n instanceof Node) sec.appendChild(n);
    });
    sec.appendChild(
      h("details", { open: !parts.length }, h("summary", null, "Full document (JSON)"), LL.jsonTree(d.doc, 1))
    );
    return sec;
  }

  /* ------------------------------------------------------------------ the stored rows */
  /** @param {EvalPayload} ev */
  function rowsSection(ev) {
    var rows = ev.rows;
    var sec = LL.section("Stored rows", "rows");
    sec.appendChild(
      h(
        "p",
        { class: "muted" },
        LL.fmt.num(rows.n) +
          " rows in results.jsonl. The counts below are read off the rows " +
          "(no metric definition involved); metrics with confidence intervals are in the evaluation above."
      )
    );
    Object.keys(rows.tasks).forEach(function (task) {
      var t = rows.tasks[task];
      var order = t.labels;
      sec.appendChild(
        h("h3", null, "Task: " + task + " (" + LL.fmt.num(t.n) + " rows" + (t.kind ? ", " + t.kind : "") + ")")
      );
      var blocks = [];
      if (t.confusion)
        blocks.push(h("div", null, h("h4", null, "Confusion counts"), LL.matrixView(t.confusion, t.confusion_note)));
      if (t.reliability)
        blocks.push(
          h(
            "div",
            null,
            h("h4", null, "Reliability diagram"),
            LL.reliabilityChart([{ label: "stored probabilities", bins: t.reliability.bins }]),
            h("p", { class: "muted" }, t.reliability.note)
          )
        );
      if (blocks.length) sec.appendChild(h("div", { class: "grid2" }, blocks));
      if (t.worst && t.worst.length) {
        var ce = t.worst_by === "cross_entropy";
        sec.appendChild(
          h("h4", null, "Worst items (" + t.worst.length + ", by " + (ce ? "-log p(gold)" : "absolute error") + ")")
        );
        sec.appendChild(
          LL.table({
            rows: t.worst,
            pageSize: 25,
            columns: [
              {
                key: "id",
                label: "id",
                render: function (/** @type {WorstItem} */ r) {
                  return h("code", null, LL.valueText(r.id));
                },
              },
              { key: "gold", label: "gold" },
              { key: "prediction", label: "prediction" },
              ce ? { key: "p_gold", label: "p(gold)", num: true } : { key: "abs_error", label: "|error|", num: true },
              ce ? { key: "cross_entropy", label: "-log p(gold)", num: true } : null,
              ce
                ? {
                    key: "probs",
                    label: "probabilities",
                    sortable: false,
                    render: function (/** @type {WorstItem} */ r) {
                      return LL.probBars(r.probs, r.gold, r.prediction, order);
                    },
                  }
                : null,
              {
                key: "slices",
                label: "slices",
                sortable: false,
                render: function (/** @type {WorstItem} */ r) {
                  return r.slices
                    ? LL.chips(
                        Object.keys(r.slices).map(function (k) {
                          return k + "=" + LL.valueText(r.slices[k]);
                        })
                      )
                    : "–";
                },
              },
            ].filter(Boolean),
          })
        );
      }
    });
    if (rows.shown.length) {
      /** @type {string[]} */
      var cols = [];
      rows.shown.forEach(function (r) {
        Object.keys(r).forEach(function (k) {
          if (cols.indexOf(k) < 0) cols.push(k);
        });
      });
      sec.appendChild(
        h(
          "details",
          null,
          h("summary", null, "The first " + rows.shown.length + " rows as stored"),
          LL.table({
            rows: rows.shown,
            pageSize: 50,
            columns: cols.map(function (k) {
              return {
                key: k,
                label: k,
                render: function (r) {
                  var v = r[k];
                  if (k === "probs" && v && typeof v === "object") return LL.probBars(v, r.gold, r.prediction);
                  return v !== null && typeof v === "object"
                    ? h("code", null, JSON.stringify(v))
                    : typeof v === "number"
                      ? LL.numCell(v)
                      : LL.valueText(v);
                },
              };
            }),
          })
        )
      );
    }
    return sec;
  }

  /* ------------------------------------------------------------ temperature illustration */
  /** @param {number[]} z @param {number} T */
  function softmaxAt(z, T) {
    var m = -Infinity,
      i,
      out = new Array(z.length),
      s = 0;
    for (i = 0; i < z.length; i++) m = Math.max(m, z[i] / T);
    for (i = 0; i < z.length; i++) {
      out[i] = Math.exp(z[i] / T - m);
      s += out[i];
    }
    for (i = 0; i < z.length; i++) out[i] /= s;
    return out;
  }
  /** @param {LogitsTask} task @param {number} T */
  function summarizeAt(task, T) {
    var n = task.logits.length,
      nll = 0,
      conf = 0,
      acc = 0,
      /** @type {(ReliabilityBin & {sc: number, sa: number})[]} */
      bins = [];
    for (var b = 0; b < 10; b++)
      bins.push({ low: b / 10, high: (b + 1) / 10, count: 0, sc: 0, sa: 0, confidence: null, accuracy: null });
    for (var i = 0; i < n; i++) {
      var p = softmaxAt(task.logits[i], T),
        g = task.gold[i],
        top = 0;
      for (var j = 1; j < p.length; j++) if (p[j] > p[top]) top = j;
      nll += -Math.log(Math.max(p[g], 1e-300));
      conf += p[top];
      acc += top === g ? 1 : 0;
      var k = Math.min(9, Math.floor(p[top] * 10));
      bins[k].count++;
      bins[k].sc += p[top];
      bins[k].sa += top === g ? 1 : 0;
    }
    var ece = 0;
    bins.forEach(function (bb) {
      bb.confidence = bb.count ? bb.sc / bb.count : null;
      bb.accuracy = bb.count ? bb.sa / bb.count : null;
      if (bb.count) ece += (bb.count / n) * Math.abs(bb.accuracy - bb.confidence);
    });
    return { nll: nll / n, confidence: conf / n, accuracy: acc / n, ece: ece, bins: bins };
  }
  /** @param {LogitsTask} task */
  function bestT(task) {
    var lo = Math.log(0.05),
      hi = Math.log(20),
      g = (Math.sqrt(5) - 1) / 2;
    var a = hi - g * (hi - lo),
      b = lo + g * (hi - lo);
    var fa = summarizeAt(task, Math.exp(a)).nll,
      fb = summarizeAt(task, Math.exp(b)).nll;
    for (var it = 0; it < 40; it++) {
      if (fa < fb) {
        hi = b;
        b = a;
        fb = fa;
        a = hi - g * (hi - lo);
        fa = summarizeAt(task, Math.exp(a)).nll;
      } else {
        lo = a;
        a = b;
        fa = fb;
        b = lo + g * (hi - lo);
        fb = summarizeAt(task, Math.exp(b)).nll;
      }
    }
    return Math.exp((lo + hi) / 2);
  }

  /** @param {EvalPayload} ev */
  function temperatureSection(ev) {
    var sec = LL.section("Temperature what-if", "temperature");
    sec.classList.add("illustration");
    sec.setAttribute("aria-describedby", "temperature-about");
    sec.appendChild(h("p", null, h("span", { class: "illu-label" }, "ILLUSTRATION — NOT A MEASURED RESULT")));
    var about = h(
      "p",
      { id: "temperature-about" },
      "Drag the slider to see what the probabilities would be at another temperature T: softmax(z / T), " +
        "computed in this browser from the stored logits. Nothing here was fitted or stored, and none of it is an evaluation of the model; " +
        "the measured results are in the sections above."
    );
    sec.appendChild(about);
    var body = h("div", { id: "temperature-body" }, h("p", { class: "muted" }, "Loading the stored logits…"));
    sec.appendChild(body);
    LL.data
      .logits(ev.run, ev.name)
      .then(function (lg) {
        LL.clear(body);
        var names = Object.keys(lg.tasks);
        var taskSel = h(
          "select",
          { id: "t-task" },
          names.map(function (n) {
            return h("option", { value: n }, n);
          })
        );
        var slider = h("input", {
          type: "range",
          id: "t-slider",
          min: -2,
          max: 2,
          step: 0.01,
          value: 0,
          "aria-label": "log2 of the temperature",
        });
        var tOut = h("output", { id: "t-value", for: "t-slider" }, "T = 1");
        var best = h("button", { type: "button", id: "t-best" }, "T with the lowest NLL on these rows");
        var reset = h("button", { type: "button" }, "T = 1");
        var src = h("p", { class: "muted" });
        var table = h("div"),
          chart = h("div");
        body.appendChild(
          h(
            "div",
            { class: "controls" },
            names.length > 1 ? [h("label", { for: "t-task" }, "Task"), taskSel] : null,
            h("label", { for: "t-slider" }, "Temperature"),
            slider,
            tOut,
            reset,
            best
          )
        );
        body.appendChild(src);
        body.appendChild(h("div", { class: "grid2" }, table, chart));
        var note = h("p", { class: "muted" });
        body.appendChild(note);
        function task() {
          return lg.tasks[taskSel.value || names[0]];
        }
        function draw() {
          var t = task(),
            T = Math.pow(2, Number(slider.value));
          tOut.textContent = "T = " + T.toFixed(3);
          src.textContent =
            "From the " +
            t.source +
            " of " +
            LL.fmt.num(t.shown) +
            " rows" +
            (t.total > t.shown ? " (the first " + LL.fmt.num(t.shown) + " of " + LL.fmt.num(t.total) + ")" : "") +
            "; labels " +
            t.labels.join(", ") +
            ".";
          var base = summarizeAt(t, 1),
            now = summarizeAt(t, T);
          LL.clear(table).appendChild(
            LL.table({
              sortable: false,
              rows: [
                { q: "mean -log p(gold)", a: base.nll, b: now.nll },
                { q: "mean top-label probability", a: base.confidence, b: now.confidence },
                { q: "ECE (10 equal-width bins)", a: base.ece, b: now.ece },
                { q: "accuracy (T never changes the arg-max)", a: base.accuracy, b: now.accuracy },
              ],
              columns: [
                { key: "q", label: "quantity" },
                { key: "a", label: "T = 1", num: true },
                { key: "b", label: "T = " + T.toFixed(3), num: true },
              ],
            })
          );
          LL.clear(chart).appendChild(
            LL.reliabilityChart(
              [
                { label: "T = 1", bins: base.bins, color: "#777", dashed: true },
                { label: "T = " + T.toFixed(3), bins: now.bins, color: "#8250df" },
              ],
              { label: "Illustrative reliability diagram at the chosen temperature" }
            )
          );
        }
        taskSel.addEventListener("change", draw);
        slider.addEventListener("input", draw);
        reset.addEventListener("click", function () {
          slider.value = "0";
          draw();
          note.textContent = "";
        });
        best.addEventListener("click", function () {
          var T = bestT(task());
          slider.value = String(Math.max(-2, Math.min(2, Math.log(T) / Math.LN2)));
          draw();
          note.textContent =
            "T = " +
            T.toFixed(3) +
            " minimises the mean -log p(gold) of these same rows: an in-sample fit, optimistic by construction. " +
            "An honest temperature is fitted on other data (see labledger calibrate).";
        });
        draw();
      })
      .catch(function (e) {
        LL.clear(body).appendChild(LL.callout("error", e.message));
      });
    return sec;
  }

  /**
   * The samples a harness run did not complete (inspect_ai's errored samples: the set's meta.json
   * `harness.errored`), left out of every metric as the harness leaves them out; null when none.
   * @param {Record<string, Json>} meta
   * @returns {string | null}
   */
  function erroredNote(meta) {
    var hm = meta.harness;
    if (!hm || typeof hm !== "object" || Array.isArray(hm)) return null;
    var ids = hm.errored;
    if (!Array.isArray(ids) || !ids.length) return null;
    var done = hm.samples_completed,
      total = hm.samples_total;
    return (
      String(hm.name || "The harness") +
      (isNum(done) && isNum(total)
        ? " completed " + LL.fmt.num(done) + " of " + LL.fmt.num(total) + " samples (each epoch counted); "
        : ": ") +
      "these errored and are left out of every metric below, as the harness leaves them out: " +
      ids.map(String).join(", ")
    );
  }

  LL.start(function () {
    var p = LL.params();
    return LL.data
      .catalog()
      .then(function (cat) {
        var run = LL.findRun(cat, p.run);
        if ((run.evaluations || []).indexOf(p.name) < 0)
          throw new Error("Run " + run.name + " has no evaluation " + JSON.stringify(p.name || "") + " in this site.");
        return LL.data.evaluation(p.run, p.name);
      })
      .then(function (ev) {
        var main = LL.main();
        LL.title(ev.name + " · " + ev.run_name);
        LL.crumbs([
          { label: "Runs", href: "index.html" },
          { label: ev.run_name, href: LL.link("run.html", { run: ev.run }) },
          { label: "Evaluation: " + ev.name },
        ]);
        main.appendChild(h("h1", null, "Evaluation: ", ev.name));
        var meta = ev.meta || {};
        main.appendChild(
          h(
            "p",
            { class: "sub" },
            "Run ",
            h("a", { href: LL.link("run.html", { run: ev.run }) }, ev.run_name),
            ev.rows ? " · " + LL.fmt.num(ev.rows.n) + " rows" : "",
            meta.sha256 ? [" · results sha256 ", h("code", null, String(meta.sha256).slice(0, 16) + "…")] : ""
          )
        );
        var errored = erroredNote(meta);
        if (errored) main.appendChild(LL.callout("warn", errored));
        ev.documents.forEach(function (d, i) {
          main.appendChild(documentSection(d, i));
        });
        if (!ev.documents.length && !ev.rows)
          main.appendChild(LL.callout("warn", "Nothing is stored under this evaluation."));
        if (ev.rows) main.appendChild(rowsSection(ev));
        if (ev.has_logits) main.appendChild(temperatureSection(ev));
        document.querySelectorAll("figure.chart").forEach(function (f) {
          var fig = /** @type {ChartFigure} */ (f);
          if (fig.mount) fig.mount();
        });
      });
  });
})();
