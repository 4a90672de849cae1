/* neuronprobe report: sorting and filtering of tables, copy buttons.
   The page is complete without this script; it only adds controls.
   It sets up every .np-report on the page once (a notebook may hold several). */
(function () {
  "use strict";

  function sortKey(row, index) {
    var cell = row.cells[index];
    if (!cell) { return ""; }
    var key = cell.getAttribute("data-sort");
    if (key !== null && key !== "" && !isNaN(Number(key))) { return Number(key); }
    return cell.textContent.trim().toLowerCase();
  }

  function compareKeys(a, b) {
    if (typeof a === "number" && typeof b === "number") { return a - b; }
    return String(a).localeCompare(String(b));
  }

  function makeSortable(table) {
    var head = table.tHead && table.tHead.rows[0];
    var body = table.tBodies[0];
    if (!head || !body) { return; }
    Array.prototype.forEach.call(head.cells, function (th, index) {
      var button = document.createElement("button");
      button.type = "button";
      button.textContent = th.textContent;
      button.title = "sort by " + th.textContent;
      th.textContent = "";
      th.appendChild(button);
      button.addEventListener("click", function () {
        var descending = th.getAttribute("aria-sort") !== "descending";
        Array.prototype.forEach.call(head.cells, function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (r1, r2) {
          var order = compareKeys(sortKey(r1, index), sortKey(r2, index));
          return descending ? -order : order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  }

  function makeFilter(root) {
    var bar = root.querySelector(".np-filter");
    var table = root.querySelector("table.np-ops");
    if (!bar || !table) { return; }
    var text = bar.querySelector(".np-filter-text");
    var verdict = bar.querySelector(".np-filter-verdict");
    var phase = bar.querySelector(".np-filter-phase");
    var shown = bar.querySelector(".np-filter-shown");
    var rows = table.tBodies[0].rows;
    function apply() {
      var needle = text.value.trim().toLowerCase();
      var wanted = verdict.value;
      var visible = 0;
      Array.prototype.forEach.call(rows, function (row) {
        var match = (!wanted || row.getAttribute("data-verdict") === wanted) &&
          (!phase || !phase.value || row.getAttribute("data-phase") === phase.value) &&
          (!needle || row.textContent.toLowerCase().indexOf(needle) !== -1);
        row.hidden = !match;
        if (match) { visible += 1; }
      });
      shown.textContent = visible + " of " + rows.length + " ops";
    }
    text.addEventListener("input", apply);
    verdict.addEventListener("change", apply);
    if (phase) { phase.addEventListener("change", apply); }
    bar.hidden = false;
    apply();
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    return new Promise(function (resolve, reject) {
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.appendChild(area);
      area.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      document.body.removeChild(area);
      if (ok) { resolve(); } else { reject(new Error("copy not allowed")); }
    });
  }

  function makeCopyButtons(root) {
    Array.prototype.forEach.call(root.querySelectorAll(".np-snippet"), function (snippet) {
      var button = snippet.querySelector(".np-copy");
      var code = snippet.querySelector("pre");
      if (!button || !code) { return; }
      button.hidden = false;
      button.addEventListener("click", function () {
        copyText(code.textContent).then(function () {
          button.textContent = "Copied";
        }, function () {
          button.textContent = "Select and copy by hand";
        });
        window.setTimeout(function () { button.textContent = "Copy"; }, 1500);
      });
    });
  }

  function setUp(root) {
    root.setAttribute("data-np-ready", "1");
    Array.prototype.forEach.call(root.querySelectorAll("table.np-sortable"), makeSortable);
    makeFilter(root);
    makeCopyButtons(root);
  }

  Array.prototype.forEach.call(document.querySelectorAll(".np-report:not([data-np-ready])"), setUp);
}());
