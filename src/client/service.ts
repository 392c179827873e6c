// The facade callers hold: the seam's SubagentService as a Temporal client. It validates every
// request synchronously, before anything durable exists, then starts or attaches run workflows.
import { createHash, randomUUID } from 'node:crypto';
import {
  Client,
  InternalConnectionLike,
  InternalConnectionLikeSymbol,
  WorkflowExecutionAlreadyStartedError,
} from '@temporalio/client';
import type { SearchAttributePair } from '@temporalio/common';
import { type ResolvedRunSettings, SUBAGENT_RUN_WORKFLOW, type SubagentRunInput } from '../../workflows/definitions';
import {
  DEPTH_ATTRIBUTE,
  PARENT_RUN_ATTRIBUTE,
  PROVIDER_ATTRIBUTE,
  ROOT_RUN_ATTRIBUTE,
  STATUS_ATTRIBUTE,
} from '../../workflows/search-attributes';
import type { subagentRunWorkflow } from '../../workflows/subagent-run';
import {
  MAX_TIMER_MS,
  RUN_ID_PREFIX,
  defaultTaskQueue,
  isHttpUrl,
  isWholeNumber,
  modelTaskQueue,
  providerNameViolation,
  taskQueueViolation,
} from '../seam/constants';
import { defaultPayloadLimit } from '../temporal/payload-store';
import { SubagentError } from '../seam/errors';
import { canonicalJson, describeValue } from '../seam/json';
import { requestedModel } from '../seam/delegation';
import type {
  SubagentAgentProvider,
  SubagentProvider,
  SubagentProviderDescriptor,
  SubagentRunSettings,
} from '../seam/provider';
import type { ResolvedSubagentRequest, SubagentStartRequest } from '../seam/request';
import type { SubagentLogger, SubagentRun } from '../seam/run';
import { SubagentEventListener, SubagentEventName, SubagentEvents } from './events';
import { type Begun, RunHandle, RunHandleContext, StopAtStart, withinDeadline } from './run-handle';
import { resolveRunSettings } from './run-settings';
import { assertPayloadWithin, readCallerInput, resolveStartRequest } from './validate';
import { DEFAULT_RECONNECT_WINDOW_MS, unknownSearchAttribute } from '../temporal/errors';

/** Deadline of the call that creates a run or a resume on the server. */
const DEFAULT_START_TIMEOUT_MS = 10_000;

export interface TemporalSubagentServiceOptions {
  /** The Temporal client runs are started with; its namespace is the runs' namespace. */
  client: Client;
  /** Defaults for every run; a provider's `runSettings` override them. */
  runSettings?: SubagentRunSettings;
  /**
   * Deadline of the call that creates a run (or a resume) on the server; past it, `result`
   * rejects with `UNAVAILABLE`. Waiting for the result itself has no deadline. Default 10 s.
   */
  startTimeoutMs?: number;
  /**
   * How long waiting for a result rides out an unreachable server (a restart) before `result`
   * rejects with `UNAVAILABLE`. Default 10 minutes.
   */
  reconnectWindowMs?: number;
  /** Keep the runs' search attributes (provider, parent, depth, status, stop reason). Default true. */
  searchAttributes?: boolean;
  /**
   * Largest request, message or resume content accepted; default just under Temporal's 2 MiB, or
   * 256 MiB when the client's data converter offloads large payloads.
   */
  maxPayloadBytes?: number;
  logger?: SubagentLogger;
}

interface RegisteredProvider {
  descriptor: SubagentProviderDescriptor;
  taskQueue: string;
  settings: ResolvedRunSettings;
}

const CAPABILITY_CHECKS = [
  ['outputSchema', 'outputSchema'],
  ['maxDepth', 'depthLimit'],
  ['toolFilter', 'toolFilter'],
] as const;

export class TemporalSubagentService {
  private readonly providers = new Map<string, RegisteredProvider>();
  private readonly events: SubagentEvents;
  private readonly context: RunHandleContext;
  private indexing: boolean;

  constructor(private readonly options: TemporalSubagentServiceOptions) {
    checkServiceNumbers(options);
    const logger = options.logger ?? { warn: (message: string) => console.warn(message) };
    this.events = new SubagentEvents(logger);
    this.context = {
      client: options.client,
      events: this.events,
      logger,
      maxPayloadBytes: options.maxPayloadBytes ?? defaultPayloadLimit(options.client.options.loadedDataConverter),
      startTimeoutMs: options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS,
      reconnectWindowMs: options.reconnectWindowMs ?? DEFAULT_RECONNECT_WINDOW_MS,
    };
    resolveRunSettings(this.context.maxPayloadBytes, options.runSettings); // fail at construction, not at the first start
    this.indexing = options.searchAttributes ?? true;
  }

  /**
   * Registers a provider by its descriptor (a full seam `SubagentProvider` works too: only its
   * descriptor fields are read). Returns a synchronous disposer that unregisters it; runs already
   * started keep going. Throws `DUPLICATE_PROVIDER` for a taken name, `INVALID_CONFIG` for a name
   * that cannot name runs (empty, not well-formed, over 900 bytes) or bad run settings, and rethrows a `subagent/provider-added` listener's error after rolling back.
   */
  registerProvider(provider: SubagentProviderDescriptor | SubagentProvider): () => void {
    if (typeof provider !== 'object' || provider === null) {
      throw new SubagentError('a provider must be an object with a name', 'INVALID_CONFIG');
    }
    const { name } = provider;
    const badName = providerNameViolation(name);
    if (badName) throw new SubagentError(badName, 'INVALID_CONFIG');
    if (this.providers.has(name)) {
      throw new SubagentError(`a subagent provider named "${name}" is already registered`, 'DUPLICATE_PROVIDER');
    }
    const descriptor = provider as SubagentProviderDescriptor;
    checkTaskQueue(name, descriptor.taskQueue);
    checkEndpoint(name, (descriptor as Partial<SubagentAgentProvider>).endpoint);
    const entry: RegisteredProvider = {
      descriptor,
      taskQueue: descriptor.taskQueue ?? defaultTaskQueue(name),
      settings: resolveRunSettings(this.context.maxPayloadBytes, this.options.runSettings, descriptor.runSettings),
    };
    this.providers.set(name, entry);
    let registered = true;
    const unregister = () => {
      if (!registered) return;
      registered = false;
      if (this.providers.get(name) === entry) this.providers.delete(name);
      this.events.emitContained('subagent/provider-removed', name);
    };
    try {
      this.events.emit('subagent/provider-added', descriptor);
    } catch (err) {
      unregister();
      throw err;
    }
    return unregister;
  }

  /** The registered object itself, or undefined. */
  getProvider(name: string): SubagentProviderDescriptor | undefined {
    return this.providers.get(name)?.descriptor;
  }

  /** Registered provider names in registration order. */
  list(): string[] {
    return [...this.providers.keys()];
  }

  on<E extends SubagentEventName>(event: E, listener: SubagentEventListener<E>): () => void {
    return this.events.on(event, listener);
  }

  /**
   * Starts a durable run and returns its handle at once. Throws synchronously, with nothing
   * created: `NO_PROVIDER`, then `UNSUPPORTED_CAPABILITY` (outputSchema, depthLimit, toolFilter in
   * that order), `INVALID_REQUEST`, `SubagentDepthError`, `INVALID_CONFIG` (an LLM provider with
   * no model to call), `PAYLOAD_TOO_LARGE`. A server that cannot be reached rejects `result` with
   * `UNAVAILABLE`.
   */
  start(name: string, request: SubagentStartRequest): SubagentRun {
    const provider = this.providers.get(name);
    if (!provider) {
      const known = this.list();
      throw new SubagentError(
        `no subagent provider registered for "${name}"${known.length ? ` (registered: ${known.join(', ')})` : ''}`,
        'NO_PROVIDER',
      );
    }
    const { descriptor } = provider;
    // The caller's own objects are read here, once: a getter or a Proxy that throws is bad input
    // like any other, before the run exists.
    const { input, key, signal } = readCallerInput('the start request', () => {
      for (const [field, capability] of CAPABILITY_CHECKS) {
        if (request?.[field] !== undefined && !descriptor.capabilities[capability]) {
          throw new SubagentError(
            `subagent provider "${name}" does not support the "${capability}" capability`,
            'UNSUPPORTED_CAPABILITY',
          );
        }
      }
      const input: SubagentRunInput = {
        provider: name,
        driver: descriptor.driver ?? 'turns',
        request: resolveStartRequest(request, {
          seedFromParent: descriptor.inheritsParentContext,
          ...(descriptor.toolNames ? { toolNames: descriptor.toolNames } : {}),
        }),
        settings: provider.settings,
        steering: descriptor.steering ?? false,
        ...(descriptor.steeringWithinTurn ? { steeringWithinTurn: true } : {}),
        resumable: descriptor.resumable ?? false,
        ...(rateLimited(descriptor) ? { modelTaskQueue: modelTaskQueue(provider.taskQueue) } : {}),
      };
      assertModelNamed(descriptor, input.request);
      assertPayloadWithin(input, this.context.maxPayloadBytes, 'the start request');
      return { input, key: idempotencyKeyOf(request), signal: listenable(request.signal) };
    });

    const runId = `${RUN_ID_PREFIX}${name}:${key === undefined ? randomUUID() : `key-${sha256(key)}`}`;
    const workflow = this.options.client.workflow;
    const context = this.context;
    const attributes: SearchAttributePair[] = [
      { key: PROVIDER_ATTRIBUTE, value: name },
      { key: DEPTH_ATTRIBUTE, value: input.request.depth },
      { key: STATUS_ATTRIBUTE, value: 'running' },
      ...(input.request.parent.runId === undefined
        ? []
        : [{ key: PARENT_RUN_ATTRIBUTE, value: input.request.parent.runId }]),
      { key: ROOT_RUN_ATTRIBUTE, value: input.request.parent.rootRunId ?? input.request.parent.runId ?? runId },
    ];
    const indexed = <T>(start: (extra: { typedSearchAttributes?: SearchAttributePair[] }) => Promise<T>) =>
      this.indexedStart(attributes, start);
    const startOptions = (stopAtStart: StopAtStart | undefined) => ({
      workflowId: runId,
      taskQueue: provider.taskQueue,
      args: [
        stopAtStart === 'cancelled'
          ? { ...input, abortedAtStart: true }
          : stopAtStart === 'disposed'
            ? { ...input, disposedAtStart: true }
            : input,
      ] as [SubagentRunInput],
      workflowIdReusePolicy: 'REJECT_DUPLICATE' as const,
    });
    const handle = new RunHandle(this.context, {
      runId,
      provider: name,
      // A keyed start may join a run that was resumed since: follow its current segment.
      ...(key === undefined ? { segment: 0 } : {}),
      steering: input.steering,
      resumable: input.resumable,
      emitEvents: true,
      begin: key === undefined ? startFresh : startKeyed,
    });
    // A worker on the client's own connection takes the first workflow task straight from the
    // start response (eager start), skipping a round trip through matching. The client itself
    // allows it only on a NativeConnection, which it marks so; this process need not load the worker.
    const eager =
      (this.options.client.connection as InternalConnectionLike)[InternalConnectionLikeSymbol]?.supportsEagerStart ===
      true;

    async function startFresh(stopAtStart: StopAtStart | undefined): Promise<Begun> {
      const started = await indexed((extra) =>
        withinDeadline(context, () =>
          workflow.start<typeof subagentRunWorkflow>(SUBAGENT_RUN_WORKFLOW, {
            ...startOptions(stopAtStart),
            ...extra,
            workflowIdConflictPolicy: 'FAIL',
            requestEagerStart: eager,
          }),
        ),
      );
      return { applied: true, temporalRunId: started.firstExecutionRunId };
    }

    /**
     * Starts or joins the keyed run, then checks it was started for this very request. Resolves
     * false: a joined run did not begin with `stopAtStart` (the handle cancels it instead).
     */
    async function startKeyed(stopAtStart: StopAtStart | undefined): Promise<Begun> {
      const fingerprint = sha256(canonicalJson({ provider: name, request: input.request }));
      try {
        await indexed((extra) =>
          withinDeadline(context, () =>
            workflow.start<typeof subagentRunWorkflow>(SUBAGENT_RUN_WORKFLOW, {
              ...startOptions(stopAtStart),
              ...extra,
              // Joins the run its key already started, running or closed.
              workflowIdConflictPolicy: 'USE_EXISTING',
              memo: { requestFingerprint: fingerprint },
            }),
          ),
        );
      } catch (err) {
        // The key's run has closed: this start is that run, as it ended.
        if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      }
      const { memo } = await withinDeadline(context, () => workflow.getHandle(runId).describe());
      if (memo?.requestFingerprint !== fingerprint) {
        throw new SubagentError(
          `idempotency key "${key}" already started run ${runId} for a different request`,
          'IDEMPOTENCY_CONFLICT',
        );
      }
      return { applied: false };
    }
    if (signal?.aborted) handle.run.cancel('subagent cancelled');
    else if (signal) {
      signal.onAbort = () => handle.run.cancel('subagent cancelled');
      handle.run.result.finally(() => signal.removeListener()).catch(() => undefined);
    }
    return handle.run;
  }

  /**
   * Starts with the runs' search attributes while the server knows them. A server that does not
   * (a cluster where `subagents setup` never ran) refuses the start; then this service warns once
   * and starts runs without them, which the workflow notices and keeps none up to date.
   */
  private async indexedStart<T>(
    attributes: SearchAttributePair[],
    start: (extra: { typedSearchAttributes?: SearchAttributePair[] }) => Promise<T>,
  ): Promise<T> {
    if (!this.indexing) return start({});
    try {
      return await start({ typedSearchAttributes: attributes });
    } catch (err) {
      const reason = unknownSearchAttribute(err);
      if (reason === undefined) throw err;
      this.indexing = false;
      this.context.logger.warn(
        `subagent: the Temporal namespace does not know the subagent search attributes, so runs start without them (\`subagents setup\` registers them): ${reason}`,
      );
      return start({});
    }
  }

  /**
   * A handle on an existing run, e.g. after the caller restarted: `result` resolves with its
   * current segment's result (the last one if the run has closed) and rejects with `UNKNOWN_RUN`
   * if no such run exists, or the id names a workflow of another type (then no call on the handle
   * reaches it). `sendMessage`/`resume` follow the provider's descriptor when it is
   * registered here; otherwise both are present and the run refuses what its provider lacks.
   */
  attach(runId: string): SubagentRun {
    if (typeof runId !== 'string' || !runId.startsWith(RUN_ID_PREFIX)) {
      throw new SubagentError(
        `"${runId}" is not a subagent run id (they start with "${RUN_ID_PREFIX}")`,
        'UNKNOWN_RUN',
      );
    }
    // No run's id has a lone surrogate, and the server cannot even be asked about one.
    if (!runId.isWellFormed()) {
      throw new SubagentError(`"${runId}" is not a subagent run id (it is not well-formed text)`, 'UNKNOWN_RUN');
    }
    const provider = runId.slice(RUN_ID_PREFIX.length, runId.lastIndexOf(':'));
    const descriptor = this.providers.get(provider)?.descriptor;
    return new RunHandle(this.context, {
      runId,
      provider,
      steering: descriptor ? (descriptor.steering ?? false) : true,
      resumable: descriptor ? (descriptor.resumable ?? false) : true,
      emitEvents: false,
    }).run;
  }
}

/**
 * Throws `INVALID_CONFIG` for a task queue given that cannot be one (`taskQueueViolation`): empty,
 * not well-formed, or too long. The service started every run on it, and the server refused each.
 */
export function checkTaskQueue(name: string, taskQueue: unknown): void {
  const violation = taskQueue === undefined ? undefined : taskQueueViolation(taskQueue);
  if (violation) throw new SubagentError(`subagent provider "${name}": ${violation}`, 'INVALID_CONFIG');
}

/**
 * Throws `INVALID_CONFIG` for a model endpoint that cannot work: a rate that is not a positive
 * number, a `maxTokens` or `maxContextChars` that is not a positive whole number, or a `baseURL`
 * that is not an http(s) URL (`localhost:8080/v1` has no scheme: each model call failed as
 * "Connection error.", retried for minutes before the run ended `error`).
 */
export function checkEndpoint(name: string, endpoint: Partial<SubagentAgentProvider['endpoint']> | undefined): void {
  for (const limit of ['requestsPerMinute', 'tokensPerMinute', 'tokenBurst'] as const) {
    const value = endpoint?.[limit];
    if (value !== undefined && !(typeof value === 'number' && Number.isFinite(value) && value > 0)) {
      throw new SubagentError(
        `subagent provider "${name}": endpoint.${limit} must be a positive number (got ${value})`,
        'INVALID_CONFIG',
      );
    }
  }
  // Counts, as endpointFromEnv reads them: a NaN maxContextChars left every tool result out of
  // the conversation ("over the conversation's budget of NaN"), and a maxTokens of -1 or 1.5 was
  // sent as max_tokens, which the endpoint refuses at every call.
  for (const count of ['maxTokens', 'maxContextChars'] as const) {
    const value = endpoint?.[count];
    if (value !== undefined && !(Number.isSafeInteger(value) && value > 0)) {
      throw new SubagentError(
        `subagent provider "${name}": endpoint.${count} must be a positive whole number (got ${describeValue(value)})`,
        'INVALID_CONFIG',
      );
    }
  }
  const baseURL: unknown = endpoint?.baseURL;
  if (baseURL !== undefined && baseURL !== '' && !isHttpUrl(baseURL)) {
    throw new SubagentError(
      `subagent provider "${name}": endpoint.baseURL must be an http or https URL, such as "http://localhost:8080/v1" (got ${describeValue(baseURL)})`,
      'INVALID_CONFIG',
    );
  }
}

/**
 * Throws `INVALID_CONFIG`, naming the option, for a number that cannot work. Each failed only
 * later: a `startTimeoutMs` of Infinity (or 1e300) panicked the native client's gRPC thread and
 * every start rejected `UNAVAILABLE`, as every start did with one of 0 or less; a NaN
 * `reconnectWindowMs` never gave up; a NaN or 0 `maxPayloadBytes` refused every start.
 */
function checkServiceNumbers(options: TemporalSubagentServiceOptions): void {
  const refuse = (name: string, what: string, value: unknown): never => {
    throw new SubagentError(`${name} must be ${what} (got ${describeValue(value)})`, 'INVALID_CONFIG');
  };
  const { startTimeoutMs, reconnectWindowMs, maxPayloadBytes } = options;
  // The longest gRPC deadline the service sets is as long as a Node timer holds (about 24.8 days).
  if (startTimeoutMs !== undefined && !isWholeNumber(startTimeoutMs, 1, MAX_TIMER_MS)) {
    refuse('startTimeoutMs', `a whole number of milliseconds from 1 to ${MAX_TIMER_MS}`, startTimeoutMs);
  }
  if (reconnectWindowMs !== undefined && !(typeof reconnectWindowMs === 'number' && reconnectWindowMs >= 0)) {
    refuse('reconnectWindowMs', 'a number of milliseconds, 0 or more (Infinity: for ever)', reconnectWindowMs);
  }
  if (maxPayloadBytes !== undefined && !isWholeNumber(maxPayloadBytes, 1)) {
    refuse('maxPayloadBytes', 'a whole number of bytes, 1 or more', maxPayloadBytes);
  }
}

/** Whether the provider's model calls go to a rate-limited queue of their own. */
function rateLimited(descriptor: SubagentProviderDescriptor): boolean {
  return (
    descriptor.driver === 'agent-loop' &&
    (descriptor as Partial<SubagentAgentProvider>).endpoint?.requestsPerMinute !== undefined
  );
}

/**
 * An LLM provider whose endpoint this process configures (a base URL or a key) must have a model
 * to call: the request's, the parent's, or the endpoint's. Without one every model call would
 * fail; refuse before the run exists. A provider whose endpoint is configured elsewhere (only on
 * its workers) is not judged here.
 */

function assertModelNamed(descriptor: SubagentProviderDescriptor, request: ResolvedSubagentRequest): void {
  const { endpoint } = descriptor as Partial<SubagentAgentProvider>;
  if (descriptor.driver !== 'agent-loop' || !(endpoint?.baseURL || endpoint?.apiKey)) return;
  if (requestedModel(request) !== undefined || endpoint.model) return;
  throw new SubagentError(
    `subagent provider "${descriptor.name}" has no model to call: set SUBAGENT_MODEL (or its endpoint's model), the request's agentOptions.model, or the parent's options.model`,
    'INVALID_CONFIG',
  );
}

/**
 * The request's abort signal, listened to before the run exists, so a signal that cannot be
 * listened to fails the start with nothing created. `onAbort` is set once the run's handle is.
 */
function listenable(
  signal: AbortSignal | undefined,
): { aborted: boolean; onAbort?: () => void; removeListener(): void } | undefined {
  if (signal === undefined) return undefined;
  const listening: { aborted: boolean; onAbort?: () => void; removeListener(): void } = {
    aborted: signal.aborted === true,
    removeListener: () => signal.removeEventListener('abort', listener),
  };
  const listener = () => listening.onAbort?.();
  if (!listening.aborted) signal.addEventListener('abort', listener, { once: true });
  return listening;
}

function idempotencyKeyOf(request: SubagentStartRequest): string | undefined {
  const key = request.idempotencyKey;
  if (key !== undefined && !(typeof key === 'string' && key.length > 0 && key.length <= 256)) {
    throw new SubagentError('request.idempotencyKey must be a string of 1 to 256 characters', 'INVALID_REQUEST');
  }
  return key;
}

function sha256(value: string): string {
  return createHash('sha256').update(value).digest('hex').slice(0, 40);
}
