// Queues (#/queues) and nodes (#/nodes): small tables refreshed every 2 s.

import { request } from './api.js';
import { bar, el } from './format.js';
import { poll } from './live.js';

const REFRESH_MS = 2000;

const dash = (v) => (v == null || v === '' ? '-' : String(v));
const jobLink = (name) => el('a', { href: `#/jobs/${encodeURIComponent(name)}` }, name);

// A polled table view: columns are [title, className, cell(item, refresh) -> node|string];
// `refresh()` polls again at once (after an action in a cell).
export function tableView(container, { title, path, key, columns, emptyText, setStatus }) {
  const body = el('tbody');
  const note = el('p', { class: 'muted' });
  container.replaceChildren(el('section', { class: 'view' },
    el('div', { class: 'toolbar' }, el('h2', {}, title), note),
    el('table', { class: 'grid' },
      el('thead', {}, el('tr', {}, columns.map(([t, cls]) => el('th', { class: cls }, t)))),
      body)));
  let refresher = null;
  const refresh = () => { refresher?.close(); refresher = poll(round, REFRESH_MS); };
  async function round(signal) {
    let items;
    try {
      items = (await request(path, { signal }))[key] || [];
    } catch (error) {
      if (!signal.aborted) note.textContent = `Could not refresh: ${error.message}`;
      throw error;
    }
    note.textContent = '';
    setStatus('live');
    body.replaceChildren(...(items.length
      ? items.map((item) => el('tr', { dataset: { name: item.name } },
        columns.map(([, cls, cell]) => el('td', { class: cls }, cell(item, refresh)))))
      : [el('tr', {}, el('td', { class: 'muted', colSpan: columns.length }, emptyText))]));
  }
  refresh();
  return { update() {}, destroy() { refresher.close(); setStatus(''); } };
}

export function createQueuesView(container, { setStatus }) {
  return tableView(container, {
    title: 'Queues',
    path: '/api/v1/queues',
    key: 'queues',
    emptyText: 'No queues.',
    setStatus,
    columns: [
      ['Name', 'name', (q) => q.name],
      ['Executor', '', (q) => q.executor],
      ['GPUs', 'usage', (q) => (q.nominal_gpus == null
        ? dash(q.gpus_in_use)
        : bar(q.nominal_gpus ? q.gpus_in_use / q.nominal_gpus : (q.gpus_in_use ? 1 : 0), `${q.gpus_in_use}/${q.nominal_gpus}`))],
      ['Borrow', 'num', (q) => dash(q.borrowing_limit)],
      ['Weight', 'num', (q) => dash(q.weight)],
      ['Running', 'num', (q) => dash(q.running)],
      ['Pending', 'num', (q) => dash(q.pending)],
      ['Next', '', (q) => (q.next_job ? jobLink(q.next_job) : '-')],
      ['Why it waits', 'reason', (q) => dash(q.pending_reason)],
    ],
  });
}

export function createNodesView(container, { setStatus }) {
  return tableView(container, {
    title: 'Nodes',
    path: '/api/v1/nodes',
    key: 'nodes',
    emptyText: 'No nodes: the server schedules no local GPUs.',
    setStatus,
    columns: [
      ['Name', 'name', (n) => n.name],
      ['Executor', '', (n) => dash(n.executor)],
      ['GPUs', 'num', (n) => dash(n.gpus)],
      ['In use', 'usage', (n) => bar(n.gpus ? n.gpus_in_use / n.gpus : 0, `${n.gpus_in_use}/${n.gpus}`)],
      ['Free', 'num', (n) => dash(n.gpus - n.gpus_in_use)],
      ['Jobs', 'jobs', (n) => (n.jobs?.length ? n.jobs.flatMap((j, i) => (i ? [', ', jobLink(j)] : [jobLink(j)])) : '-')],
    ],
  });
}
