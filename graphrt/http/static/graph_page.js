// Live figures for the graph picture: one SSE snapshot per second (see graph_page.py).
(function () {
  "use strict";
  const svg = document.querySelector("#picture svg");
  const details = document.getElementById("details");
  const live = document.getElementById("live");
  let latest = null;
  let selected = null;

  function fmt(ms) {
    if (ms >= 100) return ms.toFixed(0);
    if (ms >= 1) return ms.toFixed(1);
    return ms.toFixed(2);
  }
  function rate(value) {
    return value >= 10 ? value.toFixed(0) : value.toFixed(1);
  }
  function nodeGroup(index) {
    return svg.querySelector('.node[data-node="' + index + '"]');
  }
  function setLine(group, line, text) {
    const element = group.querySelector('.fig[data-line="' + line + '"]');
    if (element) element.textContent = text;
  }
  function el(tag, text, cls) {
    const element = document.createElement(tag);
    if (text !== undefined) element.textContent = text;
    if (cls) element.className = cls;
    return element;
  }

  function showDetails(index) {
    const info = GRAPHRT.nodes[index];
    if (!info) return;
    details.replaceChildren();
    details.appendChild(el("h2", info.name));
    details.appendChild(el("div", info.calculator, "hint"));
    if (info.subgraph) details.appendChild(el("div", "in subgraph " + info.subgraph, "hint subgraph"));
    const stats = latest && latest.nodes
      ? latest.nodes.find(function (n) { return String(n.config_index) === index; })
      : null;
    if (stats) {
      details.appendChild(el("h3", "Figures (all runs)"));
      const table = el("table");
      const rows = [
        ["Process() calls", stats.calls + " (" + rate(stats.calls_per_second) + "/s)"],
        ["packets in / out", stats.packets_in + " / " + stats.packets_out],
        ["input queue", String(stats.queue_depth)],
        ["latency p50 / p99", fmt(stats.latency_ms.p50) + " / " + fmt(stats.latency_ms.p99) + " ms"],
        ["latency mean / max", fmt(stats.latency_ms.mean) + " / " + fmt(stats.latency_ms.max) + " ms"],
        ["errors", String(stats.errors)],
      ];
      const engine = latest.engines && latest.engines[info.name];
      if (engine) {
        rows.push(["engine running / waiting", engine.running + " / " + engine.waiting]);
        rows.push(["KV cache", engine.kv_cache_usage_percent.toFixed(1) + "%"]);
        rows.push(["tokens/s", rate(engine.tokens_per_second)]);
      }
      const pipeline = latest.pipelines && latest.pipelines[info.name];
      if (pipeline) {
        rows.push(["pipeline running / waiting", pipeline.running + " / " + pipeline.waiting]);
        rows.push(["pipeline steps / cancelled", pipeline.steps + " / " + pipeline.cancelled]);
      }
      rows.forEach(function (row) {
        const tr = el("tr");
        tr.appendChild(el("td", row[0]));
        tr.appendChild(el("td", row[1]));
        table.appendChild(tr);
      });
      details.appendChild(table);
      details.appendChild(el("h3", "Recent errors"));
      if (!stats.recent_errors.length) details.appendChild(el("div", "none", "hint"));
      stats.recent_errors.slice().reverse().forEach(function (error) {
        const when = new Date(error.time * 1000).toLocaleTimeString();
        details.appendChild(el("div", when + " " + error.phase + ": " + error.message, "error"));
      });
    }
    details.appendChild(el("h3", "Node config"));
    details.appendChild(el("pre", info.config));
  }

  function select(index) {
    if (selected !== null) {
      const previous = nodeGroup(selected);
      if (previous) previous.classList.remove("selected");
    }
    selected = index;
    const group = nodeGroup(index);
    if (group) group.classList.add("selected");
    showDetails(index);
  }

  svg.querySelectorAll(".node").forEach(function (group) {
    const index = group.getAttribute("data-node");
    group.addEventListener("click", function () { select(index); });
    group.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") select(index);
    });
  });

  function update(snapshot) {
    latest = snapshot;
    const state = document.getElementById("state");
    state.textContent = snapshot.state;
    state.className = "state " + snapshot.state.toLowerCase();
    if (!snapshot.live) {
      live.textContent = "live figures are off (--graph_stats false)";
      return;
    }
    document.getElementById("runs").textContent =
      "requests: " + snapshot.runs.started + " (" + snapshot.runs.active + " running, " +
      snapshot.runs.failed + " failed)";
    snapshot.nodes.forEach(function (node) {
      const group = nodeGroup(node.config_index);
      if (!group) return;
      group.setAttribute("data-calls", node.calls);
      setLine(group, 0, "in " + node.packets_in + " · out " + node.packets_out +
        " · q " + node.queue_depth);
      setLine(group, 1, "p50 " + fmt(node.latency_ms.p50) + " · p99 " + fmt(node.latency_ms.p99) +
        " ms" + (node.errors ? " · err " + node.errors : ""));
      const engine = snapshot.engines && snapshot.engines[node.name];
      if (engine) {
        setLine(group, 2, "run " + engine.running + " · wait " + engine.waiting + " · kv " +
          engine.kv_cache_usage_percent.toFixed(0) + "% · " + rate(engine.tokens_per_second) +
          " tok/s");
      }
      const pipeline = snapshot.pipelines && snapshot.pipelines[node.name];
      if (pipeline) {
        setLine(group, 2, "run " + pipeline.running + " · wait " + pipeline.waiting + " · steps " +
          pipeline.steps);
      }
      group.classList.toggle("failing", node.errors > 0);
      group.classList.toggle("busy", node.queue_depth > 0 || node.calls_per_second > 0);
    });
    snapshot.streams.forEach(function (stream) {
      svg.querySelectorAll('.rate[data-stream="' + CSS.escape(stream.name) + '"]')
        .forEach(function (tspan) {
          const labelled = tspan.previousSibling && tspan.previousSibling.textContent;
          tspan.textContent = (labelled ? " · " : "") + rate(stream.packets_per_second) + "/s";
        });
    });
    if (selected !== null) showDetails(selected);
  }

  function connect() {
    const source = new EventSource(GRAPHRT.events);
    source.onopen = function () { live.textContent = "live"; live.className = "live on"; };
    source.onmessage = function (message) { update(JSON.parse(message.data)); };
    source.onerror = function () {
      live.textContent = "disconnected, retrying…";
      live.className = "live off";
    };
  }
  connect();
})();
