// Server-sent events read with fetch(), because EventSource cannot send the
// Authorization header. Parses "event:" / "data:" lines (":" lines are
// keep-alives), reconnects with exponential backoff when the stream fails or
// ends, and stops for good on close(), on 401 (after telling api.js) and on
// 404/405 (the server has no such stream: onUnsupported lets the caller poll).

import { authHeaders, errorFrom, notifyUnauthenticated } from './api.js';

const MIN_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 15000;
// Reconnect when not even a keep-alive arrived for this long (a half-open connection).
const SILENCE_MS = 45000;

// handlers: onOpen(), onMessage(type, data) with data parsed as JSON,
// onStatus('live' | 'reconnecting'), onUnsupported(error).
// Returns {close()}.
export function openEventStream(url, handlers) {
  const { onOpen = () => {}, onMessage, onStatus = () => {}, onUnsupported = () => {} } = handlers;
  let closed = false;
  let controller = null;
  let retryTimer = 0;
  let silenceTimer = 0;
  let failures = 0;

  const armSilence = () => {
    clearTimeout(silenceTimer);
    silenceTimer = setTimeout(() => controller?.abort(), SILENCE_MS);
  };

  async function connect() {
    controller = new AbortController();
    let response;
    try {
      armSilence();
      response = await fetch(url, {
        headers: authHeaders({ Accept: 'text/event-stream' }),
        signal: controller.signal,
        cache: 'no-store',
      });
      if (response.status === 401) {
        const error = await errorFrom(response);
        stop();
        notifyUnauthenticated(error.message);
        return;
      }
      if (response.status === 404 || response.status === 405) {
        const error = await errorFrom(response);
        stop();
        onUnsupported(error);
        return;
      }
      if (!response.ok) throw await errorFrom(response);
      performance.mark(`headway:stream-open ${url}`);
      onOpen();
      onStatus('live');
      await readEvents(response.body, (type, data) => {
        failures = 0;
        try {
          onMessage(type, data);
        } catch (error) {
          console.error('headway: handling a', type, 'event', error);
        }
      }, armSilence);
    } catch (error) {
      if (closed) return;
      if (error instanceof SyntaxError) console.warn('headway: bad event data', error);
    }
    if (closed) return;
    onStatus('reconnecting');
    const delay = Math.min(MAX_BACKOFF_MS, MIN_BACKOFF_MS * 2 ** failures) * (0.75 + Math.random() / 2);
    failures += 1;
    retryTimer = setTimeout(connect, delay);
  }

  function stop() {
    closed = true;
    clearTimeout(retryTimer);
    clearTimeout(silenceTimer);
    controller?.abort();
  }

  connect();
  return { close: stop };
}

// Calls dispatch(type, parsedData) for each complete message of the stream and
// onBytes() whenever anything arrives. Resolves when the stream ends.
// A snapshot of many jobs is one long "data:" line spread over many chunks, so
// each chunk is scanned once and the pieces of an unfinished line are joined
// only when its end arrives.
async function readEvents(body, dispatch, onBytes) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let partial = [];
  let type = '';
  let data = [];
  const handleLine = (line) => {
    if (line.endsWith('\r')) line = line.slice(0, -1);
    if (line === '') {
      if (data.length) dispatch(type || 'message', JSON.parse(data.join('\n')));
      type = '';
      data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let text = colon < 0 ? '' : line.slice(colon + 1);
    if (text.startsWith(' ')) text = text.slice(1);
    if (field === 'event') type = text;
    else if (field === 'data') data.push(text);
    // "id" and "retry" are not used by Headway's streams.
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    onBytes();
    const chunk = decoder.decode(value, { stream: true });
    let start = 0;
    for (let end; (end = chunk.indexOf('\n', start)) >= 0; start = end + 1) {
      let line = chunk.slice(start, end);
      if (partial.length) {
        partial.push(line);
        line = partial.join('');
        partial = [];
      }
      handleLine(line);
    }
    if (start < chunk.length) partial.push(chunk.slice(start));
  }
}
