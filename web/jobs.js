// The jobs list (#/jobs) and, for #/jobs/NAME, the job's side panel.
//
// Built for many jobs (10,000+): jobs live in a Map by name that stream
// updates patch; filtering and sorting run at most once per animation frame,
// and only the rows in view (plus a few) exist in the DOM, positioned over a
// spacer as tall as the whole list. Rows are recycled, cells patched in place.
//
// Sorting: a click on a column header sorts by it (again: the other way);
// jobs that compare equal keep the default order (newest first, then by
// name), and jobs without a value (no step yet, no ETA) go last either way.

import {
  ENDED_STATES, HEALTHS, JOB_STATES, age, barTone, barWidth, count as formatCount, duration, el, metric, percent, stepOf,
} from './format.js';
import { watchJobs } from './live.js';

const ROW_HEIGHT = 30;  // px; must match .jobs-table .row in style.css
const OVERSCAN = 6;

const COLUMNS = [
  ['name', 'Name'], ['team', 'Team'], ['state', 'State'], ['health', 'Health'],
  ['progress', 'Progress'], ['step', 'Step'], ['eta', 'ETA'], ['loss', 'Loss'],
  ['gpus', 'GPUs'], ['age', 'Age'], ['pending', 'Pending reason'],
];

const finite = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const stateRank = new Map(JOB_STATES.map((s, i) => [s, i]));
const healthRank = new Map(HEALTHS.map((h, i) => [h, i]));
// Each column's sort key (null: no value, sorted last); `age` sorts by
// creation time, newest first when ascending, as the column reads.
const SORT_KEYS = {
  name: (j) => j.name,
  team: (j) => j.team || null,
  state: (j) => stateRank.get(j.state) ?? null,
  health: (j) => healthRank.get(j.health) ?? null,
  progress: (j) => finite(j.progress?.percent),
  step: (j) => finite(j.progress?.step),
  eta: (j) => (ENDED_STATES.has(j.state) ? null : finite(j.progress?.eta_seconds)),
  loss: (j) => finite(j.progress?.metrics?.loss),
  gpus: (j) => j.gpus ?? 0,
  age: (j) => j.created_at || null,
  pending: (j) => j.pending_reason || null,
};
const DEFAULT_SORT = { key: 'age', descending: false };

// Newest first, then by name: the order of equal keys.
function defaultOrder(a, b) {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? 1 : -1;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

export function sortJobs(list, { key, descending }) {
  const keyOf = SORT_KEYS[key] || SORT_KEYS.age;
  // age ascending means newest first: the reverse of creation time.
  const flip = (key === 'age') !== descending ? -1 : 1;
  const decorated = list.map((job) => ({ job, k: keyOf(job) }));
  decorated.sort((a, b) => {
    if (a.k !== b.k) {
      if (a.k === null) return 1;
      if (b.k === null) return -1;
      return (a.k < b.k ? -1 : 1) * flip;
    }
    return defaultOrder(a.job, b.job);
  });
  return decorated.map((d) => d.job);
}

export function createJobsView(container, { setStatus }) {
  const jobs = new Map();
  const teams = new Set();
  let rows = [];  // the filtered, sorted views
  let dataChanged = true;
  let frame = 0;
  let selected = null;
  let sort = { ...DEFAULT_SORT };

  const search = el('input', { type: 'search', class: 'search', placeholder: 'Search by name', 'aria-label': 'Search by name' });
  const stateFilter = select('state', 'All states', [['active', 'Active'], ...JOB_STATES.map((s) => [s, s])]);
  const teamFilter = select('team', 'All teams', []);
  const healthFilter = select('health', 'All health', HEALTHS.map((h) => [h, h]));
  const count = el('span', { class: 'count muted' });
  const spacer = el('div', { class: 'spacer rows' });
  const empty = el('div', { class: 'empty muted', hidden: true });
  // The header row sits inside the scroller (sticky), so it shares the rows' width.
  const head = el('div', { class: 'row head', role: 'row' },
    COLUMNS.map(([key, title]) => el('div', {
      class: `cell ${key} sortable`, role: 'columnheader', tabindex: '0', dataset: { sort: key },
      title: `Sort by ${title.toLowerCase()}`,
    }, title)));
  const showSort = () => {
    for (const cell of head.children) {
      cell.setAttribute('aria-sort', cell.dataset.sort === sort.key ? (sort.descending ? 'descending' : 'ascending') : 'none');
    }
  };
  showSort();
  const sortBy = (key) => {
    sort = sort.key === key ? { key, descending: !sort.descending } : { key, descending: false };
    showSort();
    refilter();
  };
  head.addEventListener('click', (event) => {
    const cell = event.target.closest('[data-sort]');
    if (cell) sortBy(cell.dataset.sort);
  });
  head.addEventListener('keydown', (event) => {
    const cell = event.target.closest('[data-sort]');
    if (cell && (event.key === 'Enter' || event.key === ' ')) {
      event.preventDefault();
      sortBy(cell.dataset.sort);
    }
  });
  const scroller = el('div', { class: 'vscroll', tabindex: '0' }, head, spacer, empty);
  const shown = new Map();  // index in `rows` -> the row element showing it
  const spare = [];         // row elements not in use

  container.replaceChildren(el('section', { class: 'view jobs-view' },
    el('div', { class: 'toolbar' }, search, stateFilter, teamFilter, healthFilter, count),
    el('div', { class: 'table jobs-table', role: 'table' }, scroller)));

  // The side panel's code (with the charts) loads when a job is first opened.
  let panel = null;
  let panelLoading = null;
  let destroyed = false;
  const loadPanel = () => (panelLoading ??= import('./job_panel.js').then(({ JobPanel }) => {
    if (destroyed) return null;
    panel = new JobPanel(document.getElementById('job-panel'), {
      onClose: () => { location.hash = '#/jobs'; },
      onJob: (view) => {
        jobs.set(view.name, view);
        dataChanged = true;
        schedule();
      },
      onStatus: () => {},
    });
    return panel;
  }));

  const refilter = () => { dataChanged = true; schedule(); };
  search.addEventListener('input', refilter);
  for (const s of [stateFilter, teamFilter, healthFilter]) s.addEventListener('change', refilter);
  scroller.addEventListener('scroll', schedule, { passive: true });
  scroller.addEventListener('click', (event) => {
    const row = event.target.closest('[data-job]');
    if (row) location.hash = `#/jobs/${encodeURIComponent(row.dataset.job)}`;
  });
  scroller.addEventListener('keydown', (event) => {
    if (event.key !== 'Enter') return;
    const row = event.target.closest('[data-job]');
    if (row) location.hash = `#/jobs/${encodeURIComponent(row.dataset.job)}`;
  });
  const onKey = (event) => { if (event.key === 'Escape' && selected) location.hash = '#/jobs'; };
  document.addEventListener('keydown', onKey);
  const resize = new ResizeObserver(schedule);
  resize.observe(scroller);
  const ageTimer = setInterval(schedule, 1000);  // the AGE column

  const watch = watchJobs({
    onSnapshot(list) {
      performance.mark('headway:jobs-snapshot');
      jobs.clear();
      for (const job of list) jobs.set(job.name, job);
      noteTeams(list);
      refilter();
    },
    onUpdate(list) {
      for (const job of list) jobs.set(job.name, job);
      noteTeams(list);
      refilter();
    },
    onDeleted(names) {
      for (const name of names) jobs.delete(name);
      refilter();
    },
    onStatus: setStatus,
  });

  function noteTeams(list) {
    const before = teams.size;
    for (const job of list) teams.add(job.team);
    if (teams.size === before) return;
    const current = teamFilter.value;
    teamFilter.replaceChildren(el('option', { value: '' }, 'All teams'),
      ...[...teams].sort().map((t) => el('option', { value: t }, t)));
    teamFilter.value = current;
  }

  function schedule() {
    if (!frame) frame = requestAnimationFrame(flush);
  }

  function flush() {
    frame = 0;
    if (dataChanged) {
      dataChanged = false;
      rows = filtered();
      spacer.style.height = `${rows.length * ROW_HEIGHT}px`;
      count.textContent = summary();
      empty.hidden = rows.length > 0;
      empty.textContent = jobs.size ? 'No jobs match these filters.' : 'No jobs yet. Submit one with: headway submit -f job.yaml';
    }
    renderWindow();
  }

  function filtered() {
    const text = search.value.trim().toLowerCase();
    const state = stateFilter.value;
    const team = teamFilter.value;
    const health = healthFilter.value;
    const out = [];
    for (const job of jobs.values()) {
      if (state === 'active' ? ENDED_STATES.has(job.state) : state && job.state !== state) continue;
      if (team && job.team !== team) continue;
      if (health && job.health !== health) continue;
      if (text && !job.name.toLowerCase().includes(text)) continue;
      out.push(job);
    }
    if (sort.key === DEFAULT_SORT.key && sort.descending === DEFAULT_SORT.descending) return out.sort(defaultOrder);
    return sortJobs(out, sort);
  }

  function summary() {
    const byState = new Map();
    for (const job of jobs.values()) byState.set(job.state, (byState.get(job.state) || 0) + 1);
    const parts = JOB_STATES.filter((s) => byState.get(s)).map((s) => `${formatCount(byState.get(s))} ${s.toLowerCase()}`);
    const shown = rows.length === jobs.size ? `${formatCount(jobs.size)} jobs` : `${formatCount(rows.length)} of ${formatCount(jobs.size)} jobs`;
    return parts.length ? `${shown} \u00b7 ${parts.join(', ')}` : shown;
  }

  // Rows that stay in view keep their element (and content); only rows that
  // come into view are filled, each positioned absolutely at its index.
  function renderWindow() {
    const height = scroller.clientHeight || 600;
    const top = scroller.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(rows.length, Math.ceil((top + height) / ROW_HEIGHT) + OVERSCAN);
    for (const [index, row] of shown) {
      if (index >= first && index < last) continue;
      shown.delete(index);
      row.element.hidden = true;
      delete row.element.dataset.job;  // a hidden row must not answer for a job
      delete row.element.dataset.index;
      row.cache.job = null;
      spare.push(row);
    }
    const now = Date.now();
    for (let index = first; index < last; index++) {
      let row = shown.get(index);
      if (!row) {
        row = spare.pop();
        if (!row) {
          row = makeRow();
          spacer.append(row.element);
        }
        row.element.hidden = false;
        row.element.style.transform = `translateY(${index * ROW_HEIGHT}px)`;
        row.element.dataset.index = String(index);
        shown.set(index, row);
      }
      fillRow(row, rows[index], now, selected);
    }
  }

  function openPanel(name) {
    selected = name || null;
    if (selected) {
      const wanted = selected;
      loadPanel().then((loaded) => {
        if (loaded && selected === wanted) loaded.open(wanted, jobs.get(wanted));
      }, (error) => {
        panelLoading = null;  // the next open tries again
        console.error('headway: could not load the job panel', error);
      });
    } else {
      panel?.close();
    }
    schedule();
  }

  return {
    update(arg) { openPanel(arg); },
    destroy() {
      destroyed = true;
      watch.close();
      panel?.close();
      cancelAnimationFrame(frame);
      clearInterval(ageTimer);
      resize.disconnect();
      document.removeEventListener('keydown', onKey);
      setStatus('');
    },
  };
}

function select(name, allLabel, options) {
  return el('select', { class: `filter-${name}`, 'aria-label': allLabel },
    el('option', { value: '' }, allLabel),
    ...options.map(([value, label]) => el('option', { value }, label)));
}

function makeRow() {
  const c = {};
  const cell = (key, ...children) => (c[key] = el('div', { class: `cell ${key}`, role: 'cell' }, ...children));
  c.stateBadge = el('span', { class: 'badge' });
  c.healthBadge = el('span', { class: 'badge' });
  c.fill = el('span', { class: 'bar-fill' });
  c.pct = el('span', { class: 'pct' });
  const element = el('div', { class: 'row', role: 'row', tabindex: '-1' },
    cell('name'), cell('team'), cell('state', c.stateBadge), cell('health', c.healthBadge),
    cell('progress', el('span', { class: 'bar' }, c.fill), c.pct),
    cell('step'), cell('eta'), cell('loss'), cell('gpus'), cell('age'), cell('pending'));
  return { element, c, cache: {} };
}

// Patches only what changed since the row last showed something.
function fillRow(row, job, now, selected) {
  const { c, cache } = row;
  const p = job.progress || {};
  const set = (key, node, value) => {
    if (cache[key] !== value) {
      cache[key] = value;
      node.textContent = value;
    }
  };
  if (cache.job !== job.name) {
    cache.job = job.name;
    row.element.dataset.job = job.name;
    c.name.title = job.name;
  }
  row.element.classList.toggle('selected', job.name === selected);
  set('name', c.name, job.name);
  set('team', c.team, job.team || '');
  set('state', c.stateBadge, job.state);
  if (cache.stateClass !== job.state) {
    cache.stateClass = job.state;
    c.stateBadge.className = `badge state-${String(job.state).toLowerCase()}`;
  }
  set('health', c.healthBadge, job.health || '');
  if (cache.healthClass !== job.health) {
    cache.healthClass = job.health;
    c.healthBadge.className = `badge health-${String(job.health || 'none').toLowerCase()}`;
  }
  if (cache.healthReason !== job.health_reason) {
    cache.healthReason = job.health_reason;
    c.health.title = job.health_reason || '';
  }
  const pct = p.percent;
  const width = barWidth(pct);
  if (cache.width !== width) {
    cache.width = width;
    c.fill.style.width = width;
  }
  const tone = barTone(job);
  if (cache.tone !== tone) {
    cache.tone = tone;
    c.fill.className = `bar-fill ${tone}`;
  }
  set('pct', c.pct, percent(pct));
  set('step', c.step, stepOf(p));
  set('eta', c.eta, ENDED_STATES.has(job.state) ? '' : duration(p.eta_seconds));
  set('loss', c.loss, metric(p.metrics?.loss));
  set('gpus', c.gpus, String(job.gpus ?? 0));
  set('age', c.age, age(job.created_at, now));
  set('pendingText', c.pending, job.pending_reason || '');
  if (cache.pendingTitle !== job.pending_reason) {
    cache.pendingTitle = job.pending_reason;
    c.pending.title = job.pending_reason || '';
  }
}
