// The side panel for one job (#job-panel): state, health, progress, live
// metric charts, events, the artifacts it produced and read (each a link to
// its lineage, #/artifacts/NAME:VERSION), a tail of the logs and a Stop
// button. It follows GET /api/v1/jobs/{name}/watch while open.

import { request, jobPath } from './api.js';
import { artifactLink } from './artifacts.js';
import { MetricCharts } from './charts.js';
import { watchJob, poll } from './live.js';
import {
  ENDED_STATES, age, badge, bar, barTone, clock, dateTime, duration, el, metric, number, percent, stepOf,
} from './format.js';

const BUCKETS = 300;
const LOG_LINES = 200;
const LOG_REFRESH_MS = 3000;
const MAX_EVENTS = 200;

export class JobPanel {
  // onClose(): the user closed the panel. onJob(view): the panel saw a newer view.
  constructor(root, { onClose, onJob, onStatus }) {
    this.root = root;
    this.onClose = onClose;
    this.onJob = onJob;
    this.onStatus = onStatus;
    this.name = null;
  }

  // Shows `name`; `known` is the view the jobs list already has, if any.
  open(name, known) {
    if (this.name === name) return;
    this.close();
    this.name = name;
    this.view = null;
    this.stopping = false;
    this.events = new Map();
    this.logText = null;

    this.header = el('div', { class: 'panel-header' });
    this.stopButton = el('button', { id: 'stop-button', class: 'danger', type: 'button', onclick: () => this.stop() }, 'Stop');
    this.error = el('div', { class: 'panel-error', hidden: true });
    this.details = el('dl', { class: 'details' });
    const chartBox = el('div', { class: 'charts' });
    this.eventList = el('ol', { class: 'events' });
    this.artifacts = el('table', { class: 'artifacts' });
    this.artifactText = null;
    this.logs = el('pre', { class: 'logs' }, '');
    this.root.replaceChildren(
      el('div', { class: 'panel-top' },
        el('h2', { title: name }, name),
        this.stopButton,
        el('button', { class: 'close', type: 'button', title: 'Close', 'aria-label': 'Close', onclick: () => this.onClose() }, '\u00d7')),
      this.error,
      this.header,
      this.details,
      el('h3', {}, 'Metrics'),
      chartBox,
      el('h3', {}, 'Events'),
      this.eventList,
      el('h3', {}, 'Artifacts'),
      this.artifacts,
      el('h3', {}, 'Logs ', el('span', { class: 'muted' }, `(last ${LOG_LINES} lines)`)),
      this.logs,
    );
    this.root.hidden = false;
    this.root.scrollTop = 0;
    this.charts = new MetricCharts(chartBox, 2 * BUCKETS, `job:${name}`);
    if (known) this.showJob(known);

    this.watch = watchJob(name, BUCKETS, {
      onOpen: () => { this.events.clear(); },
      onJob: (view) => {
        this.showJob(view);
        this.onJob(view);
      },
      onSeries: (series) => {
        if (series.reset) this.charts.reset(series.metrics);
        else this.charts.append(series.metrics);
      },
      onEvents: (events) => this.addEvents(events),
      onError: (error) => this.showError(error.message),
      onStatus: this.onStatus,
    });
    this.logPoll = poll((signal) => this.refreshLogs(signal), LOG_REFRESH_MS);
  }

  close() {
    if (!this.name) return;
    this.watch?.close();
    this.logPoll?.close();
    this.charts?.destroy();
    this.name = null;
    this.root.hidden = true;
    this.root.replaceChildren();
  }

  showError(message) {
    this.error.textContent = message;
    this.error.hidden = !message;
  }

  showJob(view) {
    this.view = view;
    const p = view.progress || {};
    const ended = ENDED_STATES.has(view.state);
    const stopping = !ended && view.stop_requested_at;
    this.stopButton.disabled = ended || Boolean(stopping) || this.stopping === true;
    this.stopButton.textContent = stopping ? 'Stopping\u2026' : 'Stop';
    this.stopButton.title = ended ? `${view.state}: nothing to stop` : 'Stop this job';

    const healthBadge = badge('health', view.health);
    const lines = [
      el('div', { class: 'status-line' },
        el('span', { class: 'state' }, badge('state', view.state)),
        healthBadge,
        view.health_reason ? el('span', { class: 'health-reason' }, view.health_reason) : null),
      el('div', { class: 'progress-line' },
        bar((p.percent ?? 0) / 100, percent(p.percent) || '-', barTone(view)),
        el('span', {}, p.step != null ? `step ${stepOf(p)}` : 'no progress reported'),
        p.eta_seconds != null && !ended ? el('span', {}, `ETA ${duration(p.eta_seconds)}`) : null),
    ];
    if (view.pending_reason) {
      const place = view.queue_position ? `#${view.queue_position} in line` +
        (view.expected_start ? `, expected to start ${new Date(view.expected_start).toLocaleTimeString()}` : '') + ': ' : '';
      lines.push(el('div', { class: 'note' }, place + view.pending_reason));
    }
    if (view.message) lines.push(el('div', { class: 'note' }, view.message));
    this.header.replaceChildren(...lines);

    const rows = [
      ['Team', view.team], ['Queue', view.queue], ['Priority', view.priority],
      ['Reason', view.reason], ['Exit code', view.exit_code],
      ['GPUs', view.gpus ? `${view.gpus}${view.gpu_ids?.length ? ` (${view.gpu_ids.join(', ')})` : ''}` : '0'],
      ['Executor', view.executor],
      ['Attempt', view.attempt ? `${view.attempt} (${view.restarts} restarts, ${view.preemptions} preemptions)` : null],
      ['Epoch', p.epoch != null ? `${number(p.epoch, 2)}${p.total_epochs ? `/${p.total_epochs}` : ''}` : null],
      ['Steps/s', number(p.steps_per_second, 2)],
      ['Samples/s', number(p.samples_per_second, 1)],
      ['Last report', p.last_report_at ? `${age(p.last_report_at)} ago` : null],
      ['Created', dateTime(view.created_at)],
      ['Started', dateTime(view.started_at)],
      ['Finished', dateTime(view.finished_at)],
    ];
    const metrics = Object.entries(p.metrics || {});
    if (metrics.length) rows.push(['Metrics', metrics.map(([k, v]) => `${k} ${metric(v)}`).join(', ')]);
    this.details.replaceChildren(...rows
      .filter(([, v]) => v != null && v !== '')
      .flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, String(v))]));

    this.charts?.addStepsPerSecond(p.step, p.steps_per_second);
  }

  addEvents(events) {
    for (const event of events) this.events.set(event.id, event);
    const all = [...this.events.values()].sort((a, b) => b.id - a.id);
    this.charts?.setEvents(all);
    // Commands run in the job (exec, ssh) are audited one event each: a busy
    // session would push what happened to the job itself off the list, so
    // they are counted in one line above it instead.
    const audit = (e) => e.type === 'Exec' || e.type === 'ExecEnded';
    const execs = all.filter((e) => e.type === 'Exec');
    const newest = all.filter((e) => !audit(e)).slice(0, MAX_EVENTS);
    const rows = newest.map((e) => el('li', {},
      el('time', { datetime: e.time, title: dateTime(e.time) }, clock(e.time)),
      el('span', { class: 'event-type' }, e.type),
      el('span', {}, e.message)));
    if (execs.length) {
      rows.unshift(el('li', { class: 'exec-summary' },
        el('time', { datetime: execs[0].time, title: dateTime(execs[0].time) }, clock(execs[0].time)),
        el('span', { class: 'event-type' }, 'Exec'),
        el('span', {}, `${execs.length} ${execs.length === 1 ? 'command' : 'commands'} run in the job; the latest: ${execs[0].message}`)));
    }
    if (!rows.length) rows.push(el('li', { class: 'muted' }, 'No events.'));
    this.eventList.replaceChildren(...rows);
  }

  // What the job produced (checkpoints, models, with their step and metrics)
  // and the versions it read.
  async refreshArtifacts(signal) {
    const name = this.name;
    let listed;
    try {
      listed = await request(`${jobPath(name)}/artifacts`, { signal });
    } catch (error) {
      if (error.status === 404 || error.status === 503) return;
      throw error;
    }
    if (name !== this.name) return;
    const text = JSON.stringify(listed);
    if (text === this.artifactText) return;
    this.artifactText = text;
    const rows = [
      ...(listed.produced || []).map((a) => el('tr', { 'data-artifact': a.ref },
        el('td', {}, 'made'), el('td', {}, artifactLink(a.name, a.version, a.ref)), el('td', {}, a.kind), el('td', {}, a.state),
        el('td', {}, a.producer?.step != null ? `step ${a.producer.step}` : ''),
        el('td', {}, Object.entries(a.metrics || {}).map(([k, v]) => `${k} ${metric(v)}`).join(', ')))),
      ...(listed.used || []).map((u) => el('tr', { 'data-artifact': u.artifact },
        el('td', {}, 'read'), el('td', {}, artifactLink(u.name, u.version, u.artifact)), el('td', {}), el('td', {}),
        el('td', {}, u.attempt != null ? `attempt ${u.attempt}` : ''), el('td', {}))),
    ];
    this.artifacts.replaceChildren(...(rows.length ? rows
      : [el('tr', {}, el('td', { class: 'muted' }, 'None.'))]));
  }

  async refreshLogs(signal) {
    await this.refreshArtifacts(signal);
    const name = this.name;
    let text;
    try {
      text = await request(`${jobPath(name)}/logs?tail=${LOG_LINES}`, { signal, text: true });
    } catch (error) {
      if (error.status !== 404) throw error;
      text = '';
    }
    if (name !== this.name) return;
    const lines = text.split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    const tail = lines.slice(-LOG_LINES).join('\n') || '(no output yet)';
    if (tail !== this.logText) {
      const atBottom = this.logs.scrollTop + this.logs.clientHeight >= this.logs.scrollHeight - 4;
      this.logText = tail;
      this.logs.textContent = tail;
      if (atBottom) this.logs.scrollTop = this.logs.scrollHeight;
    }
    // An ended job's output no longer changes: one last read is enough.
    if (this.view && ENDED_STATES.has(this.view.state)) this.logPoll?.close();
  }

  async stop() {
    const name = this.name;
    this.stopping = true;
    this.stopButton.disabled = true;
    this.showError('');
    try {
      const view = await request(`${jobPath(name)}/stop`, { method: 'POST', body: { reason: 'stopped from the dashboard' } });
      if (name !== this.name) return;
      this.stopping = false;
      this.showJob(view);
      this.onJob(view);
    } catch (error) {
      if (name !== this.name) return;
      this.stopping = false;
      this.showError(`Stop failed: ${error.message}`);
      if (this.view) this.showJob(this.view);
    }
  }
}
