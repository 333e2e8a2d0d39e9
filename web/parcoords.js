// Parallel coordinates of an experiment's trials, drawn as plain SVG: one
// vertical axis per parameter plus the objective, one polyline per trial,
// coloured by its objective (best dark purple, worst amber; no objective yet:
// grey, dashed). Drawn by hand because charting libraries small enough to
// embed (uPlot included) have no parallel-coordinates plot.
//
// Axes follow the experiment spec (spec.parameters): double and int span
// [min, max], on a log scale when `log: true`; discrete and categorical
// values are evenly spaced ticks in spec order. The objective axis is
// linear, or logarithmic with `logObjective` when every objective is positive.

import { metric } from './format.js';

const SVG = 'http://www.w3.org/2000/svg';
const HEIGHT = 300;
const MARGIN = { top: 36, right: 70, bottom: 16, left: 70 };
// Index 0 colours the worst objective, the last the best; every stop stays
// readable on white.
const RAMP = ['#f59e0b', '#65a30d', '#0d9488', '#2563eb', '#4c1d95'];

// Returns an <svg> element; `parameters` is spec.parameters, `objective`
// {metric, direction}, `trials` the experiment's trials, `width` the pixels
// it will be shown at (so that text keeps its size).
export function parallelCoordinates({ parameters = [], objective = {}, trials = [], width = 900, logObjective = false }) {
  const WIDTH = Math.max(360, Math.round(width));
  const axes = parameters.map(paramAxis);
  const scores = trials.map((t) => t.objective).filter((v) => typeof v === 'number' && Number.isFinite(v));
  axes.push(objectiveAxis(objective, scores, logObjective));

  const svg = node('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: 'parcoords', role: 'img',
    'data-objective-scale': axes[axes.length - 1].log ? 'log' : 'linear',
    'aria-label': `Trials by parameter and ${objective.metric || 'objective'}` });
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const xOf = (i) => (axes.length === 1 ? WIDTH / 2 : MARGIN.left + (i * (WIDTH - MARGIN.left - MARGIN.right)) / (axes.length - 1));
  const yOf = (t) => MARGIN.top + (1 - t) * plotHeight;

  // Lines first, so axes and labels stay readable on top. Worst first, best last.
  const lines = node('g', { class: 'pc-lines' });
  const quality = objectiveQuality(objective, scores);
  const ordered = trials.map((trial) => ({ trial, q: quality(trial.objective) }))
    .sort((a, b) => (a.q ?? -1) - (b.q ?? -1));
  for (const { trial, q } of ordered) {
    let d = '';
    let pen = 'M';
    axes.forEach((axis, i) => {
      const value = i < parameters.length ? trial.params?.[axis.name] : trial.objective;
      const t = axis.position(value);
      if (t == null) {
        pen = 'M';
        return;
      }
      d += `${pen}${xOf(i).toFixed(1)},${yOf(t).toFixed(1)}`;
      pen = 'L';
    });
    if (!d) continue;
    const path = node('path', { d, class: q == null ? 'pc-line pending' : 'pc-line', stroke: qualityColor(q) });
    const params = parameters.map((p) => `${p.name}=${formatValue(trial.params?.[p.name])}`).join(', ');
    const title = node('title');
    title.textContent = `trial ${trial.index} (${trial.job}): ${params}; ${objective.metric || 'objective'} ${trial.objective == null ? 'not reported yet' : metric(trial.objective)}`;
    path.append(title);
    lines.append(path);
  }
  svg.append(lines);

  axes.forEach((axis, i) => {
    const x = xOf(i);
    const g = node('g', { class: 'pc-axis' });
    g.append(node('line', { x1: x, x2: x, y1: yOf(0), y2: yOf(1) }));
    const label = node('text', { x, y: MARGIN.top - 20, class: 'pc-title', 'text-anchor': 'middle' });
    label.textContent = axis.title;
    g.append(label);
    for (const tick of axis.ticks) {
      const y = yOf(tick.t);
      g.append(node('line', { x1: x - 3, x2: x + 3, y1: y, y2: y }));
      const text = node('text', { x: x + 6, y: y + 3.5, class: 'pc-tick' });
      text.textContent = tick.label;
      g.append(text);
    }
    svg.append(g);
  });
  return svg;
}

// quality(v) -> [0, 1], 1 the best of `scores` for the objective's
// direction; null for a trial with no objective yet.
export function objectiveQuality(objective, scores) {
  const lo = Math.min(...scores);
  const hi = Math.max(...scores);
  return (v) => {
    if (typeof v !== 'number' || !Number.isFinite(v)) return null;
    const t = hi > lo ? (v - lo) / (hi - lo) : 1;
    return objective.direction === 'maximize' ? t : 1 - t;
  };
}

// The colour of a trial of quality q (objectiveQuality): amber for the worst
// through dark purple for the best; grey without a quality.
export function qualityColor(q) {
  return q == null ? '#9ca3af' : ramp(q);
}

function paramAxis(p) {
  const title = p.log ? `${p.name} (log)` : p.name;
  if (p.type === 'discrete' || p.type === 'categorical') {
    const values = p.values || [];
    const at = (i) => (values.length === 1 ? 0.5 : i / (values.length - 1));
    return {
      name: p.name,
      title,
      position: (v) => {
        const i = values.findIndex((x) => x === v || String(x) === String(v));
        return i < 0 ? null : at(i);
      },
      ticks: values.map((v, i) => ({ t: at(i), label: formatValue(v) })),
    };
  }
  return { name: p.name, ...numericAxis(p.min, p.max, Boolean(p.log), p.type === 'int'), title };
}

function objectiveAxis(objective, scores, logRequested) {
  let lo = scores.length ? Math.min(...scores) : 0;
  let hi = scores.length ? Math.max(...scores) : 1;
  const log = logRequested && lo > 0;
  if (lo === hi) {
    if (log) {
      lo /= 2;
      hi *= 2;
    } else {
      const pad = Math.abs(lo) * 0.1 || 1;
      lo -= pad;
      hi += pad;
    }
  }
  const axis = numericAxis(lo, hi, log, false);
  const direction = objective.direction ? (objective.direction === 'maximize' ? 'max' : 'min') : '';
  const notes = [direction, log ? 'log' : ''].filter(Boolean).join(', ');
  return { ...axis, name: '', log, title: `${objective.metric || 'objective'}${notes ? ` (${notes})` : ''}` };
}

// position(v) -> [0, 1] or null; ticks [{t, label}].
function numericAxis(min, max, log, integer) {
  const lo = Number(min);
  const hi = Number(max);
  const useLog = log && lo > 0 && hi > 0;
  const f = useLog ? Math.log10 : (v) => v;
  const a = f(lo);
  const b = f(hi);
  const position = (v) => {
    const n = typeof v === 'number' ? v : Number(v);
    if (v == null || v === '' || !Number.isFinite(n) || (useLog && n <= 0)) return null;
    return b === a ? 0.5 : Math.max(0, Math.min(1, (f(n) - a) / (b - a)));
  };
  let values;
  if (useLog) {
    values = [lo];
    for (let e = Math.ceil(a); e <= Math.floor(b); e++) values.push(10 ** e);
    values.push(hi);
  } else {
    values = [0, 0.25, 0.5, 0.75, 1].map((t) => lo + t * (hi - lo));
    if (integer) values = values.map(Math.round);
  }
  const unique = [...new Set(values)].sort((x, y) => x - y);
  // Drop ticks that would sit on top of each other.
  const ticks = [];
  for (const v of unique) {
    const t = position(v);
    if (t == null || ticks.some((k) => Math.abs(k.t - t) < 0.06)) continue;
    ticks.push({ t, label: metric(v) });
  }
  return { position, ticks };
}

function ramp(q) {
  const x = Math.max(0, Math.min(1, q)) * (RAMP.length - 1);
  const i = Math.min(RAMP.length - 2, Math.floor(x));
  return mix(RAMP[i], RAMP[i + 1], x - i);
}

function mix(c1, c2, t) {
  const p = (c, k) => parseInt(c.slice(1 + 2 * k, 3 + 2 * k), 16);
  return `rgb(${[0, 1, 2].map((k) => Math.round(p(c1, k) + (p(c2, k) - p(c1, k)) * t)).join(',')})`;
}

function formatValue(v) {
  if (typeof v === 'number') return metric(v);
  return v == null ? '-' : String(v);
}

function node(tag, attrs = {}) {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
  return n;
}
