// Experiments (#/experiments) and one experiment (#/experiments/NAME): its
// trials' learning curves (the objective metric per trial, on one chart), the
// trials as parallel coordinates and as a table. Refreshed every 2 s; a
// trial's curve is fetched again only when its step moved.

import { jobPath, request } from './api.js';
import { LineChart, aligned } from './charts.js';
import { age, badge, dateTime, el, metric } from './format.js';
import { poll, seriesFromRest } from './live.js';
import { objectiveQuality, parallelCoordinates, qualityColor } from './parcoords.js';

const REFRESH_MS = 2000;
const CURVE_BUCKETS = 200;
const MAX_CURVES = 100;     // the first trials by index; more would be noise
const FETCH_PARALLEL = 6;
// Kept for the page's lifetime: the objective axes' scale.
const settings = { logObjective: false };

const expPath = (name) => `/api/v1/experiments/${encodeURIComponent(name)}`;
const jobLink = (name) => el('a', { href: `#/jobs/${encodeURIComponent(name)}` }, name);
const objectiveText = (o) => (o && o.metric ? `${o.metric} (${o.direction || 'minimize'})` : '-');

export function createExperimentsView(container, { setStatus }) {
  let current = null;
  let refresher = null;

  let render = null;

  function show(name) {
    refresher?.close();
    render?.dispose?.();
    current = name || null;
    render = current ? detail(container, current) : list(container);
    refresher = poll(async (signal) => {
      await render(signal);
      setStatus('live');
    }, REFRESH_MS);
  }

  return {
    update(arg) { if ((arg || null) !== current || !refresher) show(arg); },
    destroy() { refresher?.close(); render?.dispose?.(); setStatus(''); },
  };
}

function list(container) {
  const body = el('tbody');
  container.replaceChildren(el('section', { class: 'view' },
    el('div', { class: 'toolbar' }, el('h2', {}, 'Experiments')),
    el('table', { class: 'grid' },
      el('thead', {}, el('tr', {}, ['Name', 'State', 'Algorithm', 'Objective', 'Trials', 'Best', 'Age']
        .map((t) => el('th', {}, t)))),
      body)));
  return async (signal) => {
    const { experiments = [] } = await request('/api/v1/experiments', { signal });
    body.replaceChildren(...(experiments.length ? experiments.map((e) => el('tr', { dataset: { experiment: e.name } },
      el('td', { class: 'name' }, el('a', { href: `#/experiments/${encodeURIComponent(e.name)}` }, e.name)),
      el('td', {}, badge('state', e.state)),
      el('td', {}, e.algorithm || '-'),
      el('td', {}, objectiveText(e.objective)),
      el('td', {}, trialCounts(e)),
      el('td', {}, e.best_trial ? [jobLink(e.best_trial.job), ` ${metric(e.best_trial.objective)}`] : '-'),
      el('td', {}, age(e.created_at))))
      : [el('tr', {}, el('td', { class: 'muted', colSpan: 7 }, 'No experiments. Start one with: headway exp create -f experiment.yaml'))]));
  };
}

function trialCounts(e) {
  const counts = e.trial_counts || {};
  const done = (counts.Completed || 0) + (counts.EarlyStopped || 0) + (counts.Failed || 0);
  const parts = [];
  if (counts.Running) parts.push(`${counts.Running} running`);
  parts.push(`${done}/${e.max_trials ?? '?'} done`);
  if (counts.EarlyStopped) parts.push(`${counts.EarlyStopped} early-stopped`);
  if (counts.Failed) parts.push(`${counts.Failed} failed`);
  return parts.join(', ');
}

function detail(container, name) {
  const header = el('div', { class: 'exp-header' });
  const plot = el('div', { class: 'parcoords-box' });
  const table = el('table', { class: 'grid trials' });
  const error = el('p', { class: 'panel-error', hidden: true });
  const logBox = el('input', {
    type: 'checkbox', class: 'log-objective', checked: settings.logObjective,
    onchange: () => setLogObjective(logBox.checked),
  });
  const curves = new TrialCurves(name, (log) => setLogObjective(log));
  container.replaceChildren(el('section', { class: 'view' },
    el('div', { class: 'toolbar' },
      el('a', { href: '#/experiments', class: 'back' }, '\u2190 Experiments'),
      el('h2', {}, name)),
    error, header,
    el('h3', {}, 'Learning curves'),
    el('div', { class: 'exp-controls' }, el('label', {}, logBox, ' Log scale for the objective')),
    curves.box,
    el('p', { class: 'muted caption' }, 'The objective metric of each trial by step, coloured as below; the best trial is drawn thicker.'),
    el('h3', {}, 'Trials'), plot,
    el('p', { class: 'muted caption' }, 'One line per trial, coloured by its objective: darker is better, amber is worst, dashed grey has none yet.'),
    table));
  let lastPlotKey = '';
  let latest = null;
  // Redraws only when something the plot shows, or its width, changed.
  const drawPlot = () => {
    if (!latest) return;
    const width = plot.clientWidth - 12;
    const { parameters, objective, trials } = latest;
    const logObjective = settings.logObjective;
    const key = JSON.stringify([width, logObjective, parameters, objective, trials.map((t) => [t.index, t.params, t.objective])]);
    if (key === lastPlotKey) return;
    lastPlotKey = key;
    plot.replaceChildren(trials.length
      ? parallelCoordinates({ parameters, objective, trials, width, logObjective })
      : el('p', { class: 'muted' }, 'No trials yet.'));
  };
  function setLogObjective(log) {
    settings.logObjective = log;
    logBox.checked = log;
    curves.setLog(log);
    drawPlot();
  }
  const resize = new ResizeObserver(() => {
    drawPlot();
    curves.resize();
  });
  resize.observe(plot);
  const render = async (signal) => {
    let e;
    try {
      e = await request(expPath(name), { signal });
    } catch (err) {
      if (!signal.aborted) {
        error.textContent = err.status === 404 ? `No experiment named ${name}.` : `Could not refresh: ${err.message}`;
        error.hidden = false;
      }
      throw err;
    }
    error.hidden = true;
    const parameters = e.spec?.parameters || [];
    const trials = e.trials || [];
    header.replaceChildren(
      el('div', { class: 'status-line' }, badge('state', e.state),
        el('span', {}, `${e.algorithm || ''} \u00b7 ${objectiveText(e.objective)}${e.objective?.goal != null ? ` \u00b7 goal ${metric(e.objective.goal)}` : ''}`),
        el('span', { class: 'muted' }, trialCounts(e))),
      e.best_trial ? el('div', {}, 'Best: ', jobLink(e.best_trial.job), ` ${metric(e.best_trial.objective)}`) : null,
      e.message ? el('div', { class: 'note' }, e.message) : null,
      el('div', { class: 'muted' }, `Created ${dateTime(e.created_at)}${e.finished_at ? `, finished ${dateTime(e.finished_at)}` : ''}`));

    // Redraw the plot only when something it shows changed.
    latest = { parameters, objective: e.objective || {}, trials };
    drawPlot();
    const curvesDone = curves.update(e, signal);

    const paramNames = parameters.length ? parameters.map((p) => p.name)
      : [...new Set(trials.flatMap((t) => Object.keys(t.params || {})))];
    table.replaceChildren(
      el('thead', {}, el('tr', {},
        [['#', 'num'], ['Job'], ['Trial'], ['Job state'], ['Step', 'num'],
          [`Objective${e.objective?.metric ? ` (${e.objective.metric})` : ''}`, 'num'], ['Latest', 'num'],
          ...paramNames.map((p) => [p, numericParam(parameters, p) ? 'num' : null])]
          .map(([t, cls]) => el('th', { class: cls }, t)))),
      el('tbody', {}, trials.map((t) => el('tr', { dataset: { trial: String(t.index) }, class: t.index === e.best_trial?.index ? 'best' : null },
        el('td', { class: 'num' }, t.index),
        el('td', { class: 'name' }, jobLink(t.job)),
        el('td', { title: t.message || '' }, badge('trial', t.state)),
        el('td', {}, t.job_state ? badge('state', t.job_state) : '-'),
        el('td', { class: 'num' }, t.step ?? '-'),
        el('td', { class: 'num' }, t.objective == null ? '-' : metric(t.objective)),
        el('td', { class: 'num' }, t.latest == null ? '-' : metric(t.latest)),
        paramNames.map((p) => el('td', { class: typeof t.params?.[p] === 'number' ? 'num' : null }, formatParam(t.params?.[p])))))));
    await curvesDone;
  };
  render.dispose = () => {
    resize.disconnect();
    curves.destroy();
  };
  return render;
}

// The learning curves of an experiment's trials: the objective metric of
// each trial's job, downsampled, on one LineChart (data-metric="trials").
class TrialCurves {
  constructor(experiment, onLog) {
    this.experiment = experiment;
    this.onLog = onLog;
    this.box = el('div', { class: 'curves-box' }, el('p', { class: 'muted' }, 'No curves yet.'));
    this.cache = new Map();  // job -> {step, series}
    this.chart = null;
    this.signature = '';
  }

  setLog(log) { this.chart?.setLog(log); }

  resize() { this.chart?.setWidth(this.width()); }

  width() { return Math.max(320, this.box.clientWidth - 10); }

  destroy() { this.chart?.destroy(); }

  // Fetches the curves whose trial moved since the last look, then redraws.
  async update(e, signal) {
    const metricName = e.objective?.metric;
    if (!metricName) return;
    const trials = (e.trials || []).slice().sort((a, b) => a.index - b.index).slice(0, MAX_CURVES);
    const stale = trials.filter((t) => t.step != null && this.cache.get(t.job)?.step !== t.step);
    for (let i = 0; i < stale.length; i += FETCH_PARALLEL) {
      await Promise.all(stale.slice(i, i + FETCH_PARALLEL).map(async (t) => {
        let series = { steps: [], values: [] };
        try {
          series = seriesFromRest(await request(`${jobPath(t.job)}/metrics/${encodeURIComponent(metricName)}?buckets=${CURVE_BUCKETS}`, { signal }));
        } catch (error) {
          if (error.status !== 404) throw error;  // 404: not reported yet
        }
        this.cache.set(t.job, { step: t.step, series });
      }));
    }
    if (signal.aborted) return;
    const shown = trials.filter((t) => this.cache.get(t.job)?.series.steps.length);
    if (!shown.length) return;
    const scores = trials.map((t) => t.objective).filter((v) => typeof v === 'number' && Number.isFinite(v));
    const quality = objectiveQuality(e.objective, scores);
    const series = shown.map((t) => ({
      label: `#${t.index}`,
      color: qualityColor(quality(t.objective)),
      width: t.index === e.best_trial?.index ? 3 : 1.5,
    }));
    // Colours follow the objectives in place; other changes build a new chart.
    const signature = JSON.stringify([metricName, series.map((s) => [s.label, s.width])]);
    if (signature === this.signature) {
      this.chart.setColors(series.map((s) => s.color));
    } else {
      this.signature = signature;
      this.chart?.destroy();
      this.chart = new LineChart({
        key: 'trials',
        title: `${metricName} per trial`,
        yLabel: metricName,
        series,
        log: settings.logObjective,
        onLog: this.onLog,
        syncKey: `experiment:${this.experiment}`,
        height: 220,
        better: e.objective?.direction === 'maximize' ? 'higher' : 'lower',
      });
      this.chart.width = this.width();
      this.box.replaceChildren(this.chart.element);
    }
    this.chart.setData(aligned(shown.map((t) => this.cache.get(t.job).series)));
  }
}

function numericParam(parameters, name) {
  const p = parameters.find((x) => x.name === name);
  return p ? p.type !== 'categorical' : false;
}

function formatParam(v) {
  if (v == null) return '-';
  return typeof v === 'number' ? metric(v) : String(v);
}
