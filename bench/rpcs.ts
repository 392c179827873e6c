// Figure 12: the requests a delegation costs the server, ours against the bare workflow, counted by
// the server itself (its Prometheus `service_requests` counter, by service and operation). Every
// request the bench's client and workers make reaches the frontend; what the frontend then asks
// the history and matching services is the server's own work. Read from the embedded dev server,
// which the bench starts with a metrics port.

/** Requests by service and operation, as `service/Operation`. */
export type RequestCounts = Record<string, number>;

/** One side of a block: requests per delegation, the frontend's by operation and each service's in all. */
export interface RequestsPerDelegation {
  /** Every request the frontend answered (the clients' and workers' calls), per delegation. */
  frontend: number;
  /** Each service's requests by operation, as `service/Operation` (those with at least 0.05 per delegation). */
  by_operation: RequestCounts;
  /** The requests each service answered, per delegation. */
  by_service: Record<string, number>;
  /** The requests all services answered, per delegation: the frontend's and the server's own. */
  all_services: number;
}

/** The counters of `namespace` now (see `countRequests`). */
async function readRequests(metricsUrl: string, namespace: string): Promise<RequestCounts> {
  const response = await fetch(metricsUrl);
  if (!response.ok) throw new Error(`${metricsUrl} answered ${response.status}`);
  return countRequests(await response.text(), namespace);
}

/**
 * `service_requests` of `namespace` in a Prometheus text exposition, summed over its other labels.
 * A counter of a request still in flight (a long poll) moves when it returns, so a reading counts
 * the requests that have ended.
 */
export function countRequests(exposition: string, namespace: string): RequestCounts {
  const counts: RequestCounts = {};
  for (const line of exposition.split('\n')) {
    if (!line.startsWith('service_requests{')) continue;
    const labels = Object.fromEntries(
      [...line.slice(line.indexOf('{') + 1, line.lastIndexOf('}')).matchAll(/(\w+)="([^"]*)"/g)].map(
        ([, key, value]) => [key, value],
      ),
    );
    if (labels.namespace !== namespace) continue;
    const key = `${labels.service_name}/${labels.operation}`;
    counts[key] = (counts[key] ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return counts;
}

/** The operation of `markedReading`'s mark: one the delegations do not make. */
const MARK = 'frontend/DescribeNamespace';

/**
 * A reading of the counters that holds every request that ended before it was asked for. The
 * server publishes its counters every so often, all at once: a reading that shows a request made
 * just before (the mark, `describeNamespace`) shows all that ended before it too. The mark is
 * taken out of the counts, so it costs the next block nothing.
 */
export async function markedReading(
  metricsUrl: string,
  namespace: string,
  mark: () => Promise<unknown>,
): Promise<RequestCounts> {
  const marks = (await readRequests(metricsUrl, namespace))[MARK] ?? 0;
  await mark();
  for (;;) {
    const counts = await readRequests(metricsUrl, namespace);
    if ((counts[MARK] ?? 0) > marks) return { ...counts, [MARK]: marks };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The requests `count` delegations made between two readings, per delegation. */
export function perDelegation(before: RequestCounts, after: RequestCounts, count: number): RequestsPerDelegation {
  const byOperation: Record<string, number> = {};
  const byService: Record<string, number> = {};
  let frontend = 0;
  let all = 0;
  for (const [key, total] of Object.entries(after)) {
    const each = (total - (before[key] ?? 0)) / count;
    const [service] = key.split('/');
    byService[service!] = (byService[service!] ?? 0) + each;
    all += each;
    if (each >= 0.05) byOperation[key] = tenths(each);
    if (service === 'frontend') frontend += each;
  }
  return {
    frontend: tenths(frontend),
    by_operation: byOperation,
    by_service: Object.fromEntries(Object.entries(byService).map(([service, each]) => [service, tenths(each)])),
    all_services: tenths(all),
  };
}

const tenths = (value: number) => Math.round(value * 10) / 10;
