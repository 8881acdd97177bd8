"""The dashboard page: one self-contained HTML document (inline CSS and JavaScript, nothing
loaded from elsewhere) that fetches ``state.json`` every few seconds and renders charts of
the last half hour (SVG images drawn by the server, ``charts.py``) and three tables: worker
clusters, cluster queues, workloads (each linking to its own page).

Everything from the server is inserted as text (``textContent``), never as markup, so a
name or a message cannot inject anything into the page.
"""

from __future__ import annotations

REFRESH_SECONDS = 3

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kfed dashboard</title>
<style>
  body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
         color: #1d2330; background: #f5f6f8; }
  header { background: #1d2330; color: #fff; padding: 10px 20px; display: flex;
           flex-wrap: wrap; gap: 6px 24px; align-items: baseline; }
  header h1 { font-size: 18px; margin: 0 12px 0 0; }
  header .meta { color: #c5cad6; }
  main { padding: 12px 20px 40px; }
  section { margin-top: 18px; }
  h2 { font-size: 15px; margin: 0 0 6px; }
  h2 small { font-weight: normal; color: #5b6475; }
  table { border-collapse: collapse; width: 100%; background: #fff;
          box-shadow: 0 1px 2px rgba(0,0,0,.08); }
  th, td { text-align: left; padding: 5px 9px; border-bottom: 1px solid #e6e8ec;
           vertical-align: top; }
  th { background: #eceef2; font-weight: 600; white-space: nowrap; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  td.nowrap { white-space: nowrap; }
  .empty { color: #5b6475; font-style: italic; }
  .badge { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 12px;
           font-weight: 600; white-space: nowrap; }
  .ok { background: #dcf3e3; color: #146c2e; }
  .warn { background: #fff0c9; color: #7a5200; }
  .bad { background: #fbdcdc; color: #9b1c1c; }
  .info { background: #e1ebfb; color: #1f4f9b; }
  .muted { background: #eceef2; color: #5b6475; }
  .banner { margin: 12px 0 0; padding: 8px 12px; border-radius: 4px; }
  .note { color: #5b6475; font-size: 12px; }
  details summary { cursor: pointer; color: #1f4f9b; font-size: 12px; }
  ul.plain { margin: 2px 0; padding-left: 16px; }
  #charts { display: flex; flex-wrap: wrap; gap: 10px; }
  #charts img { background: #fff; box-shadow: 0 1px 2px rgba(0,0,0,.08); }
  a.workload { color: inherit; }
</style>
</head>
<body>
<header>
  <h1>kfed</h1>
  <span id="who" class="meta">loading...</span>
  <span id="readiness" class="meta"></span>
  <span id="updated" class="meta"></span>
</header>
<main>
  <div id="banner"></div>
  <section>
    <h2>The recent past <small>(kept in memory by this process; from
      <a href="history.json">history.json</a>)</small></h2>
    <div id="charts"></div>
  </section>
  <section id="clusters-section">
    <h2>Worker clusters</h2>
    <table id="clusters"><thead><tr>
      <th>Cluster</th><th>Health</th><th>Maintenance</th><th>Fencing</th>
      <th>Free capacity per flavor</th><th>Placing</th><th>Running</th>
    </tr></thead><tbody></tbody></table>
  </section>
  <section>
    <h2>Cluster queues</h2>
    <table id="queues"><thead><tr>
      <th>ClusterQueue</th><th>Cohort</th><th>Status</th><th>Pending (active / inadmissible)</th>
      <th>Reserving</th><th>Admitted</th><th>Reserved / nominal quota</th>
    </tr></thead><tbody></tbody></table>
  </section>
  <section>
    <h2>Workloads <small id="workload-counts"></small></h2>
    <table id="workloads"><thead><tr>
      <th>Workload</th><th>Queue</th><th>Flavors</th><th>Cluster</th><th>State</th>
      <th>Age</th><th>Why</th>
    </tr></thead><tbody></tbody></table>
  </section>
  <p class="note">Refreshes every __REFRESH__ s from
    <a href="state.json">state.json</a>. Metrics: <a href="../metrics">/metrics</a>.</p>
</main>
<script>
"use strict";
const REFRESH_MS = __REFRESH__ * 1000;
const openDetails = new Set();
const CHARTS = [["pending", false], ["admitted", false], ["gpus", true],
                ["dispatch-latency", true], ["failovers", true]];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value; else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function badge(text, kind) { return el("span", {class: "badge " + kind}, text); }

function fill(tableId, rows, columns, emptyText) {
  const body = document.querySelector("#" + tableId + " tbody");
  body.replaceChildren();
  if (rows.length === 0) {
    body.append(el("tr", {}, el("td", {colspan: String(columns), class: "empty"}, emptyText)));
  }
  for (const cells of rows) body.append(el("tr", {}, ...cells));
}

function byFlavor(items, render) {
  const groups = new Map();
  for (const item of items) {
    if (!groups.has(item.flavor)) groups.set(item.flavor, []);
    groups.get(item.flavor).push(render(item));
  }
  const list = el("ul", {class: "plain"});
  for (const [flavor, parts] of groups) {
    list.append(el("li", {}, el("b", {}, flavor), ": " + parts.join(", ")));
  }
  return list;
}

function clusterRows(clusters) {
  return clusters.map(c => [
    el("td", {}, el("b", {}, c.name)),
    el("td", {}, c.active ? badge("Active", "ok") : badge("Inactive", "bad"),
       c.active ? null : el("div", {class: "note"}, c.reason + ": " + c.message),
       c.credentials_expiring ? badge("credentials expiring", "bad") : null,
       c.credentials_expiring ? el("div", {class: "note"}, c.credentials) : null),
    el("td", {}, c.maintenance === "drain" ? badge("draining", "bad")
                 : c.maintenance === "cordon" ? badge("cordoned", "warn") : badge("none", "muted")),
    el("td", {}, !c.can_fence ? badge("no shim seen", "warn")
                 : c.shim_mode === "fence-only" ? badge("can fence (fence-only)", "ok")
                 : badge("can fence", "ok")),
    el("td", {}, c.free === null ? el("span", {class: "empty"}, "unknown (not connected)")
                 : c.free.length === 0 ? el("span", {class: "empty"}, "no quota")
                 : byFlavor(c.free, f => f.resource + " " + f.free)),
    el("td", {class: "num"}, c.placing),
    el("td", {class: "num"}, c.running),
  ]);
}

function queueRows(queues) {
  const kinds = {active: "ok", pending: "warn", terminating: "muted"};
  return queues.map(q => [
    el("td", {}, el("b", {}, q.name)),
    el("td", {}, q.cohort || "\u2014"),
    el("td", {}, badge(q.status, kinds[q.status] || "muted"),
       q.status === "active" ? null : el("div", {class: "note"}, q.message)),
    el("td", {class: "num"}, q.pending_active + " / " + q.pending_inadmissible),
    el("td", {class: "num"}, q.reserving),
    el("td", {class: "num"}, q.admitted),
    el("td", {}, byFlavor(q.quotas, x => x.resource + " " + x.reserved + "/" + x.nominal)),
  ]);
}

function stateBadge(state) {
  const kinds = {
    Admitted: "ok", Reserved: "info", Pending: "warn", Evicted: "bad", Finished: "muted",
  };
  return badge(state, kinds[state] || "muted");
}

function why(w) {
  const key = w.namespace + "/" + w.name;
  const cell = el("td", {}, w.reason);
  const p = w.placement;
  if (p && p.candidates && p.candidates.length) {
    const details = el("details", {},
      el("summary", {}, "dispatch decision" + (p.at ? " at " + p.at : "")),
      el("div", {class: "note"}, "chose " + p.cluster + " by " + p.rule),
      el("ul", {class: "plain note"}, ...p.candidates.map(c => el("li", {}, c))));
    if (openDetails.has(key)) details.open = true;
    details.addEventListener("toggle", () => {
      if (details.open) openDetails.add(key); else openDetails.delete(key);
    });
    cell.append(details);
  }
  return cell;
}

function workloadLink(w) {
  const href = "../workloads/" + encodeURIComponent(w.namespace) + "/" +
               encodeURIComponent(w.name);
  return el("a", {class: "workload", href: href}, el("b", {}, w.name));
}

function drawCharts(role) {
  const box = document.getElementById("charts");
  const wanted = CHARTS.filter(([, managerOnly]) => role === "manager" || !managerOnly);
  if (box.children.length !== wanted.length) {
    box.replaceChildren(...wanted.map(([name]) =>
      el("img", {id: "chart-" + name, alt: name, width: "460", height: "210"})));
  }
  const stamp = Date.now();
  for (const [name] of wanted) {
    document.getElementById("chart-" + name).src = "charts/" + name + ".svg?t=" + stamp;
  }
}

function workloadRows(workloads) {
  return workloads.map(w => [
    el("td", {}, workloadLink(w),
       el("div", {class: "note"}, (w.kind ? w.kind + " · " : "") + w.namespace)),
    el("td", {class: "nowrap"}, w.queue,
       w.cluster_queue ? el("div", {class: "note"}, w.cluster_queue) : null),
    el("td", {class: "nowrap"}, w.flavors.join(", ")),
    el("td", {class: "nowrap"}, w.cluster),
    el("td", {}, stateBadge(w.state),
       w.in_line ? el("div", {class: "note nowrap"}, w.in_line) : null),
    el("td", {class: "num nowrap"}, w.age),
    why(w),
  ]);
}

function render(s) {
  document.getElementById("who").textContent =
    (s.role === "manager" ? "manager " : "worker shim ") + s.identity +
    (s.role === "manager" ? (s.is_leader ? " (leader)" : " (standby)") : "");
  const readiness = document.getElementById("readiness");
  readiness.replaceChildren(s.ready ? badge("ready", "ok") : badge("not ready", "bad"),
                            " " + s.ready_reason);
  document.getElementById("updated").textContent = "updated " + s.generated_at;
  const banner = document.getElementById("banner");
  banner.replaceChildren();
  if (s.role === "manager" && !s.is_leader) {
    banner.append(el("div", {class: "banner warn"},
      s.leader ? "This replica is a standby: " + s.leader + " leads. Open the leader's dashboard "
                 + "to see clusters, queues and workloads."
               : "No replica leads yet: waiting for the leader election."));
  }
  document.getElementById("clusters-section").hidden = s.role !== "manager";
  drawCharts(s.role);
  fill("clusters", clusterRows(s.clusters), 7,
       s.is_leader ? "no MultiKueueCluster registered" : "shown by the leader");
  fill("queues", queueRows(s.queues), 7, "no ClusterQueue");
  fill("workloads", workloadRows(s.workloads), 7, "no workload");
  const counts = Object.entries(s.workloads_by_state).map(([k, v]) => v + " " + k).join(", ");
  document.getElementById("workload-counts").textContent = "(" + s.workloads.length +
    " shown of " + s.workloads_total + (counts ? ": " + counts : "") + ")";
}

async function refresh() {
  try {
    const response = await fetch("state.json", {cache: "no-store"});
    if (!response.ok) throw new Error("HTTP " + response.status);
    render(await response.json());
  } catch (err) {
    document.getElementById("banner").replaceChildren(
      el("div", {class: "banner bad"}, "Cannot refresh: " + err.message + " (retrying)"));
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}
refresh();
</script>
</body>
</html>
""".replace("__REFRESH__", str(REFRESH_SECONDS))
