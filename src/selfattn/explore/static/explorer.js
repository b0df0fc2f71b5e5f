// selfattn attention explorer: draws the payload embedded in the page (its layout is
// documented in selfattn/explore/page.py). Dependency-free ES2020, no build step.
//
// Security: strings from the payload (tokens, labels, titles) reach the DOM only through
// textContent or as SVG text nodes, never as markup; the only payload value set as an
// attribute that the browser loads is an image source, and only a data:image/ URL.
"use strict";

(() => {
  const SVG_NS = "http://www.w3.org/2000/svg";
  const PAYLOAD_VERSION = 1;
  const MIN_WEIGHT = 0.005; // big maps: lighter lines than this are not drawn ...
  const DRAW_ALL_CELLS = 4096; // ... but maps with at most this many cells draw every line
  const MAX_AXIS_LABELS = 40;
  const MEAN = "mean"; // the head selector's "all heads" value: the mean over heads
  const HEAD_COLOURS = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#393b79", "#637939",
  ];
  const FONT = "13px system-ui, sans-serif"; // must match .token in explorer.css

  // What is shown; every view is drawn from this and the payload.
  const state = {
    payload: null,
    example: 0,
    figure: 0,
    layer: 0,
    head: 0, // a head index or MEAN
    query: 0, // the query position the overlays show
    zoom: false, // matrix view: the enlarged heatmap is open
    sortKey: null, // head comparison: the column the table is sorted by
    sortDir: 1,
  };
  const ui = {}; // the DOM nodes built once by buildLayout
  let headLines = []; // the head view's <line>s, for hover isolation

  // ---------------------------------------------------------------- DOM helpers

  function el(tag, attrs = {}, text) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function svg(tag, attrs = {}, text) {
    const node = document.createElementNS(SVG_NS, tag);
    setAttrs(node, attrs);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function setAttrs(node, attrs) {
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  }

  /** A weight as the page prints it in data-weight: 6 significant digits. */
  function fmt(value) {
    return Number(value).toPrecision(6);
  }

  function oneLine(text) {
    const line = String(text).split(/\r?\n/)[0].trim();
    return line.length > 300 ? line.slice(0, 299) + "…" : line;
  }

  function labelled(text, control) {
    const label = el("label", {}, text + " ");
    label.append(control);
    return label;
  }

  function safeImageSrc(src) {
    return typeof src === "string" && src.startsWith("data:image/") ? src : "";
  }

  // ---------------------------------------------------------------- the data

  function examples() {
    return state.payload.examples;
  }

  function currentExample() {
    return examples()[state.example];
  }

  function currentFigure() {
    return currentExample().figures[state.figure];
  }

  function numLayers(figure) {
    return figure.maps.length;
  }

  function numHeads(figure, layer) {
    return figure.maps[layer].length;
  }

  /** The T × S weights of one head, or of the mean over heads when head is MEAN. */
  function headMap(figure, layer, head) {
    const heads = figure.maps[layer];
    if (head !== MEAN) return heads[head];
    return heads[0].map((row, i) =>
      row.map((_, j) => heads.reduce((sum, map) => sum + map[i][j], 0) / heads.length),
    );
  }

  function maxOf(values) {
    let max = 0;
    for (const value of values) if (value > max) max = value;
    return max;
  }

  /** Keep the selection inside the current example's figure. */
  function clampSelection() {
    state.example = Math.min(state.example, examples().length - 1);
    const figures = currentExample().figures;
    state.figure = Math.min(state.figure, figures.length - 1);
    const figure = currentFigure();
    state.layer = Math.min(state.layer, numLayers(figure) - 1);
    if (state.head !== MEAN) state.head = Math.min(state.head, numHeads(figure, state.layer) - 1);
    state.query = Math.min(state.query, figure.queries.length - 1);
  }

  function headColour(head) {
    return head === MEAN ? "#333333" : HEAD_COLOURS[head % HEAD_COLOURS.length];
  }

  /** A white → dark blue ramp for heatmaps; t in [0, 1]. */
  function ramp(t) {
    const stops = [[255, 255, 255], [107, 174, 214], [8, 48, 107]];
    const x = Math.max(0, Math.min(1, t)) * (stops.length - 1);
    const k = Math.min(Math.floor(x), stops.length - 2);
    const f = x - k;
    return stops[k].map((c, n) => Math.round(c + f * (stops[k + 1][n] - c)));
  }

  // ---------------------------------------------------------------- layout

  function buildLayout() {
    const header = el("header");
    header.append(el("h1", {}, state.payload.title || "attention"),
      el("span", { class: "muted" }, "selfattn attention explorer"));
    ui.error = el("p", { id: "error", role: "alert", hidden: "" });
    ui.form = el("form", { id: "input-form", hidden: "" });
    ui.empty = el("p", { id: "empty", class: "hint", hidden: "" },
      state.payload.serve ? "No example yet: give the model an input above." : "No examples.");
    document.getElementById("app").append(header, ui.error, ui.form, ui.empty, buildControls(),
      buildPanels());
  }

  function buildControls() {
    ui.controls = el("section", { id: "controls" });
    ui.exampleSelect = el("select", { id: "example" });
    ui.figureSelect = el("select", { id: "figure" });
    // The layer and head options name themselves ("layer 2", "head 3").
    ui.layerSelect = el("select", { id: "layer", "aria-label": "layer" });
    ui.headSelect = el("select", { id: "head", "aria-label": "head" });
    ui.exampleLabelWrap = labelled("example", ui.exampleSelect);
    ui.figureLabelWrap = labelled("attention", ui.figureSelect);
    ui.exampleLabel = el("span", { id: "example-label" });
    ui.prediction = el("span", { id: "prediction" });
    const info = el("p", { id: "example-info" });
    ui.note = el("span", { id: "example-note" }); // e.g. the input was cut to --max-tokens
    info.append(el("b", {}, "input: "), ui.exampleLabel, el("b", {}, " prediction: "),
      ui.prediction, ui.note);
    ui.controls.append(ui.exampleLabelWrap, ui.figureLabelWrap, ui.layerSelect, ui.headSelect,
      info);

    const number = (select) => Number(select.value);
    ui.exampleSelect.addEventListener("change", () => selectExample(number(ui.exampleSelect)));
    ui.figureSelect.addEventListener("change", () => selectFigure(number(ui.figureSelect)));
    ui.layerSelect.addEventListener("change", () => selectHead(number(ui.layerSelect), state.head));
    ui.headSelect.addEventListener("change", () => selectHead(state.layer,
      ui.headSelect.value === MEAN ? MEAN : number(ui.headSelect)));
    return ui.controls;
  }

  function buildPanels() {
    ui.headView = svg("svg", { id: "head-view", role: "img" });
    ui.output = el("aside", { id: "output", hidden: "" });
    const headScroll = el("div", { class: "scroll" });
    headScroll.append(ui.headView);

    ui.overlay = el("div", { id: "overlay" });

    ui.matrix = el("div", { id: "matrix-view" });
    ui.zoomWrap = el("div", { id: "matrix-zoom-wrap", hidden: "" });
    ui.zoom = el("canvas", { id: "matrix-zoom" });
    const close = el("button", { type: "button", class: "close" }, "close");
    close.addEventListener("click", () => {
      state.zoom = false;
      renderMatrix();
    });
    ui.zoomWrap.append(close, ui.zoom);

    ui.stats = el("div", { id: "head-stats" });
    ui.scatter = svg("svg", { id: "head-scatter", role: "img" });

    ui.overlayPanel = panel("Attention on the input", "Click a cell, frame or node (or a query "
      + "token) to choose the query.", ui.overlay);
    ui.main = el("main");
    ui.main.append(
      panel("Head view", "Hover a query token to isolate its row; click it to select it for "
        + "the overlay.", headScroll, ui.output),
      ui.overlayPanel,
      panel("Matrix view", "Every head of the layer; click one to enlarge it.", ui.matrix,
        ui.zoomWrap),
      panel("Head comparison", "Local heads have a small mean distance; click a column to "
        + "sort, a row or dot to select the head.", ui.stats, ui.scatter),
    );
    return ui.main;
  }

  function panel(title, hint, ...children) {
    const section = el("section", { class: "panel" });
    section.append(el("h2", {}, title));
    if (hint) section.append(el("p", { class: "hint" }, hint));
    section.append(...children);
    return section;
  }

  /** Fill a <select> with (value, text) pairs and select `selected`. */
  function fillSelect(select, options, selected) {
    select.replaceChildren(...options.map(([value, text]) => el("option", { value }, text)));
    select.value = String(selected);
  }

  // ---------------------------------------------------------------- selection

  function selectExample(index) {
    const title = examples().length ? currentFigure().title : null;
    state.example = index;
    // Keep the same kind of attention when the new example has it.
    const same = currentExample().figures.findIndex((figure) => figure.title === title);
    state.figure = same >= 0 ? same : 0;
    renderAll();
  }

  function selectFigure(index) {
    state.figure = index;
    renderAll();
  }

  function selectHead(layer, head) {
    state.layer = layer;
    state.head = head;
    renderAll();
  }

  function selectQuery(query) {
    state.query = query;
    renderHeadView();
    renderOverlay();
  }

  // ---------------------------------------------------------------- drawing

  function renderAll() {
    const empty = examples().length === 0 || currentExample().figures.length === 0;
    ui.controls.hidden = empty;
    ui.main.hidden = empty;
    ui.empty.hidden = !empty;
    if (empty) return;
    clampSelection();
    renderPickers();
    renderHeadView();
    renderOverlay();
    renderMatrix();
    renderStats();
  }

  function renderPickers() {
    const example = currentExample();
    const figure = currentFigure();
    fillSelect(ui.exampleSelect, examples().map((ex, i) =>
      [i, `${i + 1}. ${ex.label.length > 60 ? ex.label.slice(0, 59) + "…" : ex.label}`]),
      state.example);
    ui.exampleLabelWrap.hidden = examples().length < 2;
    fillSelect(ui.figureSelect, example.figures.map((f, i) => [i, f.title]), state.figure);
    ui.figureLabelWrap.hidden = example.figures.length < 2;
    // Option texts never equal option values (0-based indexes), so neither reads as the other.
    const layerName = figure.layer || "layer";
    fillSelect(ui.layerSelect, figure.maps.map((_, l) => [l, `${layerName} ${l + 1}`]),
      state.layer);
    const heads = figure.maps[state.layer].map((_, h) => [h, `head ${h + 1}`]);
    heads.push([MEAN, "all heads (mean)"]);
    fillSelect(ui.headSelect, heads, state.head);
    ui.exampleLabel.textContent = example.label;
    ui.prediction.textContent = example.prediction;
    ui.note.textContent = example.note || "";
    ui.note.hidden = !example.note;
    // seq2seq: the decoded output beside the head view.
    ui.output.hidden = state.payload.task !== "seq2seq";
    ui.output.replaceChildren(el("h3", {}, "decoded output"), el("p", {}, example.prediction));
  }

  /** The width, in pixels, of the longest label (capped). */
  function labelWidth(labels) {
    const context = document.createElement("canvas").getContext("2d");
    context.font = FONT;
    return Math.min(240, Math.max(56, maxOf(labels.map((t) => context.measureText(t).width))));
  }

  // Head view: queries on the left, keys on the right, one line per (query, key).
  function renderHeadView() {
    const figure = currentFigure();
    const map = headMap(figure, state.layer, state.head);
    const rowHeight = 20;
    const top = 28;
    const gap = 180;
    const queryWidth = labelWidth(figure.queries);
    const keyWidth = labelWidth(figure.keys);
    const x1 = queryWidth + 14;
    const x2 = x1 + gap;
    const width = x2 + keyWidth + 14;
    const height = top + Math.max(figure.queries.length, figure.keys.length) * rowHeight + 8;
    const root = ui.headView;
    setAttrs(root, { width, height, viewBox: `0 0 ${width} ${height}` });
    root.replaceChildren(
      svg("text", { x: x1 - 6, y: 16, "text-anchor": "end", class: "axis" }, "queries"),
      svg("text", { x: x2 + 6, y: 16, class: "axis" }, "keys"),
    );
    const y = (index) => top + index * rowHeight + rowHeight / 2;
    root.append(drawLines(map, x1, x2, y, headColour(state.head)));
    figure.queries.forEach((token, i) => root.append(queryToken(token, i, x1 - 6, y(i))));
    figure.keys.forEach((token, j) => root.append(keyToken(token, j, x2 + 6, y(j))));
  }

  function drawLines(map, x1, x2, y, colour) {
    const group = svg("g", { class: "lines", stroke: colour });
    const drawAll = map.length * (map[0] ? map[0].length : 0) <= DRAW_ALL_CELLS;
    headLines = [];
    map.forEach((row, i) => row.forEach((weight, j) => {
      if (!drawAll && weight < MIN_WEIGHT) return;
      const line = svg("line", {
        x1, y1: y(i), x2, y2: y(j),
        "stroke-opacity": Math.min(1, weight).toFixed(4),
        "stroke-width": (0.5 + 4 * weight).toFixed(3),
        "data-q": i, "data-k": j, "data-weight": fmt(weight),
      });
      headLines.push(line);
      group.append(line);
    }));
    return group;
  }

  function queryToken(token, i, x, y) {
    const text = svg("text", {
      x, y, "text-anchor": "end", "dominant-baseline": "middle", "data-i": i,
      class: i === state.query ? "token query selected" : "token query",
    }, token);
    text.addEventListener("mouseenter", () => isolate("q", i));
    text.addEventListener("mouseleave", () => isolate("q", null));
    text.addEventListener("click", () => selectQuery(i));
    return text;
  }

  function keyToken(token, j, x, y) {
    const text = svg("text", {
      x, y, "dominant-baseline": "middle", "data-j": j, class: "token key",
    }, token);
    text.addEventListener("mouseenter", () => isolate("k", j));
    text.addEventListener("mouseleave", () => isolate("k", null));
    return text;
  }

  /** Show only the lines whose data-q (or data-k) is `index`; null shows them all. */
  function isolate(which, index) {
    const wanted = index === null ? null : String(index);
    for (const line of headLines) {
      line.style.display = wanted === null || line.dataset[which] === wanted ? "" : "none";
    }
  }

  // ---------------------------------------------------------------- overlays

  function renderOverlay() {
    const example = currentExample();
    const figure = currentFigure();
    const kind = ["image", "spectrogram", "graph"].find((name) => example[name]);
    ui.overlayPanel.hidden = !kind;
    ui.overlay.replaceChildren();
    if (!kind) return;
    if (figure.keys.length < inputPositions(example[kind])) {
      // e.g. a seq2seq decoder's self-attention: its keys are output tokens, not the input.
      ui.overlay.append(el("p", { class: "hint" }, `${figure.title}: the keys are not the `
        + "input's positions; choose another attention to see it on the input."));
      return;
    }
    const row = headMap(figure, state.layer, state.head)[state.query];
    ui.overlay.append(el("p", { class: "hint", id: "overlay-query" },
      `attention of query ${state.query + 1}: ${figure.queries[state.query]}`));
    if (kind === "image") drawImageGrid(example.image, figure, row);
    if (kind === "spectrogram") drawSpectrogram(example.spectrogram, figure, row);
    if (kind === "graph") drawGraph(example.graph, figure);
  }

  /** How many key positions the input's picture has (image cells, frames or nodes). */
  function inputPositions(picture) {
    return picture.nodes ? picture.nodes.length : picture.rows * picture.cols;
  }

  /** Query index for key position `key` (self-attention: the same position). */
  function queryAt(figure, key) {
    return figure.queries.length === figure.keys.length ? key : state.query;
  }

  /** Keys beyond the rows × cols positions (a leading [CLS]), listed as tokens. */
  function leadingKeys(figure, row, count) {
    if (count === 0) return null;
    const list = el("p", { id: "overlay-extra" }, "also: ");
    for (let k = 0; k < count; k++) {
      const token = el("span", { class: "chip", "data-k": k, "data-weight": fmt(row[k]) },
        figure.keys[k]);
      token.title = `weight ${fmt(row[k])}`;
      token.addEventListener("click", () => selectQuery(queryAt(figure, k)));
      list.append(token, ` ${row[k].toFixed(3)}  `);
    }
    return list;
  }

  // Image: rows × cols cells over the picture, cell alpha ∝ the selected query's weight.
  function drawImageGrid(image, figure, row) {
    const cells = image.rows * image.cols;
    const offset = Math.max(0, row.length - cells);
    const max = maxOf(row.slice(offset)) || 1;
    const wrap = el("div", { class: "image-wrap" });
    const img = el("img", { alt: "input image", id: "overlay-image" });
    img.src = safeImageSrc(image.src);
    const grid = el("div", { id: "overlay-grid" });
    grid.style.gridTemplateColumns = `repeat(${image.cols}, 1fr)`;
    grid.style.gridTemplateRows = `repeat(${image.rows}, 1fr)`;
    for (let c = 0; c < cells; c++) {
      const weight = row[offset + c] ?? 0;
      const cell = el("div", {
        class: offset + c === state.query ? "cell selected" : "cell",
        "data-pos": c, "data-weight": fmt(weight),
      });
      cell.style.backgroundColor = `rgba(255, 69, 0, ${(0.85 * weight / max).toFixed(4)})`;
      cell.addEventListener("click", () => selectQuery(queryAt(figure, offset + c)));
      grid.append(cell);
    }
    wrap.append(img, grid);
    ui.overlay.append(wrap);
    const extra = leadingKeys(figure, row, offset);
    if (extra) ui.overlay.append(extra);
  }

  // Speech: the spectrogram with a strip of bars under it, one per frame.
  function drawSpectrogram(image, figure, row) {
    const frames = image.rows * image.cols;
    const offset = Math.max(0, row.length - frames);
    const max = maxOf(row.slice(offset)) || 1;
    const img = el("img", { alt: "spectrogram", id: "overlay-spectrogram" });
    img.src = safeImageSrc(image.src);
    const strip = el("div", { id: "overlay-strip" });
    for (let c = 0; c < frames; c++) {
      const weight = row[offset + c] ?? 0;
      const cell = el("div", {
        class: offset + c === state.query ? "frame selected" : "frame",
        "data-pos": c, "data-weight": fmt(weight), title: `frame ${c + 1}: ${fmt(weight)}`,
      });
      const bar = el("div", { class: "bar" });
      bar.style.height = `${(100 * weight / max).toFixed(2)}%`;
      cell.append(bar);
      cell.addEventListener("click", () => selectQuery(queryAt(figure, offset + c)));
      strip.append(cell);
    }
    ui.overlay.append(img, strip);
    const extra = leadingKeys(figure, row, offset);
    if (extra) ui.overlay.append(extra);
  }

  // Graph: the drawing with each edge weighted by the attention between its ends (the mean
  // of both directions) and each node coloured by the selected query's attention to it.
  function drawGraph(graph, figure) {
    const size = 420;
    const margin = 18;
    const map = headMap(figure, state.layer, state.head);
    const square = figure.queries.length === figure.keys.length;
    const offset = Math.max(0, figure.keys.length - graph.nodes.length);
    const at = ([x, y]) => [margin + x * (size - 2 * margin), margin + y * (size - 2 * margin)];
    const between = (i, j) => (square
      ? (map[i + offset][j + offset] + map[j + offset][i + offset]) / 2 : 0);
    const weights = graph.edges.map(([i, j]) => between(i, j));
    const maxEdge = maxOf(weights) || 1;
    const row = map[state.query];
    const maxNode = maxOf(row.slice(offset)) || 1;
    const root = svg("svg", {
      id: "overlay-graph", width: size, height: size, viewBox: `0 0 ${size} ${size}`,
    });
    graph.edges.forEach(([i, j], e) => {
      const [xa, ya] = at(graph.nodes[i]);
      const [xb, yb] = at(graph.nodes[j]);
      const t = weights[e] / maxEdge;
      root.append(svg("line", {
        x1: xa, y1: ya, x2: xb, y2: yb, class: "edge", "data-i": i, "data-j": j,
        "data-weight": fmt(weights[e]), "stroke-width": (0.5 + 5 * t).toFixed(3),
        "stroke-opacity": (0.15 + 0.85 * t).toFixed(4),
      }));
    });
    graph.nodes.forEach((point, n) => root.append(graphNode(point, n, figure, row, offset,
      maxNode, at)));
    ui.overlay.append(root);
    const extra = leadingKeys(figure, row, offset);
    if (extra) ui.overlay.append(extra);
  }

  function graphNode(point, n, figure, row, offset, maxNode, at) {
    const [x, y] = at(point);
    const weight = row[n + offset] ?? 0;
    const [r, g, b] = ramp(weight / maxNode);
    const node = svg("circle", {
      cx: x, cy: y, r: 7, fill: `rgb(${r}, ${g}, ${b})`, "data-node": n,
      "data-weight": fmt(weight), class: n + offset === state.query ? "node selected" : "node",
    });
    node.append(svg("title", {}, `${figure.keys[n + offset] ?? n}: ${fmt(weight)}`));
    node.addEventListener("click", () => selectQuery(queryAt(figure, n + offset)));
    return node;
  }

  // ---------------------------------------------------------------- matrix view

  function renderMatrix() {
    const figure = currentFigure();
    const tiles = figure.maps[state.layer].map((map, h) => {
      const tile = el("figure", { class: h === state.head ? "heatmap selected" : "heatmap" });
      const canvas = el("canvas", { "data-layer": state.layer, "data-head": h });
      paintHeatmap(canvas, map);
      canvas.addEventListener("click", () => {
        state.zoom = true;
        selectHead(state.layer, h);
      });
      tile.append(canvas, el("figcaption", {}, `head ${h + 1}`));
      return tile;
    });
    ui.matrix.replaceChildren(...tiles);
    ui.zoomWrap.hidden = !state.zoom;
    if (state.zoom) paintZoom(figure);
  }

  /** One pixel per (query, key) cell; CSS scales the canvas up without smoothing. */
  function paintHeatmap(canvas, map) {
    const rows = map.length;
    const cols = rows ? map[0].length : 0;
    canvas.width = Math.max(1, cols);
    canvas.height = Math.max(1, rows);
    const context = canvas.getContext("2d");
    const pixels = context.createImageData(canvas.width, canvas.height);
    const max = maxOf(map.map(maxOf)) || 1;
    map.forEach((row, i) => row.forEach((weight, j) => {
      const [r, g, b] = ramp(weight / max);
      pixels.data.set([r, g, b, 255], 4 * (i * cols + j));
    }));
    context.putImageData(pixels, 0, 0);
  }

  /** The selected head, large, with at most MAX_AXIS_LABELS labels per axis. */
  function paintZoom(figure) {
    const map = headMap(figure, state.layer, state.head);
    const rows = figure.queries.length;
    const cols = figure.keys.length;
    const margin = 96;
    const cell = Math.max(2, Math.floor(400 / Math.max(rows, cols)));
    const canvas = ui.zoom;
    canvas.width = margin + cols * cell + 4;
    canvas.height = margin + rows * cell + 4;
    setAttrs(canvas, { "data-layer": state.layer, "data-head": state.head });
    const context = canvas.getContext("2d");
    context.fillStyle = "#ffffff";
    context.fillRect(0, 0, canvas.width, canvas.height);
    const max = maxOf(map.map(maxOf)) || 1;
    map.forEach((row, i) => row.forEach((weight, j) => {
      const [r, g, b] = ramp(weight / max);
      context.fillStyle = `rgb(${r}, ${g}, ${b})`;
      context.fillRect(margin + j * cell, margin + i * cell, cell, cell);
    }));
    context.fillStyle = "#222222";
    context.font = "11px system-ui, sans-serif";
    const short = (text) => (text.length > 14 ? text.slice(0, 13) + "…" : text);
    // Canvas text is pixels, not markup, so tokens need no escaping here.
    context.textAlign = "right";
    context.textBaseline = "middle";
    for (let i = 0; i < rows; i += Math.ceil(rows / MAX_AXIS_LABELS)) {
      context.fillText(short(figure.queries[i]), margin - 4, margin + (i + 0.5) * cell);
    }
    context.save();
    context.rotate(-Math.PI / 2);
    context.textAlign = "left";
    for (let j = 0; j < cols; j += Math.ceil(cols / MAX_AXIS_LABELS)) {
      context.fillText(short(figure.keys[j]), -margin + 4, margin + (j + 0.5) * cell);
    }
    context.restore();
  }

  // ---------------------------------------------------------------- head comparison

  const COLUMNS = [
    ["layer", "layer"], ["head", "head"], ["distance", "mean distance"], ["entropy", "entropy"],
  ];

  function statRows(figure) {
    const rows = [];
    figure.entropy.forEach((heads, layer) => heads.forEach((entropy, head) => rows.push({
      layer, head, entropy, distance: figure.distance ? figure.distance[layer][head] : null,
    })));
    if (state.sortKey) {
      const key = state.sortKey;
      // Missing values (no distance for cross-attention) sort last either way.
      rows.sort((a, b) => (a[key] === null) - (b[key] === null)
        || state.sortDir * (a[key] - b[key]) || a.layer - b.layer || a.head - b.head);
    }
    return rows;
  }

  function renderStats() {
    const figure = currentFigure();
    const rows = statRows(figure);
    const table = el("table");
    const header = el("tr");
    for (const [key, title] of COLUMNS) {
      const arrow = state.sortKey === key ? (state.sortDir > 0 ? " ▲" : " ▼") : "";
      const th = el("th", { "data-key": key, title: "sort" }, title + arrow);
      th.addEventListener("click", () => sortBy(key));
      header.append(th);
    }
    table.append(el("thead"), el("tbody"));
    table.tHead.append(header);
    const number = (value) => (value === null ? "—" : value.toFixed(3));
    for (const row of rows) {
      const tr = el("tr", {
        "data-layer": row.layer, "data-head": row.head, "data-entropy": fmt(row.entropy),
        "data-distance": row.distance === null ? "" : fmt(row.distance),
        class: isSelected(row) ? "selected" : "",
      });
      tr.append(el("td", {}, String(row.layer + 1)), el("td", {}, String(row.head + 1)),
        el("td", {}, number(row.distance)), el("td", {}, number(row.entropy)));
      tr.addEventListener("click", () => selectHead(row.layer, row.head));
      table.tBodies[0].append(tr);
    }
    ui.stats.replaceChildren(table);
    drawScatter(figure, rows);
  }

  function isSelected(row) {
    return row.layer === state.layer && row.head === state.head;
  }

  function sortBy(key) {
    state.sortDir = state.sortKey === key ? -state.sortDir : 1;
    state.sortKey = key;
    renderStats();
  }

  /** The [low, high] range of values, widened by 5% (and never empty). */
  function domain(values) {
    let low = Math.min(...values);
    let high = Math.max(...values);
    if (!(high > low)) [low, high] = [low - 0.5, high + 0.5];
    const pad = 0.05 * (high - low);
    return [low - pad, high + pad];
  }

  // Distance against entropy, one dot per head; without distances (cross-attention) the
  // x axis is the layer.
  function drawScatter(figure, rows) {
    const width = 340;
    const height = 230;
    const left = 44;
    const bottom = 36;
    const byDistance = figure.distance !== null && figure.distance !== undefined;
    const xOf = (row) => (byDistance ? row.distance
      : row.layer + (row.head + 1) / (numHeads(figure, row.layer) + 1));
    const [xMin, xMax] = domain(rows.map(xOf));
    const [yMin, yMax] = domain(rows.map((row) => row.entropy));
    const px = (x) => left + ((x - xMin) / (xMax - xMin)) * (width - left - 12);
    const py = (y) => height - bottom - ((y - yMin) / (yMax - yMin)) * (height - bottom - 12);
    const root = ui.scatter;
    setAttrs(root, { width, height, viewBox: `0 0 ${width} ${height}` });
    root.replaceChildren(
      svg("line", { x1: left, y1: height - bottom, x2: width - 8, y2: height - bottom,
        class: "axis-line" }),
      svg("line", { x1: left, y1: 8, x2: left, y2: height - bottom, class: "axis-line" }),
      svg("text", { x: (left + width) / 2, y: height - 6, "text-anchor": "middle", class: "axis" },
        byDistance ? "mean attention distance" : "layer"),
      svg("text", { x: 12, y: (height - bottom) / 2, "text-anchor": "middle", class: "axis",
        transform: `rotate(-90 12 ${(height - bottom) / 2})` }, "entropy"),
      svg("text", { x: left, y: height - bottom + 14, class: "tick" }, xMin.toFixed(2)),
      svg("text", { x: width - 8, y: height - bottom + 14, "text-anchor": "end", class: "tick" },
        xMax.toFixed(2)),
      svg("text", { x: left - 4, y: height - bottom, "text-anchor": "end", class: "tick" },
        yMin.toFixed(2)),
      svg("text", { x: left - 4, y: 16, "text-anchor": "end", class: "tick" }, yMax.toFixed(2)),
    );
    for (const row of rows) {
      const dot = svg("circle", {
        cx: px(xOf(row)).toFixed(2), cy: py(row.entropy).toFixed(2), r: isSelected(row) ? 7 : 5,
        fill: headColour(row.head), "data-layer": row.layer, "data-head": row.head,
        class: isSelected(row) ? "dot selected" : "dot",
      });
      const distance = row.distance === null ? "" : `, distance ${row.distance.toFixed(3)}`;
      dot.append(svg("title", {}, `layer ${row.layer + 1}, head ${row.head + 1}${distance}, `
        + `entropy ${row.entropy.toFixed(3)}`));
      dot.addEventListener("click", () => selectHead(row.layer, row.head));
      root.append(dot);
    }
  }

  // ---------------------------------------------------------------- served mode

  function buildForm() {
    const isText = state.payload.input === "text";
    const input = isText
      ? el("input", { id: "input-text", name: "text", type: "text", autocomplete: "off",
        placeholder: "type a sentence", size: 60 })
      : el("input", { id: "input-file", name: "file", type: "file",
        accept: state.payload.accept || "" });
    const button = el("button", { type: "submit", id: "input-submit" }, "show attention");
    const status = el("span", { id: "input-status", class: "muted" });
    ui.form.append(labelled(isText ? "text" : `file (${state.payload.input})`, input),
      button, status);
    ui.form.hidden = false;
    ui.form.addEventListener("submit", (event) => {
      event.preventDefault();
      submit(input, button, status);
    });
  }

  /** POST the form to /maps; show the examples it answers, or its one-line error. */
  async function submit(input, button, status) {
    const body = new FormData(ui.form);
    if (input.type === "text" ? !input.value.trim() : input.files.length === 0) {
      showError(input.type === "text" ? "type some text first" : "choose a file first");
      return;
    }
    button.disabled = true;
    status.textContent = "computing…";
    try {
      const response = await fetch("/maps", { method: "POST", body });
      const reply = await response.json().catch(() => ({}));
      if (!response.ok || reply.error) {
        throw new Error(reply.error || `the server answered ${response.status}`);
      }
      addExamples(reply.examples);
      showError(null);
    } catch (error) {
      showError(error.message);
    } finally {
      button.disabled = false;
      status.textContent = "";
    }
  }

  function addExamples(added) {
    if (!Array.isArray(added) || added.length === 0
      || !added.every((ex) => ex && Array.isArray(ex.figures) && ex.figures.length)) {
      throw new Error("the server's reply holds no example");
    }
    examples().push(...added);
    selectExample(examples().length - added.length); // the first of the new ones
  }

  function showError(message) {
    ui.error.textContent = message ? oneLine(message) : "";
    ui.error.hidden = !message;
  }

  // ---------------------------------------------------------------- start

  function start() {
    let payload;
    try {
      payload = JSON.parse(document.getElementById("payload").textContent);
    } catch (error) {
      payload = { version: null };
    }
    state.payload = payload;
    if (!Array.isArray(payload.examples)) payload.examples = [];
    buildLayout();
    if (payload.version !== PAYLOAD_VERSION) {
      showError(`this page reads payload version ${PAYLOAD_VERSION}, not ${payload.version}`);
      ui.controls.hidden = true;
      ui.main.hidden = true;
      return;
    }
    if (payload.serve) buildForm();
    renderAll();
  }

  // For tests and the curious: the state and the weights the views draw.
  window.explorer = {
    state,
    headMap: () => headMap(currentFigure(), state.layer, state.head),
  };
  start();
})();
