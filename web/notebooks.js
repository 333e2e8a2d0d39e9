// Notebooks (#/notebooks): the caller's team's Jupyter notebooks on the pool,
// refreshed every 2 s, with their status, GPUs and idle time, and buttons to
// open (a one-time link from POST /api/v1/notebooks/NAME/login, opened in a
// new tab), stop, or start again. JupyterHub's notebooks are opened through
// the hub, so they have no Open button.

import { request } from './api.js';
import { duration, el } from './format.js';
import { tableView } from './pool.js';

const jobLink = (name) => (name ? el('a', { href: `#/jobs/${encodeURIComponent(name)}` }, name) : '-');

// What a user calls its state: Ready once its server answers.
export function notebookStatus(n) {
  if (n.state !== 'Running') return n.state;
  if (n.ready) return 'Ready';
  return n.job_state === 'Queued' ? 'Queued' : 'Starting';
}

function idleText(n, now = Date.now()) {
  if (!n.idle_since) return '-';
  const idle = duration(Math.max(0, (now - Date.parse(n.idle_since)) / 1000));
  if (!n.cull_at) return idle;
  return `${idle} (culled in ${duration(Math.max(0, (Date.parse(n.cull_at) - now) / 1000))})`;
}

async function open(n, button) {
  // Opened with noopener once the link is known: the notebook's tab starts
  // without a copy of this page's sessionStorage (where the dashboard keeps
  // its sign-in) and without a handle on this window. (A tab opened blank
  // first and pointed at the link later would get both.)
  button.disabled = true;
  try {
    const { url } = await request(`/api/v1/notebooks/${encodeURIComponent(n.name)}/login`, { method: 'POST', body: {} });
    const link = el('a', { href: url, target: '_blank', rel: 'noopener noreferrer' });
    link.click();
  } catch (error) {
    alert(`Could not open ${n.name}: ${error.message}`);
  } finally {
    button.disabled = false;
  }
}

async function act(n, button, refresh, start) {
  button.disabled = true;
  try {
    if (start) await request('/api/v1/notebooks', { method: 'POST', body: { name: n.name } });
    else await request(`/api/v1/notebooks/${encodeURIComponent(n.name)}/stop`, { method: 'POST', body: {} });
  } catch (error) {
    alert(`Could not ${start ? 'start' : 'stop'} ${n.name}: ${error.message}`);
  }
  refresh();
}

function actions(n, refresh) {
  const buttons = [];
  if (n.state === 'Running') {
    if (n.ready && n.url) {
      const openButton = el('button', { type: 'button', class: 'open-notebook' }, 'Open');
      openButton.addEventListener('click', () => open(n, openButton));
      buttons.push(openButton);
    }
    const stop = el('button', { type: 'button', class: 'link stop-notebook' }, 'Stop');
    stop.addEventListener('click', () => act(n, stop, refresh, false));
    buttons.push(stop);
  } else if (!n.jupyterhub_user) {
    const start = el('button', { type: 'button', class: 'link start-notebook' }, 'Start');
    start.addEventListener('click', () => act(n, start, refresh, true));
    buttons.push(start);
  }
  return el('span', { class: 'actions' }, buttons);
}

export function createNotebooksView(container, { setStatus }) {
  return tableView(container, {
    title: 'Notebooks',
    path: '/api/v1/notebooks',
    key: 'notebooks',
    emptyText: 'No notebooks: start one with `headway notebook start NAME`.',
    setStatus,
    columns: [
      ['Name', 'name', (n) => n.name],
      ['Team', '', (n) => n.team],
      ['Status', 'status', (n) => notebookStatus(n)],
      ['Profile', '', (n) => n.profile],
      ['GPUs', 'num', (n) => String(n.gpus)],
      ['Idle', 'idle', (n) => idleText(n)],
      ['Job', '', (n) => jobLink(n.job)],
      ['', 'reason', (n) => (notebookStatus(n) === 'Queued' ? n.pending_reason : n.message) || ''],
      ['', 'actions', (n, refresh) => actions(n, refresh)],
    ],
  });
}
