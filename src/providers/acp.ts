// `acp`: any Agent Client Protocol agent (Zed's, Gemini CLI, the Claude Code and Codex adapters)
// as a durable child. Each turn runs the agent as a child process of the worker and drives it
// over stdio with the official SDK: initialize, session/new (or session/load to continue), then
// prompts. Messages sent meanwhile become the next prompt at the turn boundary. The process never
// outlives the turn: it is stopped on every path (EOF, then SIGTERM, then SIGKILL), and so are the
// processes it started (it leads a process group of its own).
import { ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { isAbsolute, relative } from 'node:path';
import { Readable, Transform, Writable } from 'node:stream';
import type * as Acp from '@agentclientprotocol/sdk';
import { DEFAULT_MAX_PAYLOAD_BYTES, MAX_TIMER_MS, isWholeNumber } from '../seam/constants';
import { SubagentError } from '../seam/errors';
import { describeValue } from '../seam/json';
import type { ContentBlock } from '../seam/content';
import type { SubagentRunSettings, SubagentTurnContext, SubagentTurnProvider } from '../seam/provider';
import type { SubagentPermissionDecision, SubagentStopReason, SubagentTurnResult } from '../seam/result';
import { ConfinedRoot, ToolPathError } from '../tools/confine';

export interface AcpProviderOptions {
  /** Default `acp`. */
  name?: string;
  /** The agent's command line, e.g. `npx` with `['@zed-industries/claude-code-acp']`. */
  command: string;
  args?: string[];
  /** The agent's environment: only PATH and HOME of the worker's are passed on, plus these. */
  env?: Record<string, string>;
  /** Working directory when the parent has none; the parent's cwd wins. Must be absolute. */
  cwd?: string;
  /** Whether runs offer `resume`: only for agents that advertise `loadSession`. Default false. */
  resumable?: boolean;
  /**
   * Answers to the agent's permission requests: tool kinds (`read`, `edit`, `delete`, `move`,
   * `search`, `execute`, `think`, `fetch`, `other`) that may be allowed; everything else is
   * rejected. The kind is the agent's own label, so it is not enough: a request that names any
   * path outside the run's working directory is rejected whatever its kind, and a file kind
   * (`read`, `edit`, `delete`, `move`, `search`) that names no path is rejected too.
   */
  allowToolKinds?: string[];
  /**
   * Tool kinds asked of a person instead (`SubagentRun.approve`, `subagents approve`): the run's
   * status says `awaiting-approval` until someone answers or `runSettings.approvalTimeout` denies.
   * The path checks of `allowToolKinds` come first: a request they reject is never asked. Of
   * requests made at once, 4 are asked at a time (`MAX_ASKS_AT_ONCE`), the rest as those are answered.
   */
  askToolKinds?: string[];
  /** Let an allowed request be remembered by the agent (`allow_always`). Default false: each is asked. */
  allowAlways?: boolean;
  /**
   * The most permission requests one turn may make; past it the turn ends `error` and the agent is
   * stopped. Each decision is an event in the run's history, which the server caps. Default 1000.
   */
  maxPermissionRequests?: number;
  /** Offer the agent file reading and writing, confined to the run's cwd. Default off. */
  fileSystem?: { read?: boolean; write?: boolean };
  /**
   * The most bytes one turn may write through the client's file system, each write counted as at
   * least 4 KiB for each part of its path (what a file, and each directory it may create, takes on
   * disk): 256 MiB by default. A write past it is refused with an error the agent reads, and the
   * turn goes on (what it did stays, and it can say why it stopped); the turn's diagnostic says how
   * many were refused.
   */
  maxWriteBytes?: number;
  /** How long the agent may take to answer `initialize`, and then `session/new` or `session/load`. Default 30 s. */
  initializeTimeoutMs?: number;
  /**
   * The most text and thought one prompt may stream, in bytes; past it the turn ends `error` and
   * the agent is stopped. Default the payload limit (`DEFAULT_MAX_PAYLOAD_BYTES`): more could not
   * be returned anyway.
   */
  maxOutputBytes?: number;
  /** After a cancel, how long the agent may take to stop before SIGTERM, and SIGTERM before SIGKILL. Default 2 s. */
  killGraceMs?: number;
  taskQueue?: string;
  runSettings?: SubagentRunSettings;
}

/** Kinds that act on files: a request of one must name the paths it touches. */
const PATH_KINDS = new Set(['read', 'edit', 'delete', 'move', 'search']);

/** The paths a permission request names: its locations, and path-like fields of its raw input. */
function requestedPaths(toolCall: Acp.RequestPermissionRequest['toolCall']): string[] {
  const paths = new Set((toolCall.locations ?? []).map((location) => location.path));
  const visit = (value: unknown, key: string, depth: number) => {
    if (typeof value === 'string' && /path|file|dir|cwd/i.test(key)) paths.add(value);
    else if (value && typeof value === 'object' && depth < 3) {
      for (const [name, inner] of Object.entries(value)) visit(inner, Array.isArray(value) ? key : name, depth + 1);
    }
  };
  visit(toolCall.rawInput, '', 0);
  return [...paths];
}

/**
 * What one permission decision records of the agent's request: each decision is a signal in the
 * run's history, which the server caps (50 MB), and a turn may make `maxPermissionRequests`. A
 * request naming more paths than this is rejected, so an allowed one is always recorded whole;
 * its labels (title, kind, option id) are cut.
 */
const DECISION_PATHS = 32;
const DECISION_PATH_CHARS = 8192;
const DECISION_LABEL_CHARS = 512;

/** The most characters of title and input a request `askToolKinds` holds may put to a person. */
const APPROVAL_ASK_CHARS = 16 * 1024;

/** The most characters a diagnostic quotes of what the agent said (a stop reason, an error). */
const DIAGNOSTIC_QUOTE_CHARS = 2000;

/** The largest file the agent may read or write through the client's file system. */
const MAX_FILE_BYTES = 16 * 1024 * 1024;

/** The longest session id an agent may give (they are ids, a UUID's 36 characters or so). */
const MAX_SESSION_ID_LENGTH = 1024;

/** What one turn may write through the client's file system (`maxWriteBytes`), by default. */
const DEFAULT_MAX_WRITE_BYTES = 256 * 1024 * 1024;

/**
 * The least a write counts against `maxWriteBytes` for each part of its path, a file's or a
 * directory's block on disk: empty files are not free, and neither are the directories a write
 * creates (one write of a path 5,000 deep made 5,000 of them).
 */
const MIN_WRITE_CHARGE = 4096;

/** ACP stop reasons onto the seam's; anything else is a failure. */
export const ACP_STOP_REASONS: ReadonlyMap<string, SubagentStopReason> = new Map<string, SubagentStopReason>([
  ['end_turn', 'completed'],
  ['cancelled', 'aborted'],
  ['max_tokens', 'max-tokens'],
  ['max_turn_requests', 'max-tokens'],
  ['refusal', 'refusal'],
]);

interface AcpSessionState {
  sessionId: string;
}

/** The `acp` provider; throws `INVALID_CONFIG` for options that cannot work. */
export function createAcpProvider(options: AcpProviderOptions): SubagentTurnProvider {
  checkOptions(options);
  return {
    name: options.name ?? 'acp',
    capabilities: { outputSchema: false, depthLimit: false, toolFilter: false },
    inheritsParentContext: false,
    steering: true,
    steeringWithinTurn: true,
    resumable: options.resumable ?? false,
    ...(options.taskQueue === undefined ? {} : { taskQueue: options.taskQueue }),
    ...(options.runSettings === undefined ? {} : { runSettings: options.runSettings }),
    runTurn: (input, ctx) => acpTurn(options, input, ctx),
  };
}

/**
 * Throws `INVALID_CONFIG`, naming the option, for options that cannot work: each failed only at a
 * turn, or quietly (a NaN `maxWriteBytes` or `maxPermissionRequests` bounded nothing, a NaN
 * timeout or grace was a timer of 1 ms).
 */
function checkOptions(options: AcpProviderOptions): void {
  const refuse = (message: string): never => {
    throw new SubagentError(`acp provider: ${message}`, 'INVALID_CONFIG');
  };
  if (typeof options.command !== 'string' || options.command === '') refuse('command must be a non-empty string');
  if (
    options.args !== undefined &&
    !(Array.isArray(options.args) && options.args.every((a) => typeof a === 'string'))
  ) {
    refuse('args must be a list of strings');
  }
  const whole = (name: keyof AcpProviderOptions, minimum: number, maximum = Number.MAX_SAFE_INTEGER) => {
    const value = options[name];
    if (value !== undefined && !isWholeNumber(value, minimum, maximum)) {
      refuse(`${name} must be a whole number from ${minimum} to ${maximum} (got ${describeValue(value)})`);
    }
  };
  whole('maxPermissionRequests', 1);
  whole('maxWriteBytes', 0);
  whole('maxOutputBytes', 1);
  whole('initializeTimeoutMs', 1, MAX_TIMER_MS);
  whole('killGraceMs', 0, MAX_TIMER_MS);
}

async function acpTurn(
  options: AcpProviderOptions,
  input: ContentBlock[][],
  ctx: SubagentTurnContext,
): Promise<SubagentTurnResult> {
  const cwd = ctx.request.parent.cwd ?? options.cwd;
  if (!cwd || !isAbsolute(cwd)) {
    return failed(
      `the acp provider needs an absolute working directory (the parent's session cwd or the provider's cwd); got ${cwd ?? 'none'}`,
    );
  }
  // The caller names the cwd: spawn would throw at a NUL byte (a retry would throw again), and
  // blame the command for a directory that is missing.
  const where = `the working directory ${JSON.stringify(cwd)}`;
  if (cwd.includes('\0')) return failed(`${where} holds a NUL byte`);
  if (
    !(await stat(cwd).then(
      (found) => found.isDirectory(),
      () => false,
    ))
  ) {
    return failed(`${where} is not a directory on this worker`);
  }
  // A retried turn (its worker died) and a resumed segment continue the session they had.
  const previous = ((ctx.lastHeartbeat ?? ctx.providerState) as AcpSessionState | undefined)?.sessionId;
  let agent: AgentProcess;
  try {
    agent = await AgentProcess.start(options, cwd, ctx);
  } catch (err) {
    // Arguments spawn refuses at once (a NUL byte in the command or its environment).
    return failed(
      `the ACP agent's command ${JSON.stringify(options.command)} could not be started: ${(err as Error).message}`,
    );
  }
  const onAbort = () => agent.cancel();
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  try {
    const init = (await agent.within(options.initializeTimeoutMs ?? 30_000, 'answer initialize', () =>
      agent.request('initialize', {
        protocolVersion: agent.acp.PROTOCOL_VERSION,
        clientCapabilities: {
          fs: { readTextFile: options.fileSystem?.read ?? false, writeTextFile: options.fileSystem?.write ?? false },
          terminal: false,
        },
        clientInfo: { name: 'durable-subagents', version: '0.1.0' },
      }),
    )) as Acp.InitializeResponse;
    const canLoad = init?.agentCapabilities?.loadSession === true;
    if (previous && !canLoad && ctx.turn > 0 && ctx.attempt === 1) {
      return failed('NOT_RESUMABLE: the ACP agent cannot resume its session: it does not advertise loadSession');
    }
    const setupMs = options.initializeTimeoutMs ?? 30_000;
    let sessionId: string;
    if (previous && canLoad) {
      await agent.within(setupMs, 'answer session/load', () =>
        agent.request('session/load', { sessionId: previous, cwd, mcpServers: [] }),
      );
      sessionId = previous;
    } else {
      const created = (await agent.within(setupMs, 'answer session/new', () =>
        agent.request('session/new', { cwd, mcpServers: [] }),
      )) as Acp.NewSessionResponse | null;
      if (typeof created?.sessionId !== 'string' || created.sessionId === '') {
        throw new Error('the ACP agent answered session/new without a sessionId');
      }
      // It travels in the turn's heartbeat, its result and every later turn's input.
      if (created.sessionId.length > MAX_SESSION_ID_LENGTH) {
        throw new Error(
          `the ACP agent answered session/new with a sessionId of ${created.sessionId.length} characters, over ${MAX_SESSION_ID_LENGTH}`,
        );
      }
      sessionId = created.sessionId;
    }
    agent.sessionId = sessionId;
    ctx.heartbeat({ sessionId } satisfies AcpSessionState);

    let prompt = input;
    let output = '';
    let reasoning = '';
    let stopReason: SubagentStopReason;
    for (;;) {
      const response = await agent.prompt(sessionId, prompt);
      output = response.text;
      reasoning = response.reasoning;
      stopReason = ACP_STOP_REASONS.get(response.stopReason) ?? 'error';
      if (stopReason !== 'completed' || ctx.signal.aborted) break;
      // Steering between prompts: what arrived during this one is the next prompt. Messages that
      // cannot be read now (the server away a moment) wait in the run, as one sent after the last
      // prompt does: the turn keeps what the agent did rather than end in error.
      const more = await ctx.takeMessages().catch(() => []);
      if (more.length === 0) break;
      prompt = more;
    }
    const unknownStop =
      stopReason === 'error'
        ? `the ACP agent ended its turn with stopReason "${clip(agent.lastStopReason, DIAGNOSTIC_QUOTE_CHARS)}"`
        : undefined;
    return {
      // The last prompt's message, with the thinking the agent showed before it.
      output: [
        ...(reasoning ? [{ type: 'reasoning' as const, text: reasoning }] : []),
        ...(output ? [{ type: 'text' as const, text: output }] : []),
      ],
      stopReason,
      providerState: { sessionId },
      ...unrecorded(agent, ctx),
      ...withDiagnostic(unknownStop, agent.malformedOutput(), agent.strayResponses(), agent.refusedWrites()),
    };
  } catch (err) {
    if (ctx.signal.aborted) throw err;
    if (agent.spawnError) {
      return failed(
        `the ACP agent's command ${JSON.stringify(options.command)} could not be started: ${agent.spawnError.message}`,
      );
    }
    const ended = await agent.exited(500);
    return {
      ...failed(`${clip((err as Error).message, DIAGNOSTIC_QUOTE_CHARS)}${ended}${agent.stderrTail()}`),
      ...unrecorded(agent, ctx),
    };
  } finally {
    ctx.signal.removeEventListener('abort', onAbort);
    await agent.stop();
  }
}

type RunSide = Pick<SubagentTurnContext, 'recordPermission' | 'requestApproval' | 'streamText' | 'streamReasoning'>;

/** One agent process and its ACP connection, with the client side's handlers. */
class AgentProcess {
  readonly permissions: SubagentPermissionDecision[] = [];
  /** The session the turn prompts, once created or loaded. */
  sessionId: string | undefined;
  lastStopReason = '';
  /** Why the command could not be started, if it could not. */
  spawnError: Error | undefined;
  private stderr = '';
  private badLines: string[] = [];
  private chunks: string[] = [];
  private thoughts: string[] = [];
  /** Bytes of text and thought the current prompt has streamed. */
  private outputBytes = 0;
  /** Requests sent to the agent and not answered yet, by id. */
  private readonly unanswered = new Set<unknown>();
  /** The id of the `session/prompt` the agent has not answered yet, if one is outstanding. */
  private promptId: unknown;
  /** Messages the agent sent that answer no request, kept from the SDK. */
  private strays = 0;
  /** Bytes this turn has written through the client's file system (each write at least `MIN_WRITE_CHARGE`). */
  private writtenBytes = 0;
  /** Writes refused past `maxWriteBytes`. */
  private refusedWriteCount = 0;
  /** Permission requests the agent has made this turn. */
  private permissionRequests = 0;
  /** The file reads before the next one. */
  private reads: Promise<unknown> = Promise.resolve();
  private connection!: Acp.ClientConnection;
  private stopping: Promise<void> | undefined;
  private readonly exit: Promise<{ code: number | null; signal: string | null }>;
  /** Once its pipes have ended too: all it wrote has been read. */
  private readonly closed: Promise<unknown>;

  private constructor(
    readonly acp: typeof Acp,
    private readonly child: ChildProcessWithoutNullStreams,
    private readonly options: AcpProviderOptions,
    private readonly cwd: string,
    /**
     * The run's side: records a permission decision in its history before the agent hears it,
     * asks the run for an approval, hands the agent's text to its observers as it comes.
     */
    private readonly run: RunSide,
  ) {
    // 'exit', not 'close' alone: a process the agent started may hold its pipes open long after it
    // is gone. A command that could not be spawned has only 'close'.
    this.exit = new Promise((resolve) => {
      const ended = (code: number | null, signal: string | null) => resolve({ code, signal });
      child.once('exit', ended).once('close', ended);
    });
    this.closed = new Promise((resolve) => child.once('close', resolve));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (this.stderr = (this.stderr + chunk).slice(-2000)));
    void this.exit.then(() => this.reapAfterExit());
  }

  /** Spawns the agent and connects to it; a command that cannot run fails the first request. */
  static async start(options: AcpProviderOptions, cwd: string, run: RunSide): Promise<AgentProcess> {
    // The SDK is ESM-only; loaded on first use, so processes that never run an ACP turn never load it.
    const acp = await import('@agentclientprotocol/sdk');
    const child = spawn(options.command, options.args ?? [], {
      cwd,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
      // A process group of its own, so that stopping it stops whatever it started too.
      detached: true,
    });
    const agent = new AgentProcess(acp, child, options, cwd, run);
    agent.connect();
    return agent;
  }

  private connect(): void {
    const { acp, child } = this;
    const spawnFailed = new Promise<never>((_, reject) => child.once('error', reject));
    spawnFailed.catch(() => undefined);
    // Lines that are not JSON-RPC are noted (and skipped by the SDK) rather than lost silently.
    // A read may end inside a line: only what starts a line is judged.
    let atLineStart = true;
    const tap = new Transform({
      transform: (chunk: Buffer, _encoding, done) => {
        const text = chunk.toString('utf8');
        text.split('\n').forEach((line, index) => {
          const trimmed = line.trim();
          const starts = index > 0 || atLineStart;
          if (starts && trimmed && !trimmed.startsWith('{') && this.badLines.length < 3) {
            this.badLines.push(trimmed.slice(0, 200));
          }
        });
        if (text.length > 0) atLineStart = text.endsWith('\n');
        // While the agent has not taken what was sent to it, no more of what it writes is read:
        // the SDK's reader takes all there is, whatever waits behind it, so requests it never
        // reads the answers to would pile up in the worker. It reads what it was sent, or exits.
        void this.agentHasTaken(false).then(() => done(null, chunk));
      },
    });
    const app = acp
      .client({ name: 'durable-subagents' })
      .onRequest(acp.methods.client.session.requestPermission, ({ params }) => this.decide(params))
      .onRequest(acp.methods.client.fs.readTextFile, async ({ params }) => {
        if (!this.options.fileSystem?.read) throw acp.RequestError.methodNotFound('fs/read_text_file');
        const text = await this.oneReadAtATime(() =>
          this.confined(params.path, async (root, path) => {
            const { handle, size } = await root.openFile(path);
            try {
              if (size > MAX_FILE_BYTES) throw new ToolPathError(`${path} is ${size} bytes, over ${MAX_FILE_BYTES}`);
              return (await handle.readFile()).toString('utf8');
            } finally {
              await handle.close();
            }
          }),
        );
        const lines = text.split('\n');
        const start = (params.line ?? 1) - 1;
        return { content: lines.slice(start, params.limit ? start + params.limit : undefined).join('\n') };
      })
      .onRequest(acp.methods.client.fs.writeTextFile, async ({ params }) => {
        if (!this.options.fileSystem?.write) throw acp.RequestError.methodNotFound('fs/write_text_file');
        await this.confined(params.path, async (root, path) => {
          const bytes = Buffer.byteLength(params.content);
          if (bytes > MAX_FILE_BYTES) {
            throw new ToolPathError(`the content for ${path} is over ${MAX_FILE_BYTES} bytes`);
          }
          // Charged before the write, so that writes in flight together cannot pass the budget.
          const charge = this.chargeWrite(path, bytes);
          try {
            await root.writeFile(path, params.content);
          } catch (error) {
            this.writtenBytes -= charge;
            throw error;
          }
        });
        return {};
      });
    const stdout = child.stdout.pipe(tap);
    const wire = acp.ndJsonStream(
      Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
      Readable.toWeb(stdout) as ReadableStream<Uint8Array>,
    );
    // Both directions pass through the provider in wire order: what it sends says which requests
    // (and which prompt) are outstanding, and what the agent sends is judged against that before
    // the SDK sees it.
    const outbound = new TransformStream<Acp.AnyMessage, Acp.AnyMessage>({
      transform: (message, controller) => {
        this.sending(message);
        controller.enqueue(message);
      },
    });
    void outbound.readable.pipeTo(wire.writable).catch(() => undefined);
    const inbound = wire.readable.pipeThrough(
      new TransformStream<Acp.AnyMessage, Acp.AnyMessage>({
        transform: async (message, controller) => {
          if (!this.receiving(message)) return;
          // The SDK answers a request (or echoes a message it cannot read) whether or not the
          // agent reads its stdin: while the agent has not taken what was sent to it, no more is
          // read from it, so answers it never takes do not pile up in the worker.
          if ('method' in message && ('id' in message || typeof message.method !== 'string')) {
            await this.agentHasTaken();
          }
          controller.enqueue(message);
        },
      }),
    );
    this.connection = app.connect({ readable: inbound, writable: outbound.writable });
    void spawnFailed.catch((err: Error) => {
      if (child.pid === undefined) this.spawnError = err;
      this.connection.close(err);
    });
  }

  request(method: string, params: unknown): Promise<unknown> {
    return this.connection.agent.request(method, params);
  }

  /** One prompt: its text chunks, its thought chunks and its stop reason. */
  async prompt(
    sessionId: string,
    messages: ContentBlock[][],
  ): Promise<{ stopReason: string; text: string; reasoning: string }> {
    const blocks = messages
      .flat()
      .flatMap((block) => (block.type === 'text' ? [{ type: 'text' as const, text: block.text }] : []));
    const response = (await this.request('session/prompt', { sessionId, prompt: blocks })) as Acp.PromptResponse | null;
    // The SDK does not check what the agent answers.
    if (typeof response?.stopReason !== 'string') {
      throw new Error('the ACP agent answered session/prompt without a stopReason');
    }
    this.lastStopReason = response.stopReason;
    return { stopReason: response.stopReason, text: this.chunks.join(''), reasoning: this.thoughts.join('') };
  }

  /** A request on its way to the agent is outstanding until answered; a prompt starts its output afresh. */
  private sending(message: Acp.AnyMessage): void {
    if (!('method' in message) || !('id' in message)) return;
    this.unanswered.add(message.id);
    if (message.method === 'session/prompt') {
      this.promptId = message.id;
      this.chunks = [];
      this.thoughts = [];
      this.outputBytes = 0;
    }
  }

  /**
   * Whether the SDK is to see `message`. An answer reaches it only for a request outstanding: it
   * prints any other to the console, id and all, as fast as an agent sends them. Session updates
   * are taken here, in wire order, so that a prompt's output holds what arrived between its
   * request and its answer, and nothing sent after the answer.
   */
  private receiving(message: Acp.AnyMessage): boolean {
    if (!('method' in message)) {
      if (!('id' in message) || !this.unanswered.delete(message.id)) {
        this.strays++;
        return false;
      }
      if (message.id === this.promptId) this.promptId = undefined;
      return true;
    }
    if (message.method === 'session/update' && !('id' in message)) {
      this.update(message.params);
      return false;
    }
    return true;
  }

  /**
   * A text or thought chunk of the session this turn prompts, while a prompt is outstanding: not
   * another session's, nor the history a session/load replays, nor text sent after an answer.
   * Other updates are not used.
   */
  private update(params: unknown): void {
    if (this.promptId === undefined || !isRecord(params) || params.sessionId !== this.sessionId) return;
    const { update } = params;
    if (!isRecord(update) || !isRecord(update.content)) return;
    const { sessionUpdate: kind, content } = update;
    if (content.type !== 'text' || typeof content.text !== 'string') return;
    if (kind !== 'agent_message_chunk' && kind !== 'agent_thought_chunk') return;
    if (!this.withinOutputLimit(content.text)) return;
    if (kind === 'agent_message_chunk') {
      this.chunks.push(content.text);
      this.run.streamText?.(content.text);
    } else {
      this.thoughts.push(content.text);
      this.run.streamReasoning?.(content.text);
    }
  }

  /** Counts a write of `bytes` to `path` against `maxWriteBytes`, or refuses it (`ToolPathError`); returns the charge. */
  private chargeWrite(path: string, bytes: number): number {
    const limit = this.options.maxWriteBytes ?? DEFAULT_MAX_WRITE_BYTES;
    const parts = path.split('/').filter(Boolean).length;
    const charge = Math.max(bytes, MIN_WRITE_CHARGE * Math.max(parts, 1));
    if (this.writtenBytes + charge > limit) {
      this.refusedWriteCount++;
      throw new ToolPathError(
        `writing ${bytes} bytes to ${path} would pass maxWriteBytes: this turn has written ${this.writtenBytes} of ${limit}`,
      );
    }
    this.writtenBytes += charge;
    return charge;
  }

  /**
   * Whether `text` fits in what the current prompt may still stream (`maxOutputBytes`); once it
   * does not, the connection closes with a failure saying so, which ends the prompt.
   */
  private withinOutputLimit(text: string): boolean {
    const limit = this.options.maxOutputBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
    this.outputBytes += Buffer.byteLength(text);
    if (this.outputBytes <= limit) return true;
    this.connection.close(new Error(`the ACP agent streamed more than ${limit} bytes of text in one prompt`));
    return false;
  }

  /**
   * `read` after the reads before it, once the agent has taken what was sent to it: the SDK
   * answers every request at once, so reads an agent asks for and never takes would all be held
   * in memory (up to 16 MiB each); so at most one answer waits in the pipe.
   */
  private oneReadAtATime<T>(read: () => Promise<T>): Promise<T> {
    const next = this.reads.then(async () => {
      await this.agentHasTaken();
      return read();
    });
    this.reads = next.catch(() => undefined);
    return next;
  }

  /**
   * Resolves once the agent has taken what was sent to it (or its stdin is gone); with `settle`,
   * after what is on its way to it (an answer a handler just returned) has reached its stdin.
   */
  private async agentHasTaken(settle = true): Promise<void> {
    // An answer reaches stdin a few microtasks after its handler returned.
    if (settle) await new Promise((resolve) => setImmediate(resolve));
    const { stdin } = this.child;
    if (!stdin.writableNeedDrain || stdin.destroyed) return;
    await new Promise<void>((resolve) => {
      const taken = () => {
        stdin.off('drain', taken).off('close', taken);
        resolve();
      };
      stdin.on('drain', taken).on('close', taken);
    });
  }

  /** `op`, or a failure naming what the agent did not do within `ms`. */
  async within<T>(ms: number, what: string, op: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the ACP agent did not ${what} within ${ms} ms`)), ms);
    });
    try {
      return await Promise.race([op(), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** session/cancel, then the process is stopped if it has not finished the turn by then. */
  cancel(): void {
    if (this.sessionId) {
      void this.connection.agent.notify('session/cancel', { sessionId: this.sessionId }).catch(() => undefined);
    }
    setTimeout(() => void this.stop(), this.options.killGraceMs ?? 2000).unref();
  }

  /**
   * EOF on stdin, then SIGTERM, then SIGKILL, each after the grace, to its whole process group;
   * resolves once it has exited (what it started is killed then). Idempotent.
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const grace = this.options.killGraceMs ?? 2000;
      this.connection.close();
      this.child.stdin.end();
      if (await this.exitedWithin(grace)) return;
      this.signalGroup('SIGTERM');
      if (await this.exitedWithin(grace)) return;
      this.signalGroup('SIGKILL');
      await this.exit;
    })();
    return this.stopping;
  }

  /**
   * Once the agent has exited, what it left in its process group is killed, and its pipes end
   * within the grace even if something outside the group still holds them: no request waits
   * for an answer from a process that is gone.
   */
  private reapAfterExit(): void {
    this.signalGroup('SIGKILL');
    const grace = this.options.killGraceMs ?? 2000;
    setTimeout(() => {
      this.connection.close(new Error('the ACP agent exited, but its stdout stayed open'));
      this.child.stdout.destroy();
      this.child.stderr.destroy();
    }, grace).unref();
  }

  /** `signal` to the agent and every process in its group; a group that is gone already is no fault. */
  private signalGroup(signal: NodeJS.Signals): void {
    if (this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, signal);
    } catch {
      this.child.kill(signal);
    }
  }

  /** A sentence on how the process ended, if it did within `ms`. */
  async exited(ms: number): Promise<string> {
    const ended = await Promise.race([
      this.exit,
      new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms)),
    ]);
    if (!ended) return '';
    // What it wrote to stderr before it went: the pipe ends soon after (its group is killed).
    await Promise.race([this.closed, new Promise((resolve) => setTimeout(resolve, ms))]);
    return ended.signal ? ` (the agent was killed by ${ended.signal})` : ` (the agent exited with code ${ended.code})`;
  }

  stderrTail(): string {
    const tail = this.stderr.trim();
    return tail ? `; stderr: ${tail.slice(-1000)}` : '';
  }

  strayResponses(): string | undefined {
    return this.strays > 0
      ? `the ACP agent sent ${this.strays} response${this.strays === 1 ? '' : 's'} to no request, ignored`
      : undefined;
  }

  refusedWrites(): string | undefined {
    const limit = this.options.maxWriteBytes ?? DEFAULT_MAX_WRITE_BYTES;
    return this.refusedWriteCount > 0
      ? `the worker refused ${this.refusedWriteCount} file write${this.refusedWriteCount === 1 ? '' : 's'} past maxWriteBytes (${limit} bytes a turn)`
      : undefined;
  }

  malformedOutput(): string | undefined {
    return this.badLines.length > 0
      ? `the ACP agent wrote output that is not JSON-RPC, ignored: ${this.badLines.map((line) => JSON.stringify(line)).join(', ')}`
      : undefined;
  }

  private async exitedWithin(ms: number): Promise<boolean> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return true;
    return Promise.race([
      this.exit.then(() => true),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms)),
    ]);
  }

  /**
   * `access` to a path the agent named (absolute, as ACP has them) through the run's cwd's
   * confinement; a refusal is an invalid-params error the agent reads.
   */
  private async confined<T>(
    path: string,
    access: (root: ConfinedRoot, relativePath: string) => Promise<T>,
  ): Promise<T> {
    if (!isAbsolute(path)) throw this.acp.RequestError.invalidParams({ path }, 'ACP paths must be absolute');
    try {
      return await access(await ConfinedRoot.open(this.cwd), relative(this.cwd, path) || '.');
    } catch (error) {
      if (error instanceof ToolPathError) throw this.acp.RequestError.invalidParams({ path }, error.message);
      throw error;
    }
  }

  /**
   * The policy's answer to a permission request (see `allowToolKinds`), recorded in the run's
   * history before the agent hears it; a decision that cannot be recorded is a rejection.
   */
  private async decide(params: Acp.RequestPermissionRequest): Promise<Acp.RequestPermissionResponse> {
    const limit = this.options.maxPermissionRequests ?? 1000;
    if (++this.permissionRequests > limit) {
      // Neither decided nor recorded: the turn ends here.
      this.connection.close(new Error(`the ACP agent asked for permission more than ${limit} times in one turn`));
      return { outcome: { outcome: 'cancelled' } };
    }
    const { toolCall } = params;
    const kind = toolCall.kind ?? undefined;
    const paths = requestedPaths(toolCall);
    const pathChars = paths.reduce((sum, path) => sum + path.length, 0);
    const recordable = paths.length <= DECISION_PATHS && pathChars <= DECISION_PATH_CHARS;
    // Judged only when recordable: judging a path looks for its deepest existing directory one
    // part at a time, and one path 2,000,000 deep took the worker's file system threads minutes.
    const outside: string[] = [];
    if (recordable) {
      const root = await ConfinedRoot.open(this.cwd).catch(() => undefined);
      for (const path of paths) if (!root || !(await root.contains(path))) outside.push(path);
    }
    let reason: string;
    let allowed = false;
    const allowedKind = kind !== undefined && (this.options.allowToolKinds ?? []).includes(kind);
    const askedKind =
      kind !== undefined && (this.options.askToolKinds ?? []).includes(kind) && this.run.requestApproval !== undefined;
    if (!recordable) {
      reason = `it names ${paths.length} paths of ${pathChars} characters, more than a decision records (${DECISION_PATHS}, ${DECISION_PATH_CHARS})`;
    } else if (outside.length > 0) {
      reason = `it names a path outside the working directory: ${clip(outside[0], DECISION_LABEL_CHARS)}`;
    } else if (kind === undefined) reason = 'it gives no kind';
    else if (!allowedKind && !askedKind) reason = `kind "${clip(kind, DECISION_LABEL_CHARS)}" is not allowed`;
    else if (PATH_KINDS.has(kind) && paths.length === 0) {
      reason = `a ${kind} request that names no path cannot be checked`;
    } else if (allowedKind) {
      allowed = true;
      reason = paths.length > 0 ? `kind "${kind}", every path inside the working directory` : `kind "${kind}"`;
    } else {
      ({ allowed, reason } = await askedDecision(this.run, toolCall, kind));
    }
    const pick = (kinds: string[]) =>
      kinds.map((k) => params.options.find((candidate) => candidate.kind === k)).find(Boolean);
    const allowOption = allowed
      ? pick(this.options.allowAlways ? ['allow_always', 'allow_once'] : ['allow_once'])
      : undefined;
    const option = allowOption ?? pick(['reject_once', 'reject_always']);
    // What is cut here belongs to a rejection, or is a label: an allowed request's paths are whole.
    const recordedPaths = recordable ? paths : fitted(paths);
    const decision: SubagentPermissionDecision = {
      toolCall: clip(toolCall.title ?? toolCall.toolCallId, DECISION_LABEL_CHARS),
      ...(kind === undefined ? {} : { kind: clip(kind, DECISION_LABEL_CHARS) }),
      ...(paths.length > 0 ? { paths: recordedPaths } : {}),
      decision: allowOption ? 'allowed' : 'rejected',
      reason: allowed && !allowOption ? `${reason}, but the agent offered no one-time allow` : reason,
      ...(option ? { optionId: clip(option.optionId, DECISION_LABEL_CHARS) } : {}),
    };
    this.permissions.push(decision);
    try {
      await this.run.recordPermission?.(decision);
    } catch {
      // Unrecorded, it may not be allowed: the audit must hold every allowed request.
      if (allowOption) return { outcome: { outcome: 'cancelled' } };
    }
    return option
      ? { outcome: { outcome: 'selected', optionId: option.optionId } }
      : { outcome: { outcome: 'cancelled' } };
  }
}

/** What a person (or the parent) answered to a request `askToolKinds` holds; an ask that fails is a denial. */
async function askedDecision(
  run: RunSide,
  toolCall: Acp.RequestPermissionRequest['toolCall'],
  kind: string,
): Promise<{ allowed: boolean; reason: string }> {
  try {
    const tool = toolCall.title ?? toolCall.toolCallId;
    const args = JSON.stringify(toolCall.rawInput ?? {});
    // The ask waits in the run's state and history; a person is never shown a request cut short.
    if (tool.length + args.length > APPROVAL_ASK_CHARS) {
      return {
        allowed: false,
        reason: `kind "${kind}", not asked: its title and input are ${tool.length + args.length} characters, more than a person is asked about (${APPROVAL_ASK_CHARS})`,
      };
    }
    const { decision, by, reason } = await run.requestApproval!({ tool, kind, arguments: args });
    const why = reason === undefined ? `answered by ${by}` : `${by}: ${reason}`;
    return {
      allowed: decision === 'allow',
      reason: `kind "${kind}", ${decision === 'allow' ? 'approved' : 'denied'} (${why})`,
    };
  } catch (err) {
    return { allowed: false, reason: `kind "${kind}", the approval could not be asked: ${(err as Error).message}` };
  }
}

/** The turn's permission decisions for its result, where no signal recorded them (a host without one). */
function unrecorded(agent: AgentProcess, ctx: SubagentTurnContext): Pick<SubagentTurnResult, 'permissions'> {
  return ctx.recordPermission || agent.permissions.length === 0 ? {} : { permissions: agent.permissions };
}

/** `text`, or its beginning and how much more there was. */
function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}... (${text.length - max} more characters)`;
}

/** The first of `paths` that fit in what a decision records, each cut to a label's length. */
function fitted(paths: string[]): string[] {
  const kept: string[] = [];
  let chars = 0;
  for (const path of paths.slice(0, DECISION_PATHS)) {
    const cut = clip(path, DECISION_LABEL_CHARS);
    if (chars + cut.length > DECISION_PATH_CHARS) break;
    kept.push(cut);
    chars += cut.length;
  }
  return kept;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

function failed(diagnostic: string): SubagentTurnResult {
  return { output: [], stopReason: 'error', diagnostic };
}

function withDiagnostic(...notes: (string | undefined)[]): { diagnostic?: string } {
  const present = notes.filter((note): note is string => note !== undefined);
  return present.length > 0 ? { diagnostic: present.join('; ') } : {};
}
