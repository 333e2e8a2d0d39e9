// Live metric charts for one job, drawn with uPlot (web/vendor, loaded as the
// global `uPlot` by index.html). One small chart per metric group, only for
// metrics the job reported:
//   loss; eval (every eval_* metric); learning_rate; grad_norm;
//   throughput (samples_per_second, else steps/s); then any other metric alone.
// Each chart's element has data-metric="<group>" and data-points="<points plotted>".
// Series arrive downsampled (reset) and then point by point (append); drawing
// waits for the next animation frame, so a burst of appends costs one redraw.

import { el, metric as formatMetric } from './format.js';

const MAX_CHARTS = 12;
const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#4b5563'];
const LIVE_STEPS_PER_SECOND = ' steps/s';  // not a valid metric name, so no clash
// Steps are whole numbers: x-axis ticks at 1, 2, 5, 10, 20, 25, 50, ... only.
const STEP_INCREMENTS = [1, 2, 5].concat(...Array.from({ length: 9 }, (_, i) => [10, 20, 25, 50].map((m) => m * 10 ** i)));

const formatStep = (n) => (n >= 1e6 ? `${+(n / 1e6).toFixed(2)}M` : n >= 1e4 ? `${+(n / 1e3).toFixed(1)}k` : String(n));

export class MetricCharts {
  // maxPoints: past this many points a series drops every other older point.
  constructor(container, maxPoints = 600) {
    this.container = container;
    this.maxPoints = maxPoints;
    this.series = new Map();  // name -> {steps: [], values: []}
    this.charts = new Map();  // group key -> {element, plot, signature}
    this.frame = 0;
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

  destroy() {
    cancelAnimationFrame(this.frame);
    this.resizeObserver.disconnect();
    for (const chart of this.charts.values()) chart.plot?.destroy();
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
    if (!groups.length) {
      this.placeholder ??= el('p', { class: 'muted' }, 'No metrics reported yet.');
      if (!this.placeholder.isConnected) this.container.prepend(this.placeholder);
    } else {
      this.placeholder?.remove();
    }
    const keep = new Set(groups.map((g) => g.key));
    for (const [key, chart] of this.charts) {
      if (keep.has(key)) continue;
      chart.plot?.destroy();
      chart.element.remove();
      this.charts.delete(key);
    }
    groups.forEach((group, position) => {
      const data = aligned(group.members.map((m) => this.series.get(m)));
      const signature = group.members.join(',');
      let chart = this.charts.get(group.key);
      if (chart && chart.signature !== signature) {
        chart.plot.destroy();
        chart.plot = null;
      }
      if (!chart) {
        const plotArea = el('div', { class: 'chart-plot' });
        const title = el('div', { class: 'chart-title' });
        chart = { element: el('div', { class: 'chart', dataset: { metric: group.key } }, title, plotArea),
          title, plotArea, plot: null, zoomed: false };
        // Dragging zooms in (live data then leaves the scales alone); a double click zooms out.
        plotArea.addEventListener('dblclick', () => { chart.zoomed = false; });
        this.charts.set(group.key, chart);
      }
      if (chart.title.textContent !== group.title) chart.title.textContent = group.title;
      if (this.container.children[position] !== chart.element) {
        this.container.insertBefore(chart.element, this.container.children[position] || null);
      }
      if (!chart.plot) {
        chart.signature = signature;
        chart.zoomed = false;
        const onZoom = () => { chart.zoomed = true; };
        chart.plot = new uPlot(chartOptions(group, this.chartWidth(), onZoom), data, chart.plotArea);
      } else {
        chart.plot.setData(data, !chart.zoomed);
      }
      chart.element.dataset.points = String(data[0].length);
    });
  }

  chartWidth() {
    return Math.max(240, this.container.clientWidth || 480);
  }

  resize() {
    const width = this.chartWidth();
    for (const chart of this.charts.values()) {
      if (chart.plot && Math.abs(chart.plot.width - width) > 1) chart.plot.setSize({ width, height: chart.plot.height });
    }
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

// uPlot data: [x, y1, y2, ...] on the union of the series' steps.
function aligned(list) {
  if (list.length === 1) return [list[0].steps.slice(), list[0].values.slice()];
  const steps = [...new Set(list.flatMap((s) => s.steps))].sort((a, b) => a - b);
  const index = new Map(steps.map((s, i) => [s, i]));
  const columns = list.map((s) => {
    const column = new Array(steps.length).fill(null);
    s.steps.forEach((step, i) => { column[index.get(step)] = s.values[i]; });
    return column;
  });
  return [steps, ...columns];
}

function chartOptions(group, width, onZoom) {
  const axis = {
    stroke: '#4b5563',
    font: '11px system-ui, sans-serif',
    grid: { stroke: '#eceff3', width: 1 },
    ticks: { stroke: '#d1d5db', width: 1, size: 4 },
  };
  return {
    width,
    height: 140,
    legend: { show: true, live: true },
    cursor: { drag: { x: true, y: false, setScale: true } },
    hooks: { setSelect: [(u) => { if (u.select.width > 0) onZoom(); }] },
    scales: { x: { time: false } },
    axes: [
      { ...axis, size: 28, incrs: STEP_INCREMENTS, values: (u, ticks) => ticks.map(formatStep) },
      { ...axis, size: 58, values: (u, ticks) => ticks.map(formatMetric) },
    ],
    series: [
      { label: 'step' },
      ...group.members.map((name, i) => ({
        label: name === LIVE_STEPS_PER_SECOND ? 'steps/s' : name,
        stroke: COLORS[i % COLORS.length],
        width: 1.5,
        spanGaps: true,
        points: { show: false },
        value: (u, v) => (v == null ? '-' : formatMetric(v)),
      })),
    ],
  };
}
