// REST client for /api/v1. Every request carries "Authorization: Bearer
// <token>" when a token is stored (localStorage "headway.token"). A 401 calls
// the handler set with onUnauthenticated() (the app shows the login form) and
// rejects with an ApiError, like every other non-2xx answer.

const TOKEN_KEY = 'headway.token';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || '';
  }
}

export function getToken() {
  try { return localStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
}

export function setToken(token) {
  try { localStorage.setItem(TOKEN_KEY, token); } catch { /* private mode: kept for this page only */ }
  memoryToken = token;
}

export function clearToken() {
  try { localStorage.removeItem(TOKEN_KEY); } catch { /* ignore */ }
  memoryToken = '';
}

let memoryToken = getToken();
let unauthenticatedHandler = () => {};

export function onUnauthenticated(handler) { unauthenticatedHandler = handler; }
export function notifyUnauthenticated() { unauthenticatedHandler(); }

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
    if (response.status === 401) notifyUnauthenticated();
    throw error;
  }
  return text ? response.text() : response.json();
}

export const jobPath = (name) => `/api/v1/jobs/${encodeURIComponent(name)}`;

// Whether the server accepts `token`: true, false (401), or throws (server unreachable).
// Only the status matters, so the body (every job) is not read.
export async function checkToken(token) {
  const response = await fetch('/api/v1/jobs', { headers: authHeaders({}, token), cache: 'no-store' });
  response.body?.cancel().catch(() => {});
  if (response.status === 401) return false;
  if (!response.ok) throw new ApiError(response.status, '', `the server answered ${response.status}`);
  return true;
}
