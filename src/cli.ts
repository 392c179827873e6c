#!/usr/bin/env node
// `subagents`: operate durable subagent runs from a terminal. `dev` runs the embedded server and a
// worker; the other commands talk to TEMPORAL_ADDRESS (default 127.0.0.1:7233, where `dev`
// listens). Human output by default, `--json` for scripts; exit codes in USAGE below.
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Client, WorkflowNotFoundError } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import type { ContentBlock, SubagentResult } from '../activities/contracts';
import { AuditRecord, auditDrafts, exportAudit, verifyAudit } from './audit';
import { codecFromEnv } from './codec';
import { temporalSettingsFromEnv } from './config';
import { startDevServer } from './dev-server';
import { runStarted } from './run-handle';
import { SubagentError } from './errors';
import { BUILTIN_PROVIDERS, builtinProvider, providersFromEnv } from './providers/from-env';
import { ensureSearchAttributes } from './search-attributes';
import { TemporalSubagentService } from './service';
import { createSubagentWorker } from './worker';
import { SubagentRunStatus, sendMessageSignal, statusQuery } from '../workflows/subagent-run';

const USAGE = `usage: subagents <command> [options]

  dev [--port N] [--ui-port N]            embedded Temporal server (.data/temporal.db) and a worker
                                          hosting SUBAGENT_PROVIDERS (default scripted,spawn,fork)
  worker                                  a worker for SUBAGENT_PROVIDERS against TEMPORAL_ADDRESS
  setup                                   register the runs' search attributes on the namespace
  start <provider> <prompt> [--schema FILE] [--cwd DIR] [--max-depth N] [--agent-options JSON] [--wait]
  list [--provider P] [--status running|parked|closed] [--limit N]
  show <id>
  send <id> <message>
  cancel <id>
  resume <id> <message> [--wait]
  logs <id> [--no-follow]                 the run's records as they happen
  audit export <id> [--out FILE]          the run's whole history as hash-chained JSONL
  audit verify <file>                     checks a chain; exits 5 if a record was changed

options: --json (machine-readable output), --help
environment: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*, SUBAGENT_ENCRYPTION_KEYS
exit codes: 0 done; 1 the run ended without completing; 2 usage error; 3 unknown run;
            4 Temporal server unreachable; 5 audit verification failed; 6 any other error`;

const EXIT = { ok: 0, notCompleted: 1, usage: 2, unknownRun: 3, unreachable: 4, tampered: 5, failed: 6 } as const;

class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

interface Flags {
  json: boolean;
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

const out = (flags: Flags, human: string, data: unknown) => console.log(flags.json ? JSON.stringify(data) : human);
const textOf = (content: readonly ContentBlock[]) => content.map((block) => (block.type === 'text' ? block.text : '')).join('');
const text = (value: string): ContentBlock[] => [{ type: 'text', text: value }];

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
      wait: { type: 'boolean', default: false },
      'no-follow': { type: 'boolean', default: false },
      schema: { type: 'string' },
      'agent-options': { type: 'string' },
      cwd: { type: 'string' },
      'max-depth': { type: 'string' },
      provider: { type: 'string' },
      status: { type: 'string' },
      limit: { type: 'string' },
      out: { type: 'string' },
      port: { type: 'string' },
      'ui-port': { type: 'string' },
    },
  });
  const flags: Flags = { json: Boolean(values.json), values, positionals };
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    console.log(USAGE);
    return values.help ? EXIT.ok : EXIT.usage;
  }
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  switch (command) {
    case 'dev':
      return dev(flags);
    case 'worker':
      return worker();
    case 'audit':
      if (rest[0] === 'verify') return auditVerify(flags, need(rest[1], 'audit verify <file>'));
      if (rest[0] === 'export') return withClient((client) => auditExport(flags, client, need(rest[1], 'audit export <id>')));
      throw new CliError('usage: subagents audit export <id> | audit verify <file>', EXIT.usage);
    case 'setup':
      return withClient(async (_client, connection, namespace) => {
        const added = await ensureSearchAttributes(connection, namespace);
        out(flags, added.length ? `registered ${added.join(', ')} on ${namespace}` : `search attributes already registered on ${namespace}`, { added });
        return EXIT.ok;
      });
    case 'start':
      return withClient((client) => start(flags, client, need(rest[0], 'start <provider> <prompt>'), need(rest[1], 'start <provider> <prompt>')));
    case 'list':
      return withClient((client) => list(flags, client));
    case 'show':
      return withClient((client) => show(flags, client, need(rest[0], 'show <id>')));
    case 'send':
      return withClient((client) => send(flags, client, need(rest[0], 'send <id> <message>'), need(rest[1], 'send <id> <message>')));
    case 'cancel':
      return withClient((client) => cancel(flags, client, need(rest[0], 'cancel <id>')));
    case 'resume':
      return withClient((client) => resume(flags, client, need(rest[0], 'resume <id> <message>'), need(rest[1], 'resume <id> <message>')));
    case 'logs':
      return withClient((client) => logs(flags, client, need(rest[0], 'logs <id>')));
    default:
      throw new CliError(`unknown command "${command}"\n\n${USAGE}`, EXIT.usage);
  }
}

function need(value: string | undefined, usage: string): string {
  if (!value) throw new CliError(`usage: subagents ${usage}`, EXIT.usage);
  return value;
}

/** Connects to TEMPORAL_ADDRESS (default 127.0.0.1:7233) with the environment's TLS and encryption. */
async function withClient(fn: (client: Client, connection: NativeConnection, namespace: string) => Promise<number>): Promise<number> {
  const settings = temporalSettingsFromEnv() ?? { address: '127.0.0.1:7233', namespace: 'default' };
  let connection: NativeConnection;
  try {
    connection = await NativeConnection.connect({
      address: settings.address,
      ...(settings.tls === undefined ? {} : { tls: settings.tls }),
      ...(settings.apiKey ? { apiKey: settings.apiKey } : {}),
    });
  } catch (err) {
    throw new CliError(
      `cannot reach the Temporal server at ${settings.address} (${(err as Error).message.split('\n')[0]}): start one with \`subagents dev\` or set TEMPORAL_ADDRESS`,
      EXIT.unreachable,
    );
  }
  const codec = codecFromEnv();
  const dataConverter: DataConverter | undefined = codec ? { payloadCodecs: [codec] } : undefined;
  try {
    return await fn(new Client({ connection, namespace: settings.namespace, ...(dataConverter ? { dataConverter } : {}) }), connection, settings.namespace);
  } finally {
    await connection.close();
  }
}

/** A service that knows the built-in providers' descriptors, and a plain one for any other name. */
function serviceFor(client: Client, provider: string): TemporalSubagentService {
  const service = new TemporalSubagentService({ client, logger: { warn: (message) => console.error(message) } });
  const descriptor = BUILTIN_PROVIDERS.includes(provider) && provider !== 'acp'
    ? builtinProvider(provider)
    : { name: provider, capabilities: { outputSchema: false, depthLimit: false, toolFilter: false }, inheritsParentContext: false, steering: true, resumable: true };
  service.registerProvider(descriptor);
  return service;
}

async function dev(flags: Flags): Promise<number> {
  const port = Number(flags.values.port ?? 7233);
  const uiPort = flags.values['ui-port'] === undefined ? undefined : Number(flags.values['ui-port']);
  const server = await startDevServer({ port, dbFilename: resolve('.data', 'temporal.db'), ...(uiPort === undefined ? {} : { uiPort }) });
  const connection = await NativeConnection.connect({ address: server.address });
  await ensureSearchAttributes(connection, server.namespace);
  const codec = codecFromEnv();
  const subagentWorker = await createSubagentWorker({
    connection,
    providers: providersFromEnv(process.env, 'scripted,spawn,fork'),
    ...(codec ? { dataConverter: { payloadCodecs: [codec] } } : {}),
  });
  out(flags, `Temporal dev server on ${server.address}${server.uiUrl ? `, Web UI ${server.uiUrl}` : ''}; worker polling ${subagentWorker.taskQueues.join(', ')}. Ctrl-C stops both.`, {
    address: server.address,
    uiUrl: server.uiUrl,
    taskQueues: subagentWorker.taskQueues,
  });
  try {
    await subagentWorker.run(); // until SIGINT or SIGTERM
  } finally {
    await connection.close();
    await server.stop();
  }
  return EXIT.ok;
}

async function worker(): Promise<number> {
  await import('./worker-main');
  return new Promise<number>(() => undefined); // worker-main owns the process from here
}

async function start(flags: Flags, client: Client, provider: string, prompt: string): Promise<number> {
  const service = serviceFor(client, provider);
  const schema = flags.values.schema ? (JSON.parse(readFileSync(String(flags.values.schema), 'utf8')) as Record<string, unknown>) : undefined;
  const maxDepth = flags.values['max-depth'] === undefined ? undefined : Number(flags.values['max-depth']);
  const cwd = resolve(String(flags.values.cwd ?? process.cwd()));
  const agentOptions = flags.values['agent-options'] === undefined ? undefined : (JSON.parse(String(flags.values['agent-options'])) as Record<string, unknown>);
  const run = service.start(provider, {
    prompt: text(prompt),
    ...(agentOptions ? { agentOptions } : {}),
    parent: { id: 'subagents-cli', session: { header: { id: 'subagents-cli', cwd } } },
    ...(schema ? { outputSchema: schema } : {}),
    ...(maxDepth === undefined ? {} : { maxDepth }),
  });
  if (!flags.values.wait) {
    await runStarted(run);
    out(flags, run.id, { id: run.id });
    return EXIT.ok;
  }
  await runStarted(run);
  if (!flags.json) console.error(`started ${run.id}`);
  return waitAndPrint(flags, client, run.id, run.result);
}

/** Shows progress on stderr while waiting (human mode), then the result; exit 1 unless completed. */
async function waitAndPrint(flags: Flags, client: Client, runId: string, result: Promise<SubagentResult>): Promise<number> {
  const progress = flags.json ? undefined : followProgress(client, runId);
  const settled = await result;
  await progress?.finish();
  out(flags, `${settled.stopReason}: ${textOf(settled.output)}${settled.structured === undefined ? '' : `\n${JSON.stringify(settled.structured)}`}`, { id: runId, ...settled });
  return settled.stopReason === 'completed' ? EXIT.ok : EXIT.notCompleted;
}

/** Prints the run's records on stderr as they happen; `finish` prints what the follower had not reached yet. */
function followProgress(client: Client, runId: string): { finish(): Promise<void> } {
  const startedAt = Date.now();
  let printed = 0;
  let stopped = false;
  const print = (records: Pick<AuditRecord, 'type' | 'data'>[], from: number) => {
    for (const record of records.slice(from)) {
      const line = describeRecord(record);
      if (line) console.error(`  ${((Date.now() - startedAt) / 1000).toFixed(1).padStart(5)}s  ${line}`);
    }
  };
  void (async () => {
    for await (const record of auditDrafts(client, runId, true)) {
      if (stopped) return;
      print([record], 0);
      printed++;
    }
  })().catch(() => undefined);
  return {
    async finish() {
      stopped = true;
      const records = [];
      for await (const record of auditDrafts(client, runId, false)) records.push(record);
      print(records, printed);
    },
  };
}

async function list(flags: Flags, client: Client): Promise<number> {
  const clauses = [`WorkflowType = 'subagentRunWorkflow'`];
  const quote = (value: string) => `'${value.replaceAll("'", "\\'")}'`;
  if (flags.values.provider) clauses.push(`SubagentProvider = ${quote(String(flags.values.provider))}`);
  if (flags.values.status) clauses.push(`SubagentStatus = ${quote(String(flags.values.status))}`);
  const limit = Number(flags.values.limit ?? 50);
  const rows: Record<string, unknown>[] = [];
  for await (const execution of client.workflow.list({ query: clauses.join(' AND ') })) {
    const attributes = execution.searchAttributes as Record<string, unknown[] | undefined>;
    rows.push({
      id: execution.workflowId,
      provider: attributes.SubagentProvider?.[0],
      status: attributes.SubagentStatus?.[0] ?? execution.status.name.toLowerCase(),
      stopReason: attributes.SubagentStopReason?.[0],
      depth: attributes.SubagentDepth?.[0],
      parentRunId: attributes.SubagentParentRunId?.[0],
      started: execution.startTime.toISOString(),
    });
    if (rows.length >= limit) break;
  }
  if (flags.json) console.log(JSON.stringify(rows));
  else if (rows.length === 0) console.log('no runs');
  else for (const row of rows) console.log(`${row.id}  ${row.provider ?? '?'}  ${row.status}${row.stopReason ? ` (${row.stopReason})` : ''}  depth ${row.depth ?? '?'}  ${row.started}`);
  return EXIT.ok;
}

async function show(flags: Flags, client: Client, id: string): Promise<number> {
  const handle = client.workflow.getHandle(id);
  const description = await describeOrUnknown(handle, id);
  const attributes = description.searchAttributes as Record<string, unknown[] | undefined>;
  let status: SubagentRunStatus | undefined;
  try {
    status = await client.connection.withDeadline(Date.now() + 5000, () => handle.query(statusQuery));
  } catch {
    // No worker answers queries right now; the search attributes still tell the state.
  }
  const data = {
    id,
    temporalStatus: description.status.name,
    provider: status?.provider ?? attributes.SubagentProvider?.[0],
    status: attributes.SubagentStatus?.[0],
    stopReason: attributes.SubagentStopReason?.[0],
    depth: status?.depth ?? attributes.SubagentDepth?.[0],
    parentRunId: status?.parentRunId ?? attributes.SubagentParentRunId?.[0],
    started: description.startTime.toISOString(),
    ...(status
      ? {
          segment: status.segment,
          phase: status.phase,
          turns: status.turns,
          pendingMessages: status.pendingMessages,
          usage: status.usage,
          children: status.children,
          resumableUntil: status.resumableUntil === undefined ? undefined : new Date(status.resumableUntil).toISOString(),
          lastResult: status.lastResult,
        }
      : {}),
  };
  const human = [
    `${id}`,
    `  provider ${data.provider ?? '?'}, depth ${data.depth ?? '?'}${data.parentRunId ? `, parent ${data.parentRunId}` : ''}`,
    `  status ${data.status ?? data.temporalStatus}${data.stopReason ? ` (${data.stopReason})` : ''}${status ? `, segment ${status.segment}, ${status.turns} turns, ${status.pendingMessages} messages waiting` : ''}`,
    ...(status ? [`  tokens ${status.usage.promptTokens} prompt + ${status.usage.completionTokens} completion`] : []),
    ...(status?.children.length ? [`  children ${status.children.join(', ')}`] : []),
    ...(data.resumableUntil ? [`  resumable until ${data.resumableUntil}`] : []),
    ...(status?.lastResult ? [`  last result: ${textOf(status.lastResult.output)}`] : []),
  ].join('\n');
  out(flags, human, data);
  return EXIT.ok;
}

async function send(flags: Flags, client: Client, id: string, message: string): Promise<number> {
  const handle = client.workflow.getHandle(id);
  await describeOrUnknown(handle, id);
  await handle.signal(sendMessageSignal, { content: text(message) });
  out(flags, `sent to ${id}`, { id, sent: true });
  return EXIT.ok;
}

async function cancel(flags: Flags, client: Client, id: string): Promise<number> {
  const handle = client.workflow.getHandle(id);
  await describeOrUnknown(handle, id);
  await handle.cancel();
  out(flags, `cancel requested for ${id}`, { id, cancelRequested: true });
  return EXIT.ok;
}

async function resume(flags: Flags, client: Client, id: string, message: string): Promise<number> {
  const provider = id.startsWith('subagent-') ? id.slice('subagent-'.length, id.lastIndexOf(':')) : '';
  const service = serviceFor(client, provider);
  const attached = service.attach(id);
  await attached.result;
  if (!attached.resume) throw new CliError(`run ${id} cannot be resumed`, EXIT.failed);
  const resumed = attached.resume(text(message));
  if (!flags.values.wait) {
    await runStarted(resumed);
    out(flags, `resumed ${id}`, { id, resumed: true });
    return EXIT.ok;
  }
  return waitAndPrint(flags, client, id, resumed.result);
}

async function logs(flags: Flags, client: Client, id: string): Promise<number> {
  for await (const record of auditDrafts(client, id, !flags.values['no-follow'])) {
    if (flags.json) console.log(JSON.stringify(record));
    else console.log(`${record.time}  ${describeRecord(record) ?? record.type}`);
  }
  return EXIT.ok;
}

async function auditExport(flags: Flags, client: Client, id: string): Promise<number> {
  const records = await exportAudit(client, id);
  const jsonl = records.map((record) => JSON.stringify(record)).join('\n') + '\n';
  if (flags.values.out) {
    writeFileSync(String(flags.values.out), jsonl);
    if (!flags.json) console.error(`wrote ${records.length} records to ${flags.values.out}`);
    else console.log(JSON.stringify({ id, records: records.length, file: flags.values.out }));
  } else {
    process.stdout.write(jsonl);
  }
  return EXIT.ok;
}

function auditVerify(flags: Flags, file: string): number {
  const lines = readFileSync(file, 'utf8').split('\n').filter((line) => line.trim() !== '');
  let records: unknown[];
  try {
    records = lines.map((line) => JSON.parse(line) as unknown);
  } catch {
    out(flags, `${file}: not JSONL`, { ok: false, reason: 'not JSONL' });
    return EXIT.tampered;
  }
  const verdict = verifyAudit(records);
  out(flags, verdict.ok ? `${file}: ${verdict.records} records, chain intact` : `${file}: record ${verdict.seq}: ${verdict.reason}`, verdict);
  return verdict.ok ? EXIT.ok : EXIT.tampered;
}

async function describeOrUnknown(handle: ReturnType<Client['workflow']['getHandle']>, id: string) {
  try {
    return await handle.describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new CliError(`no subagent run with id "${id}"`, EXIT.unknownRun);
    throw err;
  }
}

/** One line for a record, for humans; undefined for records not worth a progress line. */
function describeRecord(record: Pick<AuditRecord, 'type' | 'data'>): string | undefined {
  const data = record.data as Record<string, unknown>;
  const content = (value: unknown) => (Array.isArray(value) ? textOf(value as ContentBlock[]) : '');
  switch (record.type) {
    case 'start':
      return `started on ${String(data.provider)}: ${content((data.request as { prompt: unknown }).prompt)}`;
    case 'message':
      return `message: ${content(data.content)}`;
    case 'resume':
      return `resume: ${content(data.content)}`;
    case 'turn':
      return `turn ${String(data.turn)} ${String(data.stopReason)}: ${content(data.output)}`;
    case 'model.call':
      return `model call (turn ${String(data.turn)}) ${String(data.stopReason)}: ${content(data.output)}`;
    case 'tool.call':
      return `tool ${String(data.tool)}(${String(data.arguments)})`;
    case 'permission':
      return `permission ${String(data.decision)}: ${String(data.toolCall)}`;
    case 'result':
      return `result of segment ${String(data.segment)}: ${String((data.result as SubagentResult).stopReason)}`;
    case 'cancel':
      return 'cancel requested';
    case 'close':
      return `closed (${String(data.closedBy)})`;
    case 'activity.failed':
      return `${String(data.activity)} ${String(data.outcome)}${data.failure ? `: ${String(data.failure)}` : ''}`;
    default:
      return undefined;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof CliError) {
      console.error(err.message);
      process.exit(err.exitCode);
    }
    if (err instanceof SubagentError) {
      console.error(`${err.code}: ${err.message}`);
      process.exit(err.code === 'UNKNOWN_RUN' ? EXIT.unknownRun : err.code === 'UNAVAILABLE' ? EXIT.unreachable : EXIT.failed);
    }
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(EXIT.failed);
  },
);
