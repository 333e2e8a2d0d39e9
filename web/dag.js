// A workflow's nodes as a graph: layoutWorkflow() places them (pure, no DOM)
// and DagCanvas draws them on a <canvas>, with pan, zoom and hit-testing.
//
// Built for workflows of thousands of nodes: the layout is linear in nodes
// and edges apart from one sort per layer, a very wide layer (a fan-out of
// thousands of children) wraps into rows of at most MAX_PER_ROW nodes, and
// a frame draws only what is in view (no labels when zoomed far out).
//
// Edges: a node's `children`, made to read as Argo's UI draws them: a DAG
// task with dependencies hangs under the tasks it depends on (from the DAG
// template's `dependencies` or `depends`), not under the DAG node, and the
// step groups of a Steps node follow one another, each under the steps of
// the group before. Layer = longest path from a root.

import { duration, percent } from './format.js';

export const NODE_W = 168;
export const NODE_H = 38;
const GAP_X = 16;
const GAP_Y = 54;       // between layers
const ROW_GAP = 10;     // between the rows of a wrapped layer
const MAX_PER_ROW = 50;
const MARGIN = 40;

const collator = new Intl.Collator(undefined, { numeric: true });
const DEPENDS_RESULT = /\.(Succeeded|Failed|Errored|Skipped|Omitted|Daemoned|AnySucceeded|AllFailed)$/;

// What decides the layout: the node ids and their children. Phases,
// messages and times may change without a new layout.
export function layoutKey(nodes) {
  const ids = Object.keys(nodes).sort();
  return ids.map((id) => `${id}:${(nodes[id].children || []).length}`).join(',');
}

// The task names a DAG task waits for: `dependencies`, or the names in a
// `depends` expression ("A && (B.Succeeded || C.Failed)").
function taskDeps(task) {
  if (Array.isArray(task.dependencies) && task.dependencies.length) return task.dependencies;
  if (typeof task.depends === 'string' && task.depends.trim()) {
    return task.depends.split(/[\s()!&|]+/).filter(Boolean).map((t) => t.replace(DEPENDS_RESULT, ''));
  }
  return [];
}

// -> Map id -> [child id], with DAG dependencies and step-group chains as
// described above. An edge into what follows a DAG task or a step leaves
// from that node's outbound nodes, as in Argo: the node itself, or for a
// node that contains others (a nested DAG or Steps) the nodes where it ends.
export function workflowEdges(nodes, templates = []) {
  const byTemplate = new Map();
  for (const t of templates) if (t && t.name) byTemplate.set(t.name, t);
  const edges = new Map();
  const parent = new Map();
  for (const [id, node] of Object.entries(nodes)) {
    const kids = new Set();
    for (const child of node.children || []) {
      if (!nodes[child] || child === id) continue;
      kids.add(child);
      if (!parent.has(child)) parent.set(child, id);
    }
    edges.set(id, kids);
  }
  const byBoundary = new Map();
  for (const [id, node] of Object.entries(nodes)) {
    if (!node.boundaryID) continue;
    if (!byBoundary.has(node.boundaryID)) byBoundary.set(node.boundaryID, []);
    byBoundary.get(node.boundaryID).push(id);
  }
  // The nodes where `id` ends: itself when it has no children; a Retry
  // node's last attempt's; else the childless nodes reachable from it.
  const outbound = (id) => {
    const out = [];
    const seen = new Set([id]);
    const stack = [id];
    while (stack.length) {
      const at = stack.pop();
      let kids = edges.get(at);
      if (!kids.size) { out.push(at); continue; }
      if (nodes[at].type === 'Retry') kids = [[...kids].pop()];
      for (const k of kids) if (!seen.has(k)) { seen.add(k); stack.push(k); }
    }
    return out;
  };
  // Inner DAG and Steps nodes first, so that their outbound nodes are known
  // when the one around them is linked.
  const depth = (id) => {
    let d = 0;
    for (let at = nodes[id]; at && at.boundaryID && d < 1000; at = nodes[at.boundaryID]) d += 1;
    return d;
  };
  const containers = Object.keys(nodes).filter((id) => nodes[id].type === 'DAG' || nodes[id].type === 'Steps')
    .map((id) => [id, depth(id)]).sort((a, b) => b[1] - a[1]).map(([id]) => id);

  for (const id of containers) {
    const node = nodes[id];
    if (node.type === 'DAG') {
      const tasks = byTemplate.get(node.templateName)?.dag?.tasks;
      if (!Array.isArray(tasks) || !tasks.length) continue;
      const deps = new Map(tasks.map((t) => [t.name, taskDeps(t)]));
      // Task name -> its nodes: "<dag>.<task>" or "<dag>.<task>(i:item)";
      // not the attempts under a Retry node nor the items under a TaskGroup.
      const prefix = `${node.name}.`;
      const nodesOf = new Map();
      for (const member of byBoundary.get(id) || []) {
        const n = nodes[member];
        if (!n.name || !n.name.startsWith(prefix)) continue;
        const up = nodes[parent.get(member)];
        if (up && up.id !== id && (up.type === 'Retry' || up.type === 'TaskGroup')) continue;
        const task = n.name.slice(prefix.length).replace(/\(\d+(:[^)]*)?\)$/, '');
        if (!deps.has(task)) continue;
        if (!nodesOf.has(task)) nodesOf.set(task, []);
        nodesOf.get(task).push(member);
      }
      // Where each task ends, before any edge of this DAG changes.
      const ends = new Map();
      for (const [task, members] of nodesOf) ends.set(task, members.flatMap(outbound));
      for (const [task, members] of nodesOf) {
        const sources = deps.get(task).flatMap((d) => ends.get(d) || []);
        if (!sources.length) continue;
        for (const member of members) {
          edges.get(id).delete(member);
          for (const source of sources) if (source !== member) edges.get(source).add(member);
        }
      }
    } else {
      const groups = [...edges.get(id)].filter((c) => nodes[c].type === 'StepGroup');
      if (groups.length < 2) continue;
      const index = (g) => Number((nodes[g].displayName || '').match(/^\[(\d+)\]$/)?.[1] ?? NaN);
      groups.sort((a, b) => (index(a) - index(b)) || 0);
      const ends = groups.map((g) => outbound(g));
      for (let i = 1; i < groups.length; i++) {
        edges.get(id).delete(groups[i]);
        for (const end of ends[i - 1]) edges.get(end).add(groups[i]);
      }
    }
  }
  const result = new Map();
  for (const [id, kids] of edges) result.set(id, [...kids]);
  return result;
}

// -> {pos: Map id -> {x, y, layer}, layers: [{y, rows, top, bottom, left, right}],
//     edges: Map id -> [child], width, height, ms}
// x, y: the node's top-left corner in layout pixels.
export function layoutWorkflow(nodes, templates) {
  const started = performance.now();
  const edges = workflowEdges(nodes, templates);
  const ids = Object.keys(nodes);
  const indegree = new Map(ids.map((id) => [id, 0]));
  for (const kids of edges.values()) for (const c of kids) indegree.set(c, indegree.get(c) + 1);
  const layer = new Map();
  const queue = [];
  for (const id of ids) if (indegree.get(id) === 0) { queue.push(id); layer.set(id, 0); }
  // Kahn's order; layer = longest path from a root.
  for (let head = 0; head < queue.length; head++) {
    const id = queue[head];
    const next = layer.get(id) + 1;
    for (const c of edges.get(id)) {
      if ((layer.get(c) ?? -1) < next) layer.set(c, next);
      indegree.set(c, indegree.get(c) - 1);
      if (indegree.get(c) === 0) queue.push(c);
    }
  }
  // Nodes on a cycle (none in a valid workflow): after everything else.
  let last = 0;
  for (const l of layer.values()) last = Math.max(last, l);
  for (const id of ids) if (!layer.has(id)) layer.set(id, last + 1);

  const parents = new Map();
  for (const [id, kids] of edges) {
    for (const c of kids) {
      if (!parents.has(c)) parents.set(c, []);
      parents.get(c).push(id);
    }
  }
  const byLayer = [];
  for (const id of ids) {
    const l = layer.get(id);
    (byLayer[l] ||= []).push(id);
  }

  // Rows centred on x = 0, each layer ordered by its parents' mean x (then by
  // name, numbers in order), so that children sit under their parents.
  const pos = new Map();
  const layers = [];
  let y = MARGIN;
  let minX = Infinity;
  let maxX = -Infinity;
  for (let l = 0; l < byLayer.length; l++) {
    const members = byLayer[l] || [];
    if (!members.length) continue;
    const keyed = members.map((id) => {
      const ps = parents.get(id) || [];
      let sum = 0;
      let n = 0;
      for (const p of ps) {
        const at = pos.get(p);
        if (at) { sum += at.x + at.y * 1e-6; n += 1; }
      }
      return { id, key: n ? sum / n : 0, name: nodes[id].displayName || nodes[id].name || id };
    });
    keyed.sort((a, b) => (a.key - b.key) || collator.compare(a.name, b.name));
    const perRow = Math.min(keyed.length, MAX_PER_ROW);
    const rows = Math.ceil(keyed.length / perRow);
    const top = y;
    for (let r = 0; r < rows; r++) {
      const inRow = Math.min(perRow, keyed.length - r * perRow);
      const rowWidth = inRow * (NODE_W + GAP_X) - GAP_X;
      const left = -rowWidth / 2;
      for (let i = 0; i < inRow; i++) {
        const x = left + i * (NODE_W + GAP_X);
        pos.set(keyed[r * perRow + i].id, { x, y, layer: layers.length });
      }
      minX = Math.min(minX, left);
      maxX = Math.max(maxX, left + rowWidth);
      y += NODE_H + (r < rows - 1 ? ROW_GAP : 0);
    }
    const blockWidth = perRow * (NODE_W + GAP_X) - GAP_X;
    layers.push({ rows, top, bottom: y, left: -blockWidth / 2, right: blockWidth / 2 });
    y += GAP_Y;
  }
  if (!pos.size) { minX = 0; maxX = 0; }
  const shift = MARGIN - minX;
  for (const p of pos.values()) p.x += shift;
  for (const ly of layers) { ly.left += shift; ly.right += shift; }
  return {
    pos, layers, edges,
    width: maxX - minX + 2 * MARGIN,
    height: y - GAP_Y + MARGIN,
    ms: performance.now() - started,
  };
}

// Fill, border and text colours of a node by phase.
const PHASE_COLORS = {
  Pending: ['#f3f4f6', '#9ca3af', '#374151'],
  Running: ['#dbeafe', '#2563eb', '#1e3a8a'],
  Succeeded: ['#dcfce7', '#16a34a', '#14532d'],
  Failed: ['#fee2e2', '#dc2626', '#7f1d1d'],
  Error: ['#fde2e2', '#991b1b', '#7f1d1d'],
  Skipped: ['#f9fafb', '#d1d5db', '#6b7280'],
  Omitted: ['#f9fafb', '#d1d5db', '#6b7280'],
};
const VIRTUAL = new Set(['DAG', 'Steps', 'StepGroup', 'TaskGroup', 'Retry']);
export const phaseColors = (phase) => PHASE_COLORS[phase] || PHASE_COLORS.Pending;

// The small second line of a node: "42% · ETA 3m10s" from headway's
// estimates when the server sends them, else Argo's progress "n/m" for
// nodes that contain others.
export function nodeNote(node) {
  const h = node.headway || {};
  const parts = [];
  if (h.percent != null) parts.push(percent(h.percent));
  if (h.eta_seconds != null && node.phase === 'Running') parts.push(`ETA ${duration(h.eta_seconds)}`);
  if (!parts.length && VIRTUAL.has(node.type) && node.progress && node.progress !== '0/0') parts.push(node.progress);
  if (!parts.length && node.type !== 'Pod' && node.type !== 'Suspend' && !VIRTUAL.has(node.type)) parts.push(node.type || '');
  return parts.join(' \u00b7 ');
}

const MIN_SCALE = 0.01;
const MAX_SCALE = 3;

// Draws a layout on a canvas and follows the pointer: drag to pan, wheel to
// zoom at the cursor, click to select (onSelect(id)).
export class DagCanvas {
  constructor(canvas, { onSelect }) {
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d');
    this.onSelect = onSelect;
    this.nodes = {};
    this.layout = null;
    this.scale = 1;
    this.tx = 0;
    this.ty = 0;
    this.selected = null;
    this.critical = new Set();
    this.frame = 0;
    this.fitted = false;
    this.lastDrawMs = 0;

    let drag = null;
    canvas.addEventListener('pointerdown', (e) => {
      if (e.button !== 0) return;
      drag = { x: e.clientX, y: e.clientY, tx: this.tx, ty: this.ty, moved: false };
      canvas.setPointerCapture(e.pointerId);
    });
    canvas.addEventListener('pointermove', (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x;
      const dy = e.clientY - drag.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
      drag.moved = true;
      canvas.classList.add('dragging');
      this.tx = drag.tx + dx;
      this.ty = drag.ty + dy;
      this.schedule();
    });
    const end = (e) => {
      if (!drag) return;
      const clicked = !drag.moved;
      drag = null;
      canvas.classList.remove('dragging');
      if (clicked && e.type === 'pointerup') {
        const rect = canvas.getBoundingClientRect();
        const id = this.hit(e.clientX - rect.left, e.clientY - rect.top);
        if (id) this.onSelect(id);
      }
    };
    canvas.addEventListener('pointerup', end);
    canvas.addEventListener('pointercancel', end);
    canvas.addEventListener('wheel', (e) => {
      e.preventDefault();
      const rect = canvas.getBoundingClientRect();
      if (e.ctrlKey || e.metaKey || !e.shiftKey) {
        // Wheel (or pinch): zoom at the cursor.
        this.zoomAt(Math.exp(-e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015)), e.clientX - rect.left, e.clientY - rect.top);
      } else {
        // Shift+wheel: pan.
        this.tx -= e.deltaX || e.deltaY;
        this.schedule();
      }
    }, { passive: false });
    canvas.addEventListener('keydown', (e) => {
      const step = 60;
      const moves = { ArrowLeft: [step, 0], ArrowRight: [-step, 0], ArrowUp: [0, step], ArrowDown: [0, -step] };
      if (moves[e.key]) {
        this.tx += moves[e.key][0];
        this.ty += moves[e.key][1];
        this.schedule();
        e.preventDefault();
      } else if (e.key === '+' || e.key === '=') this.zoom(1.25);
      else if (e.key === '-') this.zoom(0.8);
      else if (e.key === '0') this.fit();
    });
    this.resize = new ResizeObserver(() => this.schedule());
    this.resize.observe(canvas);
  }

  destroy() {
    this.resize.disconnect();
    cancelAnimationFrame(this.frame);
  }

  // New node data; `layout` only when the node set changed.
  setData(nodes, layout, critical = []) {
    this.nodes = nodes;
    if (layout) this.layout = layout;
    this.critical = new Set(critical);
    this.canvas.dataset.nodes = String(this.layout ? this.layout.pos.size : 0);
    if (!this.fitted && this.layout && this.canvas.clientWidth) {
      this.fitted = true;
      this.initialView();
    }
    this.schedule();
  }

  select(id) {
    this.selected = id;
    this.schedule();
  }

  // Small graphs fit the view; big ones start readable, at the top.
  initialView() {
    const { width, height } = this.layout;
    const w = this.canvas.clientWidth;
    const h = this.canvas.clientHeight;
    const s = Math.min(1, w / width, h / height);
    if (s >= 0.5) {
      this.fit();
      return;
    }
    this.scale = 1;
    const root = [...this.layout.pos.values()].find((p) => p.layer === 0);
    this.tx = w / 2 - (root ? root.x + NODE_W / 2 : width / 2);
    this.ty = 0;
  }

  fit() {
    if (!this.layout) return;
    const { width, height } = this.layout;
    const w = this.canvas.clientWidth;
    const h = this.canvas.clientHeight;
    this.scale = Math.max(MIN_SCALE, Math.min(1, w / width, h / height));
    this.tx = (w - width * this.scale) / 2;
    this.ty = 0;
    this.schedule();
  }

  zoom(factor) {
    this.zoomAt(factor, this.canvas.clientWidth / 2, this.canvas.clientHeight / 2);
  }

  zoomAt(factor, sx, sy) {
    const s = Math.max(MIN_SCALE, Math.min(MAX_SCALE, this.scale * factor));
    const wx = (sx - this.tx) / this.scale;
    const wy = (sy - this.ty) / this.scale;
    this.scale = s;
    this.tx = sx - wx * s;
    this.ty = sy - wy * s;
    this.schedule();
  }

  // Centres the view on a node.
  reveal(id) {
    const p = this.layout?.pos.get(id);
    if (!p) return;
    this.tx = this.canvas.clientWidth / 2 - (p.x + NODE_W / 2) * this.scale;
    this.ty = this.canvas.clientHeight / 2 - (p.y + NODE_H / 2) * this.scale;
    this.schedule();
  }

  // The node under canvas point (sx, sy), or null.
  hit(sx, sy) {
    if (!this.layout) return null;
    const wx = (sx - this.tx) / this.scale;
    const wy = (sy - this.ty) / this.scale;
    // The nearest node within a few screen pixels, so that tiny nodes stay
    // clickable when zoomed far out.
    const slack = 4 / this.scale;
    let best = null;
    let bestDistance = slack;
    for (const [id, p] of this.layout.pos) {
      const dx = Math.max(p.x - wx, 0, wx - p.x - NODE_W);
      const dy = Math.max(p.y - wy, 0, wy - p.y - NODE_H);
      if (dx > bestDistance || dy > bestDistance) continue;
      const d = Math.hypot(dx, dy);
      if (d === 0) return id;
      if (d <= bestDistance) { best = id; bestDistance = d; }
    }
    return best;
  }

  // Pans so that a node's right edge is left of client x `limit` (a panel
  // over the canvas), if it is not.
  keepLeftOf(id, limit) {
    const p = this.layout?.pos.get(id);
    if (!p) return;
    const rect = this.canvas.getBoundingClientRect();
    const right = rect.left + (p.x + NODE_W) * this.scale + this.tx;
    if (right <= limit) return;
    const left = rect.left + p.x * this.scale + this.tx;
    // Not past the canvas's left quarter, which the node box may cover.
    const shift = Math.min(right - limit, Math.max(0, left - rect.left - rect.width / 4));
    if (shift <= 0) return;
    this.tx -= shift;
    this.schedule();
  }

  // Where a node's centre is on screen (client coordinates), or null when
  // it is out of view. For scripts and tests.
  locate(id) {
    const p = this.layout?.pos.get(id);
    if (!p) return null;
    const sx = (p.x + NODE_W / 2) * this.scale + this.tx;
    const sy = (p.y + NODE_H / 2) * this.scale + this.ty;
    if (sx < 0 || sy < 0 || sx > this.canvas.clientWidth || sy > this.canvas.clientHeight) return null;
    const rect = this.canvas.getBoundingClientRect();
    return { x: rect.left + sx, y: rect.top + sy };
  }

  schedule() {
    if (!this.frame) this.frame = requestAnimationFrame(() => { this.frame = 0; this.draw(); });
  }

  draw() {
    const started = performance.now();
    const { canvas, ctx } = this;
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth;
    const h = canvas.clientHeight;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    canvas.dataset.scale = this.scale.toFixed(3);
    if (!this.layout) return;
    if (!this.fitted && w) {
      this.fitted = true;
      this.initialView();
    }
    const { pos, edges, layers } = this.layout;
    const s = this.scale;
    ctx.setTransform(dpr * s, 0, 0, dpr * s, dpr * this.tx, dpr * this.ty);
    // The visible part of the layout, in layout pixels.
    const vx0 = -this.tx / s;
    const vy0 = -this.ty / s;
    const vx1 = vx0 + w / s;
    const vy1 = vy0 + h / s;
    const visible = (x0, y0, x1, y1) => x1 >= vx0 && x0 <= vx1 && y1 >= vy0 && y0 <= vy1;

    // Edges. Into a wrapped layer: one line from the parent to a bus above
    // the block, and the bus, instead of thousands of lines.
    ctx.lineWidth = 1.2 / Math.max(s, 0.4);
    ctx.strokeStyle = '#b6bcc6';
    ctx.beginPath();
    for (const [from, kids] of edges) {
      const a = pos.get(from);
      if (!a || !kids.length) continue;
      const x1 = a.x + NODE_W / 2;
      const y1 = a.y + NODE_H;
      let bused = -1;  // the wrapped layer this parent's bus was drawn to
      for (const to of kids) {
        const b = pos.get(to);
        if (!b) continue;
        const ly = layers[b.layer];
        if (ly.rows > 1) {
          if (bused === b.layer) continue;
          bused = b.layer;
          const busY = ly.top - GAP_Y / 3;
          const bx = Math.max(ly.left, Math.min(ly.right, x1));
          if (visible(Math.min(x1, bx), y1, Math.max(x1, bx), busY)) {
            ctx.moveTo(x1, y1);
            ctx.bezierCurveTo(x1, (y1 + busY) / 2, bx, (y1 + busY) / 2, bx, busY);
          }
          if (visible(ly.left, busY, ly.right, busY)) {
            ctx.moveTo(ly.left, busY);
            ctx.lineTo(ly.right, busY);
          }
          continue;
        }
        const x2 = b.x + NODE_W / 2;
        const y2 = b.y;
        if (!visible(Math.min(x1, x2), Math.min(y1, y2), Math.max(x1, x2), Math.max(y1, y2))) continue;
        const mid = (y1 + y2) / 2;
        ctx.moveTo(x1, y1);
        ctx.bezierCurveTo(x1, mid, x2, mid, x2, y2);
      }
    }
    ctx.stroke();

    // Nodes, batched by colour; labels only when large enough to read.
    const groups = new Map();
    const shown = [];
    for (const [id, p] of pos) {
      if (!visible(p.x, p.y, p.x + NODE_W, p.y + NODE_H)) continue;
      const node = this.nodes[id];
      if (!node) continue;
      const phase = node.phase || 'Pending';
      if (!groups.has(phase)) groups.set(phase, []);
      groups.get(phase).push(p);
      shown.push(id);
    }
    const detailed = s >= 0.45;
    for (const [phase, list] of groups) {
      const [fill, stroke] = phaseColors(phase);
      ctx.fillStyle = fill;
      ctx.strokeStyle = stroke;
      ctx.lineWidth = detailed ? 1.2 : 1.5 / s;
      ctx.beginPath();
      for (const p of list) {
        if (detailed) ctx.roundRect(p.x, p.y, NODE_W, NODE_H, 6);
        else ctx.rect(p.x, p.y, NODE_W, NODE_H);
      }
      ctx.fill();
      if (detailed || s > 0.08) ctx.stroke();
    }
    // The critical path and the selected node: thicker borders.
    const ring = (id, color, width) => {
      const p = pos.get(id);
      if (!p || !visible(p.x, p.y, p.x + NODE_W, p.y + NODE_H)) return;
      ctx.strokeStyle = color;
      ctx.lineWidth = width / Math.min(1, s);
      ctx.beginPath();
      ctx.rect(p.x - 2, p.y - 2, NODE_W + 4, NODE_H + 4);
      ctx.stroke();
    };
    for (const id of this.critical) ring(id, '#d97706', 2.5);
    if (this.selected) ring(this.selected, '#1d4ed8', 3);

    if (detailed) {
      ctx.textBaseline = 'middle';
      for (const id of shown) {
        const node = this.nodes[id];
        const p = pos.get(id);
        const [, , text] = phaseColors(node.phase);
        const note = nodeNote(node);
        const label = node.displayName || node.name || id;
        ctx.fillStyle = text;
        ctx.font = `${VIRTUAL.has(node.type) ? 'italic ' : ''}500 12px system-ui, sans-serif`;
        ctx.fillText(clip(label, 24), p.x + 8, p.y + (note ? 13 : NODE_H / 2), NODE_W - 16);
        if (note) {
          ctx.font = '10.5px system-ui, sans-serif';
          ctx.fillStyle = '#4b5563';
          ctx.fillText(clip(note, 30), p.x + 8, p.y + 27, NODE_W - 16);
        }
      }
    }
    this.lastDrawMs = performance.now() - started;
    canvas.dataset.drawMs = this.lastDrawMs.toFixed(1);
  }
}

const clip = (text, n) => (text.length > n ? `${text.slice(0, n - 1)}\u2026` : text);
