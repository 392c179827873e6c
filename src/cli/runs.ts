// The commands that operate runs: start, list, show, send, cancel, resume, logs. Each talks to
// the configured server through a client connection; none loads the Temporal worker.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Client } from '@temporalio/client';
import { decodeSearchAttributes } from '@temporalio/common/lib/converter/payload-search-attributes';
import { temporal } from '@temporalio/proto';
import { type SubagentRunStatus, sendMessageSignal, statusQuery } from '../../workflows/definitions';
import { type AuditRecord, auditDrafts } from '../audit';
import { approveRequest } from '../client/run-approvals';
import { decodePayload } from '../temporal/run-history';
import { isNotFound } from '../temporal/errors';
import { runStarted } from '../client/run-handle';
import { RUN_ID_PREFIX } from '../seam/constants';
import { type ContentBlock, textContent, textOf } from '../seam/content';
import type { SubagentResult, SubagentSpend } from '../seam/result';
import { CliError, EXIT, Flags, describeOrUnknown, out, serviceFor, wholeNumberOption } from './common';
import { ReaderGone, print, readerWatch } from './output';

export async function start(flags: Flags, client: Client, provider: string, prompt: string): Promise<number> {
  const service = serviceFor(client, provider);
  const schema = flags.values.schema
    ? (jsonOption('schema', readFileSync(String(flags.values.schema), 'utf8')) as Record<string, unknown>)
    : undefined;
  const maxDepth = wholeNumberOption(flags, 'max-depth', 0);
  // No working directory unless one is given: a child's file tools reach only what it was handed,
  // never wherever the command happened to be typed.
  const cwd = flags.values.cwd === undefined ? undefined : resolve(String(flags.values.cwd));
  const agentOptions =
    flags.values['agent-options'] === undefined
      ? undefined
      : (jsonOption('agent-options', String(flags.values['agent-options'])) as Record<string, unknown>);
  const run = service.start(provider, {
    prompt: textContent(prompt),
    ...(agentOptions ? { agentOptions } : {}),
    parent: {
      id: 'subagents-cli',
      session: { header: { id: 'subagents-cli', ...(cwd === undefined ? {} : { cwd }) } },
    },
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

/** An option's JSON (or its file's); text that is not JSON is a usage error, exit 2. */
function jsonOption(name: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CliError(`usage: --${name} takes JSON: ${(err as Error).message}`, EXIT.usage);
  }
}

/**
 * Shows progress on stderr while waiting (human mode), then the result; exit 1 unless completed.
 * Once stdout's reader is seen to go (see `readerWatch`), it waits no more: `ReaderGone`, exit 0,
 * the run going on without it.
 */
async function waitAndPrint(
  flags: Flags,
  client: Client,
  runId: string,
  result: Promise<SubagentResult>,
): Promise<number> {
  const progress = flags.json ? undefined : followProgress(client, runId);
  // A run waiting for a worker, or in a long turn, settles in days maybe: a reader of its result
  // that has gone meanwhile ends the wait, not the result's print.
  const reader = readerWatch();
  let settled: SubagentResult;
  try {
    settled = await Promise.race([
      result,
      new Promise<never>((_, reject) => {
        const gone = () => reject(reader.signal.reason);
        if (reader.signal.aborted) gone();
        else reader.signal.addEventListener('abort', gone, { once: true });
      }),
    ]);
  } catch (err) {
    // The result no longer awaited rejects when the connection closes: nobody's to report.
    if (reader.signal.aborted) result.catch(() => undefined);
    throw err;
  } finally {
    reader.stop();
  }
  await progress?.finish();
  const structured = settled.structured === undefined ? '' : `\n${JSON.stringify(settled.structured)}`;
  const diagnostic =
    settled.stopReason === 'completed' || !settled.diagnostic ? '' : `\ndiagnostic: ${settled.diagnostic}`;
  out(flags, `${settled.stopReason}: ${textOf(settled.output)}${structured}${diagnostic}`, { id: runId, ...settled });
  return settled.stopReason === 'completed' ? EXIT.ok : EXIT.notCompleted;
}

/**
 * Prints the run's records on stderr as they happen, at the pace stderr takes them; `finish`
 * prints what the follower had not reached yet. Once stderr's reader has gone, it prints no more
 * (and reads no more), and the result is still printed on stdout.
 */
function followProgress(client: Client, runId: string): { finish(): Promise<void> } {
  const startedAt = Date.now();
  let printed = 0;
  let stopped = false;
  /** The follower's print under way: `finish` prints after it, never beside it. */
  let printing = Promise.resolve();
  const printRecord = async (record: Pick<AuditRecord, 'type' | 'data'>) => {
    const line = describeRecord(record, runId);
    if (line) await print(`  ${((Date.now() - startedAt) / 1000).toFixed(1).padStart(5)}s  ${line}\n`, process.stderr);
  };
  void (async () => {
    for await (const record of auditDrafts(client, runId, true)) {
      if (stopped) return;
      printed++;
      printing = printRecord(record);
      await printing;
    }
  })().catch(() => undefined);
  return {
    async finish() {
      stopped = true;
      try {
        await printing;
        // Read again from the start, printing past what the follower printed: a record at a time.
        let seen = 0;
        for await (const record of auditDrafts(client, runId, false)) if (seen++ >= printed) await printRecord(record);
      } catch (err) {
        if (!(err instanceof ReaderGone)) throw err;
      }
    },
  };
}

/** A visibility query's string literal. */
const quote = (value: string) => `'${value.replaceAll("'", "\\'")}'`;

export async function list(flags: Flags, client: Client): Promise<number> {
  // A run continued as new (a resume, a long segment) goes on in the run it continued as.
  const clauses = [`WorkflowType = 'subagentRunWorkflow'`, `ExecutionStatus != 'ContinuedAsNew'`];
  if (flags.values.provider) clauses.push(`SubagentProvider = ${quote(String(flags.values.provider))}`);
  if (flags.values.status) clauses.push(`SubagentStatus = ${quote(String(flags.values.status))}`);
  const limit = wholeNumberOption(flags, 'limit', 1) ?? 50;
  // The ids listed, so that a run the listing shows twice (its pages read while runs close) is
  // printed once: bounded by --limit, as the listing is.
  const listed = new Set<string>();
  for await (const execution of listedRuns(client, clauses.join(' AND '))) {
    // Each run once, as its current Temporal run shows it: one a reset ended has its last status.
    if (listed.has(execution.workflowId) || !(await isCurrentRun(client, execution))) continue;
    listed.add(execution.workflowId);
    const attributes = execution.searchAttributes;
    const row = {
      id: execution.workflowId,
      provider: attributes.SubagentProvider?.[0],
      status: attributes.SubagentStatus?.[0] ?? execution.status,
      stopReason: attributes.SubagentStopReason?.[0],
      depth: attributes.SubagentDepth?.[0],
      parentRunId: attributes.SubagentParentRunId?.[0],
      started: execution.started,
    };
    // Each row as it is found (a reader gone stops the listing). --json's one array is printed a
    // row at a time, the same text as the array whole: it held every row until the listing ended.
    if (flags.json) await print(`${listed.size === 1 ? '[' : ','}${JSON.stringify(row)}`);
    else {
      await print(
        `${row.id}  ${row.provider ?? '?'}  ${row.status}${row.stopReason ? ` (${row.stopReason})` : ''}  depth ${row.depth ?? '?'}  ${row.started}\n`,
      );
    }
    if (listed.size >= limit) break;
  }
  if (flags.json) await print(listed.size === 0 ? '[]\n' : ']\n');
  else if (listed.size === 0) await print('no runs\n');
  return EXIT.ok;
}

/** One run as the visibility store lists it, read raw: nothing in it is decoded but its search attributes. */
interface ListedRun {
  workflowId: string;
  runId: string;
  /** `running`, `completed`, `terminated`, … */
  status: string;
  /** ISO 8601. */
  started: string;
  searchAttributes: Record<string, unknown[] | undefined>;
}

/**
 * The runs `query` lists, page after page. Read raw, not through `client.workflow.list`, which
 * decodes every run's memo: one sealed by the payload codec failed the whole listing of a client
 * without the keys, though a listing shows only what the server holds in the clear.
 */
async function* listedRuns(client: Client, query: string): AsyncGenerator<ListedRun> {
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await client.workflowService.listWorkflowExecutions({
      namespace: client.options.namespace,
      query,
      ...(nextPageToken ? { nextPageToken } : {}),
    });
    for (const info of page.executions ?? []) {
      const at = info.startTime;
      yield {
        workflowId: info.execution?.workflowId ?? '',
        runId: info.execution?.runId ?? '',
        status: WORKFLOW_STATUS[info.status ?? 0]?.replace('WORKFLOW_EXECUTION_STATUS_', '').toLowerCase() ?? '',
        started: at ? new Date(Number(at.seconds ?? 0) * 1000 + Math.floor((at.nanos ?? 0) / 1e6)).toISOString() : '',
        searchAttributes: decodeSearchAttributes(info.searchAttributes?.indexedFields) as ListedRun['searchAttributes'],
      };
    }
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken);
}

const WORKFLOW_STATUS = temporal.api.enums.v1.WorkflowExecutionStatus;

/** Whether `execution` is its workflow's current run: a closed one may have been reset since. */
async function isCurrentRun(client: Client, execution: ListedRun): Promise<boolean> {
  if (execution.status === 'running') return true;
  try {
    // The raw description: it decodes nothing, so a run whose memo is sealed lists without its keys.
    const { workflowExecutionInfo } = await client.workflowService.describeWorkflowExecution({
      namespace: client.options.namespace,
      execution: { workflowId: execution.workflowId },
    });
    return workflowExecutionInfo?.execution?.runId === execution.runId;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
}

/**
 * `show <id> [--tree]`: the run's state; with `--tree`, every run below it too, each with its
 * status and what it spent, itself and with the runs below it. A run no worker answers for lists
 * its children from the search attributes instead of its status.
 */
export async function show(flags: Flags, client: Client, id: string): Promise<number> {
  const root = await describeRun(client, id);
  if (!flags.values.tree) {
    out(flags, root.human.join('\n'), root.data);
    return EXIT.ok;
  }
  // Each run printed as the walk reaches it, in the order the tree is shown, at the pace stdout
  // takes them: a tree of thousands of runs, each with its last answer, was held whole, then
  // written as one string. --json's one array is the same text as the array whole.
  let printed = 0;
  const printNode = async ({ data, status }: Awaited<ReturnType<typeof describeRun>>, depth: number) => {
    if (flags.json) {
      await print(`${printed++ === 0 ? '[' : ','}${JSON.stringify({ ...data, treeDepth: depth })}`);
      return;
    }
    const spent = status?.spend
      ? `itself ${status.ownSpend ? spendLine(status.ownSpend) : 'unknown'}; with the runs below it ${spendLine(status.spend)}`
      : 'spend unknown';
    await print(
      `${'  '.repeat(depth)}${data.id}  ${data.status ?? data.temporalStatus}${data.stopReason ? ` (${data.stopReason})` : ''}  ${spent}\n`,
    );
  };
  // Each run once: a raw client's childStarted signals can make runs each other's children, or a
  // run its own, and the walk went round such a cycle without end.
  const seen = new Set([id]);
  const walk = async (view: Awaited<ReturnType<typeof describeRun>>, depth: number): Promise<void> => {
    await printNode(view, depth);
    const children = view.status ? view.status.children : await indexedChildren(client, view.data.id);
    for (const child of children) {
      if (seen.has(child)) continue;
      seen.add(child);
      await walk(await describeRun(client, child), depth + 1);
    }
  };
  await walk(root, 0);
  if (flags.json) await print(']\n');
  return EXIT.ok;
}

function spendLine(spend: SubagentSpend): string {
  return `${spend.tokens} tokens, ${spend.modelCalls} model calls, ${spend.turns} turns, $${spend.costUsd.toFixed(4)}`;
}

/**
 * The runs started from inside run `id`, oldest first, by their `SubagentParentRunId` search
 * attribute: for a run whose status no worker answers. None where the namespace lacks the attribute.
 */
async function indexedChildren(client: Client, id: string): Promise<string[]> {
  const children: { id: string; started: number }[] = [];
  try {
    const query = `WorkflowType = 'subagentRunWorkflow' AND SubagentParentRunId = ${quote(id)}`;
    for await (const execution of listedRuns(client, query)) {
      children.push({ id: execution.workflowId, started: Date.parse(execution.started) });
    }
  } catch {
    return [];
  }
  return children.sort((a, b) => a.started - b.started).map((child) => child.id);
}

/** One run as `show` prints it: its data, and the lines a person reads. */
async function describeRun(client: Client, id: string) {
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
          pendingApprovals: status.pendingApprovals ?? [],
          resumableUntil:
            status.resumableUntil === undefined ? undefined : new Date(status.resumableUntil).toISOString(),
          lastResult: status.lastResult,
          spend: status.spend,
          ownSpend: status.ownSpend,
          budgetLeft: status.budgetLeft,
        }
      : {}),
    rateLimitedUntil: await rateLimitedUntil(client, description),
  };
  const human = [
    `${id}`,
    `  provider ${data.provider ?? '?'}, depth ${data.depth ?? '?'}${data.parentRunId ? `, parent ${data.parentRunId}` : ''}`,
    `  status ${data.status ?? data.temporalStatus}${data.stopReason ? ` (${data.stopReason})` : ''}${status ? `, segment ${status.segment}, ${status.turns} turns, ${status.pendingMessages} messages waiting` : ''}`,
    ...(status ? [`  tokens ${status.usage.promptTokens} prompt + ${status.usage.completionTokens} completion`] : []),
    ...(status?.ownSpend ? [`  spent by itself: ${spendLine(status.ownSpend)}`] : []),
    ...(status?.spend ? [`  spent with the runs below it: ${spendLine(status.spend)}`] : []),
    ...(status?.budgetLeft ? [`  budget left: ${JSON.stringify(status.budgetLeft)}`] : []),
    ...(data.rateLimitedUntil ? [`  waiting for the model endpoint's rate limit until ${data.rateLimitedUntil}`] : []),
    ...(status?.children.length ? [`  children ${status.children.join(', ')}`] : []),
    ...(status?.pendingApprovals ?? []).map(
      (request) => `  awaiting approval ${request.requestId}: ${approvalLine(request)}`,
    ),
    ...(data.resumableUntil ? [`  resumable until ${data.resumableUntil}`] : []),
    ...(status?.lastResult ? [`  last result: ${textOf(status.lastResult.output)}`] : []),
  ];
  return { data, human, ...(status ? { status } : {}) };
}

export async function send(flags: Flags, client: Client, id: string, message: string): Promise<number> {
  const handle = client.workflow.getHandle(id);
  const { status } = await describeOrUnknown(handle, id);
  if (status.name !== 'RUNNING') {
    throw new CliError(`run ${id} has closed (${status.name.toLowerCase()}): it takes no more messages`, EXIT.failed);
  }
  await handle.signal(sendMessageSignal, { content: textContent(message) });
  out(flags, `sent to ${id}`, { id, sent: true });
  return EXIT.ok;
}

/**
 * `approve` / `deny`: answers a tool call held for approval in run `id` or a run below it. Exits
 * 1 when the request already had the other decision (another answer, or its timeout).
 */
export async function answerApproval(
  flags: Flags,
  client: Client,
  id: string,
  requestId: string,
  decision: 'allow' | 'deny',
): Promise<number> {
  const reason = flags.values.reason as string | undefined;
  const decided = await approveRequest(client, id, requestId, {
    decision,
    ...(reason === undefined ? {} : { reason }),
  });
  const mine = decided.by === 'caller' && decided.decision === decision;
  out(
    flags,
    mine
      ? `${decision === 'allow' ? 'approved' : 'denied'} ${requestId}`
      : `${requestId} was decided already: ${decided.decision} (${decided.by}${decided.reason ? `: ${decided.reason}` : ''})`,
    decided,
  );
  return mine ? EXIT.ok : EXIT.notCompleted;
}

export async function cancel(flags: Flags, client: Client, id: string): Promise<number> {
  const handle = client.workflow.getHandle(id);
  const { status } = await describeOrUnknown(handle, id);
  // As `run.cancel()` on a run that has ended: nothing to do, and no failure.
  if (status.name !== 'RUNNING') {
    out(flags, `run ${id} has closed already (${status.name.toLowerCase()})`, { id, cancelRequested: false });
    return EXIT.ok;
  }
  await handle.cancel();
  out(flags, `cancel requested for ${id}`, { id, cancelRequested: true });
  return EXIT.ok;
}

export async function resume(flags: Flags, client: Client, id: string, message: string): Promise<number> {
  const provider = id.startsWith(RUN_ID_PREFIX) ? id.slice(RUN_ID_PREFIX.length, id.lastIndexOf(':')) : '';
  const service = serviceFor(client, provider);
  const attached = service.attach(id);
  await attached.result;
  if (!attached.resume) throw new CliError(`run ${id} cannot be resumed`, EXIT.failed);
  const resumed = attached.resume(textContent(message));
  if (!flags.values.wait) {
    await runStarted(resumed);
    out(flags, `resumed ${id}`, { id, resumed: true });
    return EXIT.ok;
  }
  return waitAndPrint(flags, client, id, resumed.result);
}

export async function logs(flags: Flags, client: Client, id: string): Promise<number> {
  if (flags.values.follow && flags.values['no-follow']) {
    throw new CliError('usage: subagents logs <id> [--follow|--no-follow], not both', EXIT.usage);
  }
  await describeOrUnknown(client.workflow.getHandle(id), id);
  // Following a quiet run, the long poll waits for its next record, for days maybe: a reader that
  // goes meanwhile (where it can be seen) ends it at once, not at that record.
  const reader = readerWatch();
  try {
    // A record at a time, at the pace stdout takes them: the history is read no further than printed.
    for await (const record of auditDrafts(client, id, !flags.values['no-follow'], undefined, reader.signal)) {
      await print(
        flags.json ? `${JSON.stringify(record)}\n` : `${record.time}  ${describeRecord(record, id) ?? record.type}\n`,
      );
    }
  } catch (err) {
    throw reader.signal.aborted ? reader.signal.reason : err;
  } finally {
    reader.stop();
  }
  return EXIT.ok;
}

/**
 * One line for a record of run `runId`, for humans (a held call with the command that answers
 * it); undefined for records not worth a progress line.
 */
function describeRecord(record: Pick<AuditRecord, 'type' | 'data'>, runId: string): string | undefined {
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
    case 'text.delta':
      return [
        ...(data.reasoning ? [`… (thinking) ${String(data.reasoning)}`] : []),
        ...(data.text ? [`… ${String(data.text)}`] : []),
      ].join('\n');
    case 'model.call':
      return `model call (turn ${String(data.turn)}) ${String(data.stopReason)}: ${content(data.output)}`;
    case 'tool.call':
      return `tool ${String(data.tool)}(${String(data.arguments)})`;
    case 'approval.requested': {
      const requestId = String(data.requestId);
      const call = approvalLine(data as { tool: string; arguments: string });
      return `awaiting approval ${requestId}: ${call} (subagents approve|deny ${runId} ${requestId})`;
    }
    case 'approval.answer':
      return `answer ${String(data.decision)}${data.identity ? ` from ${String(data.identity)}` : ''}: ${String(data.requestId)}`;
    case 'approval.decided':
      return `approval ${String(data.decision)} (${String(data.by)}${data.reason ? `: ${String(data.reason)}` : ''}): ${String(data.requestId)}`;
    case 'permission':
      return `permission ${String(data.decision)}: ${String(data.toolCall)}`;
    case 'child.start':
      return `delegated to ${String(data.runId)}`;
    case 'child.settled':
      return `${String(data.runId)} settled segment ${String(data.segment)}: ${String(data.stopReason)}`;
    case 'result':
      return `result of segment ${String(data.segment)}: ${String((data.result as SubagentResult).stopReason)}`;
    case 'cancel':
      return 'cancel requested';
    case 'dispose':
      return 'dispose requested';
    case 'reset':
      return `reset by an operator${data.reason ? `: ${String(data.reason)}` : ''}`;
    case 'close':
      return `closed (${String(data.closedBy)})`;
    case 'activity.failed':
      return `${String(data.activity)} ${String(data.outcome)}${data.failure ? `: ${String(data.failure)}` : ''}`;
    default:
      return undefined;
  }
}

/**
 * When a model call of the run waits for its endpoint's rate limit (its heartbeat says so), as ISO
 * 8601. A wait already over is none: an attempt cut off while it waited leaves it behind.
 */
async function rateLimitedUntil(
  client: Client,
  description: Awaited<ReturnType<typeof describeOrUnknown>>,
): Promise<string | undefined> {
  for (const activity of description.raw.pendingActivities ?? []) {
    const payloads = activity.heartbeatDetails?.payloads;
    if (!payloads?.length) continue;
    const details = (await decodePayload(client.options.loadedDataConverter, payloads).catch(() => undefined)) as
      { rateLimitedUntil?: number } | undefined;
    const until = details?.rateLimitedUntil;
    if (typeof until === 'number' && until > Date.now()) return new Date(until).toISOString();
  }
  return undefined;
}

/** A held call as a person deciding reads it: the tool and the start of its arguments. */
function approvalLine({ tool, arguments: args }: { tool: string; arguments: string }): string {
  return `${tool}(${args.length > 200 ? `${args.slice(0, 200)}…` : args})`;
}
