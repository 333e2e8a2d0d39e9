// Workflows (#/workflows) and one workflow (#/workflows/NAMESPACE/NAME),
// from the Argo Server routes the server answers (/api/v1/workflows/...).
//
// The list is a table, newest first. A workflow shows its phase, message
// and progress, buttons for the lifecycle routes (suspend, resume, stop,
// terminate, retry, delete) and its nodes as a graph on a canvas (dag.js):
// a click on a node shows its details beside the graph; on a Pod node it
// also opens the job's side panel (job_panel.js), the Headway job that ran it.
//
// Both refresh every 2 s (there is no event stream for workflows). The graph
// is laid out again only when its nodes or edges change; a phase change
// only redraws it. Every value from the server is set as text (el()) or
// drawn on the canvas, never parsed as markup.

import { request } from './api.js';
import { DagCanvas, layoutKey, layoutWorkflow, nodeNote } from './dag.js';
import { age, badge, dateTime, duration, el, percent } from './format.js';
import { JobPanel } from './job_panel.js';
import { poll } from './live.js';

const REFRESH_MS = 2000;
const PAGE_SIZE = 500;
const DEFAULT_NAMESPACE = 'default';
export const TEAM_LABEL = 'headway.dev/team';
const ENDED_PHASES = new Set(['Succeeded', 'Failed', 'Error']);

const listPath = (ns) => `/api/v1/workflows/${encodeURIComponent(ns)}`;
const wfPath = (ns, name) => `${listPath(ns)}/${encodeURIComponent(name)}`;
export const workflowHref = (ns, name) => `#/workflows/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`;

// Seconds from start to finish, or to now while it runs.
function elapsed(start, finish, now = Date.now()) {
  const a = Date.parse(start);
  if (Number.isNaN(a)) return null;
  const b = finish ? Date.parse(finish) : now;
  return Number.isNaN(b) ? null : (b - a) / 1000;
}

const started = (wf) => wf.status?.startedAt || wf.metadata?.creationTimestamp;

// "NAMESPACE/NAME" (or "NAME": the default namespace) -> {ns, name}.
export function parseWorkflowRoute(arg) {
  const text = String(arg || '');
  const slash = text.indexOf('/');
  if (slash < 0) return { ns: DEFAULT_NAMESPACE, name: text };
  return { ns: text.slice(0, slash) || DEFAULT_NAMESPACE, name: text.slice(slash + 1) };
}

export function createWorkflowsView(container, { setStatus }) {
  let current = null;
  let refresher = null;
  let render = null;

  function show(arg) {
    refresher?.close();
    render?.dispose?.();
    current = arg || '';
    render = current ? detail(container, parseWorkflowRoute(current)) : list(container);
    refresher = poll(async (signal) => {
      await render(signal);
      setStatus('live');
    }, REFRESH_MS);
  }

  return {
    update(arg) { if ((arg || '') !== current || !refresher) show(arg); },
    destroy() { refresher?.close(); render?.dispose?.(); setStatus(''); },
  };
}

// Every page of the list (listOptions.continue), newest first.
async function listWorkflows(ns, signal) {
  const items = [];
  let next = '';
  for (let i = 0; i < 100; i++) {
    const query = `listOptions.limit=${PAGE_SIZE}${next ? `&listOptions.continue=${encodeURIComponent(next)}` : ''}`;
    const page = await request(`${listPath(ns)}?${query}`, { signal });
    items.push(...(page.items || []));
    next = page.metadata?.continue || '';
    if (!next) break;
  }
  const time = (wf) => Date.parse(wf.metadata?.creationTimestamp || started(wf) || '') || 0;
  return items.sort((a, b) => (time(b) - time(a)) || String(a.metadata?.name).localeCompare(String(b.metadata?.name)));
}

function list(container) {
  const body = el('tbody');
  const note = el('p', { class: 'panel-error', hidden: true });
  const count = el('span', { class: 'count muted' });
  const teams = new Set();
  let items = [];
  const teamFilter = el('select', { class: 'filter-team', 'aria-label': 'All teams', onchange: () => show() },
    el('option', { value: '' }, 'All teams'));
  container.replaceChildren(el('section', { class: 'view workflows-view' },
    el('div', { class: 'toolbar' }, el('h2', {}, 'Workflows'), teamFilter, count),
    note,
    el('table', { class: 'grid workflows' },
      el('thead', {}, el('tr', {}, [['Name'], ['Team'], ['Phase'], ['Progress', 'num'], ['Started'], ['Duration', 'num']]
        .map(([t, cls]) => el('th', { class: cls }, t)))),
      body)));
  const teamOf = (wf) => wf.metadata?.labels?.[TEAM_LABEL] || '';
  // The team filter is applied here: the server's label selector does not
  // match the team it sets itself on workflows submitted without one.
  function show() {
    for (const wf of items) {
      const team = teamOf(wf);
      if (team && !teams.has(team)) {
        teams.add(team);
        const options = [...teams].sort().map((t) => el('option', { value: t }, t));
        const chosen = teamFilter.value;
        teamFilter.replaceChildren(el('option', { value: '' }, 'All teams'), ...options);
        teamFilter.value = chosen;
      }
    }
    const team = teamFilter.value;
    const shown = team ? items.filter((wf) => teamOf(wf) === team) : items;
    count.textContent = `${shown.length} workflow${shown.length === 1 ? '' : 's'}`;
    const now = Date.now();
    body.replaceChildren(...(shown.length ? shown.map((wf) => {
      const { name, namespace = DEFAULT_NAMESPACE, labels = {} } = wf.metadata || {};
      const status = wf.status || {};
      const start = started(wf);
      return el('tr', { dataset: { workflow: name } },
        el('td', { class: 'name' }, el('a', { href: workflowHref(namespace, name) }, name)),
        el('td', {}, labels[TEAM_LABEL] || '-'),
        el('td', {}, phaseBadge(wf)),
        el('td', { class: 'num progress' }, status.progress || '-'),
        el('td', { title: dateTime(start) }, start ? `${age(start, now)} ago` : '-'),
        el('td', { class: 'num' }, duration(elapsed(start, status.finishedAt, now)) || '-'));
    }) : [el('tr', {}, el('td', { class: 'muted', colSpan: 6 }, team ? `No workflows of team ${team}.`
      : 'No workflows. Submit one with the Argo CLI, Hera, or POST /api/v1/workflows/NAMESPACE.'))]));
  }
  return async (signal) => {
    try {
      items = await listWorkflows(DEFAULT_NAMESPACE, signal);
    } catch (error) {
      if (!signal.aborted) {
        note.textContent = `Could not refresh: ${error.message}`;
        note.hidden = false;
      }
      throw error;
    }
    note.hidden = true;
    show();
  };
}

// The phase, "Suspended" while a running workflow is suspended.
function phaseBadge(wf) {
  const phase = wf.status?.phase || 'Pending';
  if (wf.spec?.suspend && !ENDED_PHASES.has(phase)) return el('span', { class: 'badge phase-suspended', title: phase }, 'Suspended');
  return badge('phase', phase);
}

const ACTIONS = [
  // [label, route, when it applies (workflow) -> bool, danger]
  ['Suspend', 'suspend', (wf, ended) => !ended && !wf.spec?.suspend],
  ['Resume', 'resume', (wf, ended) => !ended && Boolean(wf.spec?.suspend)],
  ['Stop', 'stop', (wf, ended) => !ended, true],
  ['Terminate', 'terminate', (wf, ended) => !ended, true],
  ['Retry', 'retry', (wf, ended) => ended && wf.status?.phase !== 'Succeeded'],
  ['Delete', 'delete', () => true, true],
];

function detail(container, { ns, name }) {
  const header = el('div', { class: 'wf-header' });
  // An action's failure and a refresh's failure are shown apart, so the next
  // refresh cannot wipe out what the user's own click was answered.
  const error = el('p', { class: 'panel-error wf-error', role: 'alert', hidden: true });
  const refreshError = el('p', { class: 'panel-error wf-refresh-error', role: 'status', hidden: true });
  const buttons = new Map(ACTIONS.map(([label, route, , danger]) => [route, el('button', {
    type: 'button', class: danger ? 'danger' : null, dataset: { action: route }, onclick: () => act(route),
  }, label)]));
  const canvas = el('canvas', { class: 'dag-canvas', tabindex: '0', 'aria-label': `Nodes of workflow ${name}` });
  const info = el('aside', { class: 'wf-node', hidden: true, 'aria-label': 'Node details' });
  const legend = el('span', { class: 'dag-stats muted' });
  const dag = new DagCanvas(canvas, { onSelect: (id) => selectNode(id) });
  const panel = new JobPanel(document.getElementById('job-panel'), {
    onClose: () => panel.close(), onJob: () => {}, onStatus: () => {},
  });
  // For scripts and tests: where a node is on screen, by id or display name.
  canvas.locateNode = (key) => dag.locate(findNode(key));

  container.replaceChildren(el('section', { class: 'view wf-detail' },
    el('div', { class: 'toolbar' },
      el('a', { href: '#/workflows', class: 'back' }, '\u2190 Workflows'),
      el('h2', { class: 'wf-title', title: name }, name),
      el('span', { class: 'wf-phase' }),
      el('span', { class: 'grow' }),
      el('span', { class: 'wf-actions' }, [...buttons.values()])),
    error, refreshError, header,
    el('div', { class: 'dag-toolbar' },
      el('button', { type: 'button', class: 'chart-toggle', title: 'Zoom in (+)', onclick: () => dag.zoom(1.25) }, '+'),
      el('button', { type: 'button', class: 'chart-toggle', title: 'Zoom out (\u2212)', onclick: () => dag.zoom(0.8) }, '\u2212'),
      el('button', { type: 'button', class: 'chart-toggle dag-fit', title: 'Fit the whole graph (0)', onclick: () => dag.fit() }, 'Fit'),
      el('span', { class: 'muted' }, 'Drag to pan, wheel to zoom, click a node for its details.'),
      legend),
    el('div', { class: 'dag-box' }, info, canvas)));

  let wf = null;
  let key = null;
  let selected = null;
  let lastJob = null;
  let confirmDelete = 0;
  let gone = false;

  function findNode(k) {
    const nodes = wf?.status?.nodes || {};
    if (nodes[k]) return k;
    for (const [id, n] of Object.entries(nodes)) if (n.displayName === k) return id;
    return null;
  }

  function selectNode(id) {
    selected = id;
    dag.select(id);
    showNode();
    const job = wf?.status?.nodes?.[id]?.headway?.job;
    if (job) {
      lastJob = job;
      panel.open(job);
      // Keep the node in view, left of the panel.
      const panelLeft = document.getElementById('job-panel').getBoundingClientRect().left;
      dag.keepLeftOf(id, panelLeft - 24);
    } else if (panel.name) {
      panel.close();
    }
  }

  function showNode() {
    const node = selected && wf?.status?.nodes?.[selected];
    if (!node) {
      info.hidden = true;
      return;
    }
    const params = (list) => (list || []).map((p) => `${p.name}=${p.value ?? p.default ?? ''}`).join('\n');
    const h = node.headway || {};
    const out = node.outputs || {};
    const rows = [
      ['Type', node.type],
      ['Template', node.templateName],
      ['Job', h.job ? el('a', { href: `#/jobs/${encodeURIComponent(h.job)}`, class: 'job-link', dataset: { job: h.job }, onclick: (e) => { e.preventDefault(); panel.open(h.job); } }, h.job) : null],
      ['Progress', node.progress],
      ['Percent', percent(h.percent)],
      ['ETA', h.eta_seconds != null && !ENDED_PHASES.has(node.phase) ? duration(h.eta_seconds) : null],
      ['Health', h.health ? badge('health', h.health) : null],
      ['Started', dateTime(node.startedAt)],
      ['Finished', dateTime(node.finishedAt)],
      ['Duration', node.startedAt ? duration(elapsed(node.startedAt, node.finishedAt)) : null],
      ['Inputs', params(node.inputs?.parameters)],
      ['Outputs', params(out.parameters)],
      ['Result', out.result],
      ['Exit code', out.exitCode],
      ['Node id', node.id],
    ].filter(([, v]) => v != null && v !== '');
    info.dataset.node = node.id;
    info.hidden = false;
    info.replaceChildren(...[
      el('div', { class: 'wf-node-top' },
        el('h3', { title: node.name }, node.displayName || node.name),
        el('button', { class: 'close', type: 'button', title: 'Close', 'aria-label': 'Close', onclick: () => { selected = null; dag.select(null); showNode(); } }, '\u00d7')),
      el('div', { class: 'status-line' }, badge('phase', node.phase), el('span', { class: 'muted' }, nodeNote(node))),
      node.message ? el('div', { class: 'note wf-node-message' }, node.message) : null,
      el('dl', { class: 'details' }, rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', { class: k === 'Inputs' || k === 'Outputs' || k === 'Result' ? 'pre' : null }, v instanceof Node ? v : String(v))])),
    ].filter(Boolean));
  }

  function showWorkflow() {
    const status = wf.status || {};
    const phase = status.phase || 'Pending';
    const ended = ENDED_PHASES.has(phase);
    container.querySelector('.wf-phase').replaceChildren(phaseBadge(wf));
    for (const [label, route, applies] of ACTIONS) {
      const button = buttons.get(route);
      button.hidden = !applies(wf, ended);
      if (route === 'delete' && !confirmDelete) button.textContent = label;
    }
    const h = status.headway || {};
    const [done, total] = String(status.progress || '').split('/').map(Number);
    const fraction = Number.isFinite(h.percent) ? h.percent / 100 : total ? done / total : 0;
    const labels = wf.metadata?.labels || {};
    header.replaceChildren(...[
      el('div', { class: 'status-line' },
        el('span', { class: 'wf-progress' }, el('span', { class: 'bar' }, el('span', { class: `bar-fill tone-${phase === 'Succeeded' ? 'succeeded' : ended ? 'failed' : 'normal'}`, style: `width:${Math.max(0, Math.min(100, fraction * 100)).toFixed(1)}%` })),
          ` ${status.progress || '-'}${Number.isFinite(h.percent) ? ` \u00b7 ${percent(h.percent)}` : ''}`),
        h.eta_seconds != null && !ended ? el('span', {}, `ETA ${duration(h.eta_seconds)}`) : null,
        h.health ? badge('health', h.health) : null,
        el('span', { class: 'muted' }, [
          labels[TEAM_LABEL] ? `team ${labels[TEAM_LABEL]}` : null,
          started(wf) ? `started ${dateTime(started(wf))}` : null,
          status.finishedAt ? `finished ${dateTime(status.finishedAt)}` : null,
          started(wf) ? `took ${duration(elapsed(started(wf), status.finishedAt))}` : null,
        ].filter(Boolean).join(' \u00b7 '))),
      status.message ? el('div', { class: 'note wf-message' }, status.message) : null,
    ].filter(Boolean));
  }

  async function act(route) {
    if (route === 'delete' && !confirmDelete) {
      const button = buttons.get('delete');
      button.textContent = 'Delete: sure?';
      confirmDelete = setTimeout(() => { confirmDelete = 0; button.textContent = 'Delete'; }, 4000);
      return;
    }
    clearTimeout(confirmDelete);
    confirmDelete = 0;
    for (const b of buttons.values()) b.disabled = true;
    error.hidden = true;
    try {
      if (route === 'delete') {
        await request(wfPath(ns, name), { method: 'DELETE' });
        gone = true;
        location.hash = '#/workflows';
        return;
      }
      const answer = await request(`${wfPath(ns, name)}/${route}`, { method: 'PUT', body: {} });
      if (answer && answer.metadata) {
        // The answer may lack the nodes: keep the ones we have.
        wf = { ...answer, status: { ...answer.status, nodes: answer.status?.nodes || wf?.status?.nodes } };
        showWorkflow();
      }
    } catch (err) {
      error.textContent = `${route[0].toUpperCase()}${route.slice(1)} failed: ${err.message}`;
      error.hidden = false;
    } finally {
      for (const b of buttons.values()) b.disabled = false;
      if (route === 'delete' && wf) buttons.get('delete').textContent = 'Delete';
    }
  }

  const render = async (signal) => {
    if (gone) return;
    let next;
    try {
      next = await request(wfPath(ns, name), { signal });
    } catch (err) {
      if (!signal.aborted) {
        refreshError.textContent = err.status === 404 ? `No workflow named ${name} in ${ns}. (${err.message})` : `Could not refresh: ${err.message}`;
        refreshError.hidden = false;
      }
      throw err;
    }
    if (signal.aborted) return;
    refreshError.hidden = true;
    wf = next;
    const nodes = wf.status?.nodes || {};
    const k = layoutKey(nodes);
    let layout = null;
    if (k !== key) {
      key = k;
      const templates = [...(wf.spec?.templates || []), ...Object.values(wf.status?.storedTemplates || {})];
      layout = layoutWorkflow(nodes, templates);
      canvas.dataset.layoutMs = layout.ms.toFixed(1);
      legend.textContent = `${Object.keys(nodes).length.toLocaleString()} nodes \u00b7 laid out in ${Math.round(layout.ms)} ms`;
    }
    showWorkflow();
    dag.setData(nodes, layout, wf.status?.headway?.critical_path || []);
    showNode();
    if (selected && !nodes[selected]) selected = null;
  };
  render.dispose = () => {
    clearTimeout(confirmDelete);
    dag.destroy();
    if (lastJob || panel.name) panel.close();
  };
  return render;
}
