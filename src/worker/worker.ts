// Worker bootstrap: hosts the run workflow and provider implementations. One Temporal worker per
// task queue, all sharing one prebuilt workflow bundle; a provider's runs (workflow and turn
// activities) live on its queue, so a fleet serves a provider wherever its queue is polled.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, WithStartWorkflowOperation, WorkflowNotFoundError, WorkflowUpdateStage } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { type InjectedSinks, NativeConnection, Worker, WorkerOptions, bundleWorkflowCode } from '@temporalio/worker';
import { MODEL_CALL_ACTIVITY, RESERVED_ACTIVITY_NAMES, RunContextCache, createActivities } from '../../activities';
import {
  type SubagentSinks,
  TOKEN_LIMITER_WORKFLOW,
  chargeTokensSignal,
  permissionDecidedSignal,
  requestApprovalUpdate,
  reserveTokensUpdate,
  textDeltaSignal,
  tokenLimiterId,
} from '../../workflows/definitions';
import { GENERATION, GENERATION_DECLARATION } from '../../workflows/patches';
import { resolveRunSettings } from '../client/run-settings';
import { TemporalSubagentService, checkEndpoint, checkTaskQueue } from '../client/service';
import { abortable, sendAgainIfDropped } from '../temporal/errors';
import { budgetOf } from '../client/validate';
import { narrowBudget } from '../seam/budget';
import {
  DEFAULT_MAX_PAYLOAD_BYTES,
  MAX_TIMER_MS,
  defaultTaskQueue,
  isWholeNumber,
  modelTaskQueue,
  providerNameViolation,
} from '../seam/constants';
import {
  type SubagentPayloadStore,
  defaultPayloadLimit,
  payloadStoreOf,
  sweepPayloads,
} from '../temporal/payload-store';
import type { SubagentDelegate } from '../seam/delegation';
import { SubagentDepthError, SubagentError } from '../seam/errors';
import { describeValue } from '../seam/json';
import type { SubagentHostedProvider, SubagentModelPrices } from '../seam/provider';
import { checkModelPrices, modelPricesFromEnv } from '../temporal/config';
import { SubagentTracing, TRACING_WORKFLOW_MODULE, tracingWorkerOptions } from '../temporal/tracing';
import { bindDelegationTools } from '../tools/subagent';
import { queryPendingMessages, queryRunContext } from './run-queries';

export interface SubagentWorkerOptions {
  connection: NativeConnection;
  namespace?: string;
  /** Provider implementations to host; each is served on its descriptor's task queue. */
  providers: readonly SubagentHostedProvider[];
  /** A prebuilt bundle (`bundleSubagentWorkflows()`); default: bundled once per process. */
  workflowBundle?: WorkerOptions['workflowBundle'];
  identity?: string;
  /** Host heartbeat period during a turn; cancellation reaches a turn within about this long. Default 1 s. */
  heartbeatIntervalMs?: number;
  /** How long a cancelled provider may take to stop. Default 10 s. */
  cancelGraceMs?: number;
  /**
   * When a streaming model call or turn hands its text to the run's observers: the first batch
   * `firstMs` after the text begins, then each wait twice the last, up to `maxMs`. Each batch is a
   * history event and a workflow task in the one Temporal run a turn holds until it ends, so one
   * attempt sends at most `maxBatches` and `maxBytes` of text, each retry half as much: after the
   * first quarter of the batches, each wait doubles with every sixteenth. Default 250 ms, 1 s,
   * 2,000 and 8 MiB.
   */
  textBatches?: { firstMs: number; maxMs: number; maxBatches?: number; maxBytes?: number };
  /**
   * USD per million tokens by model name, which prices each model call for budgets and the spend
   * a run reports. Default: `SUBAGENT_MODEL_PRICES` (the same table as JSON), else none (cost 0).
   */
  modelPrices?: SubagentModelPrices;
  maxPayloadBytes?: number;
  /** Runs whose context the worker keeps in memory. Default 256. */
  contextCacheSize?: number;
  /**
   * The service running children delegate through (`context.delegate`); default: one on this
   * worker's connection with the hosted providers registered.
   */
  subagents?: TemporalSubagentService;
  /**
   * OpenTelemetry tracing (opt-in). A `workflowBundle` given with it must have been built with
   * `bundleSubagentWorkflows({ tracing: true })`.
   */
  tracing?: SubagentTracing;
  /** Payload codecs (encryption) for the workers and the worker's own client; the callers' must match. */
  dataConverter?: DataConverter;
  /**
   * How often the worker deletes the offloaded payloads of runs the server has forgotten, when
   * `dataConverter` offloads them to a payload store (`sweepPayloads`): first at a random moment
   * within 10 s of `run()` (or within the interval, if shorter), then this long after each sweep
   * ends. Default 1 hour; 0: never. `shutdown()` stops a sweep under way and waits for it.
   */
  payloadSweepIntervalMs?: number;
  /** Passed to every Temporal worker (concurrency, cache size, tuner...). */
  workerOptions?: Partial<
    Omit<WorkerOptions, 'connection' | 'namespace' | 'taskQueue' | 'activities' | 'workflowBundle' | 'workflowsPath'>
  >;
}

export interface SubagentWorker {
  readonly taskQueues: readonly string[];
  /** Polls until `shutdown()` (or a shutdown signal); rejects if a worker fails. */
  run(): Promise<void>;
  /** Runs while `fn` runs, then shuts down. */
  runUntil<R>(fn: () => Promise<R>): Promise<R>;
  shutdown(): Promise<void>;
}

const STICKY_QUEUE_TIMEOUT_MS = 1000;
const DEFAULT_HEARTBEAT_INTERVAL_MS = 1000;
const PAYLOAD_SWEEP_INTERVAL_MS = 60 * 60 * 1000;
/** The first payload sweep comes within this long of the worker's start. */
const FIRST_SWEEP_WITHIN_MS = 10 * 1000;

const bundles = new Map<boolean, ReturnType<typeof bundleWorkflowCode>>();

/**
 * Bundles the workflow code once per process (and once more with the tracing interceptors,
 * when asked); pass the result to every worker.
 */
export function bundleSubagentWorkflows(options: { tracing?: boolean } = {}): ReturnType<typeof bundleWorkflowCode> {
  const tracing = options.tracing ?? false;
  let bundle = bundles.get(tracing);
  if (!bundle) {
    const workflowsPath = require.resolve('../../workflows');
    bundle = bundleWorkflowCode({
      workflowsPath,
      // The workflow modules keep no state of their own (a run's state lives in its function), so
      // a worker evaluates them once, shared by every run, instead of once for each run it creates:
      // a run's first task does less, and each cached run holds about a third less heap.
      preloadModules: [workflowsPath],
      ...(tracing ? { workflowInterceptorModules: [TRACING_WORKFLOW_MODULE] } : {}),
      logger: { trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error, log() {} },
    });
    bundles.set(tracing, bundle);
  }
  return bundle;
}

/**
 * Creates (not yet running) workers for the given providers. Throws `INVALID_CONFIG` for no
 * providers, a name that cannot name runs (`providerNameViolation`), two with one name, a tool
 * named like a reserved activity, two tools of one provider with one name, a tool whose
 * parameters cannot be sent as JSON, or a delegation tool made with `inheritsParentContext: true`
 * for a provider it knows does not inherit, or, without `subagents`, for a provider it does not
 * host (`bindDelegationTools`). The caller runs and shuts them down.
 */
export async function createSubagentWorker(options: SubagentWorkerOptions): Promise<SubagentWorker> {
  const providers = new Map<string, SubagentHostedProvider>();
  for (const provider of options.providers) {
    const badName = providerNameViolation(provider.name);
    if (badName) throw new SubagentError(badName, 'INVALID_CONFIG');
    if (providers.has(provider.name)) {
      throw new SubagentError(`two hosted providers are named "${provider.name}"`, 'INVALID_CONFIG');
    }
    checkTaskQueue(provider.name, provider.taskQueue);
    if (provider.driver === 'agent-loop') checkEndpoint(provider.name, provider.endpoint);
    const clash =
      provider.driver === 'agent-loop' && provider.tools.find((tool) => RESERVED_ACTIVITY_NAMES.includes(tool.name));
    if (clash) {
      throw new SubagentError(
        `provider "${provider.name}" has a tool named "${clash.name}", a name the worker reserves`,
        'INVALID_CONFIG',
      );
    }
    // A call is run by the first tool of its name: the model would be shown a second one's
    // description, and get the first one's work.
    const twice =
      provider.driver === 'agent-loop' &&
      provider.tools.find((tool, index) => provider.tools.findIndex((other) => other.name === tool.name) !== index);
    if (twice) {
      throw new SubagentError(`provider "${provider.name}" has two tools named "${twice.name}"`, 'INVALID_CONFIG');
    }
    // Every model call sends the tools' schemas as JSON: one that cannot be (a cycle, a BigInt)
    // failed every attempt of every model call of the provider's runs.
    for (const tool of provider.driver === 'agent-loop' ? provider.tools : []) {
      const unsendable = unsendableParameters(tool.parameters);
      if (unsendable) {
        throw new SubagentError(
          `provider "${provider.name}" has a tool "${tool.name}" whose parameters ${unsendable}`,
          'INVALID_CONFIG',
        );
      }
    }
    providers.set(provider.name, provider);
  }
  if (providers.size === 0) throw new SubagentError('a subagent worker needs at least one provider', 'INVALID_CONFIG');
  checkWorkerNumbers(options);
  // A turn heartbeats each `heartbeatIntervalMs`: at or past a provider's heartbeat timeout,
  // every turn longer than that timed out and was retried until its run ended `error`. Checked
  // against the provider's own settings; a caller's service-wide ones are its own to match.
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS;
  for (const provider of providers.values()) {
    const { turnHeartbeatMs } = resolveRunSettings(DEFAULT_MAX_PAYLOAD_BYTES, provider.runSettings);
    if (heartbeatIntervalMs >= turnHeartbeatMs) {
      throw new SubagentError(
        `heartbeatIntervalMs (${heartbeatIntervalMs}) must be shorter than the heartbeatTimeout of provider "${provider.name}" (${turnHeartbeatMs} ms): every longer turn would time out`,
        'INVALID_CONFIG',
      );
    }
  }

  const namespace = options.namespace ?? 'default';
  const client = new Client({
    connection: options.connection,
    namespace,
    ...(options.dataConverter ? { dataConverter: options.dataConverter } : {}),
  });
  let subagents = options.subagents;
  if (!subagents) {
    // Nested starts are bounded as the worker's own payloads are.
    const { maxPayloadBytes } = options;
    subagents = new TemporalSubagentService({ client, ...(maxPayloadBytes === undefined ? {} : { maxPayloadBytes }) });
    for (const provider of providers.values()) subagents.registerProvider(provider);
  }
  // A delegation tool's wording (and whether it hands the run's completed turns down) follows the
  // provider it delegates to, as the service it delegates through knows it, else as hosted here.
  // The worker's own service knows the hosted providers and no others, ever.
  const known = subagents;
  const every = options.subagents ? undefined : [...providers.keys()];
  for (const provider of providers.values()) {
    if (provider.driver !== 'agent-loop') continue;
    const lookup = (name: string) => known.getProvider(name) ?? providers.get(name);
    const tools = bindDelegationTools(provider.name, provider.tools, lookup, every);
    if (tools !== provider.tools) providers.set(provider.name, { ...provider, tools });
  }
  const cache = new RunContextCache(options.contextCacheSize);
  const queueOf = (name: string) => {
    const provider = providers.get(name);
    return provider?.taskQueue ?? defaultTaskQueue(name);
  };
  const activities = createActivities({
    providers,
    delegate: delegateThrough(subagents),
    fetchRunContext: (runId) => queryRunContext(client.workflow.getHandle(runId)),
    fetchPendingMessages: (runId) => queryPendingMessages(client.workflow.getHandle(runId), 0),
    fetchPendingMessagesFrom: (runId, from) => queryPendingMessages(client.workflow.getHandle(runId), from),
    recordPermission: (runId, decision) => client.workflow.getHandle(runId).signal(permissionDecidedSignal, decision),
    requestApproval: async (runId, args, signal) => {
      const update = await sendAgainIfDropped(() =>
        client.workflow.getHandle(runId).startUpdate(requestApprovalUpdate, {
          args: [args],
          waitForStage: WorkflowUpdateStage.ACCEPTED,
        }),
      );
      return abortable(update.result(), signal);
    },
    // A run closed meanwhile has no observer left to hand its text to: nothing to report.
    publishText: (runId, delta) =>
      client.workflow
        .getHandle(runId)
        .signal(textDeltaSignal, delta)
        .catch((err: unknown) => {
          if (!(err instanceof WorkflowNotFoundError)) throw err;
        }),
    releaseAfterTimeout: async (execution, activityId) => {
      const { pendingActivities } = await client.workflowService.describeWorkflowExecution({ namespace, execution });
      const pending = pendingActivities?.find((activity) => activity.activityId === activityId);
      if (pending?.lastFailure?.timeoutFailureInfo) {
        await client.workflowService.resetStickyTaskQueue({ namespace, execution });
      }
    },
    // The provider's one limiter, started on its queue by the first call that finds none running.
    reserveTokens: (provider, args) =>
      sendAgainIfDropped(() =>
        client.workflow.executeUpdateWithStart(reserveTokensUpdate, {
          args: [args],
          startWorkflowOperation: new WithStartWorkflowOperation(TOKEN_LIMITER_WORKFLOW, {
            workflowId: tokenLimiterId(provider),
            taskQueue: queueOf(provider),
            args: [{}],
            workflowIdConflictPolicy: 'USE_EXISTING',
          }),
        }),
      ),
    chargeTokens: async (provider, args) => {
      await client.workflow.signalWithStart(TOKEN_LIMITER_WORKFLOW, {
        workflowId: tokenLimiterId(provider),
        taskQueue: queueOf(provider),
        args: [{}],
        signal: chargeTokensSignal,
        signalArgs: [args],
      });
    },
    cache,
    heartbeatIntervalMs: options.heartbeatIntervalMs,
    ...(options.textBatches ? { textBatches: options.textBatches } : {}),
    modelPrices: options.modelPrices ?? modelPricesFromEnv(),
    cancelGraceMs: options.cancelGraceMs,
    maxPayloadBytes: options.maxPayloadBytes ?? defaultPayloadLimit(options.dataConverter),
  });
  const workflowBundle =
    options.workflowBundle ?? (await bundleSubagentWorkflows({ tracing: options.tracing !== undefined }));
  const buildId = buildIdOf(workflowBundle);
  const taskQueues = [...new Set([...providers.values()].map((p) => p.taskQueue ?? defaultTaskQueue(p.name)))];
  const heartbeatThrottle = heartbeatIntervalMs;
  const tracing = options.tracing ? tracingWorkerOptions(options.tracing) : {};
  const workers = await Promise.all(
    taskQueues.map((taskQueue) =>
      Worker.create({
        // Heartbeats are throttled to this interval, and cancellation arrives with them.
        maxHeartbeatThrottleInterval: heartbeatThrottle,
        defaultHeartbeatThrottleInterval: heartbeatThrottle,
        // A run whose worker died waits this long for it before another worker takes its next
        // workflow task (and replays it): with the SDK's 10 s default (or our earlier 2 s) it
        // dominated recovery, which the benchmark holds to the heartbeat timeout + 2 s.
        stickyQueueScheduleToStartTimeout: STICKY_QUEUE_TIMEOUT_MS,
        // Recorded in three events of every step: the SDK's default (its name, version and a
        // whole SHA-256) alone would be a fifth of an agent loop's history.
        ...(buildId ? { buildId } : {}),
        ...tracing,
        ...options.workerOptions,
        connection: options.connection,
        namespace,
        taskQueue,
        ...(options.identity === undefined ? {} : { identity: options.identity }),
        workflowBundle,
        activities,
        // The tracing exporter's and the caller's sinks beside the run workflow's own.
        sinks: { ...tracing.sinks, ...options.workerOptions?.sinks, ...subagentSinks(cache) },
        ...(options.dataConverter ? { dataConverter: options.dataConverter } : {}),
      }),
    ),
  );

  // A rate-limited endpoint's model calls have a queue of their own, which the server hands out
  // at the endpoint's rate to every worker of the fleet polling it.
  const modelWorkers = await Promise.all(
    [...providers.values()].flatMap((provider) => {
      const rate = provider.driver === 'agent-loop' ? provider.endpoint.requestsPerMinute : undefined;
      if (rate === undefined) return [];
      return [
        Worker.create({
          maxHeartbeatThrottleInterval: heartbeatThrottle,
          defaultHeartbeatThrottleInterval: heartbeatThrottle,
          ...tracing,
          ...options.workerOptions,
          connection: options.connection,
          namespace,
          taskQueue: modelTaskQueue(provider.taskQueue ?? defaultTaskQueue(provider.name)),
          ...(options.identity === undefined ? {} : { identity: options.identity }),
          activities: { [MODEL_CALL_ACTIVITY]: activities[MODEL_CALL_ACTIVITY] },
          maxTaskQueueActivitiesPerSecond: rate / 60,
          ...(options.dataConverter ? { dataConverter: options.dataConverter } : {}),
        }),
      ];
    }),
  );
  workers.push(...modelWorkers);

  const sweeper = payloadSweeper(client, options);
  let running: Promise<void> | undefined;
  const run = () =>
    (running ??= (async () => {
      sweeper.start();
      try {
        await Promise.all(workers.map((worker) => worker.run()));
      } finally {
        await sweeper.stop();
      }
    })());
  const shutdown = async () => {
    // The sweep stops at once, while the workers finish their tasks; shutdown resolves once both
    // have ended, and nothing is deleted after.
    const sweepStopped = sweeper.stop();
    for (const worker of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
    await Promise.all([running, sweepStopped]);
  };
  return {
    taskQueues,
    run,
    shutdown,
    async runUntil(fn) {
      const polling = run();
      try {
        return await Promise.race([fn(), polling.then(() => Promise.reject(new Error('the subagent worker stopped')))]);
      } finally {
        await shutdown();
      }
    },
  };
}

/**
 * Throws `INVALID_CONFIG`, naming the option, for a number of the worker's own that cannot work,
 * or an identity the server refuses.
 * Each became a timer or a limit that fails quietly: a NaN, Infinity or over-long interval is a
 * Node timer of 1 ms (a payload sweep 30 days apart ran about 900 times a second, and a NaN text
 * batch a signal, a history event, per millisecond), a NaN cache size never evicts, and a NaN or
 * 0 payload limit failed every turn of every run.
 */
function checkWorkerNumbers(options: SubagentWorkerOptions): void {
  const check = (name: string, value: unknown, minimum: number, maximum: number, what: string) => {
    if (value === undefined) return;
    if (!isWholeNumber(value, minimum, maximum)) {
      throw new SubagentError(`${name} must be ${what} (got ${describeValue(value)})`, 'INVALID_CONFIG');
    }
  };
  const timer = (name: string, value: unknown, minimum: number) =>
    check(name, value, minimum, MAX_TIMER_MS, `a whole number of milliseconds from ${minimum} to ${MAX_TIMER_MS}`);
  timer('heartbeatIntervalMs', options.heartbeatIntervalMs, 1);
  timer('cancelGraceMs', options.cancelGraceMs, 0);
  check(
    'payloadSweepIntervalMs',
    options.payloadSweepIntervalMs,
    0,
    MAX_TIMER_MS,
    `0 (never) or a whole number of milliseconds up to ${MAX_TIMER_MS} (about 24.8 days, the longest a timer holds)`,
  );
  if (options.textBatches !== undefined) {
    const { firstMs, maxMs, maxBatches, maxBytes } = (options.textBatches ?? {}) as Partial<
      NonNullable<SubagentWorkerOptions['textBatches']>
    >;
    timer('textBatches.firstMs', firstMs ?? NaN, 1);
    timer('textBatches.maxMs', maxMs ?? NaN, firstMs!);
    check('textBatches.maxBatches', maxBatches, 1, Number.MAX_SAFE_INTEGER, 'a whole number, 1 or more');
    check('textBatches.maxBytes', maxBytes, 1, Number.MAX_SAFE_INTEGER, 'a whole number of bytes, 1 or more');
  }
  if (options.modelPrices !== undefined) checkModelPrices(options.modelPrices, 'modelPrices');
  check('contextCacheSize', options.contextCacheSize, 0, Number.MAX_SAFE_INTEGER, 'a whole number of runs, 0 or more');
  check('maxPayloadBytes', options.maxPayloadBytes, 1, Number.MAX_SAFE_INTEGER, 'a whole number of bytes, 1 or more');
  // The server refuses a longer identity only when the worker completes a task ("Identity length
  // exceeds limit"): the worker polled, took every run's first task and finished none, saying so
  // only in a log line of the SDK's core.
  const identity = options.identity ?? options.workerOptions?.identity;
  if (identity !== undefined && !(typeof identity === 'string' && Buffer.byteLength(identity) <= MAX_IDENTITY_BYTES)) {
    const got = typeof identity === 'string' ? `${Buffer.byteLength(identity)} bytes` : describeValue(identity);
    throw new SubagentError(
      `identity must be a string of at most ${MAX_IDENTITY_BYTES} bytes (got ${got})`,
      'INVALID_CONFIG',
    );
  }
}

/** The longest worker identity the server takes, in UTF-8 bytes. */
const MAX_IDENTITY_BYTES = 1000;

/**
 * The sinks the run workflow calls (SubagentSinks): the user messages it appends go into the
 * activities' cache. Without a cache (replaying a history), they go nowhere.
 */
export function subagentSinks(cache?: RunContextCache): InjectedSinks<SubagentSinks> {
  return {
    subagentConversation: {
      userEntries: {
        fn: (info, position, entries) => cache?.putUserEntries(info.runId, position, entries),
        callDuringReplay: false,
      },
    },
  };
}

/**
 * A short id of the workflow code the worker runs: `subagents`, the code's generation when the
 * bundle declares one (`@2`: its runs record no patch markers, see `runPaths`), and `+` 16 hex
 * digits of the bundle's SHA-256. None for a bundle given by a path that cannot be read; the SDK's
 * default then applies, and runs record their markers.
 */
function buildIdOf(bundle: NonNullable<WorkerOptions['workflowBundle']>): string | undefined {
  let code: string;
  try {
    code = 'code' in bundle ? bundle.code : readFileSync(bundle.codePath, 'utf8');
  } catch {
    return undefined;
  }
  const generation = code.includes(GENERATION_DECLARATION) ? `@${GENERATION}` : '';
  return `subagents${generation}+${createHash('sha256').update(code).digest('hex').slice(0, 16)}`;
}

/**
 * Sweeps the payload store while the worker runs (when its data converter has one): first at a
 * random moment within `FIRST_SWEEP_WITHIN_MS` of the start (or of the interval, if shorter), then
 * `intervalMs` after each sweep ends. `stop` ends the sweeping, the sweep under way between two runs,
 * and resolves once it has ended.
 */
function payloadSweeper(client: Client, options: SubagentWorkerOptions): { start(): void; stop(): Promise<void> } {
  const store = payloadStoreOf(options.dataConverter);
  const intervalMs = options.payloadSweepIntervalMs ?? PAYLOAD_SWEEP_INTERVAL_MS;
  const stopping = new AbortController();
  let sweeping: Promise<void> | undefined;
  const sweepUntilStopped = async (sweeps: SubagentPayloadStore) => {
    // Soon after the start, not an interval after it: a worker restarted more often than that
    // (deploys, autoscaling, a crash loop) never swept, and the store grew without bound. At a
    // random moment, so a fleet restarted together does not sweep the store all at once.
    let delayMs = Math.floor(Math.random() * Math.min(intervalMs, FIRST_SWEEP_WITHIN_MS));
    for (;;) {
      try {
        // Not holding the process open: the worker's pollers do that while it runs.
        await sleep(delayMs, undefined, { signal: stopping.signal, ref: false });
      } catch {
        return;
      }
      // One sweep at a time, the next an interval after it ends: one slower than the interval
      // (many runs, a slow store) is never joined by another.
      await sweepPayloads(client, sweeps, { signal: stopping.signal }).catch((err: unknown) =>
        console.warn(`subagent worker: sweeping the payload store "${sweeps.name}" failed: ${(err as Error).message}`),
      );
      delayMs = intervalMs;
    }
  };
  return {
    start() {
      if (!store || intervalMs <= 0 || sweeping || stopping.signal.aborted) return;
      sweeping = sweepUntilStopped(store);
    },
    // The sweep is awaited: left going, it asked the server on a connection its caller then closed
    // (a warning), or deleted blobs after the worker's shutdown had returned.
    async stop() {
      stopping.abort();
      await sweeping;
    },
  };
}

/**
 * Nested runs through `service`, the running child as their parent: its depth, its cwd, a link to
 * its run, its completed turns when the delegation hands them down, cancelled with its turn. A
 * nested run keeps the parent's cap, narrowed by its own `maxDepth`, so a cap set at the top holds
 * for every descendant, in whatever process they run; its budget is what remains of the parent's,
 * narrowed by its own.
 */
function delegateThrough(service: TemporalSubagentService): SubagentDelegate {
  return (provider, request, parent) => {
    // Its own cap can only narrow the one above it, as its budget can, never loosen it.
    const cap =
      request.maxDepth === undefined || parent.maxDepth === undefined
        ? (request.maxDepth ?? parent.maxDepth)
        : Math.min(request.maxDepth, parent.maxDepth);
    const depth = parent.depth + 1;
    const capable = service.getProvider(provider)?.capabilities.depthLimit ?? false;
    // A provider without the capability cannot take the cap; the depth is checked here instead.
    if (request.maxDepth === undefined && cap !== undefined && !capable && depth > cap) {
      throw new SubagentDepthError(depth, cap);
    }
    const budget = narrowBudget(parent.budget, request.budget === undefined ? undefined : budgetOf(request.budget));
    return service.start(provider, {
      ...request,
      ...(cap !== undefined && (capable || request.maxDepth !== undefined) ? { maxDepth: cap } : {}),
      ...(budget === undefined ? {} : { budget }),
      signal: request.signal ?? parent.signal,
      parent: {
        id: parent.runId,
        runId: parent.runId,
        rootRunId: parent.rootRunId ?? parent.runId,
        options: { subagentDepth: parent.depth, ...(parent.model === undefined ? {} : { model: parent.model }) },
        session: {
          header: { id: parent.runId, ...(parent.cwd === undefined ? {} : { cwd: parent.cwd }) },
          // Its completed turns, when the delegation hands them down: a fork is seeded with them.
          ...(parent.events === undefined ? {} : { events: parent.events }),
        },
      },
    });
  };
}

/** Why a tool's `parameters` cannot be sent to a model as a JSON Schema object, or undefined. */
function unsendableParameters(parameters: unknown): string | undefined {
  if (typeof parameters !== 'object' || parameters === null || Array.isArray(parameters)) {
    return 'are not a JSON Schema object';
  }
  try {
    JSON.stringify(parameters);
    return undefined;
  } catch (err) {
    return `cannot be sent as JSON: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`;
  }
}
