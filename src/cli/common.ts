// What every `subagents` command shares: parsed flags, output (human or `--json`), exit codes,
// and a client connection to the configured server.
import { Client, WorkflowNotFoundError } from '@temporalio/client';
import { SUBAGENT_RUN_WORKFLOW } from '../../workflows/definitions';
import { type SubagentClientConnection, connectClient } from '../client/connect';
import { TemporalSubagentService } from '../client/service';
import { BUILTIN_PROVIDERS, builtinProvider } from '../providers/from-env';
import { SubagentError } from '../seam/errors';
import { omitUndefined } from '../seam/json';
import type { SubagentProviderDescriptor } from '../seam/provider';

export const EXIT = {
  ok: 0,
  notCompleted: 1,
  usage: 2,
  unknownRun: 3,
  unreachable: 4,
  tampered: 5,
  failed: 6,
} as const;

/** A failure with the exit code it means; its message is printed as is. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

export interface Flags {
  json: boolean;
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

/** Prints the human line, or `data` as one JSON line with `--json`. */
export const out = (flags: Flags, human: string, data: unknown) =>
  console.log(flags.json ? JSON.stringify(data) : human);

export function need(value: string | undefined, usage: string): string {
  if (!value) throw new CliError(`usage: subagents ${usage}`, EXIT.usage);
  return value;
}

/**
 * The whole number an option gives, from `min` to `max`; undefined when it is not given.
 * Otherwise a usage error, exit 2.
 */
export function wholeNumberOption(flags: Flags, name: string, min: number, max?: number): number | undefined {
  const value = flags.values[name];
  if (value === undefined) return undefined;
  const number = typeof value === 'string' && /^\s*-?\d+\s*$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(number) || number < min || (max !== undefined && number > max)) {
    const range = max === undefined ? `of ${min} or more` : `from ${min} to ${max}`;
    throw new CliError(`usage: --${name} takes a whole number ${range} (got ${JSON.stringify(value)})`, EXIT.usage);
  }
  return number;
}

/** How long a command waits for the server to answer before it says it is unreachable. */
const CONNECT_TIMEOUT_MS = 5000;

/** Runs `fn` with a client of the configured server (127.0.0.1:7233 when none is), then closes it. */
export async function withClient(fn: (temporal: SubagentClientConnection) => Promise<number>): Promise<number> {
  let temporal: SubagentClientConnection;
  try {
    temporal = await connectClient({ connectTimeoutMs: CONNECT_TIMEOUT_MS });
  } catch (err) {
    if (!(err instanceof SubagentError && err.code === 'UNAVAILABLE')) throw err;
    throw new CliError(`${err.message}: start one with \`subagents dev\` or set TEMPORAL_ADDRESS`, EXIT.unreachable);
  }
  try {
    return await fn(temporal);
  } finally {
    await temporal.close();
  }
}

/**
 * A service that knows the built-in providers' descriptors, and a plain one for any other name.
 * Descriptors only: the worker's environment, not this one, configures the model endpoint.
 */
export function serviceFor(client: Client, provider: string): TemporalSubagentService {
  const service = new TemporalSubagentService({ client, logger: { warn: (message) => console.error(message) } });
  service.registerProvider(
    BUILTIN_PROVIDERS.includes(provider) && provider !== 'acp'
      ? descriptorOf(builtinProvider(provider))
      : {
          name: provider,
          capabilities: { outputSchema: false, depthLimit: false, toolFilter: false },
          inheritsParentContext: false,
          steering: true,
          resumable: true,
        },
  );
  return service;
}

/** The fields the service reads of a provider, without the implementation and its endpoint. */
function descriptorOf(provider: SubagentProviderDescriptor): SubagentProviderDescriptor {
  const { name, capabilities, inheritsParentContext, steering, steeringWithinTurn, resumable } = provider;
  const { driver, toolNames, taskQueue, runSettings } = provider;
  return omitUndefined({
    name,
    capabilities,
    inheritsParentContext,
    steering,
    steeringWithinTurn,
    resumable,
    driver,
    toolNames,
    taskQueue,
    runSettings,
  });
}

/**
 * The run's description; an unknown id is exit 3, and so is a workflow of another type (its id
 * only looks like a run's), before a command signals or cancels it.
 */
export async function describeOrUnknown(handle: ReturnType<Client['workflow']['getHandle']>, id: string) {
  let description;
  try {
    description = await handle.describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new CliError(`no subagent run with id "${id}"`, EXIT.unknownRun);
    throw err;
  }
  if (description.type !== SUBAGENT_RUN_WORKFLOW) {
    throw new CliError(
      `no subagent run with id "${id}": it is a workflow of type "${description.type}"`,
      EXIT.unknownRun,
    );
  }
  return description;
}
