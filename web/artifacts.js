// Artifacts (#/artifacts): the caller's artifact versions, and for
// #/artifacts/NAME:VERSION one version with its lineage, from
// GET /api/v1/artifacts/NAME/versions/VERSION: what it is (kind, state, size,
// digest, metrics, labels), the job that made it ("Made by", with its state
// and command), the versions that job read ("Made from") and the jobs that
// read this one ("Used by"), each a link to its own view; and the artifact's
// other versions (GET /api/v1/artifacts/NAME) to step between them.
//
// Every value from the server is set as text (el()), never as markup.

import { request } from './api.js';
import { badge, bytes, dateTime, el, metric } from './format.js';
import { poll } from './live.js';

const REFRESH_MS = 3000;

export const artifactPath = (name) => `/api/v1/artifacts/${encodeURIComponent(name)}`;

// "NAME:VERSION" -> {name, version}; a bare NAME means its newest ready version.
export function parseRef(ref) {
  const text = String(ref || '');
  const colon = text.lastIndexOf(':');
  if (colon < 0) return { name: text, version: 'latest' };
  return { name: text.slice(0, colon), version: text.slice(colon + 1) || 'latest' };
}

// The dashboard link of an artifact version: #/artifacts/NAME:VERSION.
export function artifactHref(name, version) {
  return `#/artifacts/${encodeURIComponent(name)}:${encodeURIComponent(String(version))}`;
}

export const artifactLink = (name, version, text = `${name}:${version}`) =>
  el('a', { href: artifactHref(name, version), class: 'artifact-link', dataset: { ref: `${name}:${version}` } }, text);

const jobLink = (name) => el('a', { href: `#/jobs/${encodeURIComponent(name)}`, class: 'job-link', dataset: { job: name } }, name);

// A digest as "sha256:1a2b3c4d5e6f…"; the full value on hover and in the copy.
export function shortDigest(digest, keep = 12) {
  const text = String(digest || '');
  const colon = text.indexOf(':');
  const hex = colon < 0 ? text : text.slice(colon + 1);
  if (hex.length <= keep) return text;
  return `${colon < 0 ? '' : text.slice(0, colon + 1)}${hex.slice(0, keep)}\u2026`;
}

// A command line as a shell would read it: arguments with spaces or quotes are single-quoted.
export function shellLine(args) {
  return (args || []).map((arg) => {
    const s = String(arg);
    return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`;
  }).join(' ');
}

// What a refused read means to the user.
function explain(error, what) {
  if (error.status === 404) return `${what} was not found: it may have been deleted, or the name is wrong. (${error.message})`;
  if (error.status === 403) return `You may not see ${what}: it belongs to another team. (${error.message})`;
  if (error.status === 503) return `This server keeps no artifacts. (${error.message})`;
  return `Could not load ${what}: ${error.message}`;
}

const pairs = (object, sep, format = (v) => v) => Object.entries(object || {}).map(([k, v]) => `${k}${sep}${format(v)}`);

function chips(object, format) {
  const items = pairs(object, format ? ' ' : '=', format);
  return items.length ? el('span', { class: 'chips' }, items.map((text) => el('span', { class: 'chip' }, text))) : null;
}

export function createArtifactsView(container, { setStatus }) {
  const root = el('section', { class: 'view artifact-view' });
  container.replaceChildren(root);
  let refresher = null;
  let shownText = null;
  let current = null;  // the ref shown

  function show(arg) {
    refresher?.close();
    shownText = null;
    current = arg || '';
    if (!current) {
      root.replaceChildren(el('div', { class: 'toolbar' }, el('h2', {}, 'Artifacts'), el('span', { class: 'count muted' })),
        el('p', { class: 'muted loading' }, 'Loading\u2026'));
      refresher = poll((signal) => refreshList(signal, current), REFRESH_MS);
    } else {
      const { name, version } = parseRef(current);
      root.replaceChildren(toolbar(name, version), el('p', { class: 'muted loading' }, 'Loading\u2026'));
      refresher = poll((signal) => refreshVersion(signal, current, name, version), REFRESH_MS);
    }
  }

  function toolbar(name, version) {
    return el('div', { class: 'toolbar' },
      el('a', { class: 'back', href: '#/artifacts' }, '\u2190 Artifacts'),
      el('h2', { class: 'artifact-title', title: `${name}:${version}` }, `${name}:${version}`));
  }

  // Shows `message` in place of the content; the refresher keeps trying.
  function fail(message, head) {
    const text = `error:${message}`;
    if (text === shownText) return;
    shownText = text;
    root.replaceChildren(head, el('p', { class: 'panel-error artifact-error', role: 'alert' }, message));
  }

  async function refreshList(signal, ref) {
    let listed;
    try {
      listed = await request('/api/v1/artifacts', { signal });
    } catch (error) {
      if (signal.aborted || ref !== current) return;
      fail(explain(error, 'the artifacts'), el('div', { class: 'toolbar' }, el('h2', {}, 'Artifacts')));
      if (error.status === 403 || error.status === 404 || error.status === 503) return;
      throw error;
    }
    if (ref !== current) return;
    setStatus('live');
    const items = listed.artifacts || [];
    const text = JSON.stringify(items);
    if (text === shownText) return;
    shownText = text;
    const body = items.length
      ? items.map((a) => el('tr', { dataset: { artifact: a.ref } },
        el('td', { class: 'name' }, artifactLink(a.name, a.version, a.ref)),
        el('td', {}, a.kind), el('td', {}, badge('artifact', a.state)), el('td', { class: 'num' }, bytes(a.size)),
        el('td', {}, a.team), el('td', {}, a.producer?.job ? jobLink(a.producer.job) : '-'),
        el('td', {}, dateTime(a.created_at))))
      : [el('tr', {}, el('td', { class: 'muted', colSpan: 7 }, 'No artifacts yet. Jobs save them with headway.save_artifact().'))];
    root.replaceChildren(
      el('div', { class: 'toolbar' }, el('h2', {}, 'Artifacts'), el('span', { class: 'count muted' }, `${items.length} versions`)),
      el('table', { class: 'grid artifact-list' },
        el('thead', {}, el('tr', {}, ['Version', 'Kind', 'State', 'Size', 'Team', 'Made by', 'Created']
          .map((t) => el('th', { class: t === 'Size' ? 'num' : '' }, t)))),
        el('tbody', {}, body)));
  }

  async function refreshVersion(signal, ref, name, version) {
    let a;
    let versions = null;
    try {
      [a, versions] = await Promise.all([
        request(`${artifactPath(name)}/versions/${encodeURIComponent(version)}`, { signal }),
        // The other versions are a help, not a need: the version shows without them.
        request(artifactPath(name), { signal }).catch((error) => {
          if (signal.aborted) throw error;
          return null;
        }),
      ]);
    } catch (error) {
      if (signal.aborted || ref !== current) return;
      fail(explain(error, `artifact ${name}:${version}`), toolbar(name, version));
      if (error.status === 403 || error.status === 404 || error.status === 503 || error.status === 400) return;
      throw error;
    }
    if (ref !== current) return;
    setStatus('live');
    const text = JSON.stringify([a, versions]);
    if (text === shownText) return;
    shownText = text;
    root.replaceChildren(...renderVersion(a, versions));
  }

  return {
    update(arg) { if (arg !== current || !refresher) show(arg); },
    destroy() { refresher?.close(); refresher = null; setStatus(''); },
  };
}

function renderVersion(a, versions) {
  const lineage = a.lineage || {};
  const producer = a.producer || {};
  const made = lineage.producer;
  const inputs = lineage.inputs || [];
  const usedBy = lineage.used_by || [];

  const copyNote = el('span', { class: 'copy-note muted', 'aria-live': 'polite' });
  const digest = el('span', { class: 'digest' },
    el('code', { class: 'digest-value', title: a.digest, dataset: { digest: a.digest } }, shortDigest(a.digest)),
    a.digest ? el('button', {
      type: 'button', class: 'chart-toggle copy', title: 'Copy the full digest',
      onclick: () => copy(a.digest, copyNote),
    }, 'copy') : null,
    copyNote);

  const facts = [
    ['Kind', a.kind],
    ['State', badge('artifact', a.state)],
    ['Size', a.size != null ? el('span', { title: `${a.size.toLocaleString()} bytes` }, bytes(a.size)) : null],
    ['Digest', a.digest ? digest : null],
    ['Team', a.team],
    ['Metrics', chips(a.metrics, metric)],
    ['Labels', chips(a.labels)],
    ['Created', dateTime(a.created_at)],
    ['Ready', dateTime(a.ready_at)],
    ['Created by', a.created_by],
  ].filter(([, v]) => v != null && v !== '');

  const madeBy = [];
  if (made?.job) {
    const where = [
      producer.step != null ? `step ${producer.step}` : null,
      producer.attempt != null ? `attempt ${producer.attempt}` : null,
      producer.pipeline_node ? `pipeline node ${producer.pipeline_node}` : null,
    ].filter(Boolean).join(', ');
    madeBy.push(el('div', { class: 'made-by' },
      made.state ? jobLink(made.job) : el('span', { class: 'job-gone' }, made.job),
      made.state ? badge('state', made.state) : el('span', { class: 'muted' }, '(deleted, or not visible to you)'),
      where ? el('span', { class: 'muted' }, where) : null));
    if (made.command?.length) madeBy.push(el('pre', { class: 'command', title: 'The job\u2019s command' }, shellLine(made.command)));
    const labels = chips(made.labels);
    if (labels) madeBy.push(el('div', { class: 'made-by-labels' }, el('span', { class: 'muted' }, 'job labels '), labels));
  } else {
    madeBy.push(el('p', { class: 'muted' }, 'No job: this version was recorded from outside a job.'));
  }

  const useTable = (cls, rows, first, empty) => el('table', { class: `artifacts ${cls}` },
    rows.length ? rows.map((u) => el('tr', { dataset: { artifact: u.artifact, job: u.job } },
      el('td', {}, first(u)),
      el('td', {}, u.attempt != null ? `attempt ${u.attempt}` : ''),
      el('td', { class: 'muted', title: dateTime(u.used_at) }, `read ${dateTime(u.used_at)}`)))
      : [el('tr', {}, el('td', { class: 'muted' }, empty))]);

  const out = [
    el('div', { class: 'toolbar' },
      el('a', { class: 'back', href: '#/artifacts' }, '\u2190 Artifacts'),
      el('h2', { class: 'artifact-title', title: a.ref }, a.ref),
      badge('artifact', a.state)),
  ];
  const list = versions?.versions || [];
  if (list.length) {
    const newestFirst = [...list].sort((x, y) => y.version - x.version);
    out.push(el('nav', { class: 'versions', 'aria-label': 'Versions' },
      el('span', { class: 'muted' }, 'Versions'),
      newestFirst.map((v) => (v.version === a.version
        ? el('span', { class: 'version current', 'aria-current': 'page', dataset: { version: String(v.version) }, title: v.state }, `v${v.version}`)
        : el('a', { class: `version state-${String(v.state).toLowerCase()}`, href: artifactHref(v.name, v.version), dataset: { version: String(v.version) }, title: `${v.ref} \u00b7 ${v.state} \u00b7 ${dateTime(v.created_at)}` }, `v${v.version}`)))));
  }
  out.push(el('div', { class: 'lineage' },
    el('div', { class: 'card facts' },
      el('dl', { class: 'details' }, facts.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v instanceof Node ? v : String(v))]))),
    el('div', { class: 'card' },
      el('h3', {}, 'Made by'), el('div', { class: 'made-by-box' }, madeBy),
      el('h3', {}, 'Made from ', el('span', { class: 'muted' }, made?.job ? `(what ${made.job} read)` : '')),
      useTable('made-from', inputs, (u) => artifactLink(u.name, u.version, u.artifact), made?.job ? 'Nothing: the job read no artifacts.' : 'Unknown: no producing job.'),
      el('h3', {}, 'Used by ', el('span', { class: 'muted' }, '(jobs that read this version)')),
      useTable('used-by', usedBy, (u) => jobLink(u.job), 'No job has read this version.'))));
  return out;
}

async function copy(text, note) {
  try {
    await navigator.clipboard.writeText(text);
    note.textContent = 'copied';
  } catch {
    note.textContent = 'select the digest to copy it';
  }
  setTimeout(() => { note.textContent = ''; }, 2000);
}
