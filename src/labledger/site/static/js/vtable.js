// @ts-check
/* A sortable table that renders only the rows on screen (10,000 runs scroll as fast as 10): rows
   have a fixed height, two spacers stand in for the rows above and below the window. */
(function () {
  "use strict";
  var LL = window.LL,
    h = LL.h;

  /**
   * opts: {columns: [{key, label, render(row), value(row), num, title, className, sortable}], rows,
   * sort: {key, dir}, className, empty, onSort(sort), rowHeight (px), height (CSS), rowClass(row)}.
   * Returns the scroll box; box.redraw(rows?, columns?) redraws, box.rendered() counts drawn rows.
   */
  LL.vtable = function (opts) {
    var cols = opts.columns,
      rows = opts.rows.slice(),
      sort = opts.sort || null,
      sorted = rows;
    var rowH = opts.rowHeight || 36;
    var box = /** @type {any} */ (
      h("div", { class: "scroll vtable-box", style: { maxHeight: opts.height || "70vh" }, tabindex: "0" })
    );
    var above = h("div", { class: "vpad", "aria-hidden": "true" });
    var below = h("div", { class: "vpad", "aria-hidden": "true" });
    var table = h("table", { class: "data vtable" + (opts.className ? " " + opts.className : "") });
    var thead = h("thead"),
      tbody = h("tbody");
    table.appendChild(thead);
    table.appendChild(tbody);
    box.appendChild(above);
    box.appendChild(table);
    box.appendChild(below);
    var drawn = [-1, -1];

    function order() {
      var c = sort
        ? cols.filter(function (x) {
            return x.key === sort.key;
          })[0]
        : null;
      sorted = c ? LL.sortRows(rows, c, sort.dir) : rows.slice();
    }
    function header() {
      LL.sortHeader(thead, cols, sort, function (next) {
        sort = next;
        order();
        header();
        paint(true);
        if (opts.onSort) opts.onSort(sort);
      });
    }
    function paint(force) {
      var headH = thead.getBoundingClientRect().height || rowH;
      var view = box.clientHeight || 600;
      var first = Math.max(0, Math.floor((box.scrollTop - headH) / rowH) - 8);
      var last = Math.min(sorted.length, Math.ceil((box.scrollTop + view) / rowH) + 8);
      if (!force && first === drawn[0] && last === drawn[1]) return;
      drawn = [first, last];
      above.style.height = first * rowH + "px";
      below.style.height = (sorted.length - last) * rowH + "px";
      LL.clear(tbody);
      if (!sorted.length) {
        tbody.appendChild(
          h("tr", null, h("td", { colspan: cols.length, class: "muted" }, opts.empty || "Nothing to show."))
        );
        return;
      }
      for (var i = first; i < last; i++) {
        var r = sorted[i];
        tbody.appendChild(
          h(
            "tr",
            { class: opts.rowClass ? opts.rowClass(r) : null, style: { height: rowH + "px" } },
            cols.map(function (c) {
              var out = c.render
                ? c.render(r, i)
                : c.num
                  ? LL.numCell(LL.cellValue(c, r))
                  : LL.valueText(LL.cellValue(c, r));
              return h("td", { class: (c.num ? "n " : "") + (c.className || ""), "data-label": c.label || null }, out);
            })
          )
        );
      }
    }
    var pending = false;
    box.addEventListener("scroll", function () {
      if (pending) return;
      pending = true;
      requestAnimationFrame(function () {
        pending = false;
        paint(false);
      });
    });
    order();
    header();
    paint(true);
    // The first paint happens before the box is in the document (no height yet): paint again then,
    // with the row height the browser actually gave (so the spacers match the rows they replace).
    requestAnimationFrame(function () {
      var tr = /** @type {HTMLElement | null} */ (tbody.firstElementChild);
      var real = tr && sorted.length ? tr.getBoundingClientRect().height : 0;
      if (real > 0 && Math.abs(real - rowH) > 0.5) rowH = real;
      paint(true);
    });
    box.redraw = function (newRows, newCols) {
      if (newRows) rows = newRows.slice();
      if (newCols) cols = newCols;
      order();
      header();
      paint(true);
    };
    box.rendered = function () {
      return drawn[1] - drawn[0];
    };
    box.sortState = function () {
      return sort;
    };
    return box;
  };
})();
