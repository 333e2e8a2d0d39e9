// REST client for /api/v1. Every request carries "Authorization: Bearer
// <token>" when a session is stored. A 401 calls the handler set with
// onUnauthenticated() (the app shows the login form) and rejects with an
// ApiError, like every other non-2xx answer.
//
// The token a user signs in with (or the #token= of the URL the server
// prints) is traded at once for a short-lived session token
// (POST /api/v1/sessions), and only that is kept, in sessionStorage: it
// leaves with the tab and expires on the server, so a long-lived token never
// sits in the browser's storage.

const TOKEN_KEY = 'headway.session';
// Where earlier versions kept the long-lived token itself: removed on load.
const LEGACY_TOKEN_KEY = 'headway.token';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || '';
  }
}

try { localStorage.removeItem(LEGACY_TOKEN_KEY); } catch { /* storage disabled */ }

export function getToken() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return memoryToken || ''; }
}

function setToken(token) {
  try { sessionStorage.setItem(TOKEN_KEY, token); } catch { /* storage disabled: kept for this page only */ }
  memoryToken = token;
}

export function clearToken() {
  try { sessionStorage.removeItem(TOKEN_KEY); } catch { /* ignore */ }
  memoryToken = '';
}

let memoryToken = '';
memoryToken = getToken();
let unauthenticatedHandler = () => {};

// handler(message): message is the server's reason, e.g. "token expired".
export function onUnauthenticated(handler) { unauthenticatedHandler = handler; }
export function notifyUnauthenticated(message = '') { unauthenticatedHandler(message); }

export function authHeaders(extra = {}, token = memoryToken) {
  const headers = { ...extra };
  if (token) headers.Authorization = `Bearer ${token}`;
  return headers;
}

// The ApiError for a non-2xx response, from its JSON error body when it has one.
export async function errorFrom(response) {
  let code = '';
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error) {
      code = body.error.code || '';
      message = body.error.message || message;
    } else if (body && typeof body.message === 'string') {
      // Argo Server's routes (/api/v1/workflows/...): {"code": <gRPC code>, "message"}.
      code = body.code != null ? String(body.code) : '';
      message = body.message || message;
    }
  } catch { /* not JSON */ }
  return new ApiError(response.status, code, message);
}

// request('/api/v1/jobs') -> parsed JSON; {text: true} -> the body as text.
export async function request(path, { method = 'GET', body, signal, text = false } = {}) {
  const headers = authHeaders(body === undefined ? {} : { 'Content-Type': 'application/json' });
  const response = await fetch(path, {
    method, headers, signal, cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) {
    const error = await errorFrom(response);
    if (response.status === 401) notifyUnauthenticated(error.message);
    throw error;
  }
  return text ? response.text() : response.json();
}

export const jobPath = (name) => `/api/v1/jobs/${encodeURIComponent(name)}`;

// Trades `token` for a session and keeps the session: true; false when the
// server refuses the token (401); throws when the server cannot be reached
// or answers otherwise. A server without authentication (503) needs no
// session: true, and nothing is kept.
export async function signIn(token) {
  const response = await fetch('/api/v1/sessions', {
    method: 'POST', headers: authHeaders({}, token), cache: 'no-store',
  });
  if (response.status === 401) return false;
  if (response.status === 503) {
    clearToken();
    return true;
  }
  if (!response.ok) throw await errorFrom(response);
  const session = await response.json();
  setToken(session.token);
  return true;
}
