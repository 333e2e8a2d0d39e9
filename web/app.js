// The dashboard's entry point: hash routing between views, sign-in and the
// connection indicator.
//
// Routes: #/jobs, #/jobs/NAME (the job's side panel), #/queues, #/nodes,
// #/experiments, #/experiments/NAME, #/artifacts, #/artifacts/NAME:VERSION
// (a version with its lineage), #/workflows, #/workflows/NAMESPACE/NAME (its
// graph of nodes), #/notebooks. A view is created on entering its route
// and destroyed on leaving it (which closes its streams and timers).
//
// Auth: a token from the sign-in form, or "#token=..." in the URL on load
// (removed from the address bar at once), is traded for a short-lived
// session (api.js); every request sends the session. Any 401 (a refused or
// expired session) tears the view down and shows the sign-in form.

import { clearToken, getToken, onUnauthenticated, signIn } from './api.js';
import { el } from './format.js';
import { createJobsView } from './jobs.js';

// The jobs list, where most visits start, comes with the page; every other
// view's code loads when its route is first entered.
const VIEWS = {
  jobs: async () => createJobsView,
  queues: () => import('./pool.js').then((m) => m.createQueuesView),
  nodes: () => import('./pool.js').then((m) => m.createNodesView),
  experiments: () => import('./experiments.js').then((m) => m.createExperimentsView),
  artifacts: () => import('./artifacts.js').then((m) => m.createArtifactsView),
  workflows: () => import('./workflows.js').then((m) => m.createWorkflowsView),
  notebooks: () => import('./notebooks.js').then((m) => m.createNotebooksView),
};

const main = document.getElementById('view');
const nav = document.getElementById('nav');
const conn = document.getElementById('conn');
const signOut = document.getElementById('sign-out');
const login = document.getElementById('login');
const loginForm = document.getElementById('login-form');
const tokenInput = document.getElementById('token-input');
const loginError = document.getElementById('login-error');

let current = null;  // {name, view}
let signedOut = false;  // the server refused us: views stay down until sign-in

const STATUS_TEXT = { live: 'live', reconnecting: 'reconnecting\u2026', polling: 'polling' };
function setStatus(kind) {
  conn.textContent = STATUS_TEXT[kind] || '';
  conn.className = `conn ${kind || ''}`;
}

// The token of a "#token=..." URL, removed from the address bar (and so
// from the history); '' when there is none.
function takeTokenFromUrl() {
  const hash = location.hash.replace(/^#/, '');
  const match = hash.match(/(^|[?&])token=([^&]*)/);
  if (!match) return '';
  let token = match[2];
  try { token = decodeURIComponent(token); } catch { /* keep it as it is */ }
  const rest = (hash.slice(0, match.index) + (match[1] === '?' ? '?' : '') + hash.slice(match.index + match[0].length))
    .replace(/[?&]+$/, '').replace(/^&/, '').replace('?&', '?');
  history.replaceState(null, '', `${location.pathname}${location.search}#${rest || '/jobs'}`);
  return token;
}

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, '').split('/');
  const name = VIEWS[parts[0]] ? parts[0] : 'jobs';
  let arg = parts.slice(1).join('/');
  try { arg = decodeURIComponent(arg); } catch { /* keep it as it is */ }
  return { name, arg };
}

let routing = 0;  // the latest route(): an earlier one still loading its view gives way
async function route() {
  const { name, arg } = parseRoute();
  for (const link of nav.querySelectorAll('a')) link.classList.toggle('active', link.dataset.view === name);
  document.title = arg ? `${arg} \u00b7 Headway` : `${name[0].toUpperCase()}${name.slice(1)} \u00b7 Headway`;
  if (signedOut) return;
  const ticket = ++routing;
  if (!current || current.name !== name) {
    let create;
    try {
      create = await VIEWS[name]();
    } catch (error) {
      if (ticket !== routing) return;
      unmount();
      main.replaceChildren(el('p', { class: 'view-error' }, `Could not load this view: ${error.message}`));
      return;
    }
    if (ticket !== routing || signedOut) return;
    unmount();
    current = { name, view: create(main, { setStatus }) };
  }
  current.view.update(arg);
}

function unmount() {
  current?.view.destroy();
  current = null;
  main.replaceChildren();
}

function showLogin(message) {
  signedOut = true;
  unmount();
  setStatus('');
  signOut.hidden = true;
  loginError.textContent = message || '';
  loginError.hidden = !message;
  login.hidden = false;
  tokenInput.focus();
}

onUnauthenticated((message) => {
  if (signedOut) return;
  const had = getToken();
  clearToken();
  if (/expired/i.test(message || '')) showLogin('Your session expired. Sign in again.');
  else showLogin(had ? 'The server refused the stored session. Sign in again.' : '');
});

loginForm.addEventListener('submit', async (event) => {
  event.preventDefault();
  const token = tokenInput.value.trim();
  const button = loginForm.querySelector('button');
  if (!token) {
    showLogin('Enter a token.');
    return;
  }
  button.disabled = true;
  try {
    if (!(await signIn(token))) {
      loginError.textContent = 'The server refused this token.';
      loginError.hidden = false;
      tokenInput.select();
      return;
    }
  } catch (error) {
    loginError.textContent = `Could not reach the server: ${error.message}`;
    loginError.hidden = false;
    return;
  } finally {
    button.disabled = false;
  }
  tokenInput.value = '';
  login.hidden = true;
  loginError.hidden = true;
  signOut.hidden = false;
  signedOut = false;
  route();
});

signOut.addEventListener('click', () => {
  clearToken();
  signOut.hidden = true;
  unmount();
  route();  // a server with --auth answers 401, which brings up the sign-in form
});

// A "#token=..." link is traded for a session at once, while the browser
// still fetches the view's modules, not after them.
const tokenFromUrl = takeTokenFromUrl();
const signingIn = tokenFromUrl ? signIn(tokenFromUrl).catch((error) => error) : null;

async function start() {
  performance.mark('headway:start');  // the page's marks: bench/dashboard_bench.mjs reads them
  window.addEventListener('hashchange', route);
  if (signingIn) {
    const outcome = await signingIn;
    if (outcome instanceof Error) {
      showLogin(`Could not reach the server: ${outcome.message}`);
      return;
    }
    if (!outcome) {
      showLogin('The link\u2019s token was refused (it may have expired). Sign in with a token.');
      return;
    }
  }
  performance.mark('headway:signed-in');
  signOut.hidden = !getToken();
  route();
}

start();
