/* Evaluation page: stored documents (metrics with CIs and definitions, slices, confusion matrices,
   threshold sweeps with gates, reliability, raw vs calibrated), counts from the stored rows, worst
   items, and the temperature illustration (computed here, apart from measured results). */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h;
  var HANDLED = [
    "tasks",
    "threshold_trials",
    "threshold_selection",
    "paired_test",
    "gates",
    "definition",
    "definitions",
    "raw",
    "calibrated",
    "reliability",
  ];

  function isScalar(v) {
    return v === null || typeof v !== "object";
  }
  function isFlat(o) {
    return (
      o &&
      typeof o === "object" &&
      !Array.isArray(o) &&
      Object.keys(o).every(function (k) {
        return isScalar(o[k]);
      })
    );
  }
  function paramsText(p) {
    if (!p || typeof p !== "object") return "";
    return Object.keys(p)
      .map(function (k) {
        return k + "=" + (typeof p[k] === "string" ? p[k] : JSON.stringify(p[k]));
      })
      .join(", ");
  }
  function ciText(m) {
    if (!LL.isNum(m.ci_low) || !LL.isNum(m.ci_high)) return "–";
    return "[" + LL.fmt.num(m.ci_low) + ", " + LL.fmt.num(m.ci_high) + "]";
  }

  /** Confusion matrix from {labels, matrix}, nested {gold: {pred: n}}, or a list of lists. */
  function matrixView(value, labels, note) {
    var lab = labels,
      mat = null;
    if (value && Array.isArray(value.matrix)) {
      mat = value.matrix;
      lab = value.labels || labels;
    } else if (Array.isArray(value) && value.every(Array.isArray)) mat = value;
    else if (value && typeof value === "object") {
      var rows = LL.labelOrder(Object.keys(value)),
        cols = [];
      rows.forEach(function (r) {
        if (value[r] && typeof value[r] === "object")
          Object.keys(value[r]).forEach(function (c) {
            if (cols.indexOf(c) < 0) cols.push(c);
          });
      });
      lab = LL.labelOrder(rows.concat(cols));
      mat = lab.map(function (r) {
        return lab.map(function (c) {
          return value[r] && LL.isNum(value[r][c]) ? value[r][c] : 0;
        });
      });
    }
    if (!mat) return LL.jsonTree(value, 1);
    lab = (
      lab ||
      mat.map(function (_, i) {
        return i;
      })
    ).map(String);
    if (
      lab.length === mat.length &&
      mat.every(function (r) {
        return Array.isArray(r) && r.length === lab.length;
      })
    ) {
      // Show labels in reading order ("-1", "0", "+1"); rows and columns move together.
      var order = LL.labelOrder(lab).map(function (l) {
        return lab.indexOf(l);
      });
      mat = order.map(function (i) {
        return order.map(function (j) {
          return mat[i][j];
        });
      });
      lab = order.map(function (i) {
        return lab[i];
      });
    }
    var table = h(
      "table",
      { class: "data confusion" },
      h("caption", null, note || "rows: gold, columns: prediction; shading: share of the row"),
      h(
        "thead",
        null,
        h(
          "tr",
          null,
          h("th", { scope: "col" }, "gold \\ pred"),
          lab.map(function (l) {
            return h("th", { scope: "col", class: "n" }, String(l));
          }),
          h("th", { scope: "col", class: "n" }, "total")
        )
      ),
      h(
        "tbody",
        null,
        mat.map(function (row, i) {
          var total = row.reduce(function (a, b) {
            return a + (LL.isNum(b) ? b : 0);
          }, 0);
          return h(
            "tr",
            null,
            h("th", { scope: "row" }, String(lab[i])),
            row.map(function (v, j) {
              var share = total ? v / total : 0;
              return h(
                "td",
                {
                  class: "n",
                  title: v + " of " + total + " (" + LL.fmt.pct(share) + " of the row)",
                  style: {
                    background: "rgba(0,114,178," + (0.08 + 0.6 * share).toFixed(3) + ")",
                    fontWeight: i === j ? "700" : "400",
                  },
                },
                LL.fmt.num(v)
              );
            }),
            h("td", { class: "n muted" }, LL.fmt.num(total))
          );
        })
      )
    );
    return h("div", { class: "scroll" }, table);
  }

  function metricsTable(list) {
    var scalars = list.filter(function (m) {
      return m && isScalar(m.value);
    });
    var others = list.filter(function (m) {
      return m && !isScalar(m.value);
    });
    var out = [];
    if (scalars.length)
      out.push(
        LL.table({
          rows: scalars,
          stack: true,
          columns: [
            {
              key: "metric",
              label: "Metric",
              render: function (m) {
                return h("strong", null, m.metric);
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
                return h("span", { class: "num", title: LL.fmt.exact(m.value) }, LL.fmt.num(m.value, 5));
              },
            },
            {
              key: "ci",
              label: "95% CI",
              value: function (m) {
                return m.ci_low;
              },
              render: ciText,
              num: true,
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
        })
      );
    others.forEach(function (m) {
      out.push(h("h4", null, m.metric, m.params ? " (" + paramsText(m.params) + ")" : ""));
      if (m.definition) out.push(h("p", { class: "muted" }, m.definition));
      out.push(
        /confusion/i.test(m.metric) || (m.value && m.value.matrix)
          ? matrixView(m.value, m.labels)
          : genericView(m.value, 1)
      );
    });
    return out;
  }

  function slicesView(slices) {
    return Object.keys(slices).map(function (field) {
      var values = slices[field] || {};
      var names = [];
      Object.keys(values).forEach(function (v) {
        ((values[v] || {}).metrics || []).forEach(function (m) {
          if (m && isScalar(m.value) && names.indexOf(m.metric) < 0) names.push(m.metric);
        });
      });
      var rows = LL.labelOrder(Object.keys(values)).map(function (v) {
        var r = { slice: v, body: values[v] || {} };
        ((values[v] || {}).metrics || []).forEach(function (m) {
          if (m && isScalar(m.value) && !(m.metric in r)) {
            r[m.metric] = m;
            r.n = r.n || m.n;
          }
        });
        if (r.n === undefined) r.n = r.body.n;
        return r;
      });
      return [
        h("h4", null, "By " + field),
        LL.table({
          rows: rows,
          columns: [
            { key: "slice", label: field },
            { key: "n", label: "n", num: true },
          ].concat(
            names.map(function (name) {
              return {
                key: name,
                label: name,
                num: true,
                value: function (r) {
                  return r[name] ? r[name].value : null;
                },
                render: function (r) {
                  var m = r[name];
                  if (!m) return "–";
                  return h(
                    "span",
                    { title: "exact " + LL.fmt.exact(m.value) + "; 95% CI " + ciText(m) },
                    LL.fmt.num(m.value, 4),
                    LL.isNum(m.ci_low) ? h("small", { class: "muted" }, " " + ciText(m)) : null
                  );
                },
              };
            })
          ),
        }),
      ];
    });
  }

  function findReliability(obj) {
    if (!obj || typeof obj !== "object") return null;
    if (obj.reliability && Array.isArray(obj.reliability.bins)) return obj.reliability;
    return null;
  }

  function tasksView(tasks) {
    return Object.keys(tasks).map(function (task) {
      var body = tasks[task] || {};
      var parts = [h("h3", null, "Task: " + task, body.n !== undefined ? " (n = " + LL.fmt.num(body.n) + ")" : "")];
      var facts = Object.keys(body).filter(function (k) {
        return isScalar(body[k]) && k !== "n";
      });
      if (facts.length)
        parts.push(
          h(
            "div",
            { class: "facts" },
            facts.map(function (k) {
              return h(
                "div",
                { class: "fact" },
                h("span", { class: "fk" }, k),
                h("span", { class: "fv" }, LL.valueText(body[k]))
              );
            })
          )
        );
      if (Array.isArray(body.metrics)) parts = parts.concat(metricsTable(body.metrics));
      if (body.per_class && Array.isArray(body.per_class.labels)) parts = parts.concat(perClassView(body.per_class));
      if (body.confusion_matrix)
        parts.push(
          h("h4", null, "Confusion matrix"),
          body.confusion_matrix.definition ? h("p", { class: "muted" }, body.confusion_matrix.definition) : null,
          matrixView(body.confusion_matrix, body.labels)
        );
      if (body.slices && typeof body.slices === "object") parts = parts.concat(slicesView(body.slices));
      var rel = findReliability(body);
      if (rel) parts.push(h("h4", null, "Reliability"), LL.reliabilityChart([{ label: task, bins: rel.bins }]));
      var rest = {};
      Object.keys(body).forEach(function (k) {
        if (
          ["metrics", "slices", "confusion_matrix", "reliability", "per_class", "labels"].indexOf(k) < 0 &&
          !isScalar(body[k])
        )
          rest[k] = body[k];
      });
      if (Object.keys(rest).length) parts.push(genericView(rest, 1));
      return h("div", { class: "task" }, parts);
    });
  }

  function gateLines(gates) {
    return (gates || [])
      .map(function (g) {
        var text = typeof g === "string" ? g : (g && g.text) || JSON.stringify(g);
        var m = /(>=|<=|>|<)\s*(-?[0-9.]+(?:e[-+]?[0-9]+)?)\s*$/i.exec(text);
        return m ? { y: Number(m[2]), label: "gate " + text } : null;
      })
      .filter(Boolean);
  }

  function sweepView(doc) {
    var trials = doc.threshold_trials.filter(function (t) {
      return t && LL.isNum(t.threshold);
    });
    var keys = [];
    trials.forEach(function (t) {
      Object.keys(t).forEach(function (k) {
        if (k !== "threshold" && typeof t[k] === "number" && keys.indexOf(k) < 0) keys.push(k);
      });
    });
    var sel = doc.threshold_selection || {};
    var parts = [h("h3", null, "Threshold sweep")];
    if (doc.decision) parts.push(h("p", { class: "muted" }, doc.decision));
    parts.push(
      LL.lineChart({
        title: "metrics by threshold" + (doc.objective ? " (objective: " + doc.objective + ")" : ""),
        x: trials.map(function (t) {
          return t.threshold;
        }),
        xLabel: "threshold",
        series: keys.map(function (k, i) {
          return {
            label: k,
            values: trials.map(function (t) {
              return typeof t[k] === "number" ? t[k] : null;
            }),
            color: LL.palette[i % LL.palette.length],
          };
        }),
        marks: LL.isNum(sel.threshold) ? [{ x: sel.threshold, label: "chosen " + sel.threshold }] : [],
        hlines: gateLines(doc.gates),
        height: 300,
      })
    );
    var facts = [];
    if (doc.gates && doc.gates.length)
      facts.push(
        h(
          "p",
          null,
          "Gates: ",
          doc.gates.map(function (g) {
            return h("code", { class: "chip" }, typeof g === "string" ? g : JSON.stringify(g));
          })
        )
      );
    if ("recall_gate_passed" in sel)
      facts.push(
        h(
          "p",
          null,
          "Gates passed at the chosen threshold: ",
          LL.badge(sel.recall_gate_passed ? "yes" : "no", sel.recall_gate_passed ? "ok" : "bad")
        )
      );
    if (doc.tie_break) facts.push(h("p", { class: "muted" }, "Selection rule: " + doc.tie_break));
    parts = parts.concat(facts);
    var blocks = [];
    if (doc.threshold_selection)
      blocks.push(h("div", null, h("h4", null, "Chosen threshold"), LL.kv(doc.threshold_selection, { compact: true })));
    if (doc.paired_test)
      blocks.push(
        h("div", null, h("h4", null, "Paired test at that threshold"), LL.kv(doc.paired_test, { compact: true }))
      );
    if (blocks.length) parts.push(h("div", { class: "grid2" }, blocks));
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
    return parts;
  }

  function calibrationView(doc) {
    var raw = doc.raw,
      cal = doc.calibrated;
    if (!isFlat(raw) || !isFlat(cal))
      return [
        h("h3", null, "Raw vs calibrated"),
        h(
          "div",
          { class: "grid2" },
          h("div", null, h("h4", null, "Raw"), genericView(raw, 2)),
          h("div", null, h("h4", null, "Calibrated"), genericView(cal, 2))
        ),
      ];
    var keys = Object.keys(raw).concat(
      Object.keys(cal).filter(function (k) {
        return !(k in raw);
      })
    );
    return [
      h("h3", null, "Raw vs calibrated"),
      LL.table({
        rows: keys.map(function (k) {
          return { metric: k, raw: raw[k], calibrated: cal[k] };
        }),
        columns: [
          { key: "metric", label: "Metric" },
          { key: "raw", label: "Raw", num: true },
          { key: "calibrated", label: "Calibrated", num: true },
          {
            key: "delta",
            label: "Δ",
            num: true,
            value: function (r) {
              return LL.isNum(r.raw) && LL.isNum(r.calibrated) ? r.calibrated - r.raw : null;
            },
            render: function (r) {
              return LL.isNum(r.raw) && LL.isNum(r.calibrated) ? LL.numCell(r.calibrated - r.raw) : "–";
            },
          },
        ],
      }),
    ];
  }

  /** Any JSON: flat objects as key/value tables, lists of flat objects as tables, the rest as trees. */
  function genericView(value, depth) {
    if (isScalar(value)) return h("span", null, LL.valueText(value));
    if (Array.isArray(value)) {
      if (value.length && value.every(isFlat)) {
        var cols = [];
        value.forEach(function (r) {
          Object.keys(r).forEach(function (k) {
            if (cols.indexOf(k) < 0) cols.push(k);
          });
        });
        return LL.table({
          rows: value,
          pageSize: 50,
          columns: cols.map(function (k) {
            return {
              key: k,
              label: k,
              num: value.some(function (r) {
                return typeof r[k] === "number";
              }),
            };
          }),
        });
      }
      if (value.every(isScalar)) return h("span", null, value.map(LL.valueText).join(", "));
      return LL.jsonTree(value, 1);
    }
    if (isInterval(value)) return intervalView(value);
    if (isFlat(value)) return LL.kv(value, { compact: true });
    if (depth > 2) return LL.jsonTree(value, 1);
    var flat = {},
      nested = [];
    Object.keys(value).forEach(function (k) {
      if (isScalar(value[k]) || isInterval(value[k]) || (Array.isArray(value[k]) && value[k].every(isScalar)))
        flat[k] = value[k];
      else nested.push(k);
    });
    var kvRows = Object.keys(flat).map(function (k) {
      var v = flat[k];
      return h(
        "tr",
        null,
        h("th", { scope: "row" }, k),
        h(
          "td",
          null,
          isInterval(v)
            ? intervalView(v)
            : Array.isArray(v)
              ? v.map(LL.valueText).join(", ")
              : typeof v === "number"
                ? h("span", { title: LL.fmt.exact(v) }, LL.fmt.exact(v))
                : LL.valueText(v)
        )
      );
    });
    return h(
      "div",
      null,
      kvRows.length
        ? h("div", { class: "scroll" }, h("table", { class: "kv compact" }, h("tbody", null, kvRows)))
        : null,
      nested.map(function (k) {
        return h("div", null, h("h4", null, k), genericView(value[k], depth + 1));
      })
    );
  }
  function isInterval(v) {
    return v && typeof v === "object" && !Array.isArray(v) && typeof v.value === "number" && "ci_low" in v;
  }
  function intervalView(v) {
    return h(
      "span",
      { title: "exact " + LL.fmt.exact(v.value) },
      LL.fmt.num(v.value, 4),
      h("small", { class: "muted" }, " " + ciText(v))
    );
  }
  function perClassView(pc) {
    var keys = [];
    pc.labels.forEach(function (r) {
      Object.keys(r).forEach(function (k) {
        if (k !== "label" && keys.indexOf(k) < 0) keys.push(k);
      });
    });
    var order = LL.labelOrder(
      pc.labels.map(function (r) {
        return r.label;
      })
    );
    var rows = order.map(function (l) {
      return pc.labels.filter(function (r) {
        return String(r.label) === l;
      })[0];
    });
    return [
      h("h4", null, "Per class"),
      pc.definition ? h("p", { class: "muted" }, pc.definition + (pc.method ? " CI: " + pc.method + "." : "")) : null,
      LL.table({
        rows: rows,
        columns: [
          {
            key: "label",
            label: "label",
            render: function (r) {
              return h("code", null, String(r.label));
            },
          },
        ].concat(
          keys.map(function (k) {
            return {
              key: k,
              label: k,
              num: true,
              value: function (r) {
                return isInterval(r[k]) ? r[k].value : r[k];
              },
              render: function (r) {
                return isInterval(r[k]) ? intervalView(r[k]) : LL.numCell(r[k]);
              },
            };
          })
        ),
      }),
    ];
  }

  function documentSection(d, i) {
    var title = d.kind === "evaluation" ? "Evaluation" : d.kind.charAt(0).toUpperCase() + d.kind.slice(1);
    var sec = LL.section(title, "doc-" + i);
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
      sec.appendChild(LL.callout(d.origin === "unavailable" ? "warn" : "error", d.error));
      return sec;
    }
    (d.thinned || []).forEach(function (t) {
      sec.appendChild(LL.callout("warn", "Thinned for display: " + t));
    });
    var doc = d.doc;
    if (!doc || typeof doc !== "object") {
      sec.appendChild(genericView(doc, 1));
      return sec;
    }
    if (doc.tasks && typeof doc.tasks === "object")
      tasksView(doc.tasks).forEach(function (n) {
        sec.appendChild(n);
      });
    if (Array.isArray(doc.threshold_trials))
      sweepView(doc).forEach(function (n) {
        sec.appendChild(n);
      });
    if (doc.raw && doc.calibrated)
      calibrationView(doc).forEach(function (n) {
        sec.appendChild(n);
      });
    var rel = findReliability(doc);
    if (rel)
      sec.appendChild(
        h("div", null, h("h3", null, "Reliability"), LL.reliabilityChart([{ label: "stored", bins: rel.bins }]))
      );
    var defs = doc.definition || doc.definitions;
    if (defs && typeof defs === "object")
      sec.appendChild(h("details", { open: true }, h("summary", null, "Definitions"), LL.kv(defs, { compact: true })));
    var rest = {};
    Object.keys(doc).forEach(function (k) {
      if (HANDLED.indexOf(k) < 0) rest[k] = doc[k];
    });
    if (Object.keys(rest).length) sec.appendChild(h("div", null, h("h3", null, "Other fields"), genericView(rest, 1)));
    sec.appendChild(h("details", null, h("summary", null, "Full document (JSON)"), LL.jsonTree(doc, 1)));
    return sec;
  }

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
      var order = t.labels || [];
      sec.appendChild(
        h("h3", null, "Task: " + task + " (" + LL.fmt.num(t.n) + " rows" + (t.kind ? ", " + t.kind : "") + ")")
      );
      var blocks = [];
      if (t.confusion)
        blocks.push(
          h(
            "div",
            null,
            h("h4", null, "Confusion counts"),
            matrixView(t.confusion, t.confusion.labels, t.confusion.note)
          )
        );
      if (t.reliability)
        blocks.push(
          h(
            "div",
            null,
            h("h4", null, "Reliability diagram"),
            LL.reliabilityChart([{ label: task, bins: t.reliability.bins }]),
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
                render: function (r) {
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
                    render: function (r) {
                      return LL.probBars(r.probs, r.gold, r.prediction, order);
                    },
                  }
                : null,
              {
                key: "slices",
                label: "slices",
                sortable: false,
                render: function (r) {
                  return r.slices && typeof r.slices === "object"
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
    if (rows.shown && rows.shown.length) {
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
  function summarizeAt(task, T) {
    var n = task.logits.length,
      nll = 0,
      conf = 0,
      acc = 0,
      bins = [];
    for (var b = 0; b < 10; b++) bins.push({ low: b / 10, high: (b + 1) / 10, count: 0, sc: 0, sa: 0 });
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
          slider.value = 0;
          draw();
          note.textContent = "";
        });
        best.addEventListener("click", function () {
          var T = bestT(task());
          slider.value = Math.max(-2, Math.min(2, Math.log(T) / Math.LN2));
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
        ev.documents.forEach(function (d, i) {
          main.appendChild(documentSection(d, i));
        });
        if (!ev.documents.length && !ev.rows)
          main.appendChild(LL.callout("warn", "Nothing is stored under this evaluation."));
        if (ev.rows) main.appendChild(rowsSection(ev));
        if (ev.has_logits) main.appendChild(temperatureSection(ev));
        document.querySelectorAll("figure.chart").forEach(function (f) {
          if (f.mount) f.mount();
        });
      });
  });
})();
