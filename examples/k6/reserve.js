// k6 script for stockbench's order API (docs/api.md): each iteration is one
// buyer's journey against a `stockbench serve` instance — reserve one unit,
// think, then confirm (or, for a share of buyers, cancel) — at a constant
// arrival rate, with one check per outcome the API gives.
//
//   stockbench serve --backend local --strategy lua-tcc --load FLASH-1=1000 --listen 127.0.0.1:8080
//   k6 run -e BASE=http://127.0.0.1:8080 -e SKU=FLASH-1 -e RATE=200 -e DURATION=30s examples/k6/reserve.js
//
// Not run on the machine it was written on (k6 is not installed there);
// its calls are those of docs/api.md, which service/docs_test.go runs.
// Order ids are unique per VU and iteration, so a retry (k6 does not retry
// by itself) would be safe: the API is idempotent by order id.
import http from 'k6/http';
import { check, sleep } from 'k6';
import { Counter } from 'k6/metrics';

const BASE = __ENV.BASE || 'http://127.0.0.1:8080';
const SKU = __ENV.SKU || 'FLASH-1';
const CANCEL = parseFloat(__ENV.CANCEL || '0.1'); // share of buyers who cancel
const RUN = __ENV.RUN || `${Date.now()}`;         // keeps order ids unique across runs

// Each outcome the API answers, counted apart (docs/api.md, "Outcomes").
const outcomes = new Counter('stockbench_outcomes');

export const options = {
  scenarios: {
    buyers: {
      executor: 'constant-arrival-rate',
      rate: parseInt(__ENV.RATE || '100'),
      timeUnit: '1s',
      duration: __ENV.DURATION || '30s',
      preAllocatedVUs: 50,
      maxVUs: 500,
    },
  },
  thresholds: {
    // A failure is a 5xx or no answer; out of stock (409) and the other
    // refusals are answers a healthy store gives.
    'http_req_failed{kind:answer}': ['rate<0.01'],
  },
};

// 4xx refusals are answers, not failures.
http.setResponseCallback(http.expectedStatuses({ min: 200, max: 499 }));

const params = { headers: { 'Content-Type': 'application/json' }, tags: { kind: 'answer' } };

function post(path, body, key) {
  const p = Object.assign({}, params, { headers: Object.assign({ 'Idempotency-Key': key }, params.headers) });
  const res = http.post(`${BASE}${path}`, JSON.stringify(body), p);
  let outcome = 'none';
  try { outcome = res.json('outcome'); } catch (e) { /* not an API answer */ }
  outcomes.add(1, { path, outcome });
  return { res, outcome };
}

export default function () {
  const id = `k6-${RUN}-${__VU}-${__ITER}`;
  const r = post('/v1/reserve', { order_id: id, sku: SKU, qty: 1, ttl_ms: 60000 }, id);
  check(r.res, {
    'reserve answered (ok, out_of_stock, limit or busy)': () => ['ok', 'out_of_stock', 'limit', 'busy'].includes(r.outcome),
  });
  if (r.outcome !== 'ok') {
    return;
  }
  sleep(0.2 + Math.random() * 0.3); // the buyer pays (think time)
  const path = Math.random() < CANCEL ? '/v1/cancel' : '/v1/confirm';
  const d = post(path, { order_id: id, sku: SKU }, id);
  check(d.res, {
    'decision ok (a reserved order is confirmed or cancelled once)': () => d.outcome === 'ok',
  });
}
