// Line charts drawn with uPlot (web/vendor, loaded as the global `uPlot` by
// index.html with `async`, so that the job list never waits for it; a chart
// made before it arrived is drawn when it does).
//
// LineChart: one chart with a title, axis titles, a legend that follows the
// cursor (the latest values when the cursor is elsewhere), a log/linear
// switch for y, EMA smoothing, a mark at each non-finite point (the API
// sends those as null) and vertical lines at given steps (health changes).
// The chart element carries what the tests and tools read:
//   data-points      points on the x axis
//   data-scale       "log" or "linear" (y as drawn)
//   data-smoothing   the EMA weight in use, "0" for none
//   data-non-finite  non-finite points marked
//   data-markers     the vertical lines, "Diverging@120,Stalled@300"
//
// MetricCharts: the live charts of one job. One chart per metric group, only
// for metrics the job reported:
//   loss; eval (every eval_* metric); learning_rate; grad_norm;
//   throughput (samples_per_second, else steps/s); then any other metric alone.
// Each chart's element also has data-metric="<group>". Series arrive
// downsampled (reset) and then point by point (append); drawing waits for the
// next animation frame, so a burst of appends costs one redraw. Smoothing and
// each group's scale are kept for the page's lifetime, so they survive
// closing and opening panels.

import { el, metric as formatMetric, number as formatNumber, step as formatStep } from './format.js';

const MAX_CHARTS = 12;
export const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#4b5563'];
const LIVE_STEPS_PER_SECOND = ' steps/s';  // not a valid metric name, so no clash
// Steps are whole numbers: x-axis ticks at 1, 2, 5, 10, 20, 25, 50, ... only.
const STEP_INCREMENTS = [1, 2, 5].concat(...Array.from({ length: 9 }, (_, i) => [10, 20, 25, 50].map((m) => m * 10 ** i)));
export const HEALTH_COLORS = {
  Diverging: '#dc2626', Stalled: '#d97706', Plateaued: '#7c3aed', Overfitting: '#db2777', Progressing: '#16a34a', Unknown: '#6b7280',
};
const NON_FINITE_COLOR = '#dc2626';
const FONT = '11px system-ui, sans-serif';
const MAX_LEGEND = 10;  // more series than this: the legend lists the best MAX_LEGEND
export const MAX_SMOOTHING = 0.99;

// Resolves once the global `uPlot` exists.
let uplotLoading = null;
function uplotLoaded() {
  uplotLoading ??= new Promise((resolve) => {
    if (globalThis.uPlot) {
      resolve();
      return;
    }
    let script = document.getElementById('uplot-script');
    if (!script) script = document.head.appendChild(el('script', { id: 'uplot-script', src: 'vendor/uPlot.iife.min.js' }));
    script.addEventListener('load', resolve, { once: true });
    script.addEventListener('error', () => console.error('headway: could not load vendor/uPlot.iife.min.js'), { once: true });
  });
  return uplotLoading;
}

// Settings shared by every job's charts while the page lives.
const settings = { smoothing: 0, logScale: new Map() };  // group key -> true

// TensorBoard's smoothing: an exponential moving average over the points in
// order, debiased so that the first points are not pulled toward 0. Missing
// (undefined) and non-finite (null) points stay as they are and do not move
// the average.
export function smooth(values, weight) {
  if (!(weight > 0)) return values.slice();
  const out = new Array(values.length);
  let last = 0;
  let n = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v == null || !Number.isFinite(v)) {
      out[i] = v;
      continue;
    }
    last = last * weight + (1 - weight) * v;
    n++;
    out[i] = last / (1 - weight ** n);
  }
  return out;
}

// The health changes of a job's events at the step they happened:
// [{step, label, color, title}]. HealthChanged messages read
// "Progressing -> Diverging: reason (at step 120)"; events that name no step
// (from servers that did not write it) are left out, and so is the first
// "Unknown -> Progressing" of an attempt, which every healthy job has.
export function healthMarkers(events) {
  const out = [];
  for (const e of events || []) {
    if (e.type !== 'HealthChanged') continue;
    const m = /^(\w+) -> (\w+)\b.*\(at step (\d+)\)$/.exec(e.message || '');
    if (!m || (m[1] === 'Unknown' && m[2] === 'Progressing')) continue;
    out.push({ step: Number(m[3]), label: m[2], color: HEALTH_COLORS[m[2]] || HEALTH_COLORS.Unknown, title: e.message });
  }
  return out.sort((a, b) => a.step - b.step);
}

export class LineChart {
  // key: the chart's name (data-metric); title; yLabel: the y axis title
  // (metric name and unit); xLabel: the x axis title; series: [{label, color}];
  // log, smoothing: initial y scale and EMA weight; onLog(log): the user
  // switched the scale; syncKey: charts with the same key share the cursor;
  // height: the plot's height in pixels; better: 'lower' or 'higher', which
  // values the legend lists first when it cannot list every series.
  constructor({ key, title, yLabel, xLabel = 'step', series, log = false, smoothing = 0, onLog = () => {}, syncKey = '', height = 150, better = 'lower' }) {
    this.better = better;
    this.key = key;
    this.xLabel = xLabel;
    this.yLabel = yLabel;
    this.seriesInfo = series;
    this.log = log;
    this.smoothing = smoothing;
    this.onLog = onLog;
    this.syncKey = syncKey;
    this.height = height;
    this.raw = [[]];
    this.markers = [];
    this.plot = null;
    this.zoomed = false;
    this.width = 480;

    this.titleText = el('span', { class: 'chart-title' }, title);
    this.logButton = el('button', {
      type: 'button', class: 'chart-toggle', 'aria-pressed': String(log), title: 'Logarithmic y axis',
      onclick: () => {
        this.setLog(!this.log);
        this.onLog(this.log);
      },
    }, 'log y');
    this.legend = el('div', { class: 'chart-legend', 'aria-live': 'off' });
    this.plotArea = el('div', { class: 'chart-plot' });
    this.element = el('div', { class: 'chart', dataset: { metric: key, xLabel, yLabel } },
      el('div', { class: 'chart-head' }, this.titleText, this.logButton), this.plotArea, this.legend);
    // Dragging zooms in (live data then leaves the scales alone); a double click zooms out.
    this.plotArea.addEventListener('dblclick', () => { this.zoomed = false; });
  }

  setTitle(title) {
    if (this.titleText.textContent !== title) this.titleText.textContent = title;
  }

  // data: [steps, column per series]; a column holds a number, null (a
  // non-finite value) or undefined (no point at that step).
  setData(data) {
    this.raw = data;
    this.render(false);
  }

  // [{step, label, color, title}]: vertical lines, redrawn with the chart.
  setMarkers(markers) {
    const signature = markers.map((m) => `${m.label}@${m.step}`).join(',');
    if (signature === this.element.dataset.markers) return;
    this.markers = markers;
    this.element.dataset.markers = signature;
    this.plot?.redraw(false, false);
  }

  // New colours for the same series ([{color}], in order), without a rebuild.
  setColors(colors) {
    if (colors.every((c, k) => c === this.seriesInfo[k]?.color)) return;
    this.seriesInfo = this.seriesInfo.map((info, k) => ({ ...info, color: colors[k] ?? info.color }));
    this.plot?.redraw(false, false);
    this.updateLegend();
  }

  setLog(log) {
    if (log === this.log) return;
    this.log = log;
    this.logButton.setAttribute('aria-pressed', String(log));
    this.render(true);
  }

  setSmoothing(weight) {
    if (weight === this.smoothing) return;
    this.smoothing = weight;
    this.render(true);
  }

  setWidth(width) {
    this.width = width;
    if (this.plot && Math.abs(this.plot.width - width) > 1) this.plot.setSize({ width, height: this.height });
  }

  destroy() {
    this.destroyed = true;
    this.plot?.destroy();
    this.plot = null;
    this.element.remove();
  }

  // Builds what uPlot draws from the raw columns: on a log scale, values <= 0
  // left out; with smoothing, each series twice (faint raw, then smoothed).
  render(rebuild) {
    if (!globalThis.uPlot) {
      if (!this.waitingForUplot) {
        this.waitingForUplot = true;
        uplotLoaded().then(() => {
          this.waitingForUplot = false;
          if (!this.destroyed) this.render(true);
        });
      }
      return;
    }
    const [steps, ...columns] = this.raw;
    let nonFinite = 0;
    for (const column of columns) for (const v of column) if (v === null) nonFinite++;
    const positive = columns.some((c) => c.some((v) => v > 0));
    const log = this.log && positive;
    const shown = columns.map((c) => (log ? c.map((v) => (v == null || v > 0 ? v : undefined)) : c));
    const data = [steps];
    for (const column of shown) {
      if (this.smoothing > 0) data.push(column, smooth(column, this.smoothing));
      else data.push(column);
    }
    const layout = `${log}/${this.smoothing > 0}`;
    if (rebuild || !this.plot || this.layout !== layout) {
      this.plot?.destroy();
      this.layout = layout;
      this.zoomed = false;
      this.plot = new uPlot(this.options(log), data, this.plotArea);
    } else {
      this.plot.setData(data, !this.zoomed);
    }
    Object.assign(this.element.dataset, {
      points: String(steps.length),
      scale: log ? 'log' : 'linear',
      smoothing: String(this.smoothing),
      nonFinite: String(nonFinite),
    });
    this.logButton.title = this.log && !positive ? 'Logarithmic y axis (no positive values to draw yet)' : 'Logarithmic y axis';
    this.updateLegend();
  }

  options(log) {
    const axis = {
      stroke: '#4b5563',
      font: FONT,
      labelFont: `600 ${FONT}`,
      grid: { stroke: '#eceff3', width: 1 },
      ticks: { stroke: '#d1d5db', width: 1, size: 4 },
    };
    const smoothed = this.smoothing > 0;
    const series = [{ label: this.xLabel }];
    // Colours are read at each draw, so setStyles() can change them in place.
    this.seriesInfo.forEach(({ label, width = 1.5 }, k) => {
      const color = () => this.seriesInfo[k].color;
      if (smoothed) series.push({ label: `${label} (raw)`, stroke: () => faint(color()), width: 1, spanGaps: true, points: { show: false } });
      series.push({ label, stroke: color, width, spanGaps: true, points: { show: false } });
    });
    return {
      width: this.width,
      height: this.height,
      legend: { show: false },
      cursor: {
        y: false,  // a vertical line only: a shared cursor means the same step, not the same value
        drag: { x: true, y: false, setScale: true },
        ...(this.syncKey ? { sync: { key: this.syncKey } } : {}),
      },
      hooks: {
        setSelect: [(u) => { if (u.select.width > 0) this.zoomed = true; }],
        setCursor: [() => this.updateLegend()],
        draw: [(u) => this.drawMarks(u)],
      },
      // Log: the data's own range (uPlot's snaps out to whole powers of ten,
      // which flattens a loss that moves within one decade).
      scales: { x: { time: false }, y: log ? { distr: 3, log: 10, range: (u, min, max) => logRange(min, max) } : {} },
      axes: [
        { ...axis, label: this.xLabel, labelSize: 16, size: 26, incrs: STEP_INCREMENTS, values: (u, ticks) => ticks.map(formatStep) },
        {
          ...axis, label: this.yLabel, labelSize: 16, size: 54, values: (u, ticks) => ticks.map(formatMetric),
          ...(log ? { splits: (u, i, min, max) => logTicks(min, max) } : {}),
        },
      ],
      series,
    };
  }

  // The values at the cursor, or the latest ones when the cursor is elsewhere.
  updateLegend() {
    const [steps, ...columns] = this.raw;
    const idx = this.plot?.cursor.idx;
    const hovering = idx != null && idx < steps.length;
    const at = (column) => {
      if (hovering) return column[idx];
      for (let i = column.length - 1; i >= 0; i--) if (column[i] !== undefined) return column[i];
      return undefined;
    };
    const step = hovering ? steps[idx] : steps[steps.length - 1];
    const items = [el('span', { class: 'legend-step' }, `${hovering ? '' : 'latest '}${this.xLabel} ${step == null ? '-' : step}`)];
    const smoothed = this.smoothing > 0 ? this.plot?.data : null;
    let entries = columns.map((column, i) => {
      const raw = at(column);
      let shown = raw;
      if (smoothed && raw != null) {
        const s = smoothed[2 + 2 * i];
        const sv = hovering ? s[idx] : s[lastDefined(s)];
        if (sv != null) shown = sv;
      }
      return { i, raw, shown };
    });
    let more = 0;
    if (entries.length > MAX_LEGEND) {
      const sign = this.better === 'higher' ? -1 : 1;
      const rank = (e) => (typeof e.shown === 'number' ? sign * e.shown : Infinity);
      entries = entries.sort((a, b) => rank(a) - rank(b) || a.i - b.i);
      more = entries.length - MAX_LEGEND;
      entries = entries.slice(0, MAX_LEGEND);
    }
    for (const { i, raw, shown } of entries) {
      const { label, color } = this.seriesInfo[i];
      const value = raw === undefined ? '-' : raw === null ? 'NaN/inf' : formatMetric(raw);
      const text = smoothed && raw != null && shown !== raw ? `${formatMetric(shown)} (raw ${value})` : value;
      items.push(el('span', { class: 'legend-item' },
        el('span', { class: 'legend-swatch', style: `background:${color}` }), `${label} `,
        el('b', { class: raw === null ? 'non-finite' : null }, text)));
    }
    if (more) items.push(el('span', { class: 'muted' }, `+${more} more`));
    this.legend.dataset.step = step == null ? '' : String(step);
    this.legend.dataset.hover = String(hovering);
    this.legend.replaceChildren(...items);
  }

  // Non-finite points: a red triangle on the top edge, in the series' column;
  // health changes: a dashed vertical line with the new health's name.
  drawMarks(u) {
    const { ctx } = u;
    const { left, top, width, height } = u.bbox;
    const dpr = devicePixelRatio || 1;
    const inside = (x) => x >= left - 0.5 && x <= left + width + 0.5;
    ctx.save();
    ctx.beginPath();
    ctx.rect(left - 4 * dpr, top - 8 * dpr, width + 8 * dpr, height + 8 * dpr);
    ctx.clip();
    const steps = this.raw[0];
    ctx.fillStyle = NON_FINITE_COLOR;
    for (const column of this.raw.slice(1)) {
      for (let i = 0; i < column.length; i++) {
        if (column[i] !== null) continue;
        const x = u.valToPos(steps[i], 'x', true);
        if (!inside(x)) continue;
        ctx.beginPath();
        ctx.moveTo(x - 4 * dpr, top);
        ctx.lineTo(x + 4 * dpr, top);
        ctx.lineTo(x, top + 7 * dpr);
        ctx.closePath();
        ctx.fill();
      }
    }
    ctx.font = `600 ${10 * dpr}px system-ui, sans-serif`;
    ctx.lineWidth = dpr;
    ctx.setLineDash([4 * dpr, 3 * dpr]);
    for (const marker of this.markers) {
      const x = Math.round(u.valToPos(marker.step, 'x', true)) + 0.5;
      if (!inside(x)) continue;
      ctx.strokeStyle = marker.color;
      ctx.beginPath();
      ctx.moveTo(x, top);
      ctx.lineTo(x, top + height);
      ctx.stroke();
      ctx.fillStyle = marker.color;
      const textWidth = ctx.measureText(marker.label).width;
      const tx = x + 3 * dpr + textWidth > left + width ? x - 3 * dpr - textWidth : x + 3 * dpr;
      ctx.fillText(marker.label, tx, top + 18 * dpr);
    }
    ctx.restore();
  }
}

// A log axis' range around [min, max] (both > 0), padded by 5% of its span.
export function logRange(min, max) {
  if (!(min > 0) || !(max > 0)) return [0.1, 10];
  if (min === max) return [min / 1.5, max * 1.5];
  const pad = 10 ** (Math.max(Math.log10(max / min), 0.2) * 0.05);
  return [min / pad, max * pad];
}

// Ticks of a log axis from min to max: within a decade, evenly spaced round
// numbers (1, 2 or 5 times a power of ten apart); over a few decades 1, 2
// and 5 times each power of ten; over more, the powers of ten.
export function logTicks(min, max) {
  if (!(min > 0) || !(max > min)) return [];
  const decades = Math.log10(max / min);
  const out = [];
  if (decades < 1) {
    const rough = (max - min) / 5;
    const mag = 10 ** Math.floor(Math.log10(rough));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= rough);
    for (let k = Math.ceil(min / step); k * step <= max; k++) out.push(Number((k * step).toPrecision(12)));
    return out;
  }
  const multiples = decades <= 3 ? [1, 2, 5] : [1];
  const every = Math.max(1, Math.ceil(decades / 8));
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) {
    if (e % every) continue;
    for (const m of multiples) {
      const v = Number((m * 10 ** e).toPrecision(12));
      if (v >= min && v <= max) out.push(v);
    }
  }
  return out;
}

// A colour at a quarter of its opacity: "#rrggbb" or "rgb(r,g,b)".
function faint(color) {
  if (/^#[0-9a-f]{6}$/i.test(color)) return `${color}40`;
  const m = /^rgb\((.*)\)$/.exec(color);
  return m ? `rgba(${m[1]},0.25)` : color;
}

function lastDefined(column) {
  for (let i = column.length - 1; i >= 0; i--) if (column[i] != null) return i;
  return -1;
}

// The y axis title of a metric group: its name and, where known, its unit.
function yLabelOf(group) {
  if (group.key === 'throughput') return group.title.replace(/^throughput \((.*)\)$/, '$1');
  if (group.key === 'eval') return 'eval metrics';
  return group.title;
}

export class MetricCharts {
  // maxPoints: past this many points a series drops every other older point.
  // syncKey: charts of one panel share the cursor.
  constructor(container, maxPoints = 600, syncKey = 'job') {
    this.container = container;
    this.maxPoints = maxPoints;
    this.syncKey = syncKey;
    this.series = new Map();  // name -> {steps: [], values: []}
    this.charts = new Map();  // group key -> {chart, signature}
    this.markers = [];
    this.frame = 0;
    this.smoothingValue = el('output', { class: 'smoothing-value' });
    this.slider = el('input', {
      type: 'range', class: 'smoothing', min: '0', max: String(MAX_SMOOTHING), step: '0.01',
      value: String(settings.smoothing), 'aria-label': 'Smoothing',
      oninput: () => this.setSmoothing(Number(this.slider.value)),
    });
    this.showSmoothing();
    this.toolbar = el('div', { class: 'chart-toolbar', hidden: true },
      el('label', {}, 'Smoothing ', this.slider), this.smoothingValue,
      el('span', { class: 'muted chart-help' }, 'drag to zoom, double-click to reset'));
    this.box = el('div', { class: 'chart-list' });
    container.replaceChildren(this.toolbar, this.box);
    this.resizeObserver = new ResizeObserver(() => this.resize());
    this.resizeObserver.observe(container);
  }

  // Replaces every series: metrics is {name: {steps, values}}.
  reset(metrics) {
    for (const name of [...this.series.keys()]) {
      if (name !== LIVE_STEPS_PER_SECOND) this.series.delete(name);
    }
    this.append(metrics);
  }

  append(metrics) {
    for (const [name, { steps = [], values = [] }] of Object.entries(metrics || {})) {
      let series = this.series.get(name);
      if (!series) this.series.set(name, series = { steps: [], values: [] });
      for (let i = 0; i < steps.length; i++) insertPoint(series, steps[i], values[i] ?? null);
      thin(series, this.maxPoints);
    }
    this.schedule();
  }

  // Steps per second as the job view states it, for jobs that report no
  // samples_per_second: a series of its own, kept only while the panel is open.
  addStepsPerSecond(step, value) {
    if (step == null || value == null || !Number.isFinite(value)) return;
    let series = this.series.get(LIVE_STEPS_PER_SECOND);
    if (!series) this.series.set(LIVE_STEPS_PER_SECOND, series = { steps: [], values: [] });
    const last = series.steps.length ? series.steps[series.steps.length - 1] : -Infinity;
    if (step <= last) return;
    insertPoint(series, step, value);
    thin(series, this.maxPoints);
    this.schedule();
  }

  // The job's events: health changes become vertical lines on every chart.
  setEvents(events) {
    this.markers = healthMarkers(events);
    for (const { chart } of this.charts.values()) chart.setMarkers(this.markers);
  }

  setSmoothing(weight) {
    settings.smoothing = Math.max(0, Math.min(MAX_SMOOTHING, weight));
    this.showSmoothing();
    for (const { chart } of this.charts.values()) chart.setSmoothing(settings.smoothing);
  }

  showSmoothing() {
    this.smoothingValue.textContent = settings.smoothing > 0 ? formatNumber(settings.smoothing, 2) : 'off';
  }

  destroy() {
    cancelAnimationFrame(this.frame);
    this.resizeObserver.disconnect();
    for (const { chart } of this.charts.values()) chart.destroy();
    this.charts.clear();
    this.container.replaceChildren();
  }

  schedule() {
    if (!this.frame) this.frame = requestAnimationFrame(() => { this.frame = 0; this.draw(); });
  }

  groups() {
    const names = [...this.series.keys()].filter((n) => this.series.get(n).steps.length);
    const has = (n) => names.includes(n);
    const used = new Set();
    const groups = [];
    const add = (key, title, members) => {
      if (!members.length) return;
      members.forEach((m) => used.add(m));
      groups.push({ key, title, members });
    };
    add('loss', 'loss', names.filter((n) => n === 'loss'));
    add('eval', 'eval', names.filter((n) => n.startsWith('eval_')).sort());
    add('learning_rate', 'learning rate', names.filter((n) => n === 'learning_rate'));
    add('grad_norm', 'grad norm', names.filter((n) => n === 'grad_norm'));
    if (has('samples_per_second')) add('throughput', 'throughput (samples/s)', ['samples_per_second']);
    else if (has('steps_per_second')) add('throughput', 'throughput (steps/s)', ['steps_per_second']);
    else if (this.series.get(LIVE_STEPS_PER_SECOND)?.steps.length > 1) add('throughput', 'throughput (steps/s)', [LIVE_STEPS_PER_SECOND]);
    used.add(LIVE_STEPS_PER_SECOND);
    for (const name of names.filter((n) => !used.has(n)).sort()) add(name, name, [name]);
    return groups.slice(0, MAX_CHARTS);
  }

  draw() {
    const groups = this.groups();
    this.toolbar.hidden = !groups.length;
    if (!groups.length) {
      this.placeholder ??= el('p', { class: 'muted' }, 'No metrics reported yet.');
      if (!this.placeholder.isConnected) this.box.prepend(this.placeholder);
    } else {
      this.placeholder?.remove();
    }
    const keep = new Set(groups.map((g) => g.key));
    for (const [key, entry] of this.charts) {
      if (keep.has(key)) continue;
      entry.chart.destroy();
      this.charts.delete(key);
    }
    const width = this.chartWidth();
    groups.forEach((group, position) => {
      const data = aligned(group.members.map((m) => this.series.get(m)));
      const signature = group.members.join(',');
      let entry = this.charts.get(group.key);
      if (entry && entry.signature !== signature) {
        entry.chart.destroy();
        this.charts.delete(group.key);
        entry = null;
      }
      if (!entry) {
        const chart = new LineChart({
          key: group.key,
          title: group.title,
          yLabel: yLabelOf(group),
          series: group.members.map((name, i) => ({
            label: name === LIVE_STEPS_PER_SECOND ? 'steps/s' : name,
            color: COLORS[i % COLORS.length],
          })),
          log: settings.logScale.get(group.key) === true,
          smoothing: settings.smoothing,
          onLog: (log) => settings.logScale.set(group.key, log),
          syncKey: this.syncKey,
        });
        chart.width = width;
        chart.setMarkers(this.markers);
        entry = { chart, signature };
        this.charts.set(group.key, entry);
      }
      entry.chart.setTitle(group.title);
      if (this.box.children[position] !== entry.chart.element) {
        this.box.insertBefore(entry.chart.element, this.box.children[position] || null);
      }
      entry.chart.setData(data);
    });
  }

  chartWidth() {
    return Math.max(240, (this.container.clientWidth || 480) - 10);
  }

  resize() {
    const width = this.chartWidth();
    for (const { chart } of this.charts.values()) chart.setWidth(width);
  }
}

// Keeps the series ordered by step; a repeated step replaces the older value.
function insertPoint(series, step, value) {
  const { steps, values } = series;
  const n = steps.length;
  if (n === 0 || step > steps[n - 1]) {
    steps.push(step);
    values.push(value);
    return;
  }
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (steps[mid] < step) lo = mid + 1; else hi = mid;
  }
  if (steps[lo] === step) {
    values[lo] = value;
  } else {
    steps.splice(lo, 0, step);
    values.splice(lo, 0, value);
  }
}

// Past `max` points, keeps every other point of the older half: recent points
// stay exact, the chart stays light however long the panel stays open.
function thin(series, max) {
  if (series.steps.length <= max) return;
  const half = Math.floor(series.steps.length / 2);
  const keep = (_, i) => i >= half || i % 2 === 0;
  series.steps = series.steps.filter(keep);
  series.values = series.values.filter(keep);
}

// uPlot data: [x, y1, y2, ...] on the union of the series' steps; a series
// with no point at a step has undefined there (null stays a non-finite value).
export function aligned(list) {
  if (list.length === 1) return [list[0].steps.slice(), list[0].values.slice()];
  const steps = [...new Set(list.flatMap((s) => s.steps))].sort((a, b) => a - b);
  const index = new Map(steps.map((s, i) => [s, i]));
  const columns = list.map((s) => {
    const column = new Array(steps.length).fill(undefined);
    s.steps.forEach((step, i) => { column[index.get(step)] = s.values[i]; });
    return column;
  });
  return [steps, ...columns];
}
