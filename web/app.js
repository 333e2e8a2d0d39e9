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
import { createArtifactsView } from './artifacts.js';
import { createExperimentsView } from './experiments.js';
import { createJobsView } from './jobs.js';
import { createNotebooksView } from './notebooks.js';
import { createNodesView, createQueuesView } from './pool.js';
import { createWorkflowsView } from './workflows.js';

const VIEWS = {
  jobs: createJobsView,
  queues: createQueuesView,
  nodes: createNodesView,
  experiments: createExperimentsView,
  artifacts: createArtifactsView,
  workflows: createWorkflowsView,
  notebooks: createNotebooksView,
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

function route() {
  const { name, arg } = parseRoute();
  for (const link of nav.querySelectorAll('a')) link.classList.toggle('active', link.dataset.view === name);
  document.title = arg ? `${arg} \u00b7 Headway` : `${name[0].toUpperCase()}${name.slice(1)} \u00b7 Headway`;
  if (signedOut) return;
  if (!current || current.name !== name) {
    unmount();
    current = { name, view: VIEWS[name](main, { setStatus }) };
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

async function start() {
  performance.mark('headway:start');  // the page's marks: bench/dashboard_bench.mjs reads them
  const fromUrl = takeTokenFromUrl();
  window.addEventListener('hashchange', route);
  if (fromUrl) {
    try {
      if (!(await signIn(fromUrl))) {
        showLogin('The link\u2019s token was refused (it may have expired). Sign in with a token.');
        return;
      }
    } catch (error) {
      showLogin(`Could not reach the server: ${error.message}`);
      return;
    }
  }
  performance.mark('headway:signed-in');
  signOut.hidden = !getToken();
  route();
}

start();
